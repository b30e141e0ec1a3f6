// How long a newly started fleet view takes to show every node of the key-value bucket (issue
// 19): FleetView::start() with the bucket read in one pass (a key-value watcher,
// FleetOptions::kv_watch, the default) against the same view reading it key by key
// (kvStore_Keys, then one kvStore_Get per key), in the same process, against a real
// `nats-server -js` on loopback.
//
//   nats-server -js -a 127.0.0.1 -p 4333 -sd /tmp/gpustream-js &
//   export GPUSTREAM_BENCH_NATS=nats://127.0.0.1:4333 GPUSTREAM_BENCH_KV_KEYS=10000
//   build/bench/fleet_kv_bench --benchmark_repetitions=3
//
// main() first fills the bucket `gpustream_bench_nodes` with N node states
// (GPUSTREAM_BENCH_KV_KEYS, default 10000): each the last full message of an 8-GPU simulated node,
// exactly as an agent puts it (`GSK1`, about 1.5 KB deflated), under its own node name. Each
// iteration starts a new view and ends when its bucket is read and decoded (start() itself returns
// at once since issue 27: BM_StartReturns measures it): by then every node is in its table and
// channel (checked). Counters: nodes (read), ms_per_1000_keys.
//
// GPUSTREAM_BENCH_KV_BOMBS=64 (issue 27) fills each key instead with 64 deflate bombs (full
// messages of a few kilobytes, each declaring 8 MiB once inflated): the attack that made the
// first version listen after 63 s with 4 keys. Counters then add decode_cpu_s and refused (by
// the nodes' budgets).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#if defined(GPUSTREAM_HAS_NATS)
#include <nats/nats.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "gpustream/logging.hpp"
#include "gpustream/probes/simulated_probe.hpp"
#include "gpustream/transport/fleet.hpp"
#include "gpustream/transport/fleet_codec.hpp"

namespace {

using namespace gpustream;

constexpr const char* kBucket = "gpustream_bench_nodes";

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string url() { return env_or("GPUSTREAM_BENCH_NATS", "nats://127.0.0.1:4222"); }
int keys() { return std::atoi(env_or("GPUSTREAM_BENCH_KV_KEYS", "10000").c_str()); }
int bombs() { return std::atoi(env_or("GPUSTREAM_BENCH_KV_BOMBS", "0").c_str()); }

/// A node state of `n` deflate bombs of `node` (one encoded, its header rewritten per probe).
std::string bomb_state(const std::string& node, int n) {
  static const auto one = [] {
    GpuSnapshot bomb;
    bomb.probe = "sim";
    DeviceSample d;
    d.id = "sim-0";
    d.name = std::string((std::size_t{8} << 20) - 4096, 'a');
    bomb.devices.push_back(std::move(d));
    return transport::BusEncoder("bomb", "gpustream/bench").encode(bomb);
  }();
  const auto h = transport::parse_bus_header(one);
  const std::string body = one.substr(one.find('\n') + 1);
  std::map<std::string, std::string> fulls;
  for (int i = 0; i < n; ++i) {
    const std::string probe = "p" + std::to_string(i);
    fulls[probe] = "GSB1 f z " + node + " " + probe + " 1 1 1 " + std::to_string(h.body_bytes) +
                   " gpustream/bench\n" + body;
  }
  return transport::encode_node_state(fulls);
}
/// FleetOptions::connect_timeout (GPUSTREAM_BENCH_TIMEOUT_MS, default 60000; the fleet's is 5000).
int timeout_ms() { return std::atoi(env_or("GPUSTREAM_BENCH_TIMEOUT_MS", "60000").c_str()); }

/// One 8-GPU snapshot of the simulated probe (derived metrics as Telemetry publishes them).
GpuSnapshot sample() {
  boost::asio::io_context io;
  boost::asio::thread_pool pool(1);
  SimulatedProbeOptions o;
  o.devices = 8;
  auto probe = make_simulated_probe({io.get_executor(), pool.get_executor()}, o);
  auto guard = boost::asio::make_work_guard(io);
  std::optional<GpuSnapshot> out;
  probe->async_sample([&](boost::system::error_code, GpuSnapshot s) {
    for (auto& d : s.devices) derive_metrics(d);
    s.sequence = 1;
    out = std::move(s);
  });
  while (!out) io.run_one();
  pool.join();
  return *out;
}

/// Fills the bucket with `n` node states; false (printed) when the server cannot be used.
bool fill(int n) {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  kvStore* kv = nullptr;
  natsStatus s = natsConnection_ConnectTo(&nc, url().c_str());
  if (s == NATS_OK) s = natsConnection_JetStream(&js, nc, nullptr);
  if (s == NATS_OK) {
    js_DeleteKeyValue(js, kBucket);  // a bucket left by an earlier run
    kvConfig cfg;
    kvConfig_Init(&cfg);
    cfg.Bucket = kBucket;
    cfg.History = 1;
    cfg.StorageType = js_MemoryStorage;  // as the agents create it
    s = js_CreateKeyValue(&kv, js, &cfg);
  }
  const auto snap = sample();
  std::size_t bytes = 0;
  for (int i = 0; s == NATS_OK && i < n; ++i) {
    char node[32];
    std::snprintf(node, sizeof node, "bench-node-%05d", i);
    transport::BusEncoder enc(node, "gpustream/bench");
    enc.encode(snap);
    const auto state =
        bombs() > 0 ? bomb_state(node, bombs()) : transport::encode_node_state(enc.last_fulls());
    bytes += state.size();
    uint64_t rev = 0;
    s = kvStore_Put(&rev, kv, node, state.data(), static_cast<int>(state.size()));
  }
  if (s != NATS_OK)
    std::fprintf(stderr, "fleet_kv_bench: %s: %s (start nats-server -js; see the file comment)\n",
                 url().c_str(), natsStatus_GetText(s));
  else
    std::fprintf(stderr, "fleet_kv_bench: %d node states in '%s', %.0f bytes each on average\n", n,
                 kBucket, static_cast<double>(bytes) / n);
  if (kv) kvStore_Destroy(kv);
  if (js) jsCtx_Destroy(js);
  if (nc) natsConnection_Destroy(nc);
  return s == NATS_OK;
}

void BM_NewFleetView(benchmark::State& state, bool watch) {
  const int n = keys();
  std::uint64_t nodes = 0, refused = 0;
  double decode_cpu_s = 0;
  for (auto _ : state) {
    boost::asio::io_context io;
    SnapshotChannel channel(io.get_executor());
    transport::FleetOptions o;
    o.url = url();
    o.subject_prefix = "gpustream-bench-idle";  // no live traffic: the bucket alone
    o.kv_bucket = kBucket;
    o.kv_watch = watch;
    o.stale_after = std::chrono::hours(1);
    o.gone_after = std::chrono::hours(2);
    // Long enough for the key-by-key read to finish listing: with the default 5 s, listing
    // 10,000 keys (kvStore_Keys) times out on this machine and the view reads none of them.
    o.connect_timeout = std::chrono::milliseconds(timeout_ms());
    transport::FleetView view(io.get_executor(), channel, o);
    view.start();  // returns at once (issue 27): the bucket is read in the background
    view.wait_for_bucket(std::chrono::milliseconds(timeout_ms()));
    const auto st = view.stats();
    nodes = st.kv_nodes;
    decode_cpu_s = static_cast<double>(st.decode_cpu_ns) / 1e9;
    refused = 0;
    for (const auto r : st.refused) refused += r;
    state.PauseTiming();
    const bool all = nodes == static_cast<std::uint64_t>(n) && view.nodes().size() == nodes;
    view.stop();
    if (!all) {
      state.SkipWithError("the view did not show every node of the bucket");
      break;
    }
    state.ResumeTiming();
  }
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["keys"] = n;
  state.counters["decode_cpu_s"] = decode_cpu_s;
  state.counters["refused"] = static_cast<double>(refused);
}

/// How long start() takes: the time before `gpustream fleet` can listen (the first version read
/// and decoded the whole bucket first).
void BM_StartReturns(benchmark::State& state) {
  for (auto _ : state) {
    boost::asio::io_context io;
    SnapshotChannel channel(io.get_executor());
    transport::FleetOptions o;
    o.url = url();
    o.subject_prefix = "gpustream-bench-idle";
    o.kv_bucket = kBucket;
    o.stale_after = std::chrono::hours(1);
    o.gone_after = std::chrono::hours(2);
    transport::FleetView view(io.get_executor(), channel, o);
    view.start();
    state.PauseTiming();
    view.stop();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_StartReturns)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

/// The bucket's read alone (libnats, no decoding): the transport's share of the time above.
void BM_ReadOnly(benchmark::State& state, bool watch) {
  const int n = keys();
  int got = 0;
  for (auto _ : state) {
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
    kvStore* kv = nullptr;
    natsStatus s = natsConnection_ConnectTo(&nc, url().c_str());
    if (s == NATS_OK) s = natsConnection_JetStream(&js, nc, nullptr);
    if (s == NATS_OK) s = js_KeyValue(&kv, js, kBucket);
    kvWatchOptions wo;
    kvWatchOptions_Init(&wo);
    wo.Timeout = timeout_ms();
    got = 0;
    if (s == NATS_OK && watch) {
      wo.IgnoreDeletes = true;
      kvWatcher* w = nullptr;
      s = kvStore_WatchAll(&w, kv, &wo);
      for (kvEntry* e = nullptr; s == NATS_OK;) {
        s = kvWatcher_Next(&e, w, timeout_ms());
        if (s != NATS_OK || !e) break;
        got += kvEntry_ValueLen(e) > 0;
        kvEntry_Destroy(e);
      }
      if (w) kvWatcher_Destroy(w);
    } else if (s == NATS_OK) {
      kvKeysList list{};
      s = kvStore_Keys(&list, kv, &wo);
      for (int i = 0; s == NATS_OK && i < list.Count; ++i) {
        kvEntry* e = nullptr;
        if (kvStore_Get(&e, kv, list.Keys[i]) != NATS_OK) continue;
        got += kvEntry_ValueLen(e) > 0;
        kvEntry_Destroy(e);
      }
      if (s == NATS_OK) kvKeysList_Destroy(&list);
    }
    if (kv) kvStore_Destroy(kv);
    if (js) jsCtx_Destroy(js);
    if (nc) natsConnection_Destroy(nc);
    if (got != n) {
      state.SkipWithError(
          ("read " + std::to_string(got) + " values: " + natsStatus_GetText(s)).c_str());
      break;
    }
  }
  state.counters["keys"] = n;
}

BENCHMARK_CAPTURE(BM_ReadOnly, key_by_key, false)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_ReadOnly, watcher, true)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_NewFleetView, key_by_key, false)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_NewFleetView, watcher, true)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
  gpustream::set_log_level(gpustream::LogLevel::warn);
  benchmark::Initialize(&argc, argv);
  if (!fill(keys())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

#else
int main() {
  std::fprintf(stderr, "fleet_kv_bench: this build has no NATS support (install libnats-dev)\n");
  return 0;
}
#endif
