// Prometheus text exposition 0.0.4 of snapshots, probe statistics and server counters.
#include "gpustream/transport/prometheus.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <map>

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

  /// A sample whose labels are already rendered (render_labels(): escaped, no braces) followed by
  /// `extra` (",k=\"v\"…", rendered too): a device's labels are rendered once for all its
  /// families (issue #32: a fleet's /metrics renders tens of series per device, and each one
  /// copied and escaped the device's labels again).
  void sample_rendered(std::size_t f, std::string_view rendered, std::string_view extra,
                       double value) {
    if (!std::isfinite(value)) return;
    auto& out = families_[f].samples;
    out += families_[f].name;
    out += '{';
    out += rendered;
    out += extra;
    out += "} ";
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, value);
    out.append(buf, r.ptr);
    out += '\n';
  }
  void sample_rendered(std::size_t f, std::string_view rendered, std::string_view extra,
                       std::uint64_t value) {
    auto& out = families_[f].samples;
    out += families_[f].name;
    out += '{';
    out += rendered;
    out += extra;
    out += "} ";
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

 private:
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

void devices(Exposition& e, const GpuSnapshot& s) {
  const auto& family_labels = device_family_labels();
  std::array<std::size_t, kMetricCount> fam{};
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto& d = kDeviceFamilies[i];
    fam[static_cast<std::size_t>(d.metric)] = e.family(std::string(d.name), d.type, d.help);
  }
  const auto info = e.family("gpustream_gpu_info", "gauge",
                             "Always 1: one series per device, with its PCI bus id and index.");
  const auto engine = e.family("gpustream_gpu_engine_utilization_ratio", "gauge",
                               "Fraction of time an engine class was busy (0..1).");
  const auto procs =
      e.family("gpustream_gpu_processes", "gauge",
               "Processes using the device (as far as the source can tell); absent when the "
               "source cannot list them or the node is stale.");
  for (const auto& d : s.devices) {
    Labels base{{"device", d.id},
                {"vendor", std::string(to_string(d.vendor))},
                {"probe", s.probe},
                {"name", d.name}};
    if (!s.node.empty()) base.emplace_back("node", s.node);  // a fleet's devices (docs/fleet.md)
    // A MIG instance is a device of its own; `parent` names its physical GPU.
    if (!d.parent.empty()) base.emplace_back("parent", d.parent);
    Labels l = base;
    l.emplace_back("pci_bus_id", d.pci_bus_id);
    l.emplace_back("index", std::to_string(d.index));
    if (d.mig) {
      l.emplace_back("mig_profile", d.mig->profile);
      l.emplace_back("gpu_instance_id", std::to_string(d.mig->gpu_instance_id));
      l.emplace_back("compute_instance_id", std::to_string(d.mig->compute_instance_id));
    }
    if (d.partitioned) l.emplace_back("mig_mode", "enabled");
    e.sample(info, l, std::uint64_t{1});
    const std::string rendered = Exposition::render_labels(base);
    for (std::size_t i = 0; i < kMetricCount; ++i) {
      const auto& f = kDeviceFamilies[i];
      const auto& r = d.metrics[f.metric];
      if (!r.has_value()) continue;
      const auto family = fam[static_cast<std::size_t>(f.metric)];
      e.sample_rendered(family, rendered, family_labels[i], r.value() * f.mul / f.div);
    }
    for (const auto& en : d.engines) {
      if (!en.utilization_percent.has_value()) continue;
      std::string extra = ",engine=\"";
      extra += escape_label_value(en.name);
      extra += '"';
      e.sample_rendered(engine, rendered, extra, en.utilization_percent.value() / 100);
    }
    // The count is known only when the list is: a probe that cannot list processes, or a stale
    // node's copy (processes absent, reason `stale`), has no series here, never a 0.
    if (!d.processes_absent)
      e.sample_rendered(procs, rendered, {}, static_cast<std::uint64_t>(d.processes.size()));
  }
}

// The container label of a process: its id, else its pod; empty when unknown.
std::string container_label(const ProcessSample& p) {
  if (!p.container) return {};
  if (!p.container->id.empty()) return p.container->id;
  if (!p.container->pod_uid.empty()) return "pod/" + p.container->pod_uid;
  return {};
}

void processes(Exposition& e, const std::vector<SnapshotPtr>& latest, std::size_t max_series) {
  const auto memory = e.family("gpustream_gpu_process_memory_bytes", "gauge",
                               "GPU memory a process uses on the device.");
  const auto util = e.family("gpustream_gpu_process_utilization_ratio", "gauge",
                             "Share of the device a process used (0..1).");
  std::size_t written = 0;
  std::uint64_t omitted = 0;
  const auto put = [&](std::size_t family, const Labels& l, double v) {
    if (written < max_series) {
      e.sample(family, l, v);
      ++written;
    } else {
      ++omitted;
    }
  };
  for (const auto& s : latest) {
    if (!s) continue;
    for (const auto& d : s->devices) {
      for (const auto& p : d.processes) {
        if (!p.gpu_memory_bytes && !p.gpu_utilization_percent) continue;
        Labels l{{"device", d.id},
                 {"vendor", std::string(to_string(d.vendor))},
                 {"probe", s->probe},
                 {"name", d.name},
                 {"pid", std::to_string(p.pid)},
                 {"process", p.name}};
        if (!s->node.empty()) l.emplace_back("node", s->node);
        if (p.pod) {
          // The kubelet's names, as dcgm-exporter labels them: `container` is then the
          // container's name, and its id (when the cgroup gives it) moves to `container_id`.
          l.emplace_back("pod", p.pod->name);
          l.emplace_back("namespace", p.pod->namespace_name);
          l.emplace_back("container", p.pod->container);
          if (p.container && !p.container->id.empty())
            l.emplace_back("container_id", p.container->id);
        } else if (auto c = container_label(p); !c.empty()) {
          l.emplace_back("container", std::move(c));
        }
        // Not `job`: Prometheus gives every scraped series the target's `job` label, and an
        // exposed one would be renamed `exported_job` (or, with honor_labels, replace it).
        if (p.slurm) {
          l.emplace_back("slurm_job", p.slurm->job_id);
          if (!p.slurm->step.empty()) l.emplace_back("slurm_step", p.slurm->step);
        }
        if (p.gpu_memory_bytes) put(memory, l, static_cast<double>(*p.gpu_memory_bytes));
        if (p.gpu_utilization_percent) put(util, l, *p.gpu_utilization_percent / 100);
      }
    }
  }
  e.sample(e.family("gpustream_gpu_process_series_omitted", "gauge",
                    "Per-process samples left out by the --metrics-processes bound."),
           Labels{}, omitted);
}

void host(Exposition& e, const GpuSnapshot& s) {
  if (!s.host) return;
  const auto& h = *s.host;
  Labels l{{"probe", s.probe}};
  if (!s.node.empty()) l.emplace_back("node", s.node);
  const auto opt = [&](std::string name, std::string_view help,
                       const std::optional<std::uint64_t>& v) {
    const auto f = e.family(std::move(name), "gauge", help);
    if (v) e.sample(f, l, *v);
  };
  opt("gpustream_host_memory_total_bytes", "Host RAM in total.", h.memory_total_bytes);
  opt("gpustream_host_memory_available_bytes", "Host RAM available for new allocations.",
      h.memory_available_bytes);
  opt("gpustream_host_memory_used_bytes", "Host RAM in use.", h.memory_used_bytes);
  opt("gpustream_host_swap_total_bytes", "Swap in total.", h.swap_total_bytes);
  opt("gpustream_host_swap_used_bytes", "Swap in use.", h.swap_used_bytes);
  for (const auto& [key, value] : h.metrics) {
    const auto f = e.family("gpustream_host_" + sanitize_name(key), "gauge",
                            "Host figure '" + sanitize_name(key) + "' in base units.");
    e.sample(f, l, value);
  }
}

void snapshot_meta(Exposition& e, const GpuSnapshot& s) {
  Labels l{{"probe", s.probe}};
  if (!s.node.empty()) l.emplace_back("node", s.node);
  e.sample(e.family("gpustream_snapshot_timestamp_seconds", "gauge",
                    "Wall-clock time of the probe's latest snapshot (Unix seconds)."),
           l, seconds(s.time_unix_ns));
  e.sample(e.family("gpustream_snapshot_sequence", "gauge",
                    "Channel sequence number of the probe's latest snapshot."),
           l, s.sequence);
  e.sample(e.family("gpustream_snapshot_sample_duration_seconds", "gauge",
                    "How long the probe's latest sample took."),
           l, seconds(s.sample_duration_ns));
  e.sample(e.family("gpustream_snapshot_errors", "gauge",
                    "Problems reported in the probe's latest snapshot."),
           l, static_cast<std::uint64_t>(s.errors.size()));
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

std::string render_prometheus(const std::vector<SnapshotPtr>& latest,
                              const std::vector<ProbeStats>& stats, const ServerCounters* counters,
                              const PrometheusOptions& options) {
  Exposition e;
  if (options.device_families)
    for (const auto& s : latest)
      if (s) devices(e, *s);
  if (options.max_process_series > 0) processes(e, latest, options.max_process_series);
  for (const auto& s : latest)
    if (s) host(e, *s);
  for (const auto& s : latest)
    if (s) snapshot_meta(e, *s);
  probe_stats(e, stats);
  if (counters) server(e, *counters);
  return e.str();
}

}  // namespace gpustream::transport
