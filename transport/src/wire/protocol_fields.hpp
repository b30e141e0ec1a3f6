// Private to the transport: reading the fields of a decoded wire message (protocol_decode.cpp,
// protocol_event.cpp). A bad field throws JsonError naming it ("$.<key>: <what>").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <boost/json.hpp>

#include "gpustream/json.hpp"

namespace gpustream::transport::fields {

[[noreturn]] inline void bad(std::string_view key, std::string_view what) {
  throw JsonError("$." + std::string(key) + ": " + std::string(what));
}

/// The value at `key`, or nullptr when it is missing or null.
inline const boost::json::value* find(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && !v->is_null() ? v : nullptr;
}

/// A string field; "" when missing and not required.
inline std::string text(const boost::json::object& o, std::string_view key, bool required = false) {
  const auto* v = find(o, key);
  if (!v) {
    if (required) bad(key, "required key is missing");
    return {};
  }
  if (!v->is_string()) bad(key, "expected a string");
  return std::string(v->get_string());
}

/// A non-negative integer field; 0 when missing and not required.
inline std::uint64_t u64(const boost::json::object& o, std::string_view key,
                         bool required = false) {
  const auto* v = find(o, key);
  if (!v) {
    if (required) bad(key, "required key is missing");
    return 0;
  }
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
  bad(key, "expected a non-negative integer");
}

}  // namespace gpustream::transport::fields
