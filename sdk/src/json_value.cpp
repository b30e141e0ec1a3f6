// The document encoder: builds a boost::json::value with the same keys, order and rules as the
// text encoder (json_write.cpp). Slower than the text encoder (one allocation per node); use it
// when a caller wants to edit or embed the document.
#include <array>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpustream/json.hpp"
#include "gpustream/log.hpp"
#include "json_lossy.hpp"

namespace gpustream {

void detail::note_lossy(std::string_view what, std::string_view where) {
  static LogOnce once;
  if (once.first(std::string(what)))
    logger()->warn("json: {} (first seen at {}); written in a JSON-safe form", what, where);
}

Reading detail::writable(const Reading& r, std::string_view where) {
  if (r.has_value() && !std::isfinite(r.value())) {
    note_lossy("non-finite metric value", where);
    return Reading::missing(Absence::unsupported, r.source());
  }
  return r;
}

namespace {

namespace json = boost::json;

using detail::note_lossy;
using detail::writable;

json::string_view sv(std::string_view s) noexcept { return {s.data(), s.size()}; }

json::value text(std::string_view s) {
  if (is_valid_utf8(s)) return json::value(sv(s));
  const std::string valid = to_valid_utf8(s);
  note_lossy("string that is not UTF-8", valid);
  return json::value(sv(valid));
}

json::value name(std::string_view enum_name) { return json::value(sv(enum_name)); }

template <typename Int>
json::value optional_integer(const std::optional<Int>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

json::value optional_number(const std::optional<double>& v, std::string_view where) {
  if (v && std::isfinite(*v)) return json::value(*v);
  if (v) note_lossy("non-finite number", where);
  return json::value(nullptr);
}

json::value metric_value(Metric m, double v) {
  if (to_string(m).ends_with("_bytes") && v >= 0 && v < 18446744073709551616.0 &&
      v == std::floor(v))
    return json::value(static_cast<std::uint64_t>(v));
  return json::value(v);
}

json::array engines_json(const std::vector<EngineSample>& engines) {
  json::array a;
  a.reserve(engines.size());
  for (const auto& e : engines) {
    const Reading r = writable(e.utilization_percent, e.name);
    json::object o;
    o.reserve(4);
    o.emplace("name", text(e.name));
    o.emplace("utilization_percent", r.has_value() ? json::value(r.value()) : json::value());
    o.emplace("source", name(to_string(r.source())));
    if (!r.has_value()) o.emplace("absent", name(to_string(r.reason())));
    a.emplace_back(std::move(o));
  }
  return a;
}

json::object process_json(const ProcessSample& p) {
  json::object o;
  o.reserve(8);
  o.emplace("pid", p.pid);
  o.emplace("name", text(p.name));
  o.emplace("gpu_memory_bytes", optional_integer(p.gpu_memory_bytes));
  if (p.gtt_memory_bytes) o.emplace("gtt_memory_bytes", *p.gtt_memory_bytes);
  o.emplace("gpu_utilization_percent", optional_number(p.gpu_utilization_percent, p.name));
  o.emplace("host_rss_bytes", optional_integer(p.host_rss_bytes));
  o.emplace("per_process_exact", p.per_process_exact);
  if (p.container) {
    json::object c;
    if (!p.container->runtime.empty()) c.emplace("runtime", text(p.container->runtime));
    if (!p.container->id.empty()) c.emplace("id", text(p.container->id));
    if (!p.container->pod_uid.empty()) c.emplace("pod_uid", text(p.container->pod_uid));
    if (!p.container->qos.empty()) c.emplace("qos", text(p.container->qos));
    o.emplace("container", std::move(c));
  } else if (p.container_absent != ContainerAbsent::not_collected) {
    o.emplace("container_absent", to_string(p.container_absent));
  }
  o.emplace("engines", engines_json(p.engines));
  return o;
}

}  // namespace

json::value to_json(const DeviceSample& d) {
  json::object o;
  o.reserve(16);
  o.emplace("id", text(d.id));
  o.emplace("vendor", name(to_string(d.vendor)));
  o.emplace("index", d.index);
  o.emplace("name", text(d.name));
  o.emplace("pci_bus_id", text(d.pci_bus_id));
  o.emplace("power_state", name(to_string(d.power_state)));
  if (d.energy_kind) o.emplace("energy_kind", name(to_string(*d.energy_kind)));
  if (d.power_kind) o.emplace("power_kind", name(to_string(*d.power_kind)));
  if (!d.parent.empty()) o.emplace("parent", text(d.parent));
  if (d.mig) {
    json::object mig;
    mig.reserve(3);
    mig.emplace("gpu_instance_id", d.mig->gpu_instance_id);
    mig.emplace("compute_instance_id", d.mig->compute_instance_id);
    mig.emplace("profile", text(d.mig->profile));
    o.emplace("mig", std::move(mig));
  }
  if (d.partitioned) o.emplace("partitioned", true);

  json::object metrics, sources, absent, absent_sources;
  metrics.reserve(kMetricCount);
  sources.reserve(kMetricCount);
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto m = static_cast<Metric>(i);
    const Reading r = writable(d.metrics[m], d.id);
    const auto key = sv(to_string(m));
    if (r.has_value()) {
      metrics.emplace(key, metric_value(m, r.value()));
      sources.emplace(key, name(to_string(r.source())));
    } else {
      absent.emplace(key, name(to_string(r.reason())));
      if (r.source() != Source::none) absent_sources.emplace(key, name(to_string(r.source())));
    }
  }
  o.emplace("metrics", std::move(metrics));
  o.emplace("sources", std::move(sources));
  o.emplace("absent", std::move(absent));
  if (!absent_sources.empty()) o.emplace("absent_sources", std::move(absent_sources));

  json::array throttle;
  throttle.reserve(d.throttle_reasons.size());
  for (const auto& t : d.throttle_reasons) throttle.emplace_back(text(t));
  o.emplace("throttle_reasons", std::move(throttle));
  if (d.throttle_reasons_absent)
    o.emplace("throttle_reasons_absent", name(to_string(*d.throttle_reasons_absent)));
  o.emplace("engines", engines_json(d.engines));
  json::array processes;
  processes.reserve(d.processes.size());
  for (const auto& p : d.processes) processes.emplace_back(process_json(p));
  o.emplace("processes", std::move(processes));
  if (d.processes_absent) o.emplace("processes_absent", name(to_string(*d.processes_absent)));
  json::object attributes;
  attributes.reserve(d.attributes.size());
  for (const auto& [k, v] : d.attributes) {
    if (is_valid_utf8(k))
      attributes.emplace(sv(k), text(v));
    else
      attributes.emplace(sv(to_valid_utf8(k)), text(v));
  }
  o.emplace("attributes", std::move(attributes));
  return o;
}

json::value to_json(const HostSample& h) {
  json::object o;
  o.reserve(7);
  o.emplace("memory_total_bytes", optional_integer(h.memory_total_bytes));
  o.emplace("memory_available_bytes", optional_integer(h.memory_available_bytes));
  o.emplace("memory_used_bytes", optional_integer(h.memory_used_bytes));
  o.emplace("swap_total_bytes", optional_integer(h.swap_total_bytes));
  o.emplace("swap_used_bytes", optional_integer(h.swap_used_bytes));
  json::array processes;
  processes.reserve(h.processes.size());
  for (const auto& p : h.processes) {
    json::object po;
    po.reserve(3);
    po.emplace("pid", p.pid);
    po.emplace("name", text(p.name));
    po.emplace("rss_bytes", optional_integer(p.rss_bytes));
    processes.emplace_back(std::move(po));
  }
  o.emplace("processes", std::move(processes));
  json::object metrics;
  metrics.reserve(h.metrics.size());
  for (const auto& [k, v] : h.metrics) {
    if (!std::isfinite(v)) {
      note_lossy("non-finite host metric", k);
      continue;
    }
    if (is_valid_utf8(k))
      metrics.emplace(sv(k), v);
    else
      metrics.emplace(sv(to_valid_utf8(k)), v);
  }
  o.emplace("metrics", std::move(metrics));
  return o;
}

json::value to_json(const GpuSnapshot& s) {
  json::object o;
  o.reserve(9);
  o.emplace("schema", sv(kSchema));
  o.emplace("probe", text(s.probe));
  if (!s.node.empty()) o.emplace("node", text(s.node));
  o.emplace("sequence", s.sequence);
  o.emplace("time_unix_ns", s.time_unix_ns);
  o.emplace("monotonic_ns", s.monotonic_ns);
  o.emplace("sample_duration_ns", s.sample_duration_ns);
  json::array devices;
  devices.reserve(s.devices.size());
  for (const auto& d : s.devices) devices.emplace_back(to_json(d));
  o.emplace("devices", std::move(devices));
  if (s.host) o.emplace("host", to_json(*s.host));
  json::array errors;
  errors.reserve(s.errors.size());
  for (const auto& e : s.errors) {
    json::object eo;
    eo.reserve(3);
    eo.emplace("code", text(e.code));
    eo.emplace("message", text(e.message));
    if (!e.device.empty()) eo.emplace("device", text(e.device));
    errors.emplace_back(std::move(eo));
  }
  o.emplace("errors", std::move(errors));
  return o;
}

}  // namespace gpustream
