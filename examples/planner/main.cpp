// planner: a runtime planner asks "where does a job needing N bytes of GPU memory fit now?"
//
//   planner [BYTES]      (default 8 GiB)
//
// It reads the latest snapshot of every probe (the pull API: no subscription needed), and picks
// the device with the most free memory that is large enough. A device whose memory figures are
// absent is skipped, with the reason — an unknown figure is never taken as 0 (or as free).
#include <chrono>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

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

  const gpustream::DeviceSample* best = nullptr;
  double best_free = 0;
  const auto latest = telemetry.channel().latest();  // keeps the snapshots alive for `best`
  for (const auto& snap : latest) {
    for (const auto& d : snap->devices) {
      const auto& used = d.metrics[gpustream::Metric::memory_used_bytes];
      const auto& total = d.metrics[gpustream::Metric::memory_total_bytes];
      if (!used || !total) {
        fmt::print("skip {}: memory figures absent ({})\n", d.id,
                   gpustream::to_string(!used ? used.reason() : total.reason()));
        continue;
      }
      const double free = total.value() - used.value();
      fmt::print("{:<44} free {:>8.2f} GiB\n", d.id, free / (1ull << 30));
      if (free >= need && free > best_free) {
        best = &d;
        best_free = free;
      }
    }
  }
  if (best)
    fmt::print("place the job on {} ({}): {:.2f} GiB free\n", best->name, best->id,
               best_free / (1ull << 30));
  else
    fmt::print("no device has {:.2f} GiB free now\n", need / (1ull << 30));
  telemetry.stop();
  return 0;
}
