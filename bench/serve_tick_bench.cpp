// What `gpustream serve --simulate 8 --interval 0.1` costs per tick with no client connected:
// process CPU per published snapshot and the share of a core, against baselines in the same run.
//
//   BM_SimulatedSample        the floor: SimulatedProbe(8 GPUs)::sample_now() on the calling
//                             thread, no Telemetry (CPU per call).
//   BM_ServeTick/0            Telemetry over the simulated probe alone (8 GPUs) at 10 Hz, no
//                             server: the scheduler, the work pool, derive_metrics, the channel.
//   BM_ServeTick/1            Telemetry with the registry's probe_factory() and Config as
//                             `serve --simulate 8 --interval 0.1` makes them (every default
//                             probe: the absent vendors detect and back off, the host probe
//                             samples), no server.
//   BM_ServeTick/2            /1 plus a transport::Server listening on loopback (HTTP, port 0)
//                             on its own io thread, as serve runs it: the serve tick.
// The BM_ServeTick cases run in real time: one iteration is one 100 ms period (the bench thread
// sleeps); counters, per published snapshot of the simulated probe (`ticks`):
//   process_cpu_us_per_tick   CPU of the whole process (every thread) / ticks
//   core_percent              process CPU / wall time, in % of one core
//
// Run: build/bench/serve_tick_bench --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <time.h>

#include <chrono>
#include <memory>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "gpustream/probes/registry.hpp"
#include "gpustream/probes/simulated_probe.hpp"
#include "gpustream/telemetry.hpp"
#include "gpustream/transport/server.hpp"

namespace {

using namespace gpustream;

double serve_tick_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

constexpr std::chrono::milliseconds kPeriod{100};
constexpr int kGpus = 8;

void BM_SimulatedSample(benchmark::State& state) {
  boost::asio::io_context io;
  SimulatedProbeOptions o;
  o.devices = kGpus;
  auto probe = make_simulated_probe(ProbeExecutors{io.get_executor(), io.get_executor()}, o);
  for (auto _ : state) benchmark::DoNotOptimize(probe->sample_now());
}

/// The Config `gpustream serve --simulate 8 --interval 0.1` builds (the CLI's defaults).
Config serve_config() {
  Config c;
  c.simulate = kGpus;
  c.interval = kPeriod;
  return c;
}

void BM_ServeTick(benchmark::State& state) {
  const auto mode = state.range(0);
  Config c = serve_config();
  ProbeFactory factory = probe_factory();
  if (mode == 0) {
    factory = [](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
      SimulatedProbeOptions o;
      o.devices = kGpus;
      return std::vector<ProbePtr>{make_simulated_probe(ex, o)};
    };
  }
  Telemetry t(c, factory);
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::unique_ptr<transport::Server> server;
  if (mode == 2) {
    transport::ServerOptions so;
    so.http = boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0);
    server = std::make_unique<transport::Server>(io.get_executor(), t.channel(), so,
                                                 [&t] { return t.stats(); });
    server->start();
  }
  std::thread io_thread([&io] { io.run(); });
  t.start();
  t.wait_for_first_samples(std::chrono::seconds{10});
  // Warm-up: the absent probes' first detections, the first allocations of every buffer.
  std::this_thread::sleep_for(std::chrono::seconds{1});
  const auto published0 = t.channel().last_sequence();
  const double cpu0 = serve_tick_cpu_us();
  const auto wall0 = std::chrono::steady_clock::now();
  for (auto _ : state) std::this_thread::sleep_for(kPeriod);
  const double cpu = serve_tick_cpu_us() - cpu0;
  const double wall_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - wall0).count();
  // Ticks: the simulated probe's snapshots published meanwhile (the other probes' too: all
  // published snapshots, for the record).
  std::uint64_t ticks = 0;
  const auto published = t.channel().last_sequence() - published0;
  for (const auto& s : t.channel().history_since(published0))
    if (s->probe == kSimulatedProbe) ++ticks;
  if (ticks == 0) {
    state.SkipWithError("no tick was published");
  } else {
    state.counters["ticks"] = static_cast<double>(ticks);
    state.counters["published"] = static_cast<double>(published);
    state.counters["process_cpu_us_per_tick"] = cpu / static_cast<double>(ticks);
    state.counters["core_percent"] = 100.0 * cpu / wall_us;
  }
  if (server) {
    server->stop([&io] { io.stop(); });
  } else {
    guard.reset();
    io.stop();
  }
  io_thread.join();
  t.stop();
}

BENCHMARK(BM_SimulatedSample)->Unit(benchmark::kMicrosecond);
// 50 periods of 100 ms: 5 s per case.
BENCHMARK(BM_ServeTick)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(50)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
