// Fan-out cost: one snapshot of 8 GPUs and 100 processes, published to N in-process
// subscribers through SnapshotChannel, against a baseline that hands every subscriber its own
// deep copy (what a channel of GpuSnapshot values would do).
//
// Each iteration times publish + delivery only (manual time): the snapshots the producer hands
// over are built outside the timed region, for both. A channel iteration publishes
// kPublishesPerIteration snapshots (each followed by a poll of the io_context), so that reading
// the clocks costs little next to what is timed. Counters:
//   ns_per_delivery     timed wall nanoseconds / (publishes * subscribers)
//   cpu_ns_per_delivery the timed region's CPU time of the benchmark's thread (which publishes
//                       and runs every delivery) / (publishes * subscribers): what a loaded
//                       machine's preemption does not inflate
//   allocs_per_publish  heap allocations inside the timed region / publishes: calls of the
//                       global operator new, and of aligned_alloc, which Asio's handler
//                       allocator calls directly (both replaced below to count)
//
// Run: build-*/bench/fanout_bench   (or with --benchmark_filter=Channel)
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <vector>

#include <malloc.h>
#include <time.h>

#include <benchmark/benchmark.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include <boost/asio/thread_pool.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/probes/simulated_probe.hpp"

// --- counting global operator new ------------------------------------------------------------
// GCC 12 inlines these replacements and then mistakes free() of a pointer from `new` for a
// mismatch; every `new` here is malloc/aligned_alloc, so free() is the right release.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::uint64_t> g_allocations{0};
std::atomic<std::uint64_t> g_allocated_bytes{0};  // bytes asked for while counting

void count_allocation(std::size_t n = 0) {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    g_allocated_bytes.fetch_add(n, std::memory_order_relaxed);
  }
}

void* counted_alloc(std::size_t n, std::size_t align = 0) {
  count_allocation(n);
  if (n == 0) n = 1;
  return align > alignof(std::max_align_t) ? ::memalign(align, n) : std::malloc(n);
}
}  // namespace

// Asio's recycling allocator (handler memory) calls std::aligned_alloc, not operator new.
extern "C" void* aligned_alloc(std::size_t align, std::size_t n) noexcept {
  count_allocation(n);
  return ::memalign(align, n);
}

void* operator new(std::size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
  if (void* p = counted_alloc(n, static_cast<std::size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) {
  if (void* p = counted_alloc(n, static_cast<std::size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace gpustream {
namespace {

using Clock = std::chrono::steady_clock;

/// Snapshots published per timed region of a channel benchmark: few enough that they are still
/// in the L2 cache when published, as a probe's fresh snapshot is (4 x ~70 KB), and enough that
/// the two reads of the thread's CPU clock (a system call, ~0.5 us each here) add only a few ns
/// per delivery at 64 subscribers (they are included, not subtracted).
constexpr std::size_t kPublishesPerIteration = 4;

// --- the snapshot --------------------------------------------------------------------------

GpuSnapshot make_big_snapshot() {
  constexpr int kGpus = 8;
  constexpr int kProcesses = 100;
  GpuSnapshot s;
  s.probe = "nvidia";
  s.time_unix_ns = wall_now_ns();
  s.monotonic_ns = steady_now_ns();
  s.sample_duration_ns = 2'500'000;
  for (int g = 0; g < kGpus; ++g) {
    DeviceSample d;
    d.id = "GPU-3f2a9c1e-77b4-4c1d-9e2a-5b8c0d1e2f" + std::to_string(10 + g);
    d.vendor = Vendor::nvidia;
    d.index = g;
    d.name = "NVIDIA H100 80GB HBM3";
    d.pci_bus_id = "00000000:" + std::to_string(10 + g) + ":00.0";
    for (std::size_t m = 0; m < kMetricCount; ++m)
      d.metrics.set(static_cast<Metric>(m), 100.0 + static_cast<double>(m), Source::nvml);
    d.metrics.set_absent(Metric::fan_rpm, Absence::unsupported, Source::nvml);
    d.energy_kind = EnergyKind::counter;
    d.power_state = PowerState::active;
    d.throttle_reasons = {"sw_power_cap", "hw_thermal_slowdown"};
    for (const char* e : {"graphics", "compute", "copy", "video_decode", "video_encode", "jpeg"})
      d.engines.push_back(EngineSample{e, Reading::of(12.5, Source::nvml)});
    d.attributes = {{"uuid", d.id}, {"driver_version", "550.54.15"}, {"cuda_version", "12.4"}};
    s.devices.push_back(std::move(d));
  }
  HostSample host;
  host.memory_total_bytes = 1ull << 40;
  host.memory_available_bytes = 1ull << 39;
  for (int p = 0; p < kProcesses; ++p) {
    ProcessSample ps;
    ps.pid = 10'000 + p;
    ps.name = p % 2 ? "python3 train_llm.py --rank " + std::to_string(p) : "pt_main_thread";
    ps.gpu_memory_bytes = 4ull << 30;
    ps.gpu_utilization_percent = 87.5;
    ps.host_rss_bytes = 12ull << 30;
    ps.container = ProcessContainer{
        "containerd", "4f1c2b9d8e7a6f5c4b3a29180716253443526170819a0b1c2d3e4f5a6b7c8d9e", "", ""};
    ps.engines.push_back(EngineSample{"compute", Reading::of(80, Source::nvml)});
    s.devices[static_cast<std::size_t>(p % kGpus)].processes.push_back(ps);
    host.processes.push_back(HostProcess{ps.pid, ps.name, ps.host_rss_bytes});
  }
  s.host = std::move(host);
  return s;
}

const GpuSnapshot& big_snapshot() {
  static const GpuSnapshot s = make_big_snapshot();
  return s;
}

/// The real simulated probe's 8-GPU snapshot (derived metrics filled, as Telemetry publishes
/// it): what a fleet view holds per node (bench/fleet_load_generator.cpp sends these).
const GpuSnapshot& simulated_snapshot() {
  static const GpuSnapshot s = [] {
    boost::asio::io_context io;
    boost::asio::thread_pool pool(1);
    SimulatedProbeOptions o;
    o.devices = 8;
    auto probe = make_simulated_probe({io.get_executor(), pool.get_executor()}, o);
    auto guard = boost::asio::make_work_guard(io);  // the sample completes through the pool
    std::optional<GpuSnapshot> out;
    probe->async_sample([&](boost::system::error_code, GpuSnapshot snap) {
      for (auto& d : snap.devices) derive_metrics(d);
      out = std::move(snap);
    });
    while (!out) io.run_one();
    pool.join();
    return std::move(*out);
  }();
  return s;
}

struct Timed {
  double ns = 0;
  double cpu_ns = 0;
  std::uint64_t allocations = 0;
};

/// CPU time of the calling thread, in nanoseconds.
double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

/// Runs `body` with the clocks and the allocation counter on.
template <typename F>
void timed(benchmark::State& state, Timed& total, F&& body) {
  const auto allocs_before = g_allocations.load();
  const double cpu0 = thread_cpu_ns();
  const auto t0 = Clock::now();
  g_counting = true;
  body();
  g_counting = false;
  const auto t1 = Clock::now();
  const double cpu1 = thread_cpu_ns();
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
  state.SetIterationTime(ns * 1e-9);
  total.ns += ns;
  total.cpu_ns += cpu1 - cpu0;
  total.allocations += g_allocations.load() - allocs_before;
}

/// `per_iteration` publishes in each iteration.
void report(benchmark::State& state, const Timed& total, std::size_t subscribers,
            std::uint64_t delivered, std::size_t per_iteration = 1) {
  const auto publishes =
      static_cast<double>(state.iterations()) * static_cast<double>(per_iteration);
  const double deliveries = publishes * static_cast<double>(subscribers);
  state.counters["subscribers"] = static_cast<double>(subscribers);
  state.counters["ns_per_delivery"] = total.ns / deliveries;
  state.counters["cpu_ns_per_delivery"] = total.cpu_ns / deliveries;
  state.counters["allocs_per_publish"] = static_cast<double>(total.allocations) / publishes;
  if (delivered != static_cast<std::uint64_t>(deliveries))
    state.SkipWithError("not every subscriber received every snapshot");
}

// --- SnapshotChannel -----------------------------------------------------------------------

/// `freed_outside`: the benchmark keeps a reference to each published snapshot until the
/// channel (history, latest cache, queues) has let go of it, and drops it outside the timed
/// region, so freeing the snapshot (~700 heap blocks for this one) is not timed — as the copy
/// baseline does not time freeing the producer's snapshot. Without it, each publish also pays
/// for freeing the snapshot its history evicts.
void run_channel(benchmark::State& state, bool strand, bool freed_outside = false) {
  constexpr std::size_t kHistory = 16;
  constexpr std::size_t kHeld = 64;  // > kHistory + kPublishesPerIteration
  const auto n = static_cast<std::size_t>(state.range(0));
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);    // poll() never stops the context
  SnapshotChannel ch(io.get_executor(), kHistory);  // small history: eviction from the start
  std::uint64_t delivered = 0;
  std::vector<Subscription> subs;
  for (std::size_t i = 0; i < n; ++i) {
    SubscribeOptions o;
    if (strand) o.executor = boost::asio::make_strand(io);
    subs.push_back(ch.subscribe(o, [&delivered](const SnapshotPtr& s) {
      benchmark::DoNotOptimize(s->devices.data());
      ++delivered;
    }));
  }
  for (int i = 0; i < 32; ++i) {  // warm-up: history, latest cache, per-thread lists
    ch.publish(big_snapshot());
    io.poll();
  }
  delivered = 0;
  Timed total;
  std::vector<GpuSnapshot> batch;
  std::vector<SnapshotPtr> held(kHeld);  // freed_outside: a ring of the published snapshots
  std::size_t next_held = 0;
  for (auto _ : state) {
    // The producer's snapshots, handed over by move.
    batch.assign(kPublishesPerIteration, big_snapshot());
    // Released here, untimed: published kHeld - kPublishesPerIteration publishes ago, so the
    // channel no longer holds them and this frees them.
    for (std::size_t k = 0; k < kPublishesPerIteration; ++k) held[(next_held + k) % kHeld].reset();
    timed(state, total, [&] {
      for (auto& s : batch) {
        if (freed_outside)
          held[next_held++ % kHeld] = ch.publish(std::move(s));
        else
          ch.publish(std::move(s));
        io.poll();
      }
    });
  }
  report(state, total, n, delivered, kPublishesPerIteration);
}

void BM_ChannelFanout(benchmark::State& state) { run_channel(state, false); }
void BM_ChannelFanoutFreedOutside(benchmark::State& state) { run_channel(state, false, true); }
void BM_ChannelFanoutStrandExecutors(benchmark::State& state) { run_channel(state, true); }

// --- copy-per-subscriber baseline ----------------------------------------------------------

/// The same fan-out with values: each subscriber gets its own deep copy in its inbox and then
/// consumes it. No executor, no locks: the cheapest possible copying channel.
void BM_CopyPerSubscriberBaseline(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  struct CopySubscriber {
    std::vector<GpuSnapshot> inbox;
    std::function<void(const GpuSnapshot&)> callback;
  };
  std::uint64_t delivered = 0;
  std::vector<CopySubscriber> subs(n);
  for (auto& sub : subs) {
    sub.inbox.reserve(64);
    sub.callback = [&delivered](const GpuSnapshot& s) {
      benchmark::DoNotOptimize(s.devices.data());
      ++delivered;
    };
  }
  std::uint64_t sequence = 0;
  Timed total;
  for (auto _ : state) {
    GpuSnapshot s = big_snapshot();
    timed(state, total, [&] {
      s.sequence = ++sequence;
      for (auto& sub : subs) sub.inbox.push_back(s);
      for (auto& sub : subs) {
        for (const auto& x : sub.inbox) sub.callback(x);
        sub.inbox.clear();
      }
    });
  }
  report(state, total, n, delivered);
}

// The floor of BM_ChannelFanout: freeing one snapshot like the one each publish evicts from the
// channel's history (its ~390 heap blocks), whatever the number of subscribers. The argument is
// how many copies were made after it (16: as the channel benchmark's history), so that it is
// as far out of the cache as the evicted one. Timed: the destructions alone, kPublishesPerIteration
// per timed region (as the channel benchmark, so that the clock reads cost as little).
void BM_SnapshotFree(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0)) + kPublishesPerIteration;
  std::vector<GpuSnapshot> ring(n, big_snapshot());
  std::size_t oldest = 0;
  Timed total;
  for (auto _ : state) {
    timed(state, total, [&] {
      for (std::size_t k = 0; k < kPublishesPerIteration; ++k) ring[(oldest + k) % n] = {};
    });
    for (std::size_t k = 0; k < kPublishesPerIteration; ++k)  // untimed: the newest copies
      ring[(oldest + k) % n] = big_snapshot();
    oldest = (oldest + kPublishesPerIteration) % n;
  }
  const double frees = static_cast<double>(state.iterations() * kPublishesPerIteration);
  state.counters["cpu_ns_per_free"] = total.cpu_ns / frees;
  state.counters["ns_per_free"] = total.ns / frees;
  const auto before = g_allocations.load();
  g_counting = true;
  {
    const GpuSnapshot copy = big_snapshot();  // as many blocks as a free releases
    benchmark::DoNotOptimize(copy.devices.data());
  }
  g_counting = false;
  state.counters["blocks_per_free"] = static_cast<double>(g_allocations.load() - before);
}

// What publish adds for the channel's byte bounds: approx_bytes of the same snapshot, once per
// publish (compare with BM_ChannelFanout/1).
void BM_ApproxBytes(benchmark::State& state) {
  const GpuSnapshot& s = big_snapshot();
  for (auto _ : state) benchmark::DoNotOptimize(approx_bytes(s));
  state.counters["bytes"] = static_cast<double>(approx_bytes(s));
}

// The snapshot's layout: one deep copy of fanout's snapshot (0) or of the simulated probe's
// 8-GPU one (1), timed, with the heap blocks and bytes the copy allocates (what freeing it
// releases), its approx_bytes and the model's sizeofs as counters.
void BM_SnapshotCopy(benchmark::State& state) {
  const GpuSnapshot& s = state.range(0) == 0 ? big_snapshot() : simulated_snapshot();
  for (auto _ : state) {
    GpuSnapshot copy = s;
    benchmark::DoNotOptimize(copy.devices.data());
  }
  const auto blocks = g_allocations.load();
  const auto bytes = g_allocated_bytes.load();
  g_counting = true;
  {
    const GpuSnapshot copy = s;
    benchmark::DoNotOptimize(copy.devices.data());
  }
  g_counting = false;
  std::size_t processes = 0;
  for (const auto& d : s.devices) processes += d.processes.size();
  state.counters["blocks_per_copy"] = static_cast<double>(g_allocations.load() - blocks);
  state.counters["bytes_per_copy"] = static_cast<double>(g_allocated_bytes.load() - bytes);
  state.counters["approx_bytes"] = static_cast<double>(approx_bytes(s));
  state.counters["processes"] = static_cast<double>(processes);
  state.counters["sizeof_Reading"] = sizeof(Reading);
  state.counters["sizeof_MetricSet"] = sizeof(MetricSet);
  state.counters["sizeof_ProcessSample"] = sizeof(ProcessSample);
  state.counters["sizeof_DeviceSample"] = sizeof(DeviceSample);
  state.counters["sizeof_GpuSnapshot"] = sizeof(GpuSnapshot);
}

BENCHMARK(BM_ApproxBytes);
BENCHMARK(BM_SnapshotCopy)->Arg(0)->Arg(1);
BENCHMARK(BM_SnapshotFree)->Arg(0)->Arg(16)->UseManualTime();
BENCHMARK(BM_ChannelFanout)->Arg(1)->Arg(64)->Arg(1024)->UseManualTime();
BENCHMARK(BM_ChannelFanoutFreedOutside)->Arg(1)->Arg(64)->Arg(1024)->UseManualTime();
BENCHMARK(BM_CopyPerSubscriberBaseline)->Arg(1)->Arg(64)->Arg(1024)->UseManualTime();
BENCHMARK(BM_ChannelFanoutStrandExecutors)->Arg(64)->UseManualTime();

}  // namespace
}  // namespace gpustream

BENCHMARK_MAIN();
