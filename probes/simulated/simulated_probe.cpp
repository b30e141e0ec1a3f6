#include "gpustream/probes/simulated_probe.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <utility>

#include "gpustream/probes/settings.hpp"
#include "simulated/simulated_gpu.hpp"

namespace gpustream {

double SimulatedProbeOptions::KnownPower::power_at(std::int64_t t_ns) const noexcept {
  const double w = 2 * std::numbers::pi / (static_cast<double>(period.count()) * 1e-9);
  return base_watts + amplitude_watts * std::sin(w * static_cast<double>(t_ns) * 1e-9);
}

double SimulatedProbeOptions::KnownPower::energy_at(std::int64_t t_ns) const noexcept {
  const double w = 2 * std::numbers::pi / (static_cast<double>(period.count()) * 1e-9);
  const double t = static_cast<double>(t_ns) * 1e-9;
  return base_watts * t + amplitude_watts / w * (1 - std::cos(w * t));
}

SimulatedProbe::SimulatedProbe(ProbeExecutors executors, SimulatedProbeOptions options)
    : BlockingProbe(std::move(executors)), options_(std::move(options)) {
  if (options_.devices < 1 || options_.devices > SimulatedProbeOptions::kMaxDevices)
    throw std::invalid_argument("simulated probe: device count must be 1.." +
                                std::to_string(SimulatedProbeOptions::kMaxDevices) + ", got " +
                                std::to_string(options_.devices));
  if (options_.known_power && options_.known_power->period.count() <= 0)
    throw std::invalid_argument("simulated probe: known_power.period must be positive");
  if (!options_.monotonic_clock) options_.monotonic_clock = [] { return steady_now_ns(); };
  if (!options_.wall_clock) options_.wall_clock = [] { return wall_now_ns(); };
  for (int i = 0; i < options_.devices; ++i)
    gpus_.push_back(std::make_unique<sim::SimulatedGpu>(options_.seed, i));
}

SimulatedProbe::~SimulatedProbe() = default;

std::vector<DeviceInfo> SimulatedProbe::devices() const {
  std::vector<DeviceInfo> out;
  out.reserve(gpus_.size());
  for (const auto& gpu : gpus_) out.push_back(gpu->info());  // traits are immutable
  return out;
}

Detection SimulatedProbe::detect() {
  Detection d;
  d.available = true;
  d.devices = devices();
  return d;
}

GpuSnapshot SimulatedProbe::sample() {
  GpuSnapshot snap;
  snap.probe = std::string(kName);
  std::lock_guard lock(mu_);
  snap.monotonic_ns = options_.monotonic_clock();
  snap.time_unix_ns = options_.wall_clock();
  snap.devices.reserve(gpus_.size());
  for (auto& gpu : gpus_) snap.devices.push_back(gpu->sample(snap.monotonic_ns));
  if (const auto& k = options_.known_power) {
    for (auto& d : snap.devices) {
      d.metrics.set(Metric::power_watts, k->power_at(snap.monotonic_ns), Source::simulated);
      if (k->energy_counter) {
        d.metrics.set(Metric::energy_joules, k->energy_at(snap.monotonic_ns), Source::simulated);
        d.energy_kind = EnergyKind::counter;
      } else {
        d.metrics.set_absent(Metric::energy_joules, Absence::unsupported, Source::simulated);
        d.energy_kind.reset();
      }
    }
  }
  return snap;
}

std::shared_ptr<SimulatedProbe> make_simulated_probe(ProbeExecutors executors,
                                                     SimulatedProbeOptions options) {
  return std::make_shared<SimulatedProbe>(std::move(executors), std::move(options));
}

ProbePtr make_simulated_probe_from_config(const Config& config, ProbeExecutors executors) {
  // --simulate N and --seed are top-level keys: the section takes no settings.
  settings::section(config, SimulatedProbe::kName, {});
  SimulatedProbeOptions options;
  options.devices = std::max(1, config.simulate);
  options.seed = config.seed;
  return make_simulated_probe(std::move(executors), std::move(options));
}

}  // namespace gpustream
