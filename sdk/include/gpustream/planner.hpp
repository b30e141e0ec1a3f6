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
  Source source = Source::none;  // where free_bytes came from (nvml, amd-smi, derived, ...)
};

/// Every device in `snapshots` with at least `bytes` free, most free first (ties keep snapshot
/// order). A device seen by several probes counts once: a vendor-reported figure wins over a
/// derived one, then the smaller (the cautious answer).
std::vector<DeviceFit> fits(const std::vector<SnapshotPtr>& snapshots, std::uint64_t bytes);
/// The device with the most free memory among fits(), or nothing when none has `bytes` free.
std::optional<DeviceFit> best_device(const std::vector<SnapshotPtr>& snapshots,
                                     std::uint64_t bytes);

}  // namespace gpustream
