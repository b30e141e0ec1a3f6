// FleetView without a NATS server: bus messages handed to on_message, the staleness sweep driven
// by the test's clock, the view's routes and /metrics families on a real Server. A gone node
// leaves the channel's latest cache, so /api/v1/snapshot no longer lists it.
#if defined(GPUSTREAM_HAS_NATS)

#include <set>
#include <string>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/fleet.hpp"
#include "gpustream/transport/fleet_codec.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

namespace json = boost::json;

std::set<std::string> snapshot_nodes(Fixture& f) {
  const auto r = http_request(f, "/api/v1/snapshot");
  EXPECT_EQ(r.status, 200);
  std::set<std::string> out;
  const json::value doc = json::parse(r.body);
  for (const auto& s : doc.at("snapshots").as_array())
    out.insert(std::string(s.at("node").as_string()));
  return out;
}

std::string state_of(Fixture& f, const std::string& node) {
  const auto r = http_request(f, "/api/v1/nodes");
  const json::value doc = json::parse(r.body);
  for (const auto& n : doc.at("nodes").as_array())
    if (n.at("node").as_string() == node) return std::string(n.at("state").as_string());
  return "missing";
}

TEST(FleetView, AGoneNodeLeavesTheLatestCacheAndTheSnapshotApi) {
  Fixture f;
  FleetOptions o;
  o.kv_bucket.clear();
  o.stale_after = std::chrono::seconds(5);
  o.gone_after = std::chrono::seconds(30);
  FleetView view(f.io.get_executor(), f.channel, o);
  ServerOptions so;
  so.extra_routes = view.routes();
  so.extra_metrics = view.metrics();
  f.start(so);

  BusEncoder a("node-a", "gpustream/0.1.0", {.full_every = 1});
  BusEncoder b("node-b", "gpustream/0.1.0", {.full_every = 1});
  view.on_message(a.encode(make_snapshot("sim", 2)), "gpustream.node-a.sim");
  view.on_message(b.encode(make_snapshot("sim", 2)), "gpustream.node-b.sim");
  EXPECT_EQ(snapshot_nodes(f), (std::set<std::string>{"node-a", "node-b"}));
  const auto metrics = http_request(f, "/metrics").body;
  EXPECT_NE(metrics.find("\ngpustream_fleet_bus_streams 2\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("# TYPE gpustream_fleet_bus_state_bytes gauge"), std::string::npos);
  EXPECT_NE(metrics.find("\ngpustream_fleet_latest_entries 2\n"), std::string::npos);

  // Both go quiet: stale after 5 s (values withheld), gone after 30 s; then node-b comes back.
  const auto later = NodeTable::Clock::now() + std::chrono::seconds(31);
  view.sweep(NodeTable::Clock::now() + std::chrono::seconds(6));
  EXPECT_EQ(state_of(f, "node-a"), "stale");
  EXPECT_EQ(snapshot_nodes(f), (std::set<std::string>{"node-a", "node-b"}));  // withheld values
  const auto seq_before_gone = f.channel.last_sequence();
  view.sweep(later);
  EXPECT_EQ(state_of(f, "node-a"), "gone");
  EXPECT_EQ(state_of(f, "node-b"), "gone");
  EXPECT_TRUE(snapshot_nodes(f).empty());
  EXPECT_EQ(f.channel.latest_size(), 0u);
  // Subscribers still saw the gone markers: an empty snapshot with the node_gone error each.
  const auto h = f.channel.history_since(seq_before_gone);
  ASSERT_EQ(h.size(), 2u);
  for (const auto& s : h) {
    EXPECT_TRUE(s->devices.empty());
    ASSERT_EQ(s->errors.size(), 1u);
    EXPECT_EQ(s->errors[0].code, "node_gone");
  }
  // node-b comes back: it is listed again, node-a is not.
  view.on_message(b.encode(make_snapshot("sim", 2)), "gpustream.node-b.sim");
  EXPECT_EQ(snapshot_nodes(f), (std::set<std::string>{"node-b"}));
  EXPECT_EQ(state_of(f, "node-b"), "up");
  const auto m2 = http_request(f, "/metrics").body;
  EXPECT_NE(m2.find("\ngpustream_fleet_bus_streams 1\n"), std::string::npos) << m2;
  EXPECT_NE(m2.find("\ngpustream_fleet_latest_entries 1\n"), std::string::npos);
  EXPECT_EQ(view.stats().bus_streams, 1u);
  view.stop();
}

// The worst input for the fleet's memory: one node that speaks under a thousand probe names
// (JSON messages, which no bus decoder bounds), each snapshot ~100 KB. The view keeps no copy of
// its own: what it holds is the channel's latest cache, bounded in entries and bytes, and the
// stale copies and gone markers it publishes are made only from what that cache still holds.
TEST(FleetView, ManyProbesOfOneNodeStayWithinTheLatestCacheBounds) {
  boost::asio::io_context io;
  constexpr std::size_t kEntries = 40;
  constexpr std::size_t kBytes = std::size_t{2} << 20;
  SnapshotChannel channel(io.get_executor(), 16, std::size_t{64} << 20, kEntries, kBytes);
  FleetOptions o;
  o.kv_bucket.clear();
  o.stale_after = std::chrono::seconds(5);
  o.gone_after = std::chrono::seconds(30);
  FleetView view(io.get_executor(), channel, o);
  for (int i = 0; i < 1000; ++i) {
    auto snap = make_snapshot("p" + std::to_string(i), 8, 100);
    snap.node = "node-a";
    view.on_message(to_json_string(snap), "gpustream.node-a.p" + std::to_string(i));
    ASSERT_LE(channel.latest_size(), kEntries);
    ASSERT_LE(channel.latest_bytes(), kBytes);
  }
  EXPECT_EQ(view.stats().snapshots, 1000u);
  EXPECT_GT(channel.latest_evicted(), 900u);
  const auto held = channel.latest_size();
  const auto after = NodeTable::Clock::now();  // every message was heard before this
  // Stale, then gone: one copy/marker per entry the cache still held, never more.
  const auto seq = channel.last_sequence();
  view.sweep(after + std::chrono::seconds(6));
  EXPECT_EQ(channel.last_sequence() - seq, held);
  const auto seq_stale = channel.last_sequence();
  view.sweep(after + std::chrono::seconds(31));
  EXPECT_EQ(channel.last_sequence() - seq_stale, held);
  EXPECT_EQ(channel.latest_size(), 0u);
  view.stop();
}

}  // namespace
}  // namespace gpustream::transport::test

#endif  // GPUSTREAM_HAS_NATS
