// Prometheus text exposition 0.0.4 of snapshots, probe statistics and server counters.
#include "gpustream/transport/prometheus.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "gpustream/json.hpp"

namespace gpustream::transport {

namespace {

using Labels = std::vector<std::pair<std::string_view, std::string>>;

/// One metric family: its HELP and TYPE, then its samples. Families without a sample are not
/// written at all.
class Exposition {
 public:
  std::size_t family(std::string name, std::string_view type, std::string_view help) {
    if (const auto it = index_.find(name); it != index_.end()) return it->second;
    index_.emplace(name, families_.size());
    families_.push_back({std::move(name), std::string(type), std::string(help), {}});
    return families_.size() - 1;
  }

  void sample(std::size_t f, const Labels& labels, double value) {
    if (!std::isfinite(value)) return;  // a value we do not have is left out, never 0
    auto& out = families_[f].samples;
    out += families_[f].name;
    append_labels(out, labels);
    out += ' ';
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, value);
    out.append(buf, r.ptr);
    out += '\n';
  }

  void sample(std::size_t f, const Labels& labels, std::uint64_t value) {
    auto& out = families_[f].samples;
    out += families_[f].name;
    append_labels(out, labels);
    out += ' ';
    out += std::to_string(value);
    out += '\n';
  }

  /// `labels` as append_labels writes them, without the braces.
  static std::string render_labels(const Labels& labels) {
    std::string out;
    append_labels(out, labels);
    if (out.size() >= 2) out = out.substr(1, out.size() - 2);
    return out;
  }

  std::string str() const {
    std::size_t total = 0;
    for (const auto& f : families_)
      if (!f.samples.empty())
        total += f.name.size() * 2 + f.help.size() + f.type.size() + 18 + f.samples.size();
    std::string out;
    out.reserve(total);
    for (const auto& f : families_) {
      if (f.samples.empty()) continue;
      out += "# HELP " + f.name + ' ' + f.help + '\n';
      out += "# TYPE " + f.name + ' ' + f.type + '\n';
      out += f.samples;
    }
    return out;
  }

  static void append_labels(std::string& out, const Labels& labels) {
    if (labels.empty()) return;
    out += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) out += ',';
      first = false;
      out += k;
      out += "=\"";
      out += escape_label_value(v);
      out += '"';
    }
    out += '}';
  }

 private:
  struct Family {
    std::string name, type, help, samples;
  };
  std::vector<Family> families_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

struct DeviceFamily {
  Metric metric;
  std::string_view name;
  std::string_view type;
  double mul;  // to the base unit: value * mul / div
  double div;
  std::string_view help;
  // One more label telling apart the metrics that share a family (ECC counters, ...); empty key:
  // none.
  std::string_view label = {};
  std::string_view label_value = {};
};

// The device metrics, in base units. Percentages become ratios (0..1), MHz become hertz.
constexpr std::array<DeviceFamily, kMetricCount> kDeviceFamilies{{
    {Metric::utilization_percent, "gpustream_gpu_utilization_ratio", "gauge", 1, 100,
     "Fraction of time the GPU was busy (0..1)."},
    {Metric::memory_utilization_percent, "gpustream_gpu_memory_utilization_ratio", "gauge", 1, 100,
     "Fraction of time the memory controller was busy (0..1)."},
    {Metric::memory_used_bytes, "gpustream_gpu_memory_used_bytes", "gauge", 1, 1,
     "Device memory in use."},
    {Metric::memory_total_bytes, "gpustream_gpu_memory_total_bytes", "gauge", 1, 1,
     "Device memory in total."},
    {Metric::temperature_celsius, "gpustream_gpu_temperature_celsius", "gauge", 1, 1,
     "GPU temperature."},
    {Metric::power_watts, "gpustream_gpu_power_watts", "gauge", 1, 1,
     "Power draw (instantaneous, else the driver's average: power_kind in the JSON)."},
    {Metric::power_average_watts, "gpustream_gpu_power_average_watts", "gauge", 1, 1,
     "Power draw averaged by the driver over its own window."},
    {Metric::power_limit_watts, "gpustream_gpu_power_limit_watts", "gauge", 1, 1,
     "Enforced power limit."},
    {Metric::energy_joules, "gpustream_gpu_energy_joules_total", "counter", 1, 1,
     "Energy consumed (hardware counter, or integrated from power when the device has none)."},
    {Metric::clock_graphics_mhz, "gpustream_gpu_clock_graphics_hertz", "gauge", 1e6, 1,
     "Graphics clock."},
    {Metric::clock_sm_mhz, "gpustream_gpu_clock_sm_hertz", "gauge", 1e6, 1, "SM clock."},
    {Metric::clock_memory_mhz, "gpustream_gpu_clock_memory_hertz", "gauge", 1e6, 1,
     "Memory clock."},
    {Metric::fan_percent, "gpustream_gpu_fan_speed_ratio", "gauge", 1, 100,
     "Fan speed as a fraction of its maximum (0..1)."},
    {Metric::fan_rpm, "gpustream_gpu_fan_speed_rpm", "gauge", 1, 1,
     "Fan speed in revolutions per minute."},
    {Metric::gtt_used_bytes, "gpustream_gpu_gtt_used_bytes", "gauge", 1, 1,
     "GTT (system memory mapped for the GPU) in use."},
    {Metric::gtt_total_bytes, "gpustream_gpu_gtt_total_bytes", "gauge", 1, 1, "GTT in total."},
    {Metric::memory_free_bytes, "gpustream_gpu_memory_free_bytes", "gauge", 1, 1,
     "Device memory a new allocation can still get (the vendor's figure, else total - used)."},
    {Metric::pcie_rx_bytes_per_second, "gpustream_gpu_pcie_rx_bytes_per_second", "gauge", 1, 1,
     "PCIe traffic into the device."},
    {Metric::pcie_tx_bytes_per_second, "gpustream_gpu_pcie_tx_bytes_per_second", "gauge", 1, 1,
     "PCIe traffic out of the device."},
    {Metric::pcie_link_generation, "gpustream_gpu_pcie_link_generation", "gauge", 1, 1,
     "Current PCIe link generation."},
    {Metric::pcie_link_generation_max, "gpustream_gpu_pcie_link_generation_max", "gauge", 1, 1,
     "Highest PCIe link generation the device and its slot support."},
    {Metric::pcie_link_width, "gpustream_gpu_pcie_link_width_lanes", "gauge", 1, 1,
     "Current PCIe link width."},
    {Metric::pcie_link_width_max, "gpustream_gpu_pcie_link_width_max_lanes", "gauge", 1, 1,
     "Widest PCIe link the device and its slot support."},
    {Metric::nvlink_rx_bytes_per_second, "gpustream_gpu_nvlink_rx_bytes_per_second", "gauge", 1, 1,
     "NVLink data received over all active links, between the last two samples."},
    {Metric::nvlink_tx_bytes_per_second, "gpustream_gpu_nvlink_tx_bytes_per_second", "gauge", 1, 1,
     "NVLink data sent over all active links, between the last two samples."},
    {Metric::ecc_corrected_volatile, "gpustream_gpu_ecc_errors_total", "counter", 1, 1,
     "ECC memory errors; counter=volatile since the driver loaded, aggregate over the device's "
     "life.",
     "error", "corrected,volatile"},
    {Metric::ecc_uncorrected_volatile, "gpustream_gpu_ecc_errors_total", "counter", 1, 1, "",
     "error", "uncorrected,volatile"},
    {Metric::ecc_corrected_aggregate, "gpustream_gpu_ecc_errors_total", "counter", 1, 1, "",
     "error", "corrected,aggregate"},
    {Metric::ecc_uncorrected_aggregate, "gpustream_gpu_ecc_errors_total", "counter", 1, 1, "",
     "error", "uncorrected,aggregate"},
    {Metric::retired_pages_single_bit, "gpustream_gpu_retired_pages", "gauge", 1, 1,
     "Device memory pages retired, by cause.", "cause", "multiple_single_bit_ecc"},
    {Metric::retired_pages_double_bit, "gpustream_gpu_retired_pages", "gauge", 1, 1, "", "cause",
     "double_bit_ecc"},
    {Metric::retired_pages_pending, "gpustream_gpu_retired_pages_pending", "gauge", 1, 1,
     "1 when a page retirement waits for the next driver reload."},
    {Metric::remapped_rows_corrected, "gpustream_gpu_remapped_rows", "gauge", 1, 1,
     "Device memory rows remapped, by the kind of error that caused it.", "cause", "corrected"},
    {Metric::remapped_rows_uncorrected, "gpustream_gpu_remapped_rows", "gauge", 1, 1, "", "cause",
     "uncorrected"},
    {Metric::remapped_rows_pending, "gpustream_gpu_remapped_rows_pending", "gauge", 1, 1,
     "1 when a row remapping waits for a GPU reset."},
    {Metric::remapped_rows_failed, "gpustream_gpu_remapped_rows_failed", "gauge", 1, 1,
     "1 when a row remapping failed (the device needs service)."},
    {Metric::graphics_activity_percent, "gpustream_gpu_graphics_activity_ratio", "gauge", 1, 100,
     "Fraction of time the graphics/compute engine was active (0..1; NVML GPM, AMD gpu_metrics)."},
    {Metric::sm_activity_percent, "gpustream_gpu_sm_activity_ratio", "gauge", 1, 100,
     "Fraction of SMs with at least one warp resident, averaged over the interval (0..1; NVML "
     "GPM)."},
    {Metric::sm_occupancy_percent, "gpustream_gpu_sm_occupancy_ratio", "gauge", 1, 100,
     "Resident warps over the SMs' maximum, averaged over the interval (0..1; NVML GPM)."},
    {Metric::tensor_activity_percent, "gpustream_gpu_tensor_activity_ratio", "gauge", 1, 100,
     "Fraction of time the tensor pipes were active (0..1; NVML GPM)."},
    {Metric::dram_activity_percent, "gpustream_gpu_dram_activity_ratio", "gauge", 1, 100,
     "Fraction of time the device memory interface was busy (0..1; NVML GPM, AMD gpu_metrics)."},
    {Metric::fp64_activity_percent, "gpustream_gpu_fp64_activity_ratio", "gauge", 1, 100,
     "Fraction of time the FP64 pipe was active (0..1; NVML GPM)."},
    {Metric::fp32_activity_percent, "gpustream_gpu_fp32_activity_ratio", "gauge", 1, 100,
     "Fraction of time the FP32 pipe was active (0..1; NVML GPM)."},
    {Metric::fp16_activity_percent, "gpustream_gpu_fp16_activity_ratio", "gauge", 1, 100,
     "Fraction of time the FP16 pipe was active (0..1; NVML GPM)."},
}};

/// Every metric has its row, in Metric order (fam[] is indexed by it).
constexpr bool device_families_complete() {
  for (std::size_t i = 0; i < kMetricCount; ++i)
    if (static_cast<std::size_t>(kDeviceFamilies[i].metric) != i) return false;
  return true;
}
static_assert(device_families_complete(), "kDeviceFamilies: one row per Metric, in order");

/// A metric name made of [a-zA-Z0-9_] from a free-form key.
std::string sanitize_name(std::string_view key) {
  std::string out;
  for (const char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out.push_back(ok ? c : '_');
  }
  return out;
}

double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

/// Each device family's own labels after the device's, rendered (",key=\"v\"", or
/// ",key=\"a\",counter=\"b\"" for "a,b": ECC's volatile/aggregate); empty for most.
const std::array<std::string, kMetricCount>& device_family_labels() {
  static const std::array<std::string, kMetricCount> all = [] {
    std::array<std::string, kMetricCount> out;
    for (std::size_t i = 0; i < kMetricCount; ++i) {
      const auto& f = kDeviceFamilies[i];
      if (f.label.empty()) continue;
      Labels lf;
      const auto comma = f.label_value.find(',');
      lf.emplace_back(f.label, std::string(f.label_value.substr(0, comma)));
      if (comma != std::string_view::npos)
        lf.emplace_back("counter", std::string(f.label_value.substr(comma + 1)));
      out[i] = ',' + Exposition::render_labels(lf);
    }
    return out;
  }();
  return all;
}

// ---------------------------------------------------------------------------------------------
// The per-snapshot families, written family by family (issue #32: a streamed /metrics). The text
// is the same as when every snapshot's samples were collected per family and then joined: a
// family's samples in snapshot order, then the next family's; a family with no sample has no
// HELP and TYPE either (they are written before its first sample).

/// `v` escaped as a label value; the common case (ASCII with nothing to escape) copied as is.
void append_label_value(std::string& out, std::string_view v) {
  for (const char c : v) {
    if (static_cast<unsigned char>(c) >= 0x80 || c == '\\' || c == '"' || c == '\n') {
      out += escape_label_value(v);
      return;
    }
  }
  out += v;
}

/// `,key="value"` (no comma when `first`).
void append_label(std::string& out, std::string_view key, std::string_view value,
                  bool first = false) {
  if (!first) out += ',';
  out += key;
  out += "=\"";
  append_label_value(out, value);
  out += '"';
}

void append_number(std::string& out, double value) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, r.ptr);
}

void append_number(std::string& out, std::uint64_t value) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, r.ptr);
}

/// A device's own labels, as every device family starts them: device, vendor, probe, name,
/// then node (a fleet's devices, docs/fleet.md) and parent (a MIG instance's physical GPU).
void append_device_labels(std::string& out, const GpuSnapshot& s, const DeviceSample& d) {
  append_label(out, "device", d.id, true);
  append_label(out, "vendor", to_string(d.vendor));
  append_label(out, "probe", s.probe);
  append_label(out, "name", d.name);
  if (!s.node.empty()) append_label(out, "node", s.node);
  if (!d.parent.empty()) append_label(out, "parent", d.parent);
}

// The container label of a process: its id, else its pod; empty when unknown.
std::string container_label(const ProcessSample& p) {
  if (!p.container) return {};
  if (!p.container->id.empty()) return p.container->id;
  if (!p.container->pod_uid.empty()) return "pod/" + p.container->pod_uid;
  return {};
}

/// A process's labels (gpustream_gpu_process_*).
Labels process_labels(const GpuSnapshot& s, const DeviceSample& d, const ProcessSample& p) {
  Labels l{{"device", d.id},
           {"vendor", std::string(to_string(d.vendor))},
           {"probe", s.probe},
           {"name", d.name},
           {"pid", std::to_string(p.pid)},
           {"process", p.name}};
  if (!s.node.empty()) l.emplace_back("node", s.node);
  if (p.pod) {
    // The kubelet's names, as dcgm-exporter labels them: `container` is then the container's
    // name, and its id (when the cgroup gives it) moves to `container_id`.
    l.emplace_back("pod", p.pod->name);
    l.emplace_back("namespace", p.pod->namespace_name);
    l.emplace_back("container", p.pod->container);
    if (p.container && !p.container->id.empty()) l.emplace_back("container_id", p.container->id);
  } else if (auto c = container_label(p); !c.empty()) {
    l.emplace_back("container", std::move(c));
  }
  // Not `job`: Prometheus gives every scraped series the target's `job` label, and an exposed
  // one would be renamed `exported_job` (or, with honor_labels, replace it).
  if (p.slurm) {
    l.emplace_back("slurm_job", p.slurm->job_id);
    if (!p.slurm->step.empty()) l.emplace_back("slurm_step", p.slurm->step);
  }
  return l;
}

/// A process with a value counts against --metrics-processes once per value it has.
bool process_has_value(const ProcessSample& p) {
  return p.gpu_memory_bytes || p.gpu_utilization_percent;
}

/// The host families every host part has, in the order they are written.
struct HostField {
  std::string_view name;
  std::string_view help;
  std::optional<std::uint64_t> HostSample::*field;
};
const std::array<HostField, 5> kHostFields{{
    {"gpustream_host_memory_total_bytes", "Host RAM in total.", &HostSample::memory_total_bytes},
    {"gpustream_host_memory_available_bytes", "Host RAM available for new allocations.",
     &HostSample::memory_available_bytes},
    {"gpustream_host_memory_used_bytes", "Host RAM in use.", &HostSample::memory_used_bytes},
    {"gpustream_host_swap_total_bytes", "Swap in total.", &HostSample::swap_total_bytes},
    {"gpustream_host_swap_used_bytes", "Swap in use.", &HostSample::swap_used_bytes},
}};
constexpr std::string_view kHostPrefix = "gpustream_host_";

/// Whether a host figure's key names the family `name` ("gpustream_host_" + the key sanitized).
bool host_key_is(std::string_view name, std::string_view key) {
  if (name.size() != kHostPrefix.size() + key.size() || !name.starts_with(kHostPrefix))
    return false;
  for (std::size_t i = 0; i < key.size(); ++i) {
    const char c = key[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (name[kHostPrefix.size() + i] != (ok ? c : '_')) return false;
  }
  return true;
}

enum class FamilyKind : std::uint8_t {
  device_metric,     // kDeviceFamilies rows sharing a name, from `row` on
  device_info,       // gpustream_gpu_info
  device_engine,     // gpustream_gpu_engine_utilization_ratio
  device_processes,  // gpustream_gpu_processes
  process_memory,
  process_utilization,
  process_omitted,
  host,  // a fixed host field (`row` < kHostFields.size()) and/or host figures by key
  meta_timestamp,
  meta_sequence,
  meta_duration,
  meta_errors,
  probe_stats,  // the probes' families, rendered whole (a few per probe)
  server,       // the server's families, rendered whole (fixed)
};

struct PlannedFamily {
  FamilyKind kind;
  std::string name;
  std::string_view type;
  std::string help;
  std::size_t row = 0;
};

bool per_snapshot(FamilyKind k) {
  return k != FamilyKind::process_omitted && k != FamilyKind::probe_stats &&
         k != FamilyKind::server;
}

void snapshot_labels(std::string& out, const GpuSnapshot& s) {
  append_label(out, "probe", s.probe, true);
  if (!s.node.empty()) append_label(out, "node", s.node);
}

void probe_stats(Exposition& e, const std::vector<ProbeStats>& stats) {
  constexpr std::array kStates{ProbeState::detecting, ProbeState::available,
                               ProbeState::unavailable, ProbeState::backoff, ProbeState::stopped};
  for (const auto& ps : stats) {
    const Labels l{{"probe", ps.probe}};
    e.sample(e.family("gpustream_probe_up", "gauge", "1 when the probe is sampling, else 0."), l,
             std::uint64_t{ps.state == ProbeState::available ? 1u : 0u});
    const auto state = e.family("gpustream_probe_state", "gauge",
                                "1 for the probe's current state, 0 for the others.");
    for (const auto st : kStates) {
      Labels ls = l;
      ls.emplace_back("state", std::string(to_string(st)));
      e.sample(state, ls, std::uint64_t{ps.state == st ? 1u : 0u});
    }
    const auto counter = [&](std::string name, std::string_view help, std::uint64_t v) {
      e.sample(e.family(std::move(name), "counter", help), l, v);
    };
    counter("gpustream_probe_samples_total", "Samples completed (partial ones included).",
            ps.samples);
    counter("gpustream_probe_failures_total", "Samples that failed (timeouts included).",
            ps.failures);
    counter("gpustream_probe_timeouts_total", "Samples or detections abandoned after a timeout.",
            ps.timeouts);
    counter("gpustream_probe_overruns_total",
            "Ticks skipped because the previous sample was still running.", ps.overruns);
    counter("gpustream_probe_missed_ticks_total",
            "Ticks skipped because the scheduler fell far behind.", ps.missed_ticks);
    e.sample(e.family("gpustream_probe_consecutive_failures", "gauge",
                      "Failures in a row (0 when the last sample succeeded)."),
             l, ps.consecutive_failures);
    e.sample(e.family("gpustream_probe_interval_seconds", "gauge", "Effective sampling interval."),
             l, static_cast<double>(ps.interval.count()) / 1e3);
    e.sample(e.family("gpustream_probe_devices", "gauge", "Devices in the last sample."), l,
             static_cast<std::uint64_t>(ps.devices));
    // A summary of quantiles only: they cover the recent window (ProbeStats::latency_window
    // samples), and no cumulative _sum/_count is kept. A gauge may not carry a `quantile` label.
    const auto lat = e.family("gpustream_probe_sample_latency_seconds", "summary",
                              "Sample latency quantiles over the recent window.");
    const std::pair<std::string_view, const std::optional<std::int64_t>*> qs[] = {
        {"0.5", &ps.latency_p50_ns}, {"0.9", &ps.latency_p90_ns}, {"0.99", &ps.latency_p99_ns}};
    for (const auto& [q, v] : qs) {
      if (!*v) continue;
      Labels lq = l;
      lq.emplace_back("quantile", std::string(q));
      e.sample(lat, lq, seconds(**v));
    }
    const auto max = e.family("gpustream_probe_sample_latency_max_seconds", "gauge",
                              "Longest sample latency over the recent window.");
    if (ps.latency_max_ns) e.sample(max, l, seconds(*ps.latency_max_ns));
  }
}

void server(Exposition& e, const ServerCounters& c) {
  const auto conns = e.family("gpustream_server_connections", "gauge", "Open connections.");
  e.sample(conns, {{"transport", "http"}}, c.http_open);
  e.sample(conns, {{"transport", "websocket"}}, c.websocket_open);
  e.sample(conns, {{"transport", "tcp"}}, c.tcp_open);
  const auto counter = [&](std::string name, std::string_view help, std::uint64_t v,
                           const Labels& l = {}) {
    e.sample(e.family(std::move(name), "counter", help), l, v);
  };
  counter("gpustream_server_connections_accepted_total", "Connections accepted.",
          c.connections_accepted);
  counter("gpustream_server_connections_rejected_total",
          "Connections refused because of the connection limit.", c.connections_rejected);
  counter("gpustream_server_http_requests_total", "HTTP requests read.", c.http_requests);
  counter("gpustream_server_requests_refused_total", "Requests refused.", c.requests_forbidden,
          {{"reason", "forbidden"}});
  counter("gpustream_server_requests_refused_total", "Requests refused.", c.requests_unauthorized,
          {{"reason", "unauthorized"}});
  counter("gpustream_server_messages_rejected_total",
          "Client messages rejected (malformed, too large, over a limit).", c.messages_rejected);
  counter("gpustream_server_slow_clients_disconnected_total",
          "Clients disconnected because they did not keep up.", c.slow_clients_disconnected);
  counter("gpustream_server_snapshots_received_total", "Snapshots received from the channel.",
          c.snapshots_received);
  counter("gpustream_server_serializations_total", "Snapshot encodings made.", c.serializations);
  counter("gpustream_server_snapshots_sent_total", "Snapshot messages queued to clients.",
          c.snapshots_sent);
  counter("gpustream_server_snapshots_dropped_total",
          "Snapshot messages dropped because a client's queue was full.", c.snapshots_dropped);
  counter("gpustream_server_messages_too_large_total",
          "Snapshot or hello messages not queued to a client: larger than its send budget.",
          c.messages_too_large);
  counter("gpustream_server_http_busy_total",
          "HTTP 503s: the response byte budget was in use, or a reserved connection asked for "
          "another path than /healthz and /metrics.",
          c.http_busy);
  e.sample(e.family("gpustream_server_http_response_bytes", "gauge",
                    "Bytes of HTTP responses being written (a shared body counted once)."),
           {}, c.http_response_bytes);
  e.sample(e.family("gpustream_server_encoded_bytes_live", "gauge",
                    "Bytes of shared messages (snapshots, hellos, API bodies) alive, each once."),
           {}, c.encoded_bytes_live);
  if (!c.tls) return;  // the TLS families exist only when the listeners speak TLS
  counter("gpustream_tls_handshakes_total", "TLS handshakes completed on the listeners.",
          c.tls_handshakes);
  for (std::size_t i = 0; i < transport::kTlsFailureReasons; ++i)
    counter("gpustream_tls_handshake_failures_total",
            "TLS handshakes failed on the listeners, by reason (plaintext: a client that does "
            "not speak TLS).",
            c.tls_handshake_failures[i],
            {{"reason", std::string(transport::to_string(static_cast<transport::TlsFailure>(i)))}});
  counter("gpustream_tls_reloads_total", "TLS certificate reloads.", c.tls_reloads,
          {{"result", "ok"}});
  counter("gpustream_tls_reloads_total", "TLS certificate reloads.", c.tls_reload_failures,
          {{"result", "failed"}});
  if (c.tls_certificate_not_after > 0)
    e.sample(e.family("gpustream_tls_certificate_expiry_timestamp_seconds", "gauge",
                      "When the listeners' certificate expires (Unix time)."),
             {}, static_cast<double>(c.tls_certificate_not_after));
}

}  // namespace

std::string escape_label_value(std::string_view v) {
  const std::string valid = to_valid_utf8(v);
  std::string out;
  out.reserve(valid.size());
  for (const char c : valid) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

struct PrometheusWriter::Impl {
  std::vector<SnapshotPtr> latest;
  std::vector<ProbeStats> stats;
  std::optional<ServerCounters> counters;
  PrometheusOptions options;
  std::vector<PlannedFamily> families;
  std::uint64_t omitted = 0;  // per-process samples over the bound

  // The cursor: the family being written, the next snapshot of it, whether its HELP/TYPE are
  // out, and (per-process families) how many per-process values came before in render order.
  std::size_t family = 0;
  std::size_t snapshot = 0;
  std::size_t device = 0;  // device and per-process families: the next device of the snapshot
  bool header = false;
  std::size_t process_values = 0;

  void plan();
  void head(std::string& out, const PlannedFamily& f);
  void write_device(std::string& out, const PlannedFamily& f, const GpuSnapshot& s,
                    const DeviceSample& d);
  void write_processes(std::string& out, const PlannedFamily& f, const GpuSnapshot& s,
                       const DeviceSample& d);
  void write_host(std::string& out, const PlannedFamily& f, const GpuSnapshot& s);
  void write_meta(std::string& out, const PlannedFamily& f, const GpuSnapshot& s);
  /// One piece: one device's (or, host and snapshot families, one snapshot's) samples of the
  /// current family, or a whole small family.
  bool step(std::string& out);
};

void PrometheusWriter::Impl::plan() {
  const auto add = [this](FamilyKind k, std::string name, std::string_view type, std::string help,
                          std::size_t row = 0) {
    families.push_back({k, std::move(name), type, std::move(help), row});
  };
  if (options.device_families) {
    // One family per distinct name, in the table's order (the ECC rows share one).
    for (std::size_t i = 0; i < kMetricCount; ++i) {
      const auto& f = kDeviceFamilies[i];
      bool seen = false;
      for (std::size_t j = 0; j < i && !seen; ++j) seen = kDeviceFamilies[j].name == f.name;
      if (!seen)
        add(FamilyKind::device_metric, std::string(f.name), f.type, std::string(f.help), i);
    }
    add(FamilyKind::device_info, "gpustream_gpu_info", "gauge",
        "Always 1: one series per device, with its PCI bus id and index.");
    add(FamilyKind::device_engine, "gpustream_gpu_engine_utilization_ratio", "gauge",
        "Fraction of time an engine class was busy (0..1).");
    add(FamilyKind::device_processes, "gpustream_gpu_processes", "gauge",
        "Processes using the device (as far as the source can tell); absent when the source "
        "cannot list them or the node is stale.");
  }
  if (options.max_process_series > 0) {
    std::uint64_t values = 0;
    for (const auto& s : latest) {
      if (!s) continue;
      for (const auto& d : s->devices)
        for (const auto& p : d.processes)
          if (process_has_value(p))
            values += (p.gpu_memory_bytes ? 1 : 0) + (p.gpu_utilization_percent ? 1 : 0);
    }
    omitted = values > options.max_process_series ? values - options.max_process_series : 0;
    add(FamilyKind::process_memory, "gpustream_gpu_process_memory_bytes", "gauge",
        "GPU memory a process uses on the device.");
    add(FamilyKind::process_utilization, "gpustream_gpu_process_utilization_ratio", "gauge",
        "Share of the device a process used (0..1).");
    add(FamilyKind::process_omitted, "gpustream_gpu_process_series_omitted", "gauge",
        "Per-process samples left out by the --metrics-processes bound.");
  }
  // The host families in the order they are first met: the fixed ones with the first host
  // part, then each new figure's name (the names are held: the distinct keys of the fleet).
  std::set<std::string, std::less<>> host_names;
  for (const auto& s : latest) {
    if (!s || !s->host) continue;
    if (host_names.empty()) {
      for (std::size_t i = 0; i < kHostFields.size(); ++i) {
        host_names.emplace(kHostFields[i].name);
        add(FamilyKind::host, std::string(kHostFields[i].name), "gauge",
            std::string(kHostFields[i].help), i);
      }
    }
    for (const auto& [key, value] : s->host->metrics) {
      const auto clean = sanitize_name(key);
      auto name = std::string(kHostPrefix) + clean;
      if (host_names.contains(name)) continue;
      host_names.insert(name);
      add(FamilyKind::host, std::move(name), "gauge", "Host figure '" + clean + "' in base units.",
          kHostFields.size());
    }
  }
  add(FamilyKind::meta_timestamp, "gpustream_snapshot_timestamp_seconds", "gauge",
      "Wall-clock time of the probe's latest snapshot (Unix seconds).");
  add(FamilyKind::meta_sequence, "gpustream_snapshot_sequence", "gauge",
      "Channel sequence number of the probe's latest snapshot.");
  add(FamilyKind::meta_duration, "gpustream_snapshot_sample_duration_seconds", "gauge",
      "How long the probe's latest sample took.");
  add(FamilyKind::meta_errors, "gpustream_snapshot_errors", "gauge",
      "Problems reported in the probe's latest snapshot.");
  add(FamilyKind::probe_stats, {}, {}, {});
  if (counters) add(FamilyKind::server, {}, {}, {});
}

void PrometheusWriter::Impl::head(std::string& out, const PlannedFamily& f) {
  if (header) return;
  header = true;
  out += "# HELP ";
  out += f.name;
  out += ' ';
  out += f.help;
  out += "\n# TYPE ";
  out += f.name;
  out += ' ';
  out += f.type;
  out += '\n';
}

void PrometheusWriter::Impl::write_device(std::string& out, const PlannedFamily& f,
                                          const GpuSnapshot& s, const DeviceSample& d) {
  const auto& family_labels = device_family_labels();
  {
    const auto line = [&](std::string_view extra) {
      head(out, f);
      out += f.name;
      out += '{';
      append_device_labels(out, s, d);
      out += extra;
      out += "} ";
    };
    switch (f.kind) {
      case FamilyKind::device_metric:
        for (std::size_t i = f.row; i < kMetricCount; ++i) {
          const auto& row = kDeviceFamilies[i];
          if (row.name != f.name) continue;
          const auto& r = d.metrics[row.metric];
          if (!r.has_value()) continue;
          const double v = r.value() * row.mul / row.div;
          if (!std::isfinite(v)) continue;  // a value we do not have is left out, never 0
          line(family_labels[i]);
          append_number(out, v);
          out += '\n';
        }
        break;
      case FamilyKind::device_info: {
        std::string extra;
        append_label(extra, "pci_bus_id", d.pci_bus_id);
        append_label(extra, "index", std::to_string(d.index));
        if (d.mig) {
          append_label(extra, "mig_profile", d.mig->profile);
          append_label(extra, "gpu_instance_id", std::to_string(d.mig->gpu_instance_id));
          append_label(extra, "compute_instance_id", std::to_string(d.mig->compute_instance_id));
        }
        if (d.partitioned) append_label(extra, "mig_mode", "enabled");
        line(extra);
        out += "1\n";
        break;
      }
      case FamilyKind::device_engine:
        for (const auto& en : d.engines) {
          if (!en.utilization_percent.has_value()) continue;
          const double v = en.utilization_percent.value() / 100;
          if (!std::isfinite(v)) continue;
          std::string extra;
          append_label(extra, "engine", en.name);
          line(extra);
          append_number(out, v);
          out += '\n';
        }
        break;
      case FamilyKind::device_processes:
        // The count is known only when the list is: a probe that cannot list processes, or a
        // stale node's copy (processes absent, reason `stale`), has no series here, never a 0.
        if (d.processes_absent) break;
        line({});
        append_number(out, static_cast<std::uint64_t>(d.processes.size()));
        out += '\n';
        break;
      default:
        break;
    }
  }
}

void PrometheusWriter::Impl::write_processes(std::string& out, const PlannedFamily& f,
                                             const GpuSnapshot& s, const DeviceSample& d) {
  const bool memory = f.kind == FamilyKind::process_memory;
  const auto max = options.max_process_series;
  {
    for (const auto& p : d.processes) {
      if (!process_has_value(p)) continue;
      // The bound counts values in the order memory, utilization of each process: a value is
      // written when fewer than `max` came before it in that order, in either family.
      std::optional<double> v;
      std::size_t position = process_values;
      if (p.gpu_memory_bytes) {
        if (memory) v = static_cast<double>(*p.gpu_memory_bytes);
        ++process_values;
      }
      if (p.gpu_utilization_percent) {
        if (!memory) {
          position = process_values;
          v = *p.gpu_utilization_percent / 100;
        }
        ++process_values;
      }
      if (!v || position >= max || !std::isfinite(*v)) continue;
      head(out, f);
      out += f.name;
      Exposition::append_labels(out, process_labels(s, d, p));
      out += ' ';
      append_number(out, *v);
      out += '\n';
    }
  }
}

void PrometheusWriter::Impl::write_host(std::string& out, const PlannedFamily& f,
                                        const GpuSnapshot& s) {
  if (!s.host) return;
  const auto& h = *s.host;
  const auto line = [&] {
    head(out, f);
    out += f.name;
    out += '{';
    snapshot_labels(out, s);
    out += "} ";
  };
  if (f.row < kHostFields.size()) {
    if (const auto& v = h.*(kHostFields[f.row].field)) {
      line();
      append_number(out, *v);
      out += '\n';
    }
  }
  for (const auto& [key, value] : h.metrics) {
    if (!host_key_is(f.name, key) || !std::isfinite(value)) continue;
    line();
    append_number(out, value);
    out += '\n';
  }
}

void PrometheusWriter::Impl::write_meta(std::string& out, const PlannedFamily& f,
                                        const GpuSnapshot& s) {
  std::string value;
  switch (f.kind) {
    case FamilyKind::meta_timestamp: {
      const double v = seconds(s.time_unix_ns);
      if (!std::isfinite(v)) return;
      append_number(value, v);
      break;
    }
    case FamilyKind::meta_sequence:
      append_number(value, static_cast<std::uint64_t>(s.sequence));
      break;
    case FamilyKind::meta_duration: {
      const double v = seconds(s.sample_duration_ns);
      if (!std::isfinite(v)) return;
      append_number(value, v);
      break;
    }
    default:
      append_number(value, static_cast<std::uint64_t>(s.errors.size()));
      break;
  }
  head(out, f);
  out += f.name;
  out += '{';
  snapshot_labels(out, s);
  out += "} ";
  out += value;
  out += '\n';
}

bool PrometheusWriter::Impl::step(std::string& out) {
  while (family < families.size()) {
    const auto& f = families[family];
    if (per_snapshot(f.kind) && snapshot < latest.size()) {
      const auto& s = latest[snapshot];
      switch (f.kind) {
        case FamilyKind::host:
          if (s) write_host(out, f, *s);
          break;
        case FamilyKind::meta_timestamp:
        case FamilyKind::meta_sequence:
        case FamilyKind::meta_duration:
        case FamilyKind::meta_errors:
          if (s) write_meta(out, f, *s);
          break;
        default:  // a device at a time
          if (s && device < s->devices.size()) {
            const auto& d = s->devices[device++];
            if (f.kind == FamilyKind::process_memory || f.kind == FamilyKind::process_utilization)
              write_processes(out, f, *s, d);
            else
              write_device(out, f, *s, d);
            if (device < s->devices.size()) return true;
          }
          break;
      }
      ++snapshot;
      device = 0;
      return true;
    }
    if (f.kind == FamilyKind::process_omitted) {
      head(out, f);
      out += f.name;
      out += ' ';
      append_number(out, omitted);
      out += '\n';
    } else if (f.kind == FamilyKind::probe_stats || f.kind == FamilyKind::server) {
      Exposition e;
      if (f.kind == FamilyKind::probe_stats)
        probe_stats(e, stats);
      else
        server(e, *counters);
      out += e.str();
    }
    ++family;
    snapshot = 0;
    device = 0;
    header = false;
    process_values = 0;
    if (!per_snapshot(f.kind)) return true;
  }
  return false;
}

PrometheusWriter::PrometheusWriter(std::vector<SnapshotPtr> latest, std::vector<ProbeStats> stats,
                                   std::optional<ServerCounters> counters,
                                   PrometheusOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->latest = std::move(latest);
  impl_->stats = std::move(stats);
  impl_->counters = counters;
  impl_->options = options;
  impl_->plan();
}

PrometheusWriter::~PrometheusWriter() = default;
PrometheusWriter::PrometheusWriter(PrometheusWriter&&) noexcept = default;
PrometheusWriter& PrometheusWriter::operator=(PrometheusWriter&&) noexcept = default;

bool PrometheusWriter::next(std::string& out, std::size_t want) {
  const std::size_t before = out.size();
  while (out.size() < want || out.size() == before) {
    if (!impl_->step(out)) return out.size() != before;
  }
  return true;
}

std::string render_prometheus(const std::vector<SnapshotPtr>& latest,
                              const std::vector<ProbeStats>& stats, const ServerCounters* counters,
                              const PrometheusOptions& options) {
  PrometheusWriter w(latest, stats, counters ? std::optional(*counters) : std::nullopt, options);
  std::string out;
  while (w.next(out, std::numeric_limits<std::size_t>::max())) {}
  return out;
}

}  // namespace gpustream::transport
