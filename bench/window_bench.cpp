// What a measurement window's exact edges cost: begin() + end() of one window, wall time per
// window (the caller waits for the edge samples), against the baseline of a channel-only window
// (no edge samples) in the same process, for
//   BM_ChannelOnlyWindow/<probe>   MeasurementWindow(channel): begin(); end();
//   BM_ExactWindow/<probe>         Telemetry::begin_window("w"); end_window("w") — two fresh
//                                  edge samples (Scheduler::request_sample) per window;
//   BM_NextWindow/<probe>          Telemetry::next_window("step"): consecutive windows (the
//                                  steps of a loop), one edge sample per boundary;
//   BM_SampleNow/<probe>           Telemetry::sample_now(): one fresh sample of every probe;
//   BM_WindowOverSnapshots/<n>    MeasurementWindow (fed through add()): begin(); 100
//                                  snapshots of 2 GPUs, each device carrying <n> driver power
//                                  samples (DeviceSample::power_samples; 0 or 50); end() —
//                                  the cost of integrating every sample (read the ratio 50 / 0);
// with <probe> 0 = the simulated probe (2 GPUs), 1 = NvidiaProbe over the fake
// libnvidia-ml.so.1 (2 GPUs, persistent session). The periodic grid is 60 s, so it stays out
// of the way. Counters: `caller_cpu_us` (CPU of the calling thread in begin()+end(), from
// WindowSummary::overhead), `edge_sample_us` (the slowest edge sample, request to answer),
// `process_cpu_us` (CPU of the whole process per window: the io thread and the work pool too).
//
// Run: build/bench/window_bench   (the NVIDIA half needs the fakes: GPUSTREAM_BUILD_TESTS=ON)
#include <benchmark/benchmark.h>

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gpustream/measurement.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/probes/simulated_probe.hpp"
#include "gpustream/telemetry.hpp"

#if GPUSTREAM_HAVE_FAKES
#include "gpustream_fake_nvml_paths.hpp"
#endif

namespace {

using namespace gpustream;

double process_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

/// A running Telemetry with one probe: 0 = simulated, 1 = NVIDIA over the fake NVML.
std::unique_ptr<Telemetry> make_telemetry(int which) {
  Config c;
  c.interval = std::chrono::milliseconds{60000};
  ProbeFactory factory;
  if (which == 0) {
    factory = [](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
      SimulatedProbeOptions o;
      o.devices = 2;
      return std::vector<ProbePtr>{make_simulated_probe(ex, o)};
    };
  } else {
#if GPUSTREAM_HAVE_FAKES
    static const auto dir = std::filesystem::temp_directory_path() / "gpustream_window_bench";
    std::filesystem::create_directories(dir / "proc");
    std::ofstream(dir / "scenario.txt") << "devices=2\ndevice.0.power_curve=250000:120000:700\n";
    ::setenv(fakes::kFakeNvmlScenarioEnv, (dir / "scenario.txt").c_str(), 1);
    factory = [](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
      NvidiaProbeOptions o;
      o.nvml_library = fakes::kFakeNvml;
      o.use = NvidiaProbeOptions::Use::nvml_only;
      o.library_session = LibrarySessionMode::persistent;
      o.paths.procfs_root = (dir / "proc").string();
      return std::vector<ProbePtr>{make_nvidia_probe(ex, o)};
    };
#else
    return nullptr;
#endif
  }
  auto t = std::make_unique<Telemetry>(c, factory);
  t->start();
  if (t->wait_for_first_samples(std::chrono::seconds{10}).empty()) return nullptr;
  return t;
}

const char* probe_label(int which) { return which == 0 ? "simulated" : "nvidia(fake NVML)"; }

void BM_ChannelOnlyWindow(benchmark::State& state) {
  auto t = make_telemetry(static_cast<int>(state.range(0)));
  if (!t) {
    state.SkipWithError("no probe");
    return;
  }
  MeasurementWindow w(t->channel());
  const double cpu0 = process_cpu_us();
  for (auto _ : state) {
    w.begin();
    benchmark::DoNotOptimize(w.end());
  }
  state.counters["process_cpu_us"] =
      benchmark::Counter((process_cpu_us() - cpu0) / static_cast<double>(state.iterations()));
  state.SetLabel(probe_label(static_cast<int>(state.range(0))));
  t->stop();
}

void BM_ExactWindow(benchmark::State& state) {
  auto t = make_telemetry(static_cast<int>(state.range(0)));
  if (!t) {
    state.SkipWithError("no probe");
    return;
  }
  double caller_cpu_ns = 0, edge_ns = 0;
  std::size_t failed = 0;
  const double cpu0 = process_cpu_us();
  for (auto _ : state) {
    t->begin_window("w");
    const auto s = t->end_window("w");
    caller_cpu_ns += static_cast<double>(s.overhead.caller_cpu_ns);
    edge_ns += static_cast<double>(s.overhead.max_sample_latency_ns);
    failed += s.overhead.failed_edge_samples;
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["process_cpu_us"] = benchmark::Counter((process_cpu_us() - cpu0) / n);
  state.counters["caller_cpu_us"] = benchmark::Counter(caller_cpu_ns / n * 1e-3);
  state.counters["edge_sample_us"] = benchmark::Counter(edge_ns / n * 1e-3);
  state.counters["failed_edges"] = benchmark::Counter(static_cast<double>(failed));
  state.SetLabel(probe_label(static_cast<int>(state.range(0))));
  t->stop();
}

void BM_NextWindow(benchmark::State& state) {
  auto t = make_telemetry(static_cast<int>(state.range(0)));
  if (!t) {
    state.SkipWithError("no probe");
    return;
  }
  t->begin_window("step");
  std::size_t failed = 0;
  const double cpu0 = process_cpu_us();
  for (auto _ : state) failed += t->next_window("step").overhead.failed_edge_samples;
  state.counters["process_cpu_us"] =
      benchmark::Counter((process_cpu_us() - cpu0) / static_cast<double>(state.iterations()));
  state.counters["failed_edges"] = benchmark::Counter(static_cast<double>(failed));
  t->end_window("step");
  state.SetLabel(probe_label(static_cast<int>(state.range(0))));
  t->stop();
}

void BM_SampleNow(benchmark::State& state) {
  auto t = make_telemetry(static_cast<int>(state.range(0)));
  if (!t) {
    state.SkipWithError("no probe");
    return;
  }
  const double cpu0 = process_cpu_us();
  for (auto _ : state) benchmark::DoNotOptimize(t->sample_now());
  state.counters["process_cpu_us"] =
      benchmark::Counter((process_cpu_us() - cpu0) / static_cast<double>(state.iterations()));
  state.SetLabel(probe_label(static_cast<int>(state.range(0))));
  t->stop();
}

/// 100 snapshots 100 ms apart of 2 power-only GPUs, each with `per_device` driver samples
/// spread over the interval before it (oldest first, as the model requires).
std::vector<GpuSnapshot> snapshots_with_samples(int per_device) {
  constexpr std::int64_t kInterval = 100'000'000;
  std::vector<GpuSnapshot> out;
  for (int i = 1; i <= 100; ++i) {
    GpuSnapshot s;
    s.probe = "nvidia";
    s.monotonic_ns = i * kInterval;
    for (int g = 0; g < 2; ++g) {
      DeviceSample d;
      d.id = "GPU-" + std::to_string(g);
      d.metrics.fill_absent(Absence::unsupported);
      d.metrics.set(Metric::power_watts, 200.0 + i % 7, Source::nvml);
      d.power_kind = PowerKind::instant;
      for (int k = 0; k < per_device; ++k) {
        const std::int64_t t = s.monotonic_ns - kInterval + (k + 1) * kInterval / (per_device + 1);
        d.power_samples.push_back({t, 200.0 + (k * 13 + i) % 50});
      }
      s.devices.push_back(std::move(d));
    }
    out.push_back(std::move(s));
  }
  return out;
}

void BM_WindowOverSnapshots(benchmark::State& state) {
  const auto snaps = snapshots_with_samples(static_cast<int>(state.range(0)));
  MeasurementWindow w;
  std::size_t readings = 0;
  for (auto _ : state) {
    w.begin();
    for (const auto& s : snaps) w.add(s);
    const auto summary = w.end();
    readings = summary.devices.at(0).power_readings;
    benchmark::DoNotOptimize(summary);
  }
  state.counters["readings_per_device"] = benchmark::Counter(static_cast<double>(readings));
}

BENCHMARK(BM_WindowOverSnapshots)->Arg(0)->Arg(50)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ChannelOnlyWindow)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ExactWindow)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NextWindow)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SampleNow)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
