// FleetView without a NATS server: bus messages handed to on_message (or deliver() and
// process_pending(): the delivery side's and the decoding's halves), the staleness sweep and the
// publishers' budgets driven by the test's clocks, the view's routes and /metrics families on a
// real Server. A gone node leaves the channel's latest cache, so /api/v1/snapshot no longer
// lists it.
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

using namespace std::chrono_literals;

/// The view's clocks, driven by the test: monotonic time, and the decode CPU time (each decode
/// costs `cpu_per_decode`: the meter reads the clock before and after).
struct DrivenClocks {
  NodeTable::Clock::time_point now = NodeTable::Clock::time_point{} + 1h;
  std::chrono::nanoseconds cpu{0};
  std::chrono::nanoseconds cpu_per_decode{0};
  bool after = false;
  void install(FleetOptions& o) {
    o.clock = [this] { return now; };
    o.cpu_clock = [this] {
      if (after) cpu += cpu_per_decode;
      after = !after;
      return cpu;
    };
  }
};

std::uint64_t view_refused(const FleetView& v, FleetRefusal r) {
  return v.stats().refused[static_cast<std::size_t>(r)];
}

std::uint64_t messages_of(const FleetView& v, const std::string& node) {
  for (const auto& n : v.nodes())
    if (n.name == node) return n.messages;
  return 0;
}

FleetOptions driven_options(DrivenClocks& c) {
  FleetOptions o;
  o.kv_bucket.clear();
  o.stale_after = 5s;
  o.gone_after = 30s;
  c.install(o);
  return o;
}

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
  // This test is about the memory bound, not the publisher's budget (tested below): no limit.
  o.budget.messages_per_second = 1e9;
  o.budget.bytes_per_second = std::size_t{1} << 40;
  o.budget.burst = std::chrono::hours(1);
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

// A publisher that floods is refused by its message budget when its messages arrive (nothing of
// them is queued or decoded), while a well-behaved node's messages are all decoded.
TEST(FleetViewBudget, AFloodingPublisherIsRefusedWhileAWellBehavedNodeIsDecoded) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  DrivenClocks c;
  auto o = driven_options(c);
  o.budget.messages_per_second = 10;
  o.budget.burst = 1s;  // 10 messages at most at once
  FleetView view(io.get_executor(), channel, o);
  BusEncoder flood("flood", "gpustream/test", {.full_every = 1});
  BusEncoder good("good", "gpustream/test", {.full_every = 1});
  const auto snap = make_snapshot("sim", 2);
  for (int second = 0; second < 5; ++second) {
    for (int i = 0; i < 1000; ++i) view.on_message(flood.encode(snap), "gpustream.flood.sim");
    view.on_message(good.encode(snap), "gpustream.good.sim");
    c.now += 1s;
  }
  EXPECT_EQ(messages_of(view, "flood"), 50U);  // 10 a second
  EXPECT_EQ(messages_of(view, "good"), 5U);    // every one
  EXPECT_EQ(view_refused(view, FleetRefusal::budget_messages), 5U * 1000 - 50);
  EXPECT_EQ(view.stats().pending, 0U);
  const auto text = view.metrics()();
  EXPECT_NE(
      text.find("\ngpustream_fleet_messages_refused_total{reason=\"budget_messages\"} 4950\n"),
      std::string::npos)
      << text;
  view.stop();
}

// The worker serves the publishers' queues in turn, one message each: a node's message queued
// behind a flooder's full queue is the second one decoded, not the 65th. The flooder's queue is
// bounded (64 messages): the 65th is refused.
TEST(FleetViewBudget, TheWorkerServesThePublishersInTurn) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor(), 256);
  DrivenClocks c;
  auto o = driven_options(c);
  o.budget.messages_per_second = 1e6;
  FleetView view(io.get_executor(), channel, o);
  BusEncoder flood("flood", "gpustream/test", {.full_every = 1});
  BusEncoder good("good", "gpustream/test", {.full_every = 1});
  const auto snap = make_snapshot("sim", 2);
  for (int i = 0; i < 65; ++i) view.deliver(flood.encode(snap), "gpustream.flood.sim");
  view.deliver(good.encode(snap), "gpustream.good.sim");
  EXPECT_EQ(view_refused(view, FleetRefusal::queue_full), 1U);
  EXPECT_EQ(view.stats().pending, 65U);
  EXPECT_TRUE(view.nodes().empty());  // nothing decoded on the delivery side
  const auto seq = channel.last_sequence();
  EXPECT_EQ(view.process_pending(), 65U);
  const auto h = channel.history_since(seq);
  ASSERT_EQ(h.size(), 65U);
  EXPECT_EQ(h[0]->node, "flood");
  EXPECT_EQ(h[1]->node, "good");
  EXPECT_EQ(view.stats().pending, 0U);
  view.stop();
}

// Decode CPU time is charged to the publisher after each decode (driven: 30 ms a decode): once
// its CPU bucket (100 ms a second, 1 s of burst) is empty or in debt, its messages are refused
// until time pays the debt back; another node has its own bucket.
TEST(FleetViewBudget, DecodeCpuIsChargedToItsPublisher) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  DrivenClocks c;
  c.cpu_per_decode = 30ms;
  auto o = driven_options(c);
  o.budget.cpu_per_second = 100ms;
  o.budget.burst = 1s;
  FleetView view(io.get_executor(), channel, o);
  BusEncoder costly("costly", "gpustream/test", {.full_every = 1});
  BusEncoder good("good", "gpustream/test", {.full_every = 1});
  const auto snap = make_snapshot("sim", 2);
  for (int i = 0; i < 6; ++i) view.on_message(costly.encode(snap), "gpustream.costly.sim");
  EXPECT_EQ(messages_of(view, "costly"), 4U);  // 100 → 70 → 40 → 10 → −20: then refused
  EXPECT_EQ(view_refused(view, FleetRefusal::budget_cpu), 2U);
  view.on_message(good.encode(snap), "gpustream.good.sim");
  EXPECT_EQ(messages_of(view, "good"), 1U);
  c.now += 1s;  // −20 + 100
  view.on_message(costly.encode(snap), "gpustream.costly.sim");
  EXPECT_EQ(messages_of(view, "costly"), 5U);
  EXPECT_EQ(view.stats().decode_cpu_ns, 6U * 30'000'000);
  EXPECT_NE(view.metrics()().find("\ngpustream_fleet_decode_cpu_seconds_total 0.180000\n"),
            std::string::npos);
  view.stop();
}

// A big body: what a message declares once inflated is taken from its publisher's
// inflated-bytes budget before anything is inflated or parsed. (The body is 1 MiB of letters that
// deflate about 2:1, so that the codec's own bound on the inflation ratio does not refuse it
// first: deflate bombs of a higher ratio are the codec's, and the bucket test's below.)
TEST(FleetViewBudget, AnInflatedBodyIsCountedAgainstTheBytesBudgetBeforeDecoding) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  DrivenClocks c;
  auto o = driven_options(c);
  GpuSnapshot bomb = make_snapshot("sim", 1);
  std::string name(std::size_t{1} << 20, 'a');
  std::uint32_t x = 12345;
  for (auto& ch : name) {
    x = x * 1664525 + 1013904223;  // a fixed sequence of 16 letters: about 4 bits a byte
    ch = static_cast<char>('a' + (x >> 28));
  }
  bomb.devices[0].name = name;
  BusEncoder bomber("bomber", "gpustream/test", {.full_every = 1});
  BusEncoder good("good", "gpustream/test", {.full_every = 1});
  const std::string msg = bomber.encode(bomb);
  const auto declared = parse_bus_header(msg).body_bytes;
  ASSERT_LT(msg.size(), std::size_t{1} << 20);  // within max_message_bytes
  ASSERT_GT(declared, std::size_t{1} << 20);
  ASSERT_LT(declared / msg.size(), 8U);
  o.budget.bytes_per_second = declared * 5 / 2;  // two and a half bombs a second
  o.budget.burst = 1s;
  FleetView view(io.get_executor(), channel, o);
  for (int i = 0; i < 5; ++i) view.on_message(msg, "gpustream.bomber.sim");
  EXPECT_EQ(view_refused(view, FleetRefusal::budget_bytes), 3U);
  EXPECT_EQ(messages_of(view, "bomber"), 1U);  // the same message: the replays are seq_stale
  EXPECT_EQ(view_refused(view, FleetRefusal::seq_stale), 1U);
  view.on_message(good.encode(make_snapshot("sim", 2)), "gpustream.good.sim");
  EXPECT_EQ(messages_of(view, "good"), 1U);
  c.now += 1s;  // half a bomb left + two and a half, capped at two and a half: two more
  for (int i = 0; i < 3; ++i) view.on_message(bomber.encode(bomb), "gpustream.bomber.sim");
  EXPECT_EQ(messages_of(view, "bomber"), 3U);
  EXPECT_EQ(view_refused(view, FleetRefusal::budget_bytes), 4U);
  view.stop();
}

// A delta costs what decoding it walks: its patch and the base it applies to
// (BusDecoder::cost_bytes), so tiny deltas against a big base are bounded by the bytes budget
// like fulls are (an 8 MiB base and 400 deltas of 29 bytes cost 35 s of CPU when only the
// patch was charged).
TEST(FleetViewBudget, ADeltaIsChargedTheBaseItAppliesTo) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  DrivenClocks c;
  auto o = driven_options(c);
  GpuSnapshot big = make_snapshot("sim", 200, 8);
  BusEncoder enc("big", "gpustream/test", {.full_every = 1000});
  const std::string full = enc.encode(big);
  ASSERT_TRUE(enc.last_was_full());
  const auto full_bytes = parse_bus_header(full).body_bytes;
  o.budget.bytes_per_second = full_bytes * 5 / 2;  // the full and the patches, not 2 bases more
  o.budget.burst = 1s;
  FleetView view(io.get_executor(), channel, o);
  view.on_message(full, "gpustream.big.sim");
  ASSERT_EQ(messages_of(view, "big"), 1U);
  for (int i = 0; i < 10; ++i) {
    big.time_unix_ns += 1000;
    const std::string delta = enc.encode(big);
    ASSERT_FALSE(enc.last_was_full());
    ASSERT_LT(parse_bus_header(delta).body_bytes, full_bytes / 50);  // a tiny patch
    view.on_message(delta, "gpustream.big.sim");
  }
  // Each delta is charged at least the base's bytes: at most one fits after the full.
  EXPECT_LE(messages_of(view, "big"), 2U);
  EXPECT_GE(view_refused(view, FleetRefusal::budget_bytes), 9U);
  view.stop();
}

// The publisher is the subject's node, never the payload's: a bus header or a JSON snapshot
// naming another node is refused (nothing of it kept), and so is a subject that is not
// <prefix>.<node>.<probe>.
TEST(FleetView, APayloadNamingAnotherNodeThanItsSubjectIsRefused) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  DrivenClocks c;
  FleetView view(io.get_executor(), channel, driven_options(c));
  BusEncoder b("node-b", "gpustream/test", {.full_every = 1});
  view.on_message(b.encode(make_snapshot("sim", 2)), "gpustream.node-a.sim");
  auto forged = make_snapshot("sim", 2);
  forged.node = "node-b";
  view.on_message(to_json_string(forged), "gpustream.node-a.sim");
  EXPECT_EQ(view_refused(view, FleetRefusal::subject_mismatch), 2U);
  EXPECT_TRUE(view.nodes().empty());
  EXPECT_EQ(view.stats().bus_streams, 0U);
  EXPECT_EQ(channel.latest_size(), 0U);
  for (const char* subject : {"gpustream.node-a", "other.node-a.sim", "gpustream.node-a.sim.x",
                              "gpustream..sim", "gpustream.node*.sim"})
    view.on_message(b.encode(make_snapshot("sim", 2)), subject);
  EXPECT_EQ(view_refused(view, FleetRefusal::bad_subject), 5U);
  EXPECT_EQ(view.stats().rejected, 7U);
  // A JSON snapshot without a node takes the subject's; one with the subject's is taken.
  auto plain = make_snapshot("sim", 2);
  view.on_message(to_json_string(plain), "gpustream.node-a.sim");
  plain.node = "node-b";
  view.on_message(to_json_string(plain), "gpustream.node-b.sim");
  ASSERT_EQ(view.nodes().size(), 2U);
  EXPECT_EQ(view.nodes()[0].name, "node-a");
  view.stop();
}

// --max-nodes 50 and 50 nodes that stay up: a new node's messages are refused at once (counted
// in gpustream_fleet_nodes_refused_total) and leave nothing behind — no decoder stream, no
// queue, no budget entry. Once a node is gone, the new node takes its place.
TEST(FleetView, AFullNodeTableRefusesNewNodesAndKeepsNothingOfThem) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  DrivenClocks c;
  auto o = driven_options(c);
  o.max_nodes = 50;
  FleetView view(io.get_executor(), channel, o);
  const auto snap = make_snapshot("sim", 1);
  for (int i = 0; i < 50; ++i) {
    const std::string node = "fake-" + std::to_string(i);
    view.on_message(BusEncoder(node, "x", {.full_every = 1}).encode(snap),
                    "gpustream." + node + ".sim");
  }
  BusEncoder real("real", "gpustream/test", {.full_every = 1});
  for (int i = 0; i < 1000; ++i) {
    const std::string node = "new-" + std::to_string(i);
    view.on_message(BusEncoder(node, "x", {.full_every = 1}).encode(snap),
                    "gpustream." + node + ".sim");
  }
  view.on_message(real.encode(snap), "gpustream.real.sim");
  const auto st = view.stats();
  EXPECT_EQ(st.nodes_refused, 1001U);
  EXPECT_EQ(view.nodes().size(), 50U);
  EXPECT_EQ(st.bus_streams, 50U);
  EXPECT_EQ(st.publishers, 50U);
  EXPECT_EQ(st.pending, 0U);
  const auto text = view.metrics()();
  EXPECT_NE(text.find("\ngpustream_fleet_nodes_refused_total 1001\n"), std::string::npos) << text;
  EXPECT_NE(text.find("{reason=\"node_table_full\"} 1001\n"), std::string::npos);
  // The fakes stop: once gone, the real node is taken.
  c.now += 31s;
  view.sweep(c.now);
  view.on_message(real.encode(snap), "gpustream.real.sim");
  EXPECT_EQ(messages_of(view, "real"), 1U);
  EXPECT_EQ(view.stats().bus_streams, 1U);  // the gone nodes' streams were dropped
  view.stop();
}

// A stream frozen by a replay (the agent's own epoch replayed with an old sequence: every
// message of it dropped as seq_stale) while its node stays up thanks to another stream: its
// snapshot goes stale after stale_after (error stream_stale), the other one stays current.
TEST(FleetView, AStreamFrozenByAReplayGoesStaleWhileItsNodeStaysUp) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  DrivenClocks c;
  FleetView view(io.get_executor(), channel, driven_options(c));
  BusEncoder a("node-a", "gpustream/test", {.full_every = 1});
  const std::string old_p2 = a.encode(make_snapshot("p2", 2));
  view.on_message(old_p2, "gpustream.node-a.p2");
  view.on_message(a.encode(make_snapshot("p2", 2)), "gpustream.node-a.p2");
  view.on_message(a.encode(make_snapshot("p1", 2)), "gpustream.node-a.p1");
  const auto latest_of = [&](const std::string& probe) {
    for (const auto& s : channel.latest())
      if (s->node == "node-a" && s->probe == probe) return s;
    return SnapshotPtr{};
  };
  for (int second = 1; second <= 6; ++second) {
    c.now += 1s;
    view.on_message(a.encode(make_snapshot("p1", 2)), "gpustream.node-a.p1");
    view.on_message(old_p2, "gpustream.node-a.p2");  // the replay
    view.sweep(c.now);
    const auto p2 = latest_of("p2");
    ASSERT_TRUE(p2);
    if (second < 5) {
      EXPECT_TRUE(p2->errors.empty()) << second;
    }
  }
  EXPECT_EQ(view_refused(view, FleetRefusal::seq_stale), 6U);
  ASSERT_EQ(view.nodes().size(), 1U);
  EXPECT_EQ(view.nodes()[0].state, NodeState::up);
  const auto p2 = latest_of("p2");
  ASSERT_EQ(p2->errors.size(), 1U);
  EXPECT_EQ(p2->errors[0].code, "stream_stale");
  for (const auto& d : p2->devices) EXPECT_FALSE(d.metrics[Metric::utilization_percent]);
  const auto p1 = latest_of("p1");
  EXPECT_TRUE(p1->errors.empty());
  // The stream speaks again (a message it has not sent before): current again.
  view.on_message(a.encode(make_snapshot("p2", 2)), "gpustream.node-a.p2");
  EXPECT_TRUE(latest_of("p2")->errors.empty());
  view.stop();
}

// A message carrying JetStream's republish headers (the delivery side hands the stream's
// name) is refused whatever it holds, even a good message of the subject's own node.
TEST(FleetView, ARepublishedMessageIsRefusedWhateverItHolds) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  DrivenClocks c;
  FleetView view(io.get_executor(), channel, driven_options(c));
  BusEncoder a("node-a", "gpustream/test", {.full_every = 1});
  view.deliver(a.encode(make_snapshot("sim", 2)), "gpustream.node-a.sim", "KV_gpustream_nodes");
  view.process_pending();
  EXPECT_EQ(view_refused(view, FleetRefusal::republished), 1U);
  EXPECT_EQ(view.stats().rejected, 1U);
  EXPECT_TRUE(view.nodes().empty());
  view.deliver(a.encode(make_snapshot("sim", 2)), "gpustream.node-a.sim");
  view.process_pending();
  EXPECT_EQ(view.nodes().size(), 1U);
  view.stop();
}

std::string metric_lines(const std::string& text, const std::string& family) {
  std::string out;
  std::size_t pos = 0;
  while ((pos = text.find("\n" + family, pos)) != std::string::npos) {
    const auto end = text.find('\n', pos + 1);
    out += text.substr(pos + 1, end - pos);
    pos = end;
  }
  return out;
}

// gpustream_fleet_nodes{state} counts the node table by state; gpustream_fleet_node_up has one
// series per node up (1) or stale (0), none for a gone node.
TEST(FleetView, NodesByStateAndEachNodesUpGaugeFollowTheStaleness) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  DrivenClocks c;
  FleetView view(io.get_executor(), channel, driven_options(c));
  const auto metrics = view.metrics();
  BusEncoder a("node-a", "gpustream/test"), b("node-b", "gpustream/test");
  view.on_message(a.encode(make_snapshot("sim", 2)), "gpustream.node-a.sim");
  view.on_message(b.encode(make_snapshot("sim", 2)), "gpustream.node-b.sim");
  EXPECT_EQ(metric_lines(metrics(), "gpustream_fleet_nodes{"),
            "gpustream_fleet_nodes{state=\"up\"} 2\n"
            "gpustream_fleet_nodes{state=\"stale\"} 0\n"
            "gpustream_fleet_nodes{state=\"gone\"} 0\n");
  EXPECT_EQ(metric_lines(metrics(), "gpustream_fleet_node_up{"),
            "gpustream_fleet_node_up{node=\"node-a\"} 1\n"
            "gpustream_fleet_node_up{node=\"node-b\"} 1\n");
  // node-b keeps talking; node-a goes stale after 5 s, gone after 30 s.
  c.now += 6s;
  view.on_message(b.encode(make_snapshot("sim", 2)), "gpustream.node-b.sim");
  view.sweep(c.now);
  EXPECT_EQ(metric_lines(metrics(), "gpustream_fleet_nodes{"),
            "gpustream_fleet_nodes{state=\"up\"} 1\n"
            "gpustream_fleet_nodes{state=\"stale\"} 1\n"
            "gpustream_fleet_nodes{state=\"gone\"} 0\n");
  EXPECT_EQ(metric_lines(metrics(), "gpustream_fleet_node_up{"),
            "gpustream_fleet_node_up{node=\"node-a\"} 0\n"
            "gpustream_fleet_node_up{node=\"node-b\"} 1\n");
  c.now += 25s;
  view.on_message(b.encode(make_snapshot("sim", 2)), "gpustream.node-b.sim");
  view.sweep(c.now);
  EXPECT_EQ(metric_lines(metrics(), "gpustream_fleet_nodes{"),
            "gpustream_fleet_nodes{state=\"up\"} 1\n"
            "gpustream_fleet_nodes{state=\"stale\"} 0\n"
            "gpustream_fleet_nodes{state=\"gone\"} 1\n");
  EXPECT_EQ(metric_lines(metrics(), "gpustream_fleet_node_up{"),
            "gpustream_fleet_node_up{node=\"node-b\"} 1\n");
  EXPECT_NE(metrics().find("\ngpustream_fleet_nats_connected 0\n"), std::string::npos);
  view.stop();
}

}  // namespace
}  // namespace gpustream::transport::test

#endif  // GPUSTREAM_HAS_NATS
