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
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpustream/channel.hpp"
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
