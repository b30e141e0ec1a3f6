// gpustream/probes/simulated_probe.hpp — plausible, clearly labelled GPUs for demos, dashboards
// and benchmarks on machines without a GPU.
//
// Each simulated GPU (vendor `simulated`, name "Simulated GPU <i>", a UUID-like id stable for a
// given seed and index, PCI bus id "0000:<i+1>:00.0") reports values computed from the sample's
// monotonic time and a seeded counter-based PRNG: utilization, memory, power (instant and
// average), power limit, temperature (lagging utilization), clocks, fan, an energy counter that
// is the integral of the reported power (trapezoids between samples), engines (graphics,
// compute, copy) and a few processes. Every present value has Source::simulated; metrics it does
// not simulate are absent with Absence::unsupported.
//
// Determinism: two probes with the same seed and the same sequence of clock readings produce the
// same snapshots (except sample_duration_ns, which is measured). Inject the clocks through
// SimulatedProbeOptions to drive time in tests. A clock must not return 0 (BlockingProbe treats 0
// as "not set" and fills in the real time).
//
// Thread safety: detect()/sample() run on the work pool; the model state is under a mutex.
// Cancellation: a sample is pure computation; there is nothing to cancel.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/config.hpp"

namespace gpustream {

namespace sim {
class SimulatedGpu;
}

struct SimulatedProbeOptions {
  static constexpr int kMaxDevices = kMaxSimulatedGpus;  // the same bound as Config::simulate
  /// Number of GPUs, 1..kMaxDevices.
  int devices = 1;
  std::uint64_t seed = 1;
  /// Monotonic time of a sample, in ns. Default: steady_now_ns.
  std::function<std::int64_t()> monotonic_clock;
  /// Wall-clock time of a sample, in ns since the Unix epoch. Default: wall_now_ns.
  std::function<std::int64_t()> wall_clock;

  /// A known power curve, for tests and benchmarks of energy measurement. When set, every
  /// device reports power_watts = P(t) = base_watts + amplitude_watts * sin(2π t / period), t
  /// the sample's monotonic time in seconds, and (with energy_counter) an energy counter that
  /// reads exactly E(t) = ∫₀ᵗ P (closed form, not trapezoids between samples), so the energy
  /// between any two instants is E(t1) - E(t0) whatever the sampling. Without energy_counter
  /// the counter is absent (unsupported): a power-only device.
  struct KnownPower {
    double base_watts = 200;
    double amplitude_watts = 50;
    std::chrono::nanoseconds period{std::chrono::seconds{10}};  // > 0
    bool energy_counter = true;

    double power_at(std::int64_t t_ns) const noexcept;   // W
    double energy_at(std::int64_t t_ns) const noexcept;  // J since t = 0
  };
  std::optional<KnownPower> known_power;
};

class SimulatedProbe final : public BlockingProbe {
 public:
  static constexpr std::string_view kName = "simulated";

  /// Throws std::invalid_argument when options.devices is outside 1..kMaxDevices.
  SimulatedProbe(ProbeExecutors executors, SimulatedProbeOptions options);
  ~SimulatedProbe() override;

  std::string_view name() const noexcept override { return kName; }
  ProbeKind kind() const noexcept override { return ProbeKind::simulated; }

  /// The devices this probe simulates (what detect() reports).
  std::vector<DeviceInfo> devices() const;

 protected:
  /// Always available, with every simulated device.
  Detection detect() override;
  GpuSnapshot sample() override;
  /// Arithmetic only (no I/O, no vendor call): detect() and sample() run on the io executor,
  /// with no hop to the work pool and back. The injected clocks must not block either.
  bool never_blocks() const noexcept override { return true; }

 private:
  SimulatedProbeOptions options_;
  std::mutex mu_;
  std::vector<std::unique_ptr<sim::SimulatedGpu>> gpus_;  // guarded by mu_ while sampling
};

std::shared_ptr<SimulatedProbe> make_simulated_probe(ProbeExecutors executors,
                                                     SimulatedProbeOptions options = {});

/// The "simulated" registry row: config.simulate GPUs (at least 1: named explicitly with
/// simulate == 0 it gets one) and config.seed; its section takes no settings.
ProbePtr make_simulated_probe_from_config(const Config& config, ProbeExecutors executors);

/// "sim-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", stable for a seed and a device index.
std::string simulated_device_id(std::uint64_t seed, int index);

}  // namespace gpustream
