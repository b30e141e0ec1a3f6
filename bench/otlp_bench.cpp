// gzip on /metrics and the OTLP export (issue #30): what a scrape costs with and without gzip,
// and what one OTLP export costs to encode (JSON) and compress, for a busy 8-GPU node (every
// metric an NVML probe fills on a Hopper, 100 processes, the probe's statistics and the
// server's counters: the /metrics a default `gpustream serve` renders).
//
//   build-dir/bench/otlp_bench --benchmark_min_time=1s
//
// main() prints the sizes (identity, gzip at levels 1 and 6, OTLP JSON and gzipped) and checks
// that each gzip body inflates back to its input.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "gpustream/transport/otlp.hpp"
#include "gpustream/transport/prometheus.hpp"
#include "gpustream/transport/prometheus_events.hpp"
#include "wire/gzip.hpp"

namespace {

using namespace gpustream;
using namespace gpustream::transport;

SnapshotPtr node_snapshot(std::uint64_t sequence) {
  constexpr int kGpus = 8, kProcesses = 100;
  GpuSnapshot s;
  s.probe = "nvidia";
  s.sequence = sequence;
  s.time_unix_ns = 1717171717123456789 + static_cast<std::int64_t>(sequence) * 1'000'000'000;
  for (int g = 0; g < kGpus; ++g) {
    DeviceSample d;
    char id[64];
    std::snprintf(id, sizeof id, "GPU-%08x-5b7d-4c9e-a1f0-3c2d%08x", 0x8c1f3e2a + g, 0x1000 * g);
    d.id = id;
    d.vendor = Vendor::nvidia;
    d.index = g;
    d.name = "NVIDIA H100 80GB HBM3";
    char bus[32];
    std::snprintf(bus, sizeof bus, "00000000:%02X:00.0", 0x18 + 0x10 * g);
    d.pci_bus_id = bus;
    d.energy_kind = EnergyKind::counter;
    // Every metric present (the ones NVML has on a Hopper with GPM), values that vary by GPU.
    for (std::size_t i = 0; i < kMetricCount; ++i)
      d.metrics.set(static_cast<Metric>(i), 37.25 + g * 3.5 + static_cast<double>(i) * 11.125,
                    Source::nvml);
    d.metrics.set(Metric::memory_used_bytes, 61203283968.0 + g * 1048576.0, Source::nvml);
    d.metrics.set(Metric::memory_total_bytes, 85520809984.0, Source::nvml);
    d.engines = {{"graphics", Reading::of(91.0 + g * 0.7, Source::nvml)},
                 {"copy", Reading::of(4.5, Source::nvml)}};
    for (int p = 0; p < kProcesses / kGpus; ++p) {
      ProcessSample ps;
      ps.pid = 210000 + g * 100 + p;
      ps.name = "python3";
      ps.gpu_memory_bytes = 536870912ull + 12582912ull * static_cast<unsigned>(p);
      d.processes.push_back(std::move(ps));
    }
    s.devices.push_back(std::move(d));
  }
  return std::make_shared<const GpuSnapshot>(std::move(s));
}

std::vector<ProbeStats> stats() {
  ProbeStats s;
  s.probe = "nvidia";
  s.state = ProbeState::available;
  s.samples = 123456;
  s.devices = 8;
  return {s};
}

std::string metrics_text() {
  static const std::vector<SnapshotPtr> latest{node_snapshot(1)};
  static const auto probe_stats = stats();
  const ServerCounters counters{};
  return render_prometheus(latest, probe_stats, &counters) + render_event_metrics({}, &counters);
}

void BM_Metrics_Identity(benchmark::State& state) {
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto text = metrics_text();
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Metrics_Identity);

void BM_Metrics_Gzip(benchmark::State& state) {
  const int level = static_cast<int>(state.range(0));
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto z = gzip_compress(metrics_text(), level);
    bytes = z.size();
    benchmark::DoNotOptimize(z.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Metrics_Gzip)->Arg(1)->Arg(6);

void BM_Otlp_Encode(benchmark::State& state) {
  const std::vector<SnapshotPtr> latest{node_snapshot(1)};
  const OtlpResource resource{"gpu-node-17", "gpu-node-17:4242", "0.1.0"};
  std::size_t bytes = 0;
  for (auto _ : state) {
    OtlpEncoderState st;  // a snapshot not sent yet, as at each interval
    auto json = encode_otlp_metrics(latest, resource, st);
    bytes = json.size();
    benchmark::DoNotOptimize(json.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Otlp_Encode);

void BM_Otlp_EncodeGzip(benchmark::State& state) {
  const std::vector<SnapshotPtr> latest{node_snapshot(1)};
  const OtlpResource resource{"gpu-node-17", "gpu-node-17:4242", "0.1.0"};
  std::size_t bytes = 0;
  for (auto _ : state) {
    OtlpEncoderState st;
    auto z = gzip_compress(encode_otlp_metrics(latest, resource, st));
    bytes = z.size();
    benchmark::DoNotOptimize(z.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Otlp_EncodeGzip);

}  // namespace

int main(int argc, char** argv) {
  const auto text = metrics_text();
  OtlpEncoderState st;
  const auto json = encode_otlp_metrics({node_snapshot(1)}, {"gpu-node-17", "x", "0.1.0"}, st);
  std::printf("/metrics identity %zu bytes; gzip-1 %zu; gzip-6 %zu; OTLP JSON %zu, gzip-1 %zu\n",
              text.size(), gzip_compress(text, 1).size(), gzip_compress(text, 6).size(),
              json.size(), gzip_compress(json, 1).size());
  for (const int level : {1, 6})
    if (gunzip(gzip_compress(text, level), text.size()) != text) {
      std::fprintf(stderr, "gzip level %d does not round-trip\n", level);
      return EXIT_FAILURE;
    }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return EXIT_SUCCESS;
}
