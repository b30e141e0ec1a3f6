// One benchmark measured by the installed gpustream::benchmark (the Config comes from
// GPUSTREAM_BENCHMARK_CONFIG, set by the test).
#include <cmath>

#include <gpustream/benchmark.hpp>

namespace {

void BM_Sum(benchmark::State& state) {
  double x = 0;
  for (auto _ : state) {
    x += std::sqrt(x + 1);
    benchmark::DoNotOptimize(x);
  }
}
GPUSTREAM_BENCHMARK(BM_Sum);

}  // namespace
