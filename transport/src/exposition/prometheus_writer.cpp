// PrometheusWriter: render_prometheus()'s text family by family in pieces (issue #32, a
// streamed /metrics). The text is the same as when every snapshot's samples were collected per
// family and then joined: a family's samples in snapshot order, then the next family's; a
// family with no sample has no HELP and TYPE either (they are written before its first sample).
#include <cmath>
#include <optional>
#include <set>

#include "exposition/prometheus_families.hpp"
#include "gpustream/transport/prometheus.hpp"

namespace gpustream::transport {

namespace prometheus_detail {
namespace {

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

}  // namespace

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

namespace {

bool per_snapshot(FamilyKind k) {
  return k != FamilyKind::process_omitted && k != FamilyKind::probe_stats &&
         k != FamilyKind::server;
}

void snapshot_labels(std::string& out, const GpuSnapshot& s) {
  append_label(out, "probe", s.probe, true);
  if (!s.node.empty()) append_label(out, "node", s.node);
}

}  // namespace
}  // namespace prometheus_detail

struct PrometheusWriter::Impl {
  using PlannedFamily = prometheus_detail::PlannedFamily;
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
  using namespace prometheus_detail;
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
  using namespace prometheus_detail;
  if (header) return;
  header = true;
  Exposition::append_head(out, f.name, f.type, f.help);
}

void PrometheusWriter::Impl::write_device(std::string& out, const PlannedFamily& f,
                                          const GpuSnapshot& s, const DeviceSample& d) {
  using namespace prometheus_detail;
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
  using namespace prometheus_detail;
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
  using namespace prometheus_detail;
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
  using namespace prometheus_detail;
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
  using namespace prometheus_detail;
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
  return prometheus_detail::pull_pieces(out, want,
                                        [this](std::string& o) { return impl_->step(o); });
}

}  // namespace gpustream::transport
