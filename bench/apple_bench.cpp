// Apple probe benchmark: one persistent `macmon pipe` child (AppleSiliconProbe) against starting
// macmon once per sample, both driving the fake macmon of tests/fakes/macmon.
//
//   build-dir/bench/apple_bench
//
// Per sample, two figures:
//   cpu_us_per_sample  CPU time of this process and of its children (the macmon processes,
//                      counted once reaped), divided by the samples taken;
//   latency_us_*       from the moment the fake wrote the line (its `timestamp`, stamped with the
//                      wall clock just before the write) to the snapshot published on a
//                      SnapshotChannel.
// The persistent probe samples from its on_line hook, i.e. at once; a timer-driven Scheduler
// adds the phase between macmon's line and the next tick (up to one interval) on top.
// The fake starts in well under a millisecond; the real macmon also opens IOReport and the SMC
// and waits one interval before its first line, so per-sample figures here are a lower bound.
#include <benchmark/benchmark.h>

#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/probes/apple_probe.hpp"
#include "gpustream/subprocess.hpp"

#if defined(GPUSTREAM_HAVE_FAKES) && __has_include("gpustream_fake_macmon_paths.hpp")
#include "gpustream_fake_macmon_paths.hpp"
#define GPUSTREAM_HAVE_FAKE_MACMON 1
#endif

namespace {

using namespace gpustream;
using namespace std::chrono_literals;

#ifdef GPUSTREAM_HAVE_FAKE_MACMON

// CPU seconds used so far by this process (self) and by its reaped children.
struct Cpu {
  double self = 0;
  double children = 0;

  static Cpu now() {
    const auto seconds = [](int who) {
      rusage u{};
      ::getrusage(who, &u);
      return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
             static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
    };
    return {seconds(RUSAGE_SELF), seconds(RUSAGE_CHILDREN)};
  }
  Cpu operator-(const Cpu& o) const { return {self - o.self, children - o.children}; }
};

// An io_context on its own thread, as in an application, and a channel to publish on.
struct Loop {
  boost::asio::io_context io{1};
  boost::asio::thread_pool pool{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard{
      io.get_executor()};
  SnapshotChannel channel{io.get_executor(), 16};
  std::thread thread{[this] { io.run(); }};

  ~Loop() {
    guard.reset();
    io.stop();
    thread.join();
  }
};

// Latencies (ns) of published snapshots; the bench thread waits for the next one.
struct Published {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::int64_t> latencies;

  void add(const GpuSnapshot& s) {
    const std::int64_t latency = wall_now_ns() - s.time_unix_ns;
    std::lock_guard lock(mu);
    latencies.push_back(latency);
    cv.notify_all();
  }
  bool wait_for(std::size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 10s, [&] { return latencies.size() >= n; });
  }
};

void report(benchmark::State& state, std::vector<std::int64_t> latencies, Cpu cpu,
            std::size_t samples) {
  if (latencies.empty() || samples == 0) return state.SkipWithError("no samples");
  std::sort(latencies.begin(), latencies.end());
  const auto at = [&](double q) {
    return static_cast<double>(latencies[static_cast<std::size_t>(q * (latencies.size() - 1))]) /
           1e3;
  };
  double sum = 0;
  for (auto l : latencies) sum += static_cast<double>(l);
  const auto n = static_cast<double>(samples);
  state.counters["cpu_us_per_sample"] = (cpu.self + cpu.children) * 1e6 / n;
  state.counters["cpu_us_self"] = cpu.self * 1e6 / n;
  state.counters["cpu_us_macmon"] = cpu.children * 1e6 / n;
  state.counters["latency_us_p50"] = at(0.5);
  state.counters["latency_us_p99"] = at(0.99);
  state.counters["latency_us_mean"] = sum / static_cast<double>(latencies.size()) / 1e3;
}

const char* kFakeArgs = "--fake-stamp --fake-schema v0.8.1";

// One persistent child; every line is sampled and published as soon as it arrives.
void BM_PersistentChild(benchmark::State& state) {
  const auto interval = std::chrono::milliseconds(state.range(0));
  Loop loop;
  Published published;
  std::shared_ptr<AppleSiliconProbe> probe;
  AppleProbeOptions o;
  o.macmon = fakes::kFakeMacmon;
  o.interval = interval;
  o.env["GPUSTREAM_FAKE_MACMON"] = kFakeArgs;
  o.on_line = [&] {
    probe->async_sample([&](boost::system::error_code ec, GpuSnapshot s) {
      if (ec) return;
      published.add(*loop.channel.publish(std::move(s)));
    });
  };
  probe = make_apple_probe({loop.io.get_executor(), loop.pool.get_executor()}, o);

  // Warm up: the child is started and has printed one line.
  probe->async_sample([](boost::system::error_code, GpuSnapshot) {});
  if (!published.wait_for(1)) return state.SkipWithError("the fake macmon printed nothing");
  {
    std::lock_guard lock(published.mu);
    published.latencies.clear();
  }
  const Cpu cpu0 = Cpu::now();
  std::size_t samples = 0;
  for (auto _ : state) {
    if (!published.wait_for(++samples)) return state.SkipWithError("no line within 10 s");
  }
  // Stop the child and wait until it is reaped, so that its CPU time is counted.
  const auto pid = probe->status().pid;
  probe->stop();
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (pid && !(::kill(*pid, 0) == -1 && errno == ESRCH) &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(1ms);
  const Cpu cpu = Cpu::now() - cpu0;
  std::vector<std::int64_t> latencies;
  {
    std::lock_guard lock(published.mu);
    latencies.assign(published.latencies.begin(),
                     published.latencies.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                       samples, published.latencies.size())));
  }
  probe.reset();
  report(state, std::move(latencies), cpu, samples);
}
BENCHMARK(BM_PersistentChild)
    ->Arg(10)
    ->Arg(100)
    ->Iterations(100)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// macmon started once per sample: `macmon -i 0 pipe -s 1`, its one line parsed and published.
void BM_ChildPerSample(benchmark::State& state) {
  Loop loop;
  Published published;
  RunOptions o;
  o.argv = {fakes::kFakeMacmon, "-i", "0", "pipe", "-s", "1"};
  o.env["GPUSTREAM_FAKE_MACMON"] = kFakeArgs;
  o.timeout = 10s;
  std::atomic<int> failures{0};
  const Cpu cpu0 = Cpu::now();
  std::size_t samples = 0;
  for (auto _ : state) {
    async_run(loop.io.get_executor(), o, [&](boost::system::error_code ec, RunResult r) {
      try {
        if (ec || !r.success()) throw std::runtime_error("macmon failed");
        GpuSnapshot s;
        s.probe = "apple";
        const auto line = std::string_view(r.output).substr(0, r.output.find('\n'));
        const auto sample = parse_macmon_line(line);
        fill_apple_snapshot(s, sample, std::nullopt);
        s.time_unix_ns = sample.timestamp_unix_ns.value_or(0);
        s.monotonic_ns = steady_now_ns();
        published.add(*loop.channel.publish(std::move(s)));
      } catch (const std::exception&) {
        ++failures;
        published.add(GpuSnapshot{});  // wake the bench thread; the failure is reported below
      }
    });
    if (!published.wait_for(++samples)) return state.SkipWithError("macmon did not answer");
  }
  const Cpu cpu = Cpu::now() - cpu0;
  if (failures > 0) return state.SkipWithError("macmon failed during the run");
  std::lock_guard lock(published.mu);
  report(state, published.latencies, cpu, samples);
}
BENCHMARK(BM_ChildPerSample)->Iterations(100)->UseRealTime()->Unit(benchmark::kMillisecond);

// The in-process part alone: one recorded v0.8.1 line parsed and mapped to a snapshot.
void BM_ParseAndMapLine(benchmark::State& state) {
  const std::string line =
      R"({"all_power":4.75,"ane_power":0.25,"cpu_active_ratio":0.3125,"cpu_power":2.5,)"
      R"("cpu_scaled_ratio":0.15625,"cpu_usage_pct":0.15625,"ecpu_active_ratio":0.5,"ecpu_cores":)"
      R"([{"active_ratio":0.5,"core_id":0,"die_id":0,"freq_mhz":1800,"scaled_ratio":0.25}],)"
      R"("ecpu_freq_mhz":1800,"ecpu_scaled_ratio":0.25,"ecpu_usage":[1800,0.25],"fans":[{)"
      R"("max_rpm":null,"name":"fan0","rpm":1500}],"gpu_active_ratio":0.625,"gpu_freq_mhz":1100,)"
      R"("gpu_power":2.0,"gpu_ram_power":0.015625,"gpu_scaled_ratio":0.375,"gpu_usage":[1100,0.375],)"
      R"("memory":{"ram_total":25769803776,"ram_usage":17179869184,"swap_total":0,"swap_usage":0},)"
      R"("pcpu_active_ratio":0.125,"pcpu_freq_mhz":2900,"pcpu_scaled_ratio":0.0625,"pcpu_usage":)"
      R"([2900,0.0625],"ram_power":0.5,"sys_power":14.5,"temp":{"cpu_temp_avg":55.5,)"
      R"("gpu_temp_avg":50.25},"timestamp":"2026-03-10T09:15:00.123456789+00:00"})";
  for (auto _ : state) {
    GpuSnapshot s;
    fill_apple_snapshot(s, parse_macmon_line(line), std::nullopt);
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(BM_ParseAndMapLine);

#else

void BM_FakeMacmonMissing(benchmark::State& state) {
  for (auto _ : state) {}
  state.SkipWithError("built without tests/fakes: configure with GPUSTREAM_BUILD_TESTS=ON");
}
BENCHMARK(BM_FakeMacmonMissing);

#endif

}  // namespace

BENCHMARK_MAIN();
