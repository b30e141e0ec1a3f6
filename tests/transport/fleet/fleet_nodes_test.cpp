// The fleet's node table (staleness with driven time), stale/gone markers and the planner.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/fleet.hpp"

namespace gpustream::transport::test {
namespace {

using namespace std::chrono_literals;
using Clock = NodeTable::Clock;

SnapshotPtr node_snapshot(const std::string& node, std::vector<double> free_gib,
                          std::int64_t time_ns = 1'000'000'000) {
  GpuSnapshot s;
  s.probe = "simulated";
  s.node = node;
  s.time_unix_ns = time_ns;
  int i = 0;
  for (const double f : free_gib) {
    DeviceSample d;
    d.id = "sim-" + std::to_string(i);  // the same ids on every node
    d.index = i++;
    d.name = "Simulated GPU";
    d.vendor = Vendor::simulated;
    d.metrics.set(Metric::memory_total_bytes, 80.0 * (1ULL << 30), Source::simulated);
    d.metrics.set(Metric::memory_used_bytes, (80.0 - f) * (1ULL << 30), Source::simulated);
    d.metrics.set(Metric::utilization_percent, 50, Source::simulated);
    derive_metrics(d);
    s.devices.push_back(std::move(d));
  }
  return std::make_shared<const GpuSnapshot>(std::move(s));
}

TEST(NodeTable, UpThenStaleThenGoneThenBackUp) {
  NodeTable t(5s, 30s);
  const auto t0 = Clock::time_point{} + 1000s;
  std::optional<NodeState> before;
  ASSERT_TRUE(t.heard("a", "gpustream/0.1.0", 1, t0, 10, &before));
  EXPECT_FALSE(before);
  ASSERT_TRUE(t.heard("b", "gpustream/0.1.0", 1, t0, 10));
  EXPECT_TRUE(t.advance(t0 + 4s).empty());
  ASSERT_TRUE(t.heard("b", "gpustream/0.1.0", 2, t0 + 4s, 14));
  auto c = t.advance(t0 + 5s);  // a: 5 s quiet; b: 1 s
  ASSERT_EQ(c.size(), 1U);
  EXPECT_EQ(c[0], std::make_pair(std::string("a"), NodeState::stale));
  EXPECT_TRUE(t.advance(t0 + 6s).empty());  // a transition is reported once
  c = t.advance(t0 + 30s);
  ASSERT_EQ(c.size(), 2U);
  EXPECT_EQ(c[0], std::make_pair(std::string("a"), NodeState::gone));
  EXPECT_EQ(c[1], std::make_pair(std::string("b"), NodeState::stale));
  EXPECT_EQ(t.state("a"), NodeState::gone);
  ASSERT_TRUE(t.heard("a", "gpustream/0.2.0", 3, t0 + 31s, 41, &before));
  EXPECT_EQ(before, NodeState::gone);
  EXPECT_EQ(t.state("a"), NodeState::up);
  const auto nodes = t.nodes();
  ASSERT_EQ(nodes.size(), 2U);
  EXPECT_EQ(nodes[0].agent, "gpustream/0.2.0");
  EXPECT_EQ(nodes[0].messages, 2U);
  EXPECT_EQ(nodes[0].last_heard_unix_ns, 41);
  // A state read from the bucket that was written long ago is stale at once.
  ASSERT_TRUE(t.heard("old", "x", 1, t0 + 31s - 20s, 11));
  c = t.advance(t0 + 31s);
  ASSERT_EQ(c.size(), 1U);
  EXPECT_EQ(c[0], std::make_pair(std::string("old"), NodeState::stale));
}

TEST(NodeTable, IsBoundedAndMakesRoomFromGoneNodesOnly) {
  NodeTable t(1s, 2s, 2);
  const auto t0 = Clock::time_point{} + 100s;
  ASSERT_TRUE(t.heard("a", "v", 1, t0, 1));
  ASSERT_TRUE(t.heard("b", "v", 1, t0 + 1s, 1));
  EXPECT_FALSE(t.heard("c", "v", 1, t0 + 1s, 1));  // full, nobody gone
  (void)t.advance(t0 + 2s);                        // a gone, b stale
  EXPECT_TRUE(t.heard("c", "v", 1, t0 + 2s, 1));   // replaces a
  EXPECT_FALSE(t.state("a"));
  EXPECT_EQ(t.size(), 2U);
}

// The worst input for admission: a full table of 100,000 nodes that stay up, and 100,000 new
// nodes knocking. Each refusal is a lookup and an index probe (O(log n)); the first version
// scanned every node for the gone one heard longest ago (15.5 ms a refusal at 100,000 nodes:
// 26 minutes for this loop). A refused node leaves nothing behind.
TEST(NodeTable, AFullTableRefusesNewNodesWithoutAScanAndKeepsNothingOfThem) {
  constexpr std::size_t kNodes = 100000;
  NodeTable t(5s, 30s, kNodes);
  const auto t0 = Clock::time_point{} + 1000s;
  for (std::size_t i = 0; i < kNodes; ++i)
    ASSERT_TRUE(t.heard("n" + std::to_string(i), "v", 1, t0 + std::chrono::microseconds(i), 1,
                        nullptr, "sim"));
  for (std::size_t i = 0; i < kNodes; ++i) {
    const std::string fresh = "new" + std::to_string(i);
    ASSERT_FALSE(t.admits(fresh));
    ASSERT_FALSE(t.heard(fresh, "v", 1, t0 + 1s, 1, nullptr, "sim"));
  }
  EXPECT_EQ(t.size(), kNodes);
  EXPECT_EQ(t.streams(), kNodes);
  EXPECT_FALSE(t.state("new0"));
  EXPECT_TRUE(t.admits("n7"));  // a known node is always taken
  // All go gone at once; a new node then replaces the one heard from longest ago, n0.
  const auto changed = t.advance(t0 + 31s);
  EXPECT_EQ(changed.size(), kNodes);
  EXPECT_EQ(t.streams(), 0U);  // a node that is not up keeps no stream freshness
  ASSERT_TRUE(t.admits("late"));
  ASSERT_TRUE(t.heard("late", "v", 1, t0 + 31s, 1));
  EXPECT_FALSE(t.state("n0"));
  EXPECT_EQ(t.state("n1"), NodeState::gone);
  EXPECT_EQ(t.size(), kNodes);
}

// A node is up as long as one of its streams is accepted; a stream whose messages are dropped
// (replays, jumps) is reported stale on its own after stale_after, once, and is fresh again
// when a message of it is accepted.
TEST(NodeTable, AStreamNotHeardGoesStaleWhileItsNodeStaysUp) {
  NodeTable t(5s, 30s);
  const auto t0 = Clock::time_point{} + 1000s;
  ASSERT_TRUE(t.heard("a", "v", 1, t0, 1, nullptr, "p1"));
  ASSERT_TRUE(t.heard("a", "v", 1, t0, 1, nullptr, "p2"));
  ASSERT_TRUE(t.heard("b", "v", 1, t0, 1, nullptr, "p1"));
  std::vector<NodeTable::Stream> streams;
  for (const auto d : {1s, 2s, 3s, 4s, 5s, 6s}) {
    ASSERT_TRUE(t.heard("a", "v", 1, t0 + d, 1, nullptr, "p1"));
    ASSERT_TRUE(t.heard("b", "v", 1, t0 + d, 1, nullptr, "p1"));
    EXPECT_TRUE(t.advance(t0 + d, &streams).empty());  // both nodes stay up
  }
  ASSERT_EQ(streams.size(), 1U);
  EXPECT_EQ(streams[0], (NodeTable::Stream{"a", "p2"}));
  EXPECT_EQ(t.state("a"), NodeState::up);
  streams.clear();
  (void)t.advance(t0 + 6s, &streams);
  EXPECT_TRUE(streams.empty());  // reported once
  ASSERT_TRUE(t.heard("a", "v", 1, t0 + 7s, 1, nullptr, "p2"));
  (void)t.advance(t0 + 8s, &streams);
  EXPECT_TRUE(streams.empty());  // fresh again: p2 was heard at 7 s
  // The node goes quiet: the node goes stale, and its streams are not reported on their own.
  (void)t.advance(t0 + 13s, &streams);
  EXPECT_EQ(t.state("a"), NodeState::stale);
  EXPECT_TRUE(streams.empty());
}

TEST(FleetMarkers, StaleCopyWithholdsEveryValueAndGoneHasNoDevices) {
  const auto s = node_snapshot("n1", {10, 20});
  const auto st = stale_copy(*s, 5);
  ASSERT_EQ(st.devices.size(), 2U);
  for (const auto& d : st.devices) {
    for (std::size_t i = 0; i < kMetricCount; ++i) {
      const auto& r = d.metrics[static_cast<Metric>(i)];
      EXPECT_FALSE(r.has_value());
      EXPECT_EQ(r.reason(), Absence::stale);
    }
    EXPECT_EQ(d.processes_absent, Absence::stale);
  }
  ASSERT_EQ(st.errors.size(), 1U);
  EXPECT_EQ(st.errors[0].code, "node_stale");
  EXPECT_EQ(st.node, "n1");
  // The JSON says so too: no value, `absent` with `stale`.
  const auto doc = boost::json::parse(to_json_string(st)).as_object();
  const auto& d0 = doc.at("devices").as_array()[0].as_object();
  EXPECT_TRUE(d0.at("metrics").as_object().empty());
  EXPECT_EQ(d0.at("absent").as_object().at("memory_free_bytes"), "stale");
  const auto gone = gone_marker(*s, 5);
  EXPECT_TRUE(gone.devices.empty());
  EXPECT_EQ(gone.errors.at(0).code, "node_gone");
}

TEST(FleetFits, RanksDevicesAcrossNodesWithTheirNodeAndSource) {
  NodeTable t(5s, 30s);
  const auto t0 = Clock::time_point{} + 100s;
  for (const char* n : {"n1", "n2", "n3"}) ASSERT_TRUE(t.heard(n, "v", 1, t0, 1));
  const std::int64_t now = 3'000'000'000;
  std::vector<SnapshotPtr> latest{node_snapshot("n1", {10, 40}), node_snapshot("n2", {30, 5}),
                                  node_snapshot("n3", {70})};
  auto f = fleet_fits(latest, t, 20ULL << 30, now);
  ASSERT_EQ(f.size(), 3U);  // same device ids on several nodes count apart
  EXPECT_EQ(f[0].fit.node, "n3");
  EXPECT_EQ(f[1].fit.node, "n1");
  EXPECT_EQ(f[1].fit.device_id, "sim-1");
  EXPECT_EQ(f[2].fit.node, "n2");
  EXPECT_EQ(f[0].fit.source, Source::derived);
  EXPECT_EQ(f[0].age_ns, 2'000'000'000);
  // n3 goes stale: its snapshot is replaced by the stale copy, and its figure is not offered.
  (void)t.advance(t0 + 10s);
  ASSERT_TRUE(t.heard("n1", "v", 1, t0 + 10s, 1));
  ASSERT_TRUE(t.heard("n2", "v", 1, t0 + 10s, 1));
  latest[2] = std::make_shared<const GpuSnapshot>(stale_copy(*latest[2], 1));
  f = fleet_fits(latest, t, 20ULL << 30, now);
  ASSERT_EQ(f.size(), 2U);
  EXPECT_EQ(f[0].fit.node, "n1");
  // Even the raw snapshot of a stale node is never offered.
  latest[2] = node_snapshot("n3", {70});
  EXPECT_EQ(fleet_fits(latest, t, 20ULL << 30, now).size(), 2U);
  const auto doc = boost::json::parse(fit_json(f, 20ULL << 30)).as_object();
  const auto& first = doc.at("fits").as_array()[0].as_object();
  EXPECT_EQ(first.at("node"), "n1");
  EXPECT_EQ(first.at("source"), "derived");
  EXPECT_EQ(first.at("state"), "up");
  EXPECT_EQ(first.at("free_bytes").to_number<std::uint64_t>(), 40ULL << 30);
}

TEST(FleetNodesJson, OneSummaryPerNodeAndNullsForWhatIsUnknown) {
  NodeTable t(5s, 30s);
  const auto t0 = Clock::time_point{} + 100s;
  ASSERT_TRUE(t.heard("n1", "gpustream/0.1.0", 1, t0, 1'000'000'000));
  ASSERT_TRUE(t.heard("n2", "gpustream/0.1.0", 1, t0 - 6s, 1'000'000'000));
  (void)t.advance(t0);
  const auto s1 = node_snapshot("n1", {10, 30});
  const auto s2 = std::make_shared<const GpuSnapshot>(stale_copy(*node_snapshot("n2", {1}), 1));
  const auto doc = boost::json::parse(nodes_json({s1, s2}, t, 3'000'000'000)).as_object();
  EXPECT_EQ(doc.at("up").to_number<int>(), 1);
  EXPECT_EQ(doc.at("stale").to_number<int>(), 1);
  const auto& nodes = doc.at("nodes").as_array();
  ASSERT_EQ(nodes.size(), 2U);
  const auto& n1 = nodes[0].as_object();
  EXPECT_EQ(n1.at("node"), "n1");
  EXPECT_EQ(n1.at("state"), "up");
  EXPECT_EQ(n1.at("devices").to_number<int>(), 2);
  EXPECT_DOUBLE_EQ(n1.at("memory_total_bytes").to_number<double>(), 160.0 * (1ULL << 30));
  EXPECT_DOUBLE_EQ(n1.at("age_seconds").to_number<double>(), 2.0);
  const auto& n2 = nodes[1].as_object();
  EXPECT_EQ(n2.at("state"), "stale");
  EXPECT_TRUE(n2.at("memory_used_bytes").is_null());
  EXPECT_TRUE(n2.at("utilization_percent_mean").is_null());
}

}  // namespace
}  // namespace gpustream::transport::test
