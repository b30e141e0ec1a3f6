// sampling_loop: a benchmark harness that measures what the GPUs did while a piece of work ran.
//
//   sampling_loop [--simulate N]
//
// A MeasurementWindow is opened around the work; at the end it gives, per device, the
// min/max/mean of each metric and the energy used (from the hardware counter when there is one,
// integrated from power otherwise — the summary says which).
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "gpustream/measurement.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/telemetry.hpp"

int main(int argc, char** argv) {
  gpustream::Config config;
  config.interval = std::chrono::milliseconds{100};
  config.simulate_when_no_gpu = true;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--simulate") == 0) config.simulate = std::atoi(argv[i + 1]);
  if (config.simulate == 0) config.simulate = 2;  // this example always has something to measure

  gpustream::Telemetry telemetry(config, gpustream::probe_factory());
  telemetry.start();
  telemetry.wait_for_first_samples(std::chrono::seconds{5});

  gpustream::MeasurementWindow window(telemetry.channel());
  window.begin();
  // The "work" being measured: here, two seconds of waiting.
  std::this_thread::sleep_for(std::chrono::seconds{2});
  const auto summary = window.end();
  telemetry.stop();

  fmt::print("window: {:.2f} s, {} snapshots, {} missed\n",
             static_cast<double>(summary.end_ns - summary.begin_ns) / 1e9, summary.snapshots,
             summary.missed_snapshots);
  for (const auto& d : summary.devices) {
    fmt::print("{} ({}): {} samples\n", d.device_id, d.probe, d.samples);
    for (auto m : {gpustream::Metric::utilization_percent, gpustream::Metric::power_watts,
                   gpustream::Metric::temperature_celsius}) {
      if (const auto* s = d.find(m))
        fmt::print("  {:<22} min {:>9.2f}  mean {:>9.2f}  max {:>9.2f}\n", gpustream::to_string(m),
                   s->min, s->mean, s->max);
      else
        fmt::print("  {:<22} absent\n", gpustream::to_string(m));
    }
    if (d.energy_joules)
      fmt::print("  energy                 {:.1f} J ({})\n", *d.energy_joules,
                 gpustream::to_string(*d.energy_kind));
  }
  return summary.devices.empty() ? 1 : 0;
}
