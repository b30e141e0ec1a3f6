// The decoder: boost::json::value -> model, validating every type and enumeration name.
// Rules (docs/protocol.md): keys of the contract are required, keys added later are optional,
// unknown keys are ignored, unknown enumeration values are rejected. Each error names its place
// as a path, e.g. "$.devices[0].metrics.power_watts: expected a number, got string".
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "gpustream/json.hpp"

namespace gpustream {
namespace {

namespace json = boost::json;

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

template <typename T, typename Read>
std::optional<T> nullable(const json::value& v, Read read) {
  if (v.is_null()) return std::nullopt;
  return read(v);
}

EngineSample engine_from(const json::value& v, const Path& at) {
  const auto& o = as_object(v, at);
  EngineSample e;
  e.name = as_string(need(o, "name", at), at / "name");
  const Source source = maybe(o, "source")
                            ? as_enum(*maybe(o, "source"), at / "source", source_from_string)
                            : Source::none;
  const json::value& u = need(o, "utilization_percent", at);
  if (!u.is_null()) {
    if (maybe(o, "absent")) fail(at / "absent", "engine has a value and an absence reason");
    e.utilization_percent = Reading::of(as_double(u, at / "utilization_percent"), source);
  } else if (const json::value* why = maybe(o, "absent")) {
    e.utilization_percent =
        Reading::missing(as_enum(*why, at / "absent", absence_from_string), source);
  } else {
    e.utilization_percent = Reading::missing(Absence::not_collected, source);
  }
  return e;
}

std::vector<EngineSample> engines_from(const json::value& v, const Path& at) {
  const auto& a = as_array(v, at);
  std::vector<EngineSample> out;
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(engine_from(a[i], at[i]));
  return out;
}

ProcessSample process_from(const json::value& v, const Path& at) {
  const auto& o = as_object(v, at);
  ProcessSample p;
  p.pid = as_int64(need(o, "pid", at), at / "pid");
  p.name = as_string(need(o, "name", at), at / "name");
  const auto u64 = [&](std::string_view key) {
    return nullable<std::uint64_t>(need(o, key, at),
                                   [&](const json::value& x) { return as_uint64(x, at / key); });
  };
  p.gpu_memory_bytes = u64("gpu_memory_bytes");
  // Newer than the format: optional, and null or left out both read as unknown.
  if (const auto* g = maybe(o, "gtt_memory_bytes"))
    p.gtt_memory_bytes = as_uint64(*g, at / "gtt_memory_bytes");
  p.gpu_utilization_percent = nullable<double>(
      need(o, "gpu_utilization_percent", at),
      [&](const json::value& x) { return as_double(x, at / "gpu_utilization_percent"); });
  p.host_rss_bytes = u64("host_rss_bytes");
  p.per_process_exact = as_bool(need(o, "per_process_exact", at), at / "per_process_exact");
  if (const auto* c = maybe(o, "container")) {
    const Path cp = at / "container";
    const auto& co = as_object(*c, cp);
    ProcessContainer pc;
    const auto part = [&](std::string_view key, std::string& out) {
      if (const auto* v = maybe(co, key)) out = as_string(*v, cp / key);
    };
    part("runtime", pc.runtime);
    part("id", pc.id);
    part("pod_uid", pc.pod_uid);
    part("qos", pc.qos);
    p.container = std::move(pc);
  } else if (const auto* a = maybe(o, "container_absent")) {
    const Path ap = at / "container_absent";
    const auto reason = container_absent_from_string(as_string(*a, ap));
    // A reason added by a newer producer reads as "not collected", as unknown metrics do.
    p.container_absent = reason.value_or(ContainerAbsent::not_collected);
  }
  if (const auto* e = maybe(o, "engines")) p.engines = engines_from(*e, at / "engines");
  return p;
}

/// Reads the four per-metric objects into `set`; a metric in none of them stays not_collected.
void metrics_from(const json::object& o, const Path& at, MetricSet& set) {
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

DeviceSample device_from(const json::value& v, const Path& at) {
  const auto& o = as_object(v, at);
  DeviceSample d;
  d.id = as_string(need(o, "id", at), at / "id");
  d.vendor = as_enum(need(o, "vendor", at), at / "vendor", vendor_from_string);
  d.index = as_int(need(o, "index", at), at / "index");
  d.name = as_string(need(o, "name", at), at / "name");
  d.pci_bus_id = as_string(need(o, "pci_bus_id", at), at / "pci_bus_id");
  if (const auto* p = maybe(o, "power_state"))
    d.power_state = as_enum(*p, at / "power_state", power_state_from_string);
  if (const auto* e = maybe(o, "energy_kind"))
    d.energy_kind = as_enum(*e, at / "energy_kind", energy_kind_from_string);
  if (const auto* k = maybe(o, "power_kind"))
    d.power_kind = as_enum(*k, at / "power_kind", power_kind_from_string);
  if (const auto* p = maybe(o, "parent")) d.parent = as_string(*p, at / "parent");
  if (const auto* m = maybe(o, "mig")) {
    const Path mp = at / "mig";
    const auto& mo = as_object(*m, mp);
    const auto id = [&](std::string_view key) {
      const std::uint64_t v = as_uint64(need(mo, key, mp), mp / key);
      if (v > std::numeric_limits<unsigned>::max())
        fail(mp / key, "integer out of range: " + std::to_string(v));
      return static_cast<unsigned>(v);
    };
    MigIdentity mig;
    mig.gpu_instance_id = id("gpu_instance_id");
    mig.compute_instance_id = id("compute_instance_id");
    mig.profile = as_string(need(mo, "profile", mp), mp / "profile");
    d.mig = std::move(mig);
  }
  if (const auto* p = maybe(o, "partitioned")) d.partitioned = as_bool(*p, at / "partitioned");
  metrics_from(o, at, d.metrics);
  if (const auto* t = maybe(o, "throttle_reasons")) {
    const Path tp = at / "throttle_reasons";
    const auto& a = as_array(*t, tp);
    d.throttle_reasons.reserve(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) d.throttle_reasons.push_back(as_string(a[i], tp[i]));
  }
  if (const auto* ta = maybe(o, "throttle_reasons_absent")) {
    const Path tap = at / "throttle_reasons_absent";
    d.throttle_reasons_absent = as_enum(*ta, tap, absence_from_string);
    if (!d.throttle_reasons.empty()) fail(tap, "throttle reasons both present and absent");
  }
  d.engines = engines_from(need(o, "engines", at), at / "engines");
  const Path pp = at / "processes";
  const auto& procs = as_array(need(o, "processes", at), pp);
  d.processes.reserve(procs.size());
  for (std::size_t i = 0; i < procs.size(); ++i)
    d.processes.push_back(process_from(procs[i], pp[i]));
  if (const auto* pa = maybe(o, "processes_absent"))
    d.processes_absent = as_enum(*pa, at / "processes_absent", absence_from_string);
  if (const auto* a = maybe(o, "attributes")) {
    const Path ap = at / "attributes";
    for (const auto& kv : as_object(*a, ap)) {
      const std::string_view key(kv.key().data(), kv.key().size());
      d.attributes.emplace(key, as_string(kv.value(), ap / key));
    }
  }
  return d;
}

HostSample host_from(const json::value& v, const Path& at) {
  const auto& o = as_object(v, at);
  HostSample h;
  const auto u64 = [&](std::string_view key) -> std::optional<std::uint64_t> {
    if (const auto* x = maybe(o, key)) return as_uint64(*x, at / key);
    return std::nullopt;
  };
  h.memory_total_bytes = u64("memory_total_bytes");
  h.memory_available_bytes = u64("memory_available_bytes");
  h.memory_used_bytes = u64("memory_used_bytes");
  h.swap_total_bytes = u64("swap_total_bytes");
  h.swap_used_bytes = u64("swap_used_bytes");
  if (const auto* p = maybe(o, "processes")) {
    const Path pp = at / "processes";
    const auto& a = as_array(*p, pp);
    h.processes.reserve(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      const Path ip = pp[i];
      const auto& po = as_object(a[i], ip);
      HostProcess hp;
      hp.pid = as_int64(need(po, "pid", ip), ip / "pid");
      hp.name = as_string(need(po, "name", ip), ip / "name");
      if (const auto* r = maybe(po, "rss_bytes")) hp.rss_bytes = as_uint64(*r, ip / "rss_bytes");
      h.processes.push_back(std::move(hp));
    }
  }
  if (const auto* m = maybe(o, "metrics")) {
    const Path mp = at / "metrics";
    for (const auto& kv : as_object(*m, mp)) {
      const std::string_view key(kv.key().data(), kv.key().size());
      h.metrics.emplace(key, as_double(kv.value(), mp / key));
    }
  }
  return h;
}

SampleError error_from(const json::value& v, const Path& at) {
  const auto& o = as_object(v, at);
  SampleError e;
  e.code = as_string(need(o, "code", at), at / "code");
  e.message = as_string(need(o, "message", at), at / "message");
  if (const auto* d = maybe(o, "device")) e.device = as_string(*d, at / "device");
  return e;
}

const Path kRoot;

}  // namespace

GpuSnapshot snapshot_from_json(const json::value& v) {
  const Path& at = kRoot;
  const auto& o = as_object(v, at);
  const std::string_view schema = as_view(need(o, "schema", at), at / "schema");
  if (schema != kSchema)
    fail(at / "schema", "unsupported schema \"" + std::string(schema) +
                            "\" (this decoder reads \"" + std::string(kSchema) + "\")");
  GpuSnapshot s;
  s.probe = as_string(need(o, "probe", at), at / "probe");
  if (const auto* n = maybe(o, "node")) s.node = as_string(*n, at / "node");
  s.sequence = as_uint64(need(o, "sequence", at), at / "sequence");
  s.time_unix_ns = as_int64(need(o, "time_unix_ns", at), at / "time_unix_ns");
  if (const auto* m = maybe(o, "monotonic_ns")) s.monotonic_ns = as_int64(*m, at / "monotonic_ns");
  s.sample_duration_ns = as_int64(need(o, "sample_duration_ns", at), at / "sample_duration_ns");
  const Path dp = at / "devices";
  const auto& devices = as_array(need(o, "devices", at), dp);
  s.devices.reserve(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i)
    s.devices.push_back(device_from(devices[i], dp[i]));
  if (const auto* h = maybe(o, "host")) s.host = host_from(*h, at / "host");
  const Path ep = at / "errors";
  const auto& errors = as_array(need(o, "errors", at), ep);
  s.errors.reserve(errors.size());
  for (std::size_t i = 0; i < errors.size(); ++i) s.errors.push_back(error_from(errors[i], ep[i]));
  return s;
}

DeviceSample device_from_json(const json::value& v) { return device_from(v, kRoot); }

HostSample host_from_json(const json::value& v) { return host_from(v, kRoot); }

}  // namespace gpustream
