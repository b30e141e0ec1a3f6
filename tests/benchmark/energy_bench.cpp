// A Google Benchmark program measured by gpustream::benchmark, with no main() of its own: run by
// energy_bench_check.py (ctest benchmark.counters*) over the simulated probe
// (GPUSTREAM_BENCHMARK_CONFIG), which checks every run's counters.
#include <cmath>
#include <vector>

#include "gpustream/benchmark.hpp"

namespace {

using gpustream::benchmark::EnergyFixture;
using gpustream::benchmark::Options;

double spin(double x) {
  for (int i = 0; i < 64; ++i) x = std::sqrt(x + i);
  return x;
}

// The fixture: every device, SetUp/TearDown keep the edges out of the timed loop.
BENCHMARK_DEFINE_F(EnergyFixture, Spin)(benchmark::State& state) {
  double x = 1;
  for (auto _ : state) benchmark::DoNotOptimize(x = spin(x));
}
BENCHMARK_REGISTER_F(EnergyFixture, Spin)->Threads(1)->Threads(2);

// One chosen device: the first one the process-wide Telemetry sees, counters named "gpu0_".
class FirstDevice : public EnergyFixture {
 protected:
  Options energy_options() const override {
    Options o;
    o.prefix = "gpu0_";
    for (const auto& s : gpustream::benchmark::telemetry().channel().latest())
      if (!s->devices.empty()) {
        o.device = s->devices.front().id;
        break;
      }
    return o;
  }
};
BENCHMARK_DEFINE_F(FirstDevice, Spin)(benchmark::State& state) {
  double x = 1;
  for (auto _ : state) benchmark::DoNotOptimize(x = spin(x));
}
BENCHMARK_REGISTER_F(FirstDevice, Spin);

// A plain function, with repetitions (each repetition is a window of its own).
void BM_Function(benchmark::State& state) {
  std::vector<double> v(1024, 1.0);
  for (auto _ : state) {
    for (auto& e : v) e = spin(e);
    benchmark::DoNotOptimize(v.data());
  }
}
GPUSTREAM_BENCHMARK(BM_Function)->Repetitions(2);

// A device no probe has: no counter at all, and the label says why.
void BM_NoSuchDevice(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(spin(1));
}
[[maybe_unused]] const auto* const kNoSuchDevice = gpustream::benchmark::register_benchmark(
    "BM_NoSuchDevice", BM_NoSuchDevice, Options{.device = "no-such-gpu"});

}  // namespace
