// gpustream/benchmark.hpp — GPU energy, power, utilization and memory as Google Benchmark
// counters, per benchmark run, with no main() of one's own (link benchmark::benchmark_main).
//
//   #include <gpustream/benchmark.hpp>
//
//   using gpustream::benchmark::EnergyFixture;
//   BENCHMARK_DEFINE_F(EnergyFixture, MatMul)(benchmark::State& state) {
//     for (auto _ : state) run_matmul();
//   }
//   BENCHMARK_REGISTER_F(EnergyFixture, MatMul)->Threads(2);
//
//   // or, for a plain function (the window then also covers its code before and after its loop):
//   void BM_Copy(benchmark::State& state) { for (auto _ : state) copy(); }
//   GPUSTREAM_BENCHMARK(BM_Copy)->Repetitions(3);
//
// Each run of a benchmark (every trial Google Benchmark makes to find the iteration count, every
// repetition) is one named measurement window of one process-wide Telemetry, started lazily by
// the first run: its begin edge is sampled in the fixture's SetUp (or before the function), its
// end edge in TearDown (or after it), both outside the timed loop, so the ~0.1 ms an edge sample
// costs never counts in the benchmark's time. With ->Threads(N), thread 0 opens and closes the
// one window of the run; Google Benchmark holds every thread at its start and stop barriers,
// so the window spans every thread's timed loop. Window names are unique per run.
//
// The counters (docs/benchmark.md), prefixed with Options::prefix ("gpu_"), for the chosen
// device or the total of every device the window saw:
//   energy_J      joules per iteration (the window's energy / every thread's iterations)
//   power_mean_W  the window's energy / its length (the sum over devices)
//   power_max_W   the largest power reading (the sum of each device's largest)
//   util_max_pct  the largest utilization reading of any device
//   mem_peak_B    the largest device memory in use (the sum of each device's largest)
//   coverage      the smallest fresh_coverage of the devices (0..1)
//   exact_edges   1 when every device's both edges were fresh samples, else 0
//   window_s      the window's length (the longest device window), seconds
// A figure that is not available is not set (never 0): the label says which and why, and names
// each device's energy method ("gpustream: GPU-0 energy=counter; absent: util_max_pct (...)").
//
// The Telemetry's Config: the one given to configure() before the first run; else the JSON
// config file named by the environment variable GPUSTREAM_BENCHMARK_CONFIG (load_config); else
// the default Config (every probe but the simulated one). Probes come from the registry.
//
// Thread safety: configure() and telemetry() may be called from any thread. A Meter is used by
// the threads of one run (begin/end on each; thread 0 does the work).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "gpustream/config.hpp"
#include "gpustream/measurement.hpp"
#include "gpustream/telemetry.hpp"

namespace gpustream::benchmark {

/// The environment variable naming a JSON config file for the process-wide Telemetry.
inline constexpr const char* kConfigEnv = "GPUSTREAM_BENCHMARK_CONFIG";

/// What a Meter measures and how it names its counters.
struct Options {
  /// One device id (DeviceSample::id): its figures only. Empty: every device the window saw.
  std::string device;
  /// The probes whose devices count (empty: all).
  std::vector<std::string> probes;
  /// Put before every counter name.
  std::string prefix = "gpu_";
  /// Set the benchmark's label (energy method, absent figures and why). Off: a label the
  /// benchmark sets itself is kept.
  bool label = true;
};

/// Sets the process-wide Telemetry's Config (and probe factory; default: the registry's). Call
/// before the first benchmark runs (e.g. from a static initializer); throws std::logic_error
/// once the Telemetry exists.
void configure(Config config);
void configure(Config config, ProbeFactory factory);

/// The process-wide Telemetry: built and started on the first call (waiting for its first
/// samples, at most 10 s), stopped at exit. Throws ConfigError when its Config is wrong (every
/// later call throws the same).
Telemetry& telemetry();

/// The figures of one window, before they become counters. Each is unset when not available;
/// `absent` says which and why, one line each.
struct Figures {
  std::vector<std::string> devices;  // the devices counted, in window order
  std::vector<std::string> methods;  // "<device> energy=<method>" for each device with energy
  std::optional<double> energy_joules;
  std::optional<double> power_mean_watts;
  std::optional<double> power_max_watts;
  std::optional<double> utilization_max_percent;
  std::optional<double> memory_peak_bytes;
  std::optional<double> fresh_coverage;
  std::optional<bool> exact_edges;  // unset when no device was counted
  std::optional<double> window_seconds;
  std::vector<std::string> absent;
};

/// The figures of `summary` for `device` (empty: the total of every device).
Figures figures_of(const WindowSummary& summary, const std::string& device = {});

/// Measures one run of a benchmark as one window. Call begin(state) before the timed loop and
/// end(state) after it, on every thread of the run (fixture SetUp/TearDown); thread 0 opens and
/// closes the window and sets the counters.
class Meter {
 public:
  explicit Meter(Options options = {});
  void begin(::benchmark::State& state);
  void end(::benchmark::State& state);
  /// The figures of the last run thread 0 ended.
  const Figures& last() const noexcept { return last_; }
  const Options& options() const noexcept { return options_; }

 private:
  Options options_;
  std::string window_;  // the open window's name (thread 0 only); empty when none
  Figures last_;
};

/// A Google Benchmark fixture that measures each run (BENCHMARK_F / BENCHMARK_DEFINE_F).
/// Derive from it and override energy_options() to choose a device, probes or the prefix; a
/// SetUp/TearDown of one's own calls this one's (before / after its own work, to keep that work
/// out of the window).
class EnergyFixture : public ::benchmark::Fixture {
 public:
  void SetUp(::benchmark::State& state) override;
  void TearDown(::benchmark::State& state) override;

 protected:
  virtual Options energy_options() const { return {}; }

 private:
  std::unique_ptr<Meter> meter_;  // made and used by thread 0 only
};

/// Registers `fn` (callable with benchmark::State&) as benchmark `name`, measured like
/// EnergyFixture: each run begins before `fn` and ends after it.
template <class Fn>
::benchmark::internal::Benchmark* register_benchmark(const std::string& name, Fn fn,
                                                     Options options = {}) {
  auto meter = std::make_shared<Meter>(std::move(options));
  return ::benchmark::RegisterBenchmark(name.c_str(),
                                        [meter, fn = std::move(fn)](::benchmark::State& state) {
                                          meter->begin(state);
                                          fn(state);
                                          meter->end(state);
                                        });
}

}  // namespace gpustream::benchmark

/// BENCHMARK(fn) measured by gpustream: GPUSTREAM_BENCHMARK(BM_Copy)->Threads(2);
#define GPUSTREAM_BENCHMARK(fn) \
  BENCHMARK_PRIVATE_DECLARE(fn) = ::gpustream::benchmark::register_benchmark(#fn, fn)
