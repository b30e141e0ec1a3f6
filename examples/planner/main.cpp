// planner: a runtime planner asks "where does a job needing N bytes of GPU memory fit now?"
//
//   planner [BYTES]      (default 8 GiB)
//
// It reads the latest snapshot of every probe (the pull API: no subscription needed), and picks
// the device with the most free memory that is large enough (gpustream::best_device). A device
// whose free memory is absent is skipped, with the reason — an unknown figure is never taken as
// 0 (or as free).
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "gpustream/planner.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/telemetry.hpp"

int main(int argc, char** argv) {
  const double need = argc > 1 ? std::strtod(argv[1], nullptr) : 8.0 * (1ull << 30);
  gpustream::Config config;
  config.simulate_when_no_gpu = true;
  config.simulate = 3;
  gpustream::Telemetry telemetry(config, gpustream::probe_factory());
  telemetry.start();
  telemetry.wait_for_first_samples(std::chrono::seconds{5});

  // Every device with its free memory (the vendor's own figure, else total − used), or why it
  // has none; then the answer from best_device().
  const auto latest = telemetry.channel().latest();
  for (const auto& snap : latest) {
    for (const auto& d : snap->devices) {
      const auto& free = d.metrics[gpustream::Metric::memory_free_bytes];
      if (!free) {
        fmt::print("skip {}: free memory absent ({})\n", d.id, gpustream::to_string(free.reason()));
        continue;
      }
      fmt::print("{:<44} free {:>8.2f} GiB ({})\n", d.id, free.value() / (1ull << 30),
                 gpustream::to_string(free.source()));
    }
  }
  if (const auto best = gpustream::best_device(latest, static_cast<std::uint64_t>(need)))
    fmt::print("place the job on {} ({}): {:.2f} GiB free\n", best->name, best->device_id,
               static_cast<double>(best->free_bytes) / (1ull << 30));
  else
    fmt::print("no device has {:.2f} GiB free now\n", need / (1ull << 30));
  telemetry.stop();
  return 0;
}
