// simulated_gpu.hpp — the model behind one simulated GPU (private to the simulated probe).
//
// Fixed traits (memory size, power limit, clocks, periods, processes) are drawn once from a
// PRNG seeded with (seed, index). Instant values are functions of time plus noise from a
// counter-based hash of (seed, index, 250 ms bucket), so they do not depend on how often the GPU
// is sampled. Temperature, average power and the energy counter carry state from one sample to
// the next. Not thread-safe: the probe serializes calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpustream/model.hpp"
#include "gpustream/probe.hpp"

namespace gpustream::sim {

/// splitmix64: a tiny, well-mixed, portable PRNG step (the same numbers on every platform).
std::uint64_t mix64(std::uint64_t x) noexcept;

/// A deterministic stream of numbers.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept : state_(seed) {}
  std::uint64_t next() noexcept;
  /// Uniform in [0, 1).
  double uniform() noexcept;
  double uniform(double lo, double hi) noexcept { return lo + (hi - lo) * uniform(); }
  /// One of `n` choices, 0..n-1.
  std::size_t pick(std::size_t n) noexcept;

 private:
  std::uint64_t state_;
};

class SimulatedGpu {
 public:
  SimulatedGpu(std::uint64_t seed, int index);

  DeviceInfo info() const;
  /// The device as seen at monotonic time `t_ns`. Advances the stateful parts when `t_ns` is
  /// later than the previous call.
  DeviceSample sample(std::int64_t t_ns);

 private:
  struct ProcessTraits {
    std::int64_t pid;
    std::string name;
    double weight;
    double period_s;
    double phase;
  };

  /// Noise in [-1, 1], constant over a 250 ms bucket of time, one stream per `channel`.
  double noise(std::int64_t t_ns, std::uint64_t channel) const noexcept;

  std::uint64_t seed_;
  int index_;
  std::string id_;
  // Fixed traits.
  double memory_total_bytes_;
  double power_limit_watts_;
  double idle_power_watts_;
  double clock_min_mhz_;
  double clock_max_mhz_;
  double memory_clock_mhz_;
  double ambient_celsius_;
  double temperature_rise_celsius_;
  double slow_period_s_, slow_phase_;
  double fast_period_s_, fast_phase_;
  double copy_period_s_, copy_phase_;
  std::vector<ProcessTraits> processes_;
  // State carried between samples.
  std::optional<std::int64_t> last_t_ns_;
  double last_power_watts_ = 0;
  double power_average_watts_ = 0;
  double temperature_celsius_ = 0;
  double energy_joules_ = 0;
};

}  // namespace gpustream::sim
