// The fleet view's cost per bus message at a full node table (issue 27): 100,000 nodes that stay
// up (--max-nodes 100000), then a message of a node the table knows (decoded, heard) against one
// of a new node (refused: the table is full and no node is gone). The first version scanned the
// whole table for a gone node at each refusal (15.5 ms a refused message at 100,000 nodes against
// 0.19 ms for a known one, measured against the real binary); the table is now indexed.
//
//   build-dir/bench/fleet_view_bench --benchmark_min_time=1
//
// Each message is handed to FleetView::on_message (no NATS server: the delivery path, then the
// worker's path on the same thread), a one-GPU JSON snapshot (the same bytes for both cases).
// Counters: nodes (the table's size), publishers (budget entries: the refused nodes add none).
#include <benchmark/benchmark.h>

#include <cstdio>

#if defined(GPUSTREAM_HAS_NATS)

#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/fleet.hpp"

namespace {

using namespace gpustream;

constexpr std::size_t kNodes = 100000;

std::string node_name(const char* prefix, std::size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s%06zu", prefix, i);
  return buf;
}

std::string message_of(const std::string& node) {
  GpuSnapshot s;
  s.probe = "sim";
  s.node = node;
  s.time_unix_ns = 1'764'000'000'000'000'000;
  DeviceSample d;
  d.id = "sim-0";
  d.name = "Simulated GPU";
  d.vendor = Vendor::simulated;
  d.metrics.set(Metric::utilization_percent, 50, Source::simulated);
  d.metrics.set(Metric::memory_total_bytes, 80.0 * (1ULL << 30), Source::simulated);
  d.metrics.set(Metric::memory_used_bytes, 10.0 * (1ULL << 30), Source::simulated);
  s.devices.push_back(std::move(d));
  return to_json_string(s);
}

/// A view whose table holds kNodes up nodes (built once: ≈ 100,000 decodes).
struct FullView {
  boost::asio::io_context io;
  SnapshotChannel channel{io.get_executor()};
  transport::FleetView view;
  static transport::FleetOptions options() {
    transport::FleetOptions o;
    o.kv_bucket.clear();
    o.max_nodes = kNodes;
    o.stale_after = std::chrono::hours(1);
    o.gone_after = std::chrono::hours(2);
    // The table's cost, not the budget's: no node is refused by its rate here.
    o.budget.messages_per_second = 1e9;
    o.budget.bytes_per_second = std::size_t{1} << 40;
    o.budget.cpu_per_second = std::chrono::milliseconds(1000);
    o.budget.burst = std::chrono::hours(1);
    return o;
  }
  FullView() : view(io.get_executor(), channel, options()) {
    for (std::size_t i = 0; i < kNodes; ++i) {
      const auto node = node_name("n", i);
      view.on_message(message_of(node), "gpustream." + node + ".sim");
    }
  }
  static FullView& get() {
    static FullView v;
    return v;
  }
};

void counters(benchmark::State& state, transport::FleetView& view) {
  const auto st = view.stats();
  state.counters["nodes"] = static_cast<double>(view.nodes().size());
  state.counters["publishers"] = static_cast<double>(st.publishers);
  state.counters["nodes_refused"] = static_cast<double>(st.nodes_refused);
}

void BM_FleetKnownNode(benchmark::State& state) {
  auto& v = FullView::get();
  const std::string node = node_name("n", 4242);
  const std::string msg = message_of(node);
  const std::string subject = "gpustream." + node + ".sim";
  for (auto _ : state) v.view.on_message(msg, subject);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  counters(state, v.view);
}
BENCHMARK(BM_FleetKnownNode)->Unit(benchmark::kMicrosecond);

void BM_FleetRefusedNode(benchmark::State& state) {
  auto& v = FullView::get();
  // 1,000 distinct new nodes in turn (the same payload bytes as the known node's).
  std::vector<std::string> subjects;
  for (std::size_t i = 0; i < 1000; ++i)
    subjects.push_back("gpustream." + node_name("x", i) + ".sim");
  const std::string msg = message_of(node_name("x", 0));
  std::size_t i = 0;
  for (auto _ : state) v.view.on_message(msg, subjects[i++ % subjects.size()]);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  counters(state, v.view);
}
BENCHMARK(BM_FleetRefusedNode)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();

#else

int main() {
  std::fprintf(stderr, "fleet_view_bench: built without libnats (no FleetView)\n");
  return 0;
}

#endif
