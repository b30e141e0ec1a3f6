// The `event` wire message: encoder and decoder (see protocol_event.hpp).
#include "gpustream/transport/protocol_event.hpp"

#include <cstdint>

#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"

namespace gpustream::transport {
namespace json = boost::json;

namespace {

[[noreturn]] void bad(std::string_view key, std::string_view what) {
  throw JsonError("$." + std::string(key) + ": " + std::string(what));
}

const json::value* find(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && !v->is_null() ? v : nullptr;
}

std::string text(const json::object& o, std::string_view key) {
  const auto* v = find(o, key);
  if (!v) bad(key, "required key is missing");
  if (!v->is_string()) bad(key, "expected a string");
  return std::string(v->get_string());
}

std::uint64_t u64(const json::object& o, std::string_view key) {
  const auto* v = find(o, key);
  if (!v) bad(key, "required key is missing");
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
  bad(key, "expected an unsigned integer");
}

}  // namespace

json::object event_to_json(const GpuEvent& e) {
  json::object o;
  o["sequence"] = e.sequence;
  o["time_unix_ns"] = e.time_unix_ns;
  o["probe"] = e.probe;
  o["device"] = e.device_id;
  o["kind"] = to_string(e.kind);
  if (e.data) o["data"] = *e.data;
  return o;
}

std::string event_message(const GpuEvent& e) {
  json::object o;
  o["type"] = "event";
  for (auto& kv : event_to_json(e)) o[kv.key()] = kv.value();
  auto s = to_compact_json(o);
  s += '\n';
  return s;
}

namespace {

GpuEvent event_from_object(const json::object& o) {
  GpuEvent e;
  e.sequence = u64(o, "sequence");
  const auto* t = find(o, "time_unix_ns");
  if (!t || !t->is_int64()) bad("time_unix_ns", "expected an integer");
  e.time_unix_ns = t->get_int64();
  e.probe = text(o, "probe");
  e.device_id = text(o, "device");
  e.kind = event_kind_from_string(text(o, "kind")).value_or(EventKind::other);
  if (find(o, "data")) e.data = u64(o, "data");
  return e;
}

}  // namespace

GpuEvent parse_event_message(std::string_view text_in) {
  const json::value v = parse_json(text_in);
  if (!v.is_object()) throw JsonError("$: expected an object");
  const auto& o = v.get_object();
  if (const auto* t = find(o, "type"); t && (!t->is_string() || t->get_string() != "event"))
    bad("type", "expected \"event\"");
  return event_from_object(o);
}

std::optional<GpuEvent> parse_if_event_message(std::string_view text_in) {
  const json::value v = parse_json(text_in);
  if (!v.is_object()) throw JsonError("$: expected an object");
  const auto& o = v.get_object();
  const auto* t = find(o, "type");
  if (!t || !t->is_string() || t->get_string() != "event") return std::nullopt;
  return event_from_object(o);
}

}  // namespace gpustream::transport
