// gpustream/model.hpp — the data model: what one probe saw at one moment.
//
// A GpuSnapshot is built by a probe, handed to the SnapshotChannel, and from then on shared as
// std::shared_ptr<const GpuSnapshot>: immutable, safe to read from any thread.
//
// Every device metric is either a value or an explicit absence with a reason; a missing value is
// never written as 0. Every present value names its source (nvml, sysfs, amd-smi, ...).
// Units are base units and are part of the metric name (bytes, watts, joules, celsius, percent,
// MHz).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/shared_optional.hpp"

namespace gpustream {

/// Who made the device.
enum class Vendor : std::uint8_t { unknown, nvidia, amd, intel, apple, simulated };

/// Where a value came from.
enum class Source : std::uint8_t {
  none,
  nvml,
  nvidia_smi,
  amd_smi,
  rocm_smi,
  sysfs,
  fdinfo,
  level_zero,
  macmon,
  procfs,
  simulated,
  integrated,  // derived by gpustream from other samples (e.g. energy from power)
  replay,
  derived,  // computed by gpustream from other metrics of the same sample (free = total − used)
};
inline constexpr std::size_t kSourceCount = static_cast<std::size_t>(Source::derived) + 1;

/// Why a metric has no value.
enum class Absence : std::uint8_t {
  unsupported,     // the device or the source does not provide it
  no_permission,   // the source refused (e.g. NVML_ERROR_NO_PERMISSION, unreadable file)
  not_yet_seeded,  // a rate or delta metric whose first sample only seeded the counters
  suspended,       // the device is runtime-suspended and was deliberately not woken
  tool_failed,     // the CLI/library call failed for this sample
  stale,           // the source stopped producing fresh values
  lost,            // the device vanished (e.g. NVML_ERROR_GPU_IS_LOST)
  not_collected,   // the probe did not try (default for a freshly built device)
};

/// Device-level metrics. The order is part of nothing external; names are the contract.
enum class Metric : std::uint8_t {
  utilization_percent,
  memory_utilization_percent,
  memory_used_bytes,
  memory_total_bytes,
  temperature_celsius,
  power_watts,          // the device's power draw: instantaneous where the source has it, else
                        // the driver's average (see DeviceSample::power_kind)
  power_average_watts,  // power averaged by the hardware/driver over its own window
  power_limit_watts,
  energy_joules,  // see DeviceSample::energy_kind
  clock_graphics_mhz,
  clock_sm_mhz,
  clock_memory_mhz,
  fan_percent,
  fan_rpm,
  gtt_used_bytes,
  gtt_total_bytes,
  memory_free_bytes,  // device memory a new allocation can still get; see docs/probes.md
  // Interconnect and health (docs/probes.md, "Interconnect and health").
  pcie_rx_bytes_per_second,  // PCIe traffic into the device, over the driver's own window
  pcie_tx_bytes_per_second,  // PCIe traffic out of the device
  pcie_link_generation,      // current PCIe generation (1, 2, 3, 4, 5, ...)
  pcie_link_generation_max,  // the most the device and its slot can do
  pcie_link_width,           // current lanes (x1 ... x16)
  pcie_link_width_max,
  nvlink_rx_bytes_per_second,  // NVLink data received, all active links, between two samples
  nvlink_tx_bytes_per_second,
  ecc_corrected_volatile,  // ECC errors since the last driver load (count)
  ecc_uncorrected_volatile,
  ecc_corrected_aggregate,  // ECC errors over the device's life (count)
  ecc_uncorrected_aggregate,
  retired_pages_single_bit,   // pages retired after repeated single-bit errors (count)
  retired_pages_double_bit,   // pages retired after a double-bit error (count)
  retired_pages_pending,      // 1: a page retirement waits for the next driver reload, else 0
  remapped_rows_corrected,    // rows remapped after correctable errors (count)
  remapped_rows_uncorrected,  // rows remapped after uncorrectable errors (count)
  remapped_rows_pending,      // 1: a remapping waits for a GPU reset, else 0
  remapped_rows_failed,       // 1: a remapping failed (the device needs service), else 0
  // Activity that means work (docs/probes.md, "Activity"): profiling-grade figures over the
  // interval between two samples (NVML GPM on Hopper and newer; AMD gpu_metrics where it carries
  // the same meaning); absent `unsupported` elsewhere. Unlike utilization_percent (the share of
  // time any kernel ran), they say how much of the hardware the work kept busy.
  graphics_activity_percent,  // graphics/compute engine active (DCGM GR_ENGINE_ACTIVE)
  sm_activity_percent,        // SMs with at least one warp resident, averaged over all SMs
  sm_occupancy_percent,       // resident warps over the SMs' maximum, averaged over all SMs
  tensor_activity_percent,    // tensor (HMMA/IMMA) pipes active
  dram_activity_percent,      // device memory interface busy sending or receiving
  fp64_activity_percent,      // FP64 pipe active
  fp32_activity_percent,      // FP32 (FMA) pipe active
  fp16_activity_percent,      // FP16 pipe active
};
inline constexpr std::size_t kMetricCount =
    static_cast<std::size_t>(Metric::fp16_activity_percent) + 1;

/// How an energy value was obtained.
enum class EnergyKind : std::uint8_t { counter, integrated };

/// What metrics[power_watts] is: an instantaneous reading, or the driver's average over its own
/// window (a source that has no instantaneous figure, e.g. amdgpu's hwmon power1_average).
enum class PowerKind : std::uint8_t { instant, average };

/// Whether a device is awake.
enum class PowerState : std::uint8_t { unknown, active, suspended };

std::string_view to_string(Vendor v) noexcept;
std::string_view to_string(Source s) noexcept;
std::string_view to_string(Absence a) noexcept;
std::string_view to_string(Metric m) noexcept;
std::string_view to_string(EnergyKind k) noexcept;
std::string_view to_string(PowerState p) noexcept;
std::string_view to_string(PowerKind k) noexcept;
std::optional<Vendor> vendor_from_string(std::string_view s) noexcept;
std::optional<Source> source_from_string(std::string_view s) noexcept;
std::optional<Absence> absence_from_string(std::string_view s) noexcept;
std::optional<Metric> metric_from_string(std::string_view s) noexcept;
std::optional<EnergyKind> energy_kind_from_string(std::string_view s) noexcept;
std::optional<PowerState> power_state_from_string(std::string_view s) noexcept;
std::optional<PowerKind> power_kind_from_string(std::string_view s) noexcept;

/// The names of NVML's clocks-event reason bits, bit 0 up (nvmlClocksEventReason*): what an
/// NVIDIA probe writes in DeviceSample::throttle_reasons (a bit without a name as "0x..."), and
/// what `--metrics-compat dcgm` turns back into DCGM_FI_DEV_CLOCK_THROTTLE_REASONS' mask.
inline constexpr std::array<std::string_view, 9> kNvmlClockEventReasons{
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting"};

/// Thrown by Reading::value() on an absent metric (like std::bad_optional_access), with the
/// reason and the source in what(): "gpustream: metric absent (unsupported, source nvml)".
class BadReadingAccess : public std::logic_error {
 public:
  BadReadingAccess(Absence reason, Source source);
  Absence reason() const noexcept { return reason_; }
  Source source() const noexcept { return source_; }

 private:
  Absence reason_;
  Source source_;
};

/// One metric: a value with its source, or an absence with its reason.
///
/// Reading a value: test it first (`if (r) use(r.value());`), or say what stands for a missing
/// value (`r.value_or(x)`), or take the optional (`r.get()`). value() on an absent reading
/// throws BadReadingAccess: an absent metric can never be read as 0 by accident.
class Reading {
 public:
  Reading() noexcept = default;
  static Reading of(double value, Source source) noexcept {
    Reading r;
    r.value_ = value;
    r.source_ = source;
    r.present_ = true;
    return r;
  }
  static Reading missing(Absence reason, Source source = Source::none) noexcept {
    Reading r;
    r.reason_ = reason;
    r.source_ = source;
    return r;
  }

  bool has_value() const noexcept { return present_; }
  explicit operator bool() const noexcept { return has_value(); }
  /// The value; throws BadReadingAccess when the metric is absent.
  double value() const {
    if (!present_) throw_absent();
    return value_;
  }
  /// The value, or `fallback` when the metric is absent.
  double value_or(double fallback) const noexcept { return present_ ? value_ : fallback; }
  std::optional<double> get() const noexcept {
    return present_ ? std::optional<double>(value_) : std::nullopt;
  }
  /// For a present value, where it came from; for an absent one, the source that failed (or none).
  Source source() const noexcept { return source_; }
  /// Meaningful only when !has_value().
  Absence reason() const noexcept { return reason_; }

  /// Equal: both absent or both present with equal values (a value is compared only when
  /// present), and the same source and reason.
  friend bool operator==(const Reading& a, const Reading& b) noexcept {
    return a.present_ == b.present_ && (!a.present_ || a.value_ == b.value_) &&
           a.source_ == b.source_ && a.reason_ == b.reason_;
  }

 private:
  [[noreturn]] void throw_absent() const;

  // 16 bytes (a std::optional<double> and the two enums took 24): the value, then what says
  // whether it is there, in the padding a std::optional would have spent.
  double value_ = 0;
  Source source_ = Source::none;
  Absence reason_ = Absence::not_collected;
  bool present_ = false;
};
static_assert(sizeof(Reading) == 16);

/// A fixed table of Reading, one per Metric.
class MetricSet {
 public:
  const Reading& operator[](Metric m) const noexcept { return r_[static_cast<std::size_t>(m)]; }
  Reading& operator[](Metric m) noexcept { return r_[static_cast<std::size_t>(m)]; }
  void set(Metric m, double v, Source s) noexcept { (*this)[m] = Reading::of(v, s); }
  void set_absent(Metric m, Absence why, Source s = Source::none) noexcept {
    (*this)[m] = Reading::missing(why, s);
  }
  /// Marks every metric still `not_collected` as absent with `why`.
  void fill_absent(Absence why, Source s = Source::none) noexcept {
    for (auto& r : r_)
      if (!r.has_value() && r.reason() == Absence::not_collected) r = Reading::missing(why, s);
  }
  friend bool operator==(const MetricSet&, const MetricSet&) = default;

 private:
  std::array<Reading, kMetricCount> r_{};
};

/// Activity of one engine class (render, compute, copy, video, ...).
struct EngineSample {
  std::string name;
  Reading utilization_percent;
  friend bool operator==(const EngineSample&, const EngineSample&) = default;
};

/// The container a process runs in, from its /proc/<pid>/cgroup (docs/protocol.md,
/// "Containers"). Empty strings are unknown parts.
struct ProcessContainer {
  std::string runtime;  // "docker", "containerd", "cri-o", "podman"; "kubernetes" when the
                        // kubelet's path does not name the runtime, or only the pod is known
  std::string id;       // the container id (64 hex digits); empty when only the pod is known
  std::string pod_uid;  // Kubernetes pod UID; empty outside Kubernetes
  std::string qos;      // Kubernetes QoS class: "guaranteed", "burstable", "besteffort"
  friend bool operator==(const ProcessContainer&, const ProcessContainer&) = default;
};

/// Why ProcessSample::container is unset (the `container_absent` wire values).
enum class ContainerAbsent : std::uint8_t {
  not_collected,  // the probe did not look (no /proc of the process, e.g. a remote tool)
  host,           // the process runs in the host's cgroups, in no container
  unrecognized,   // a container runtime's mark that no known path shape matched
  malformed,      // /proc/<pid>/cgroup was not in the cgroup format
  no_permission,  // /proc/<pid>/cgroup could not be read
};
std::string_view to_string(ContainerAbsent a) noexcept;
std::optional<ContainerAbsent> container_absent_from_string(std::string_view s) noexcept;

/// The Slurm job a process runs in, from its /proc/<pid>/cgroup (the cgroup paths of Slurm's
/// cgroup/v1 and cgroup/v2 plugins) and, where readable, its SLURM_* environment
/// (docs/operations.md, "Slurm"). Empty strings are unknown parts.
struct SlurmJob {
  std::string job_id;  // decimal, as the cgroup names it ("job_<id>"): the job's own id
  std::string step;    // "0", "1", ..., "batch", "extern", "interactive"; empty at job level
  /// The job's user: the v1 path's uid_<n>, else the process's real uid (/proc/<pid>/status).
  std::optional<std::uint32_t> uid;
  std::string user;           // SLURM_JOB_USER, else the uid's name in the password database
  std::string array_job_id;   // SLURM_ARRAY_JOB_ID of an array job's task
  std::string array_task_id;  // SLURM_ARRAY_TASK_ID of an array job's task
  friend bool operator==(const SlurmJob&, const SlurmJob&) = default;
};

/// Why ProcessSample::slurm is unset (the `slurm_absent` wire values). Only `unrecognized` is
/// written: a process outside Slurm (or one the probe did not look at) says nothing.
enum class SlurmAbsent : std::uint8_t {
  none,          // not in a Slurm job's cgroup, or not looked at
  unrecognized,  // a cgroup path with Slurm's mark that no known shape matched
};
std::string_view to_string(SlurmAbsent a) noexcept;
std::optional<SlurmAbsent> slurm_absent_from_string(std::string_view s) noexcept;

/// The Kubernetes pod and container holding a GPU, as the kubelet's PodResources API says
/// (docs/operations.md, "Kubernetes"). Names as Kubernetes limits them: a pod name at most 253
/// bytes, a namespace and a container name at most 63.
struct KubernetesPod {
  std::string name;            // the pod's name
  std::string namespace_name;  // its namespace (the wire's "namespace")
  std::string container;       // the container's name in the pod
  friend bool operator==(const KubernetesPod&, const KubernetesPod&) = default;
};

/// Why ProcessSample::pod is unset (the `pod_absent` wire values). Only said of a process in a
/// Kubernetes pod's cgroup (ProcessContainer::pod_uid set): any other process says nothing.
enum class PodAbsent : std::uint8_t {
  none,                 // not in a pod, or nobody asked the kubelet (no --kubelet-socket)
  kubelet_unavailable,  // the kubelet could not be asked (no socket, no answer in time, garbage)
  not_assigned,         // the kubelet answered: no container holds the process's device
  ambiguous,            // several containers hold the device (a shared or time-sliced GPU)
};
std::string_view to_string(PodAbsent a) noexcept;
std::optional<PodAbsent> pod_absent_from_string(std::string_view s) noexcept;

struct ProcessSample {
  std::int64_t pid = 0;
  std::string name;
  std::optional<std::uint64_t> gpu_memory_bytes;
  /// GTT (system memory the GPU maps through its GART, AMD) the process holds, bytes; unset when
  /// the source does not say (every non-AMD source), never 0 for unknown.
  std::optional<std::uint64_t> gtt_memory_bytes;
  std::optional<double> gpu_utilization_percent;
  std::optional<std::uint64_t> host_rss_bytes;
  /// false when the source only gives a device-wide figure (e.g. nvidia-smi fallback).
  bool per_process_exact = true;
  // The placement (container, slurm, pod) is set for few processes and rarely changes: each is
  // a SharedOptional (gpustream/shared_optional.hpp), read and written as a std::optional, 8
  // bytes when unset, and shared, not copied, by a copy of the sample (a snapshot's copy, the
  // probe's cache of the process from one sample to the next).

  /// The process's container; unset with `container_absent` saying why.
  SharedOptional<ProcessContainer> container;
  ContainerAbsent container_absent = ContainerAbsent::not_collected;
  /// The Slurm job the process runs in; unset with `slurm_absent` saying why.
  SharedOptional<SlurmJob> slurm;
  SlurmAbsent slurm_absent = SlurmAbsent::none;
  /// The pod and container the process runs in, from the kubelet (its device's holder, for a
  /// process whose cgroup is a pod's); unset with `pod_absent` saying why.
  SharedOptional<KubernetesPod> pod;
  PodAbsent pod_absent = PodAbsent::none;
  std::vector<EngineSample> engines;
  friend bool operator==(const ProcessSample&, const ProcessSample&) = default;
};

/// Who a MIG (Multi-Instance GPU) instance is inside its physical GPU: a partition that is a
/// device of its own in the snapshot (DeviceSample::parent names the GPU).
struct MigIdentity {
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  std::string profile;  // the instance's profile, e.g. "1g.5gb" (NVML's device name suffix)
  friend bool operator==(const MigIdentity&, const MigIdentity&) = default;
};

/// One power reading the driver took itself (NVML's power sample ring), on the steady clock of
/// GpuSnapshot::monotonic_ns.
struct PowerSample {
  std::int64_t monotonic_ns = 0;
  double watts = 0;
  friend bool operator==(const PowerSample&, const PowerSample&) = default;
};

/// What one probe saw of one device.
struct DeviceSample {
  /// Stable id: vendor UUID where there is one, else PCI bus id, else probe-defined.
  std::string id;
  Vendor vendor = Vendor::unknown;
  int index = 0;
  std::string name;
  std::string pci_bus_id;  // "0000:01:00.0" form, empty when unknown
  MetricSet metrics;
  std::optional<EnergyKind> energy_kind;  // set when metrics[energy_joules] has a value
  /// Set when metrics[power_watts] has a value and the probe knows its kind; `average` says the
  /// figure is the driver's average (the source had no instantaneous one).
  std::optional<PowerKind> power_kind;
  /// The driver's own power readings taken since this probe's previous snapshot of the device
  /// and up to this one, oldest first, strictly increasing monotonic_ns, none after this
  /// snapshot's monotonic_ns. Empty when the source keeps no such record (or it failed: an error
  /// in GpuSnapshot::errors says why). Windows integrate energy from them
  /// (gpustream/measurement.hpp).
  std::vector<PowerSample> power_samples;
  PowerState power_state = PowerState::unknown;
  std::vector<std::string> throttle_reasons;
  /// Set when the probe tried to read why the clocks are held down and could not (`unsupported`,
  /// `no_permission`, `tool_failed`, `lost`); `throttle_reasons` is then empty. Unset:
  /// `throttle_reasons` is what the probe saw (empty: not throttled, or a probe that does not
  /// read throttling at all).
  std::optional<Absence> throttle_reasons_absent;
  std::vector<EngineSample> engines;
  std::vector<ProcessSample> processes;
  /// Set when the probe cannot list the processes using this device (e.g. `unsupported`: the
  /// source has no per-process figures, as macmon on Apple's unified memory; `no_permission`);
  /// `processes` is then empty. Unset: `processes` is the list the probe saw, possibly empty.
  std::optional<Absence> processes_absent;
  /// Free-form attributes (e.g. "metrics_source": "sysfs+level-zero", "uuid").
  std::map<std::string, std::string> attributes;
  /// For a partition of a physical device (a MIG instance): the physical device's id, which is
  /// in the same snapshot; empty for a physical device.
  std::string parent;
  /// Set for a MIG instance: its GPU-instance and compute-instance ids and profile.
  std::optional<MigIdentity> mig;
  /// True for a physical device whose memory is partitioned (MIG mode on): work is placed on its
  /// instances (the devices naming it as `parent`), never on the device itself. Its own metrics
  /// stay device-wide.
  bool partitioned = false;
  /// The Kubernetes containers the kubelet says hold this device (its PodResources API; more
  /// than one for a shared or time-sliced GPU), sorted; empty when none does or nobody asked.
  std::vector<KubernetesPod> pods;
  friend bool operator==(const DeviceSample&, const DeviceSample&) = default;
};

/// Host memory of one process.
struct HostProcess {
  std::int64_t pid = 0;
  std::string name;
  std::optional<std::uint64_t> rss_bytes;
  friend bool operator==(const HostProcess&, const HostProcess&) = default;
};

/// Host-level figures (RAM, swap, watched processes, system power where known).
struct HostSample {
  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<std::uint64_t> memory_available_bytes;
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> swap_total_bytes;
  std::optional<std::uint64_t> swap_used_bytes;
  std::vector<HostProcess> processes;
  /// Other host figures in base units, e.g. "system_power_watts".
  std::map<std::string, double> metrics;
  friend bool operator==(const HostSample&, const HostSample&) = default;
};

/// A problem met while sampling, in words a user can act on.
struct SampleError {
  std::string code;     // short machine-readable code, e.g. "gpu_lost", "tool_failed"
  std::string message;  // one line for humans
  std::string device;   // device id when the error concerns one device
  friend bool operator==(const SampleError&, const SampleError&) = default;
};

/// What one probe saw at one moment.
struct GpuSnapshot {
  std::string probe;
  /// The node (machine) the snapshot comes from, as a fleet names it (`gpustream serve --node`,
  /// docs/fleet.md); empty for this machine's own probes, and then left out of the JSON.
  std::string node;
  std::uint64_t sequence = 0;           // per channel, gap-free; set by SnapshotChannel::publish
  std::int64_t time_unix_ns = 0;        // wall clock
  std::int64_t monotonic_ns = 0;        // steady clock, for deltas
  std::int64_t sample_duration_ns = 0;  // how long the sample took
  std::vector<DeviceSample> devices;
  std::optional<HostSample> host;
  std::vector<SampleError> errors;
  friend bool operator==(const GpuSnapshot&, const GpuSnapshot&) = default;

  const DeviceSample* find_device(std::string_view id) const noexcept;
};

/// The memory a snapshot holds, in bytes: the object and everything it owns (vector and string
/// buffers beyond the small-string buffer, map nodes). An estimate that never undercounts the
/// heap a copy of the snapshot allocates by much (tests/model/snapshot_bytes_test.cpp measures
/// it); the channel's byte bounds (history, subscriber queues) count snapshots with it.
/// O(devices + processes + engines); a field added to the model that owns memory is counted here.
std::size_t approx_bytes(const GpuSnapshot& snapshot) noexcept;

/// Default byte bounds of the channel (gpustream/channel.hpp), in approx_bytes of the snapshots
/// held. Snapshots are shared, not copied: these bound what a history or a subscriber's queue
/// can keep alive, so a host with thousands of GPU processes (snapshots of megabytes) cannot
/// grow the process by gigabytes.
inline constexpr std::size_t kDefaultHistoryMaxBytes = std::size_t{64} << 20;     // 64 MiB
inline constexpr std::size_t kDefaultSubscriberMaxBytes = std::size_t{32} << 20;  // 32 MiB

/// Fills what gpustream derives from a device's other metrics, from present inputs only:
/// memory_free_bytes = memory_total_bytes − memory_used_bytes (not below 0), Source::derived,
/// when the probe did not report free memory itself. Telemetry applies it to every snapshot
/// before publishing it.
void derive_metrics(DeviceSample& device) noexcept;

/// Nanoseconds since the Unix epoch, now.
std::int64_t wall_now_ns() noexcept;
/// Nanoseconds of std::chrono::steady_clock, now.
std::int64_t steady_now_ns() noexcept;

}  // namespace gpustream
