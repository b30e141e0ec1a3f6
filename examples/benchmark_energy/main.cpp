// Google Benchmark with GPU counters: each benchmark run is one gpustream measurement window,
// and its energy per iteration, mean and max power, max utilization, peak device memory and
// coverage become counters of the run. No main() here: benchmark::benchmark_main provides it.
//
//   ./benchmark_energy                                   # the machine's GPUs
//   echo '{"probes": ["simulated"], "simulate": 2}' > sim.json
//   GPUSTREAM_BENCHMARK_CONFIG=sim.json ./benchmark_energy --benchmark_repetitions=3
//
// Replace the loops' bodies with GPU work (a kernel launch and its synchronisation): a loop that
// only launches work measures the launches, not the work.
#include <cmath>
#include <numeric>
#include <vector>

#include <gpustream/benchmark.hpp>

namespace {

// Work of a given size (a stand-in for a kernel).
void work(std::vector<float>& v) {
  for (auto& x : v) x = std::sqrt(x * x + 1.0F);
}

// The fixture takes the window's edge samples in its SetUp and TearDown, outside the timed loop;
// with ->Threads(N) thread 0 takes them and the window spans every thread's loop. Code before
// the loop (here each thread's buffer) is in the window but not in the time.
using gpustream::benchmark::EnergyFixture;

BENCHMARK_DEFINE_F(EnergyFixture, Transform)(benchmark::State& state) {
  std::vector<float> data(static_cast<std::size_t>(state.range(0)), 1.0F);
  for (auto _ : state) {
    work(data);
    benchmark::DoNotOptimize(data.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK_REGISTER_F(EnergyFixture, Transform)->Arg(1 << 12)->Arg(1 << 16)->Threads(1)->Threads(2);

// A plain function: the window also covers its code before and after the loop.
void BM_Reduce(benchmark::State& state) {
  std::vector<float> v(1 << 14, 1.0F);
  for (auto _ : state) benchmark::DoNotOptimize(std::accumulate(v.begin(), v.end(), 0.0F));
}
GPUSTREAM_BENCHMARK(BM_Reduce);

}  // namespace
