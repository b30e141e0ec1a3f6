// gpustream/planner.hpp — "where do N bytes of device memory fit now?" over snapshots.
//
//   gpustream::Telemetry t(config, gpustream::probe_factory());
//   t.start();
//   t.wait_for_first_samples(std::chrono::seconds{5});
//   if (auto best = t.best_device(8ull << 30)) place_job_on(best->device_id);
//
// The answer uses each device's memory_free_bytes: the vendor's own figure where it reports one
// (NVML `free`, amd-smi `free_vram`), else total − used (Source::derived); docs/probes.md says
// what each source means. A device whose free memory is unknown is never a candidate (an
// unknown figure is not taken as 0, nor as free). Pure functions: thread-safe, no I/O.
//
// Partitioned GPUs (NVIDIA MIG mode on): the candidates are the MIG instances, each with its own
// memory slice; the physical GPU itself never is (DeviceSample::partitioned), since no process
// can allocate on it outside an instance and its free memory is the sum of slices that no single
// allocation can span. A job placed on an instance is started with CUDA_VISIBLE_DEVICES=<its id>.
//
// Exclusions and the health rule (FitOptions): a planner leaves out devices by id, and devices
// that had a fatal event (gpustream::is_fatal: Xid 79 "fallen off the bus", 48, 94, 95, ...,
// an uncorrected ECC error) in the last fatal_event_window (default 1 hour). What is left out is
// not silently dropped: FitPlan::excluded lists every device that had `bytes` free and was left
// out, with the reason, so a planner knows why a GPU it expected was not offered:
//
//   gpustream::FitOptions o;
//   o.exclude = {"GPU-8f6c..."};                       // never this one
//   o.fatal_event_window = std::chrono::minutes{10};   // 0: no health rule
//   const auto plan = t.fits(8ull << 30, o);           // Telemetry: its own events
//   for (const auto& x : plan.excluded) log(x.device.device_id, x.detail);
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpustream/channel.hpp"
#include "gpustream/events.hpp"
#include "gpustream/model.hpp"

namespace gpustream {

/// One device with enough free memory.
struct DeviceFit {
  std::string device_id;
  std::string name;
  std::string probe;
  Vendor vendor = Vendor::unknown;
  std::uint64_t free_bytes = 0;
  Source source = Source::none;   // where free_bytes came from (nvml, amd-smi, derived, ...)
  std::string node;               // GpuSnapshot::node: empty for this machine's own devices
  std::int64_t time_unix_ns = 0;  // when the figure was sampled (the snapshot's wall clock)
  /// For a MIG instance: its physical GPU's id (DeviceSample::parent); else empty.
  std::string parent;
};

/// Every device in `snapshots` with at least `bytes` free, most free first (ties keep snapshot
/// order). A device (a node's device, in a fleet) seen by several probes counts once: a
/// vendor-reported figure wins over a derived one, then the smaller (the cautious answer).
std::vector<DeviceFit> fits(const std::vector<SnapshotPtr>& snapshots, std::uint64_t bytes);
/// The device with the most free memory among fits(), or nothing when none has `bytes` free.
std::optional<DeviceFit> best_device(const std::vector<SnapshotPtr>& snapshots,
                                     std::uint64_t bytes);

/// How long a fatal event keeps its device out of fits by default (FitOptions).
inline constexpr std::chrono::seconds kDefaultFatalEventWindow{3600};
/// The largest fatal_event_window a request may ask for (one week).
inline constexpr std::chrono::seconds kMaxFatalEventWindow{7 * 24 * 3600};

/// What a planner leaves out besides devices without enough free memory.
struct FitOptions {
  /// Device ids never offered (a fleet: on every node). An id no device has is ignored.
  std::vector<std::string> exclude;
  /// Leave out a device that had a fatal event (is_fatal) at most this long ago (event time
  /// from its time_unix_ns, to `now`); a MIG instance is left out for its parent GPU's events
  /// too. 0 (or less): no health rule.
  std::chrono::seconds fatal_event_window = kDefaultFatalEventWindow;
};

/// Why a device with enough free memory was left out. Wire names: to_string().
enum class ExclusionReason : std::uint8_t {
  excluded,     // its id is in FitOptions::exclude
  fatal_event,  // a fatal event within FitOptions::fatal_event_window
};
std::string_view to_string(ExclusionReason r) noexcept;

/// One device left out, and why.
struct FitExclusion {
  DeviceFit device;  // as it would have been offered
  ExclusionReason reason = ExclusionReason::excluded;
  /// In words: "in the request's exclusions", or the event: "xid 79 42 s ago (event #7,
  /// nvidia)".
  std::string detail;
  EventPtr event;  // the fatal event (reason fatal_event); null otherwise
};

/// fits() under FitOptions: what is offered, and what was left out.
struct FitPlan {
  std::vector<DeviceFit> fits;         // as fits(snapshots, bytes), less the excluded
  std::vector<FitExclusion> excluded;  // had `bytes` free but left out, most free first
  /// The first of fits (the most free), or nothing.
  std::optional<DeviceFit> best() const;
};

/// fits(snapshots, bytes), leaving out what `options` exclude. `events` are the fatal events
/// known (EventChannel::fatal(); any others are ignored); they name devices of this machine,
/// so they apply to devices whose `node` is empty. `now_unix_ns`: the wall clock that ages
/// them. Pure: thread-safe, no I/O.
FitPlan fits(const std::vector<SnapshotPtr>& snapshots, std::uint64_t bytes,
             const FitOptions& options, const std::vector<EventPtr>& events,
             std::int64_t now_unix_ns);
/// The reason `options` leave `device` out, or nothing: the first check is
/// FitOptions::exclude, then the health rule over `events` (as in fits() above).
std::optional<FitExclusion> exclusion(const DeviceFit& device, const FitOptions& options,
                                      const std::vector<EventPtr>& events,
                                      std::int64_t now_unix_ns);

/// This process on one device, from the latest snapshot of the probe that reports the device.
struct MyDeviceUsage {
  std::string probe;
  std::string device_id;
  Vendor vendor = Vendor::unknown;
  int index = 0;
  std::string name;
  /// GPU memory this process holds on the device. 0 is a real answer: the probe listed the
  /// device's processes and this one is not among them. Absent when not known (`absent` says
  /// why, `reason` in words).
  std::optional<std::uint64_t> gpu_memory_bytes;
  /// True when the figure is the source's own per-process accounting (NVML, DRM fdinfo,
  /// amd-smi); false for a fallback that may miss processes (nvidia-smi lists compute apps only).
  bool exact = false;
  std::optional<double> gpu_utilization_percent;  // this process's share, where reported
  std::optional<Absence> absent;
  std::string reason;
  /// The whole device, from the same snapshot.
  std::optional<std::uint64_t> device_memory_used_bytes;
  std::optional<std::uint64_t> device_memory_total_bytes;
  std::optional<std::uint64_t> device_memory_free_bytes;
  std::int64_t sampled_monotonic_ns = 0;  // when that snapshot was taken (steady clock)
};

/// "Can my model still fit?": this process's RSS and its GPU memory on each device.
struct MyProcessUsage {
  std::int64_t pid = 0;  // as <procfs_root>/self says (the pid the drivers see), else getpid()
  std::optional<std::uint64_t> host_rss_bytes;  // now, from <procfs_root>/self/statm
  std::vector<MyDeviceUsage> devices;           // every device of every snapshot, in order
  std::vector<std::string> errors;              // what could not be read, and why
};

/// my_process over `snapshots` (Telemetry::my_process() passes the latest of each probe).
/// Vendor-neutral: any probe that reports processes contributes. Reads only
/// <procfs_root>/self and <procfs_root>/self/statm.
MyProcessUsage my_process_usage(const std::vector<SnapshotPtr>& snapshots,
                                const std::string& procfs_root = "/proc");

}  // namespace gpustream
