// The reader's rules (docs/protocol.md), shared by the reader (json_read.cpp) and the patch
// reader (json_patch.cpp): a value of each type read from its JSON, each error naming its place
// as a path. Private to those two files (an anonymous namespace: each has its own copy).
#pragma once

#include <array>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gpustream/detail/schema.hpp"
#include "gpustream/json.hpp"

namespace gpustream {
namespace {

namespace json = boost::json;
namespace schema = detail::schema;

/// Where a value sits in the document; rendered only when an error is thrown.
struct Path {
  const Path* parent = nullptr;
  std::string_view key;
  std::size_t index = 0;
  bool is_index = false;

  Path operator/(std::string_view k) const { return Path{this, k, 0, false}; }
  Path operator[](std::size_t i) const { return Path{this, {}, i, true}; }

  std::string str() const {
    std::string s = parent ? parent->str() : std::string("$");
    if (is_index) {
      s.push_back('[');
      s.append(std::to_string(index));
      s.push_back(']');
    } else if (!key.empty()) {
      s.push_back('.');
      s.append(key);
    }
    return s;
  }
};

[[noreturn]] void fail(const Path& at, std::string_view what) {
  throw JsonError(at.str() + ": " + std::string(what));
}

std::string_view kind_name(const json::value& v) noexcept {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "bool";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
      return "number";
    case json::kind::string:
      return "string";
    case json::kind::array:
      return "array";
    case json::kind::object:
      return "object";
  }
  return "?";
}

[[noreturn]] void wrong_type(const Path& at, std::string_view expected, const json::value& v) {
  fail(at, "expected " + std::string(expected) + ", got " + std::string(kind_name(v)));
}

const json::object& as_object(const json::value& v, const Path& at) {
  if (!v.is_object()) wrong_type(at, "an object", v);
  return v.get_object();
}

const json::array& as_array(const json::value& v, const Path& at) {
  if (!v.is_array()) wrong_type(at, "an array", v);
  return v.get_array();
}

std::string_view as_view(const json::value& v, const Path& at) {
  if (!v.is_string()) wrong_type(at, "a string", v);
  return {v.get_string().data(), v.get_string().size()};
}

std::string as_string(const json::value& v, const Path& at) { return std::string(as_view(v, at)); }

bool as_bool(const json::value& v, const Path& at) {
  if (!v.is_bool()) wrong_type(at, "true or false", v);
  return v.get_bool();
}

/// Any JSON number that is finite (parse_json already refuses overflow; a value built in code
/// may still hold one).
double as_double(const json::value& v, const Path& at) {
  double d = 0;
  if (v.is_double())
    d = v.get_double();
  else if (v.is_int64())
    d = static_cast<double>(v.get_int64());
  else if (v.is_uint64())
    d = static_cast<double>(v.get_uint64());
  else
    wrong_type(at, "a number", v);
  if (!std::isfinite(d)) fail(at, "expected a finite number");
  return d;
}

/// A number as a person would write it ("1.5", "1e+23"), for messages.
std::string number_text(const json::value& v) {
  if (v.is_int64()) return std::to_string(v.get_int64());
  if (v.is_uint64()) return std::to_string(v.get_uint64());
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, v.get_double());
  return std::string(buf, r.ptr);
}

std::uint64_t as_uint64(const json::value& v, const Path& at) {
  if (v.is_uint64()) return v.get_uint64();
  if (v.is_int64() && v.get_int64() >= 0) return static_cast<std::uint64_t>(v.get_int64());
  if (v.is_int64() || v.is_double())
    fail(at, "expected an unsigned integer in [0, 2^64), got " + number_text(v));
  wrong_type(at, "an unsigned integer", v);
}

std::int64_t as_int64(const json::value& v, const Path& at) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
    return static_cast<std::int64_t>(v.get_uint64());
  if (v.is_uint64() || v.is_double())
    fail(at, "expected an integer in [-2^63, 2^63), got " + number_text(v));
  wrong_type(at, "an integer", v);
}

int as_int(const json::value& v, const Path& at) {
  const std::int64_t i = as_int64(v, at);
  if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max())
    fail(at, "integer out of range: " + std::to_string(i));
  return static_cast<int>(i);
}

template <typename E>
E as_enum(const json::value& v, const Path& at, std::optional<E> (*parse)(std::string_view)) {
  const std::string_view s = as_view(v, at);
  if (auto e = parse(s)) return *e;
  fail(at, "unknown value \"" + std::string(s) + "\"");
}

/// A required member.
const json::value& need(const json::object& o, std::string_view key, const Path& at) {
  if (const json::value* v = o.if_contains(json::string_view(key.data(), key.size()))) return *v;
  fail(at / key, "required key is missing");
}

/// An optional member; null counts as missing.
const json::value* maybe(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(json::string_view(key.data(), key.size()));
  return v && !v->is_null() ? v : nullptr;
}

// How a value of each type is read into its member.
void read(const json::value& v, const Path& at, std::string& out);
void read(const json::value& v, const Path& at, bool& out);
void read(const json::value& v, const Path& at, int& out);
void read(const json::value& v, const Path& at, unsigned& out);
void read(const json::value& v, const Path& at, std::int64_t& out);
void read(const json::value& v, const Path& at, std::uint64_t& out);
void read(const json::value& v, const Path& at, double& out);
template <typename E>
requires std::is_enum_v<E>
void read(const json::value& v, const Path& at, E& out);
template <typename T>
void read(const json::value& v, const Path& at, std::optional<T>& out);
template <typename T>
void read(const json::value& v, const Path& at, SharedOptional<T>& out);
template <typename T>
void read(const json::value& v, const Path& at, std::vector<T>& out);
void read(const json::value& v, const Path& at, std::vector<PowerSample>& out);
void read(const json::value& v, const Path& at, std::map<std::string, std::string>& out);
void read(const json::value& v, const Path& at, std::map<std::string, double>& out);
template <typename S>
requires schema::kDescribed<S>
void read(const json::value& v, const Path& at, S& out);

/// A member of object `o` at `at`: a required key must be there; an optional one that is
/// missing or null leaves the member as it is.
template <typename T>
void read_member(const json::object& o, const Path& at, std::string_view key, schema::Need n,
                 T& out) {
  if (n == schema::Need::required)
    read(need(o, key, at), at / key, out);
  else if (const json::value* v = maybe(o, key))
    read(*v, at / key, out);
}

/// An engine's Reading: `<key>` (value or null), "source", and "absent" when absent.
void read_member(const json::object& o, const Path& at, std::string_view key, schema::Need,
                 Reading& out) {
  const Source source = maybe(o, "source")
                            ? as_enum(*maybe(o, "source"), at / "source", source_from_string)
                            : Source::none;
  const json::value& u = need(o, key, at);
  if (!u.is_null()) {
    if (maybe(o, "absent")) fail(at / "absent", "engine has a value and an absence reason");
    out = Reading::of(as_double(u, at / key), source);
  } else if (const json::value* why = maybe(o, "absent")) {
    out = Reading::missing(as_enum(*why, at / "absent", absence_from_string), source);
  } else {
    out = Reading::missing(Absence::not_collected, source);
  }
}

/// Reads the four per-metric objects into `set`; a metric in none of them stays not_collected.
void read_member(const json::object& o, const Path& at, std::string_view, schema::Need,
                 MetricSet& set) {
  std::array<bool, kMetricCount> present{}, absent{};
  const auto each = [&](const json::value& v, std::string_view key, auto on_metric) {
    const Path p = at / key;
    for (const auto& kv : as_object(v, p)) {
      const std::string_view name(kv.key().data(), kv.key().size());
      const auto m = metric_from_string(name);
      if (!m) continue;  // a metric added by a newer producer
      on_metric(*m, kv.value(), p / name);
    }
  };
  each(need(o, "metrics", at), "metrics", [&](Metric m, const json::value& v, const Path& p) {
    set[m] = Reading::of(as_double(v, p), Source::none);
    present[static_cast<std::size_t>(m)] = true;
  });
  each(need(o, "sources", at), "sources", [&](Metric m, const json::value& v, const Path& p) {
    if (!present[static_cast<std::size_t>(m)]) fail(p, "source given for a metric with no value");
    set[m] = Reading::of(set[m].value(), as_enum(v, p, source_from_string));
  });
  each(need(o, "absent", at), "absent", [&](Metric m, const json::value& v, const Path& p) {
    if (present[static_cast<std::size_t>(m)]) fail(p, "metric is both present and absent");
    set[m] = Reading::missing(as_enum(v, p, absence_from_string));
    absent[static_cast<std::size_t>(m)] = true;
  });
  if (const json::value* s = maybe(o, "absent_sources")) {
    each(*s, "absent_sources", [&](Metric m, const json::value& v, const Path& p) {
      if (!absent[static_cast<std::size_t>(m)]) fail(p, "source given for a metric not absent");
      set[m] = Reading::missing(set[m].reason(), as_enum(v, p, source_from_string));
    });
  }
}

/// The members of a described struct, as its schema says.
template <typename S>
void read_members(const json::object& o, const Path& at, S& s) {
  schema::for_each_field<S>([&](const auto& f) {
    if (f.unless && f.unless(s)) return;
    read_member(o, at, f.name, f.need, s.*f.member);
    if (f.refuse && f.refuse(s)) fail(at / f.name, f.refuse_why);
  });
}

void read(const json::value& v, const Path& at, std::string& out) { out = as_string(v, at); }
void read(const json::value& v, const Path& at, bool& out) { out = as_bool(v, at); }
void read(const json::value& v, const Path& at, int& out) { out = as_int(v, at); }
void read(const json::value& v, const Path& at, unsigned& out) {
  const std::uint64_t u = as_uint64(v, at);
  if (u > std::numeric_limits<unsigned>::max())
    fail(at, "integer out of range: " + std::to_string(u));
  out = static_cast<unsigned>(u);
}
void read(const json::value& v, const Path& at, std::int64_t& out) { out = as_int64(v, at); }
void read(const json::value& v, const Path& at, std::uint64_t& out) { out = as_uint64(v, at); }
void read(const json::value& v, const Path& at, double& out) { out = as_double(v, at); }

/// The enumeration of a field's type, from its name.
template <typename E>
std::optional<E> enum_from_string(std::string_view s) noexcept {
  if constexpr (std::is_same_v<E, Vendor>) return vendor_from_string(s);
  if constexpr (std::is_same_v<E, Absence>) return absence_from_string(s);
  if constexpr (std::is_same_v<E, EnergyKind>) return energy_kind_from_string(s);
  if constexpr (std::is_same_v<E, PowerKind>) return power_kind_from_string(s);
  if constexpr (std::is_same_v<E, PowerState>) return power_state_from_string(s);
  // A reason added by a newer producer reads as "not collected", as unknown metrics do.
  if constexpr (std::is_same_v<E, ContainerAbsent>)
    return container_absent_from_string(s).value_or(ContainerAbsent::not_collected);
  if constexpr (std::is_same_v<E, SlurmAbsent>)
    return slurm_absent_from_string(s).value_or(SlurmAbsent::none);
  if constexpr (std::is_same_v<E, PodAbsent>)
    return pod_absent_from_string(s).value_or(PodAbsent::none);
}

template <typename E>
requires std::is_enum_v<E>
void read(const json::value& v, const Path& at, E& out) {
  out = as_enum(v, at, &enum_from_string<E>);
}

template <typename T>
void read(const json::value& v, const Path& at, std::optional<T>& out) {
  if (v.is_null()) {
    out.reset();
    return;
  }
  T t{};
  read(v, at, t);
  out = std::move(t);
}

template <typename T>
void read(const json::value& v, const Path& at, SharedOptional<T>& out) {
  if (v.is_null()) {
    out.reset();
    return;
  }
  T t{};
  read(v, at, t);
  out = std::move(t);  // a block of its own: nothing else holds what was just read
}

template <typename T>
void read(const json::value& v, const Path& at, std::vector<T>& out) {
  const auto& a = as_array(v, at);
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    T t{};
    read(a[i], at[i], t);
    out.push_back(std::move(t));
  }
}

/// One [monotonic_ns, watts] pair, watts finite and not negative.
PowerSample power_sample(const json::value& v, const Path& p) {
  const auto& pair = as_array(v, p);
  if (pair.size() != 2) fail(p, "expected [monotonic_ns, watts]");
  PowerSample s{as_int64(pair[0], p[0]), as_double(pair[1], p[1])};
  if (s.watts < 0) fail(p[1], "negative power");
  return s;
}

/// [[monotonic_ns, watts], ...]: at most kMaxPowerSamplesPerDevice, strictly increasing
/// monotonic_ns, watts finite and not negative.
void read(const json::value& v, const Path& at, std::vector<PowerSample>& out) {
  const auto& a = as_array(v, at);
  if (a.size() > kMaxPowerSamplesPerDevice)
    fail(at, "more than " + std::to_string(kMaxPowerSamplesPerDevice) + " power samples (" +
                 std::to_string(a.size()) + ")");
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Path p = at[i];
    const PowerSample s = power_sample(a[i], p);
    if (!out.empty() && s.monotonic_ns <= out.back().monotonic_ns)
      fail(p[0], "power samples must be in strictly increasing monotonic_ns");
    out.push_back(s);
  }
}

void read(const json::value& v, const Path& at, std::map<std::string, std::string>& out) {
  for (const auto& kv : as_object(v, at)) {
    const std::string_view key(kv.key().data(), kv.key().size());
    out.emplace(key, as_string(kv.value(), at / key));
  }
}

void read(const json::value& v, const Path& at, std::map<std::string, double>& out) {
  for (const auto& kv : as_object(v, at)) {
    const std::string_view key(kv.key().data(), kv.key().size());
    out.emplace(key, as_double(kv.value(), at / key));
  }
}

template <typename S>
requires schema::kDescribed<S>
void read(const json::value& v, const Path& at, S& out) { read_members(as_object(v, at), at, out); }

const Path kRoot;

/// A snapshot's checks beyond its fields: no device's power sample after its monotonic_ns.
void check_snapshot(const GpuSnapshot& s, const Path& at) {
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    const auto& ps = s.devices[i].power_samples;
    if (!ps.empty() && ps.back().monotonic_ns > s.monotonic_ns)
      fail((at / "devices")[i] / "power_samples",
           "a power sample after the snapshot's monotonic_ns");
  }
}

}  // namespace
}  // namespace gpustream
