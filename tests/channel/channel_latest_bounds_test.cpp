// SnapshotChannel's latest cache is bounded in entries and in bytes (approx_bytes plus its
// bookkeeping), evicts the (node, probe) published longest ago first, and forgets a node.
#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "channel_test_util.hpp"

namespace gpustream {
namespace {

using test::make_snapshot;

/// A node's snapshot of 8 GPUs with `processes` processes each: the worst input is many
/// nodes each at this size.
GpuSnapshot node_snapshot(const std::string& node, int processes, std::string probe = "sim") {
  GpuSnapshot s = make_snapshot(std::move(probe), {"g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7"});
  s.node = node;
  for (auto& d : s.devices) {
    for (int p = 0; p < processes; ++p) {
      ProcessSample ps;
      ps.pid = p + 1;
      ps.name = "a-process-name-past-the-small-buffer-" + std::to_string(p);
      d.processes.push_back(std::move(ps));
    }
    d.processes.shrink_to_fit();
  }
  return s;
}

std::set<std::string> nodes_of(const std::vector<SnapshotPtr>& latest) {
  std::set<std::string> out;
  for (const auto& s : latest) out.insert(s->node);
  return out;
}

TEST(ChannelLatestBounds, ManyNodesOfBigSnapshotsStayWithinTheBytes) {
  boost::asio::io_context io;
  const GpuSnapshot big = node_snapshot("x", 200);
  const std::size_t each = approx_bytes(big);
  ASSERT_GT(each, 100'000u);  // ~ 8 × 200 processes: a big node
  const std::size_t max_bytes = 32 * each + each / 2;
  SnapshotChannel ch(io.get_executor(), 0, kDefaultHistoryMaxBytes, 100000, max_bytes);
  // 2,000 nodes of it: unbounded, the cache would hold 2,000 × each (over 200 MB).
  for (int i = 0; i < 2000; ++i) {
    GpuSnapshot s = big;
    s.node = "node-" + std::to_string(i);
    ch.publish(std::move(s));
    ASSERT_LE(ch.latest_bytes(), ch.latest_max_bytes()) << i;
  }
  EXPECT_EQ(ch.latest_size(), 32u);  // as many as fit, with their bookkeeping
  EXPECT_EQ(ch.latest_evicted(), 2000u - 32u);
  // The stalest went first: the newest 32 nodes are kept.
  std::set<std::string> want;
  for (int i = 2000 - 32; i < 2000; ++i) want.insert("node-" + std::to_string(i));
  EXPECT_EQ(nodes_of(ch.latest()), want);
  EXPECT_EQ(ch.latest().size(), 32u);
  // One snapshot bigger than the whole bound is still the latest (the newest is always kept).
  GpuSnapshot huge = node_snapshot("huge", 20000);
  ASSERT_GT(approx_bytes(huge), max_bytes);
  ch.publish(std::move(huge));
  ASSERT_EQ(ch.latest_size(), 1u);
  EXPECT_EQ(ch.latest()[0]->node, "huge");
}

TEST(ChannelLatestBounds, ReplacingANodeMakesItTheFreshest) {
  boost::asio::io_context io;
  const std::size_t each = approx_bytes(node_snapshot("x", 10));
  // Room for three entries (each + the bookkeeping), not four.
  SnapshotChannel ch(io.get_executor(), 16, kDefaultHistoryMaxBytes, 100000, 3 * each + 1024);
  for (const char* n : {"a", "b", "c"}) ch.publish(node_snapshot(n, 10));
  ch.publish(node_snapshot("a", 10));  // a is now the freshest: b is the stalest
  ch.publish(node_snapshot("d", 10));
  EXPECT_EQ(nodes_of(ch.latest()), (std::set<std::string>{"a", "c", "d"}));
  EXPECT_EQ(ch.latest_evicted(), 1u);
  // latest() keeps the order of first publication.
  const auto l = ch.latest();
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0]->node, "a");
  EXPECT_EQ(l[1]->node, "c");
  EXPECT_EQ(l[2]->node, "d");
  // A replacement that grows takes room from the stalest others, never from itself.
  ch.publish(node_snapshot("c", 25));
  EXPECT_LE(ch.latest_bytes(), ch.latest_max_bytes());
  EXPECT_TRUE(nodes_of(ch.latest()).count("c"));
  EXPECT_FALSE(nodes_of(ch.latest()).count("a"));  // the stalest of a, d
}

TEST(ChannelLatestBounds, EntriesAreBoundedInCountToo) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 16, kDefaultHistoryMaxBytes, 10);
  for (int i = 0; i < 1000; ++i) {
    auto s = make_snapshot("sim");
    s.node = "n" + std::to_string(i);
    ch.publish(std::move(s));
  }
  EXPECT_EQ(ch.latest_size(), 10u);
  EXPECT_EQ(ch.latest_capacity(), 10u);
  EXPECT_EQ(ch.latest_evicted(), 990u);
  EXPECT_EQ(ch.latest().back()->node, "n999");
  EXPECT_TRUE(ch.latest("sim"));
}

TEST(ChannelLatestBounds, ForgetNodeDropsOnlyThatNodesEntries) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  for (const char* n : {"a", "ab", "b"})
    for (const char* p : {"sim", "host"}) ch.publish(node_snapshot(n, 1, p));
  const std::size_t before = ch.latest_bytes();
  EXPECT_EQ(ch.forget_node("a"), 2u);  // not "ab"
  EXPECT_EQ(nodes_of(ch.latest()), (std::set<std::string>{"ab", "b"}));
  EXPECT_EQ(ch.latest_size(), 4u);
  EXPECT_LT(ch.latest_bytes(), before);
  EXPECT_EQ(ch.forget_node("a"), 0u);
  EXPECT_EQ(ch.forget_node("zz"), 0u);
  EXPECT_EQ(ch.latest_evicted(), 0u);  // forgetting is not evicting
  // The history is untouched; a forgotten node that publishes again is back.
  EXPECT_EQ(ch.history_size(), 6u);
  ch.publish(node_snapshot("a", 1));
  EXPECT_TRUE(nodes_of(ch.latest()).count("a"));
  for (const char* n : {"ab", "b", "a"}) ch.forget_node(n);
  EXPECT_EQ(ch.latest_size(), 0u);
  EXPECT_EQ(ch.latest_bytes(), 0u);
  EXPECT_FALSE(ch.latest("sim"));
}

// For the ThreadSanitizer build: publishers of many nodes, a thread forgetting nodes and one
// reading the cache, all at once; the bounds hold throughout.
TEST(ChannelLatestBounds, ConcurrentPublishForgetAndRead) {
  boost::asio::io_context io;
  const std::size_t each = approx_bytes(node_snapshot("x", 4)) + 256;
  SnapshotChannel ch(io.get_executor(), 64, kDefaultHistoryMaxBytes, 50, 40 * each);
  std::atomic<bool> done{false};
  std::vector<std::thread> publishers;
  for (int t = 0; t < 3; ++t)
    publishers.emplace_back([&ch, t] {
      for (int i = 0; i < 400; ++i)
        ch.publish(node_snapshot("n" + std::to_string((i * 7 + t) % 120), 4));
    });
  std::thread forgetter([&] {
    for (int i = 0; !done.load(); ++i) ch.forget_node("n" + std::to_string(i % 120));
  });
  std::thread reader([&] {
    while (!done.load()) {
      for (const auto& s : ch.latest()) EXPECT_FALSE(s->node.empty());
      EXPECT_LE(ch.latest_bytes(), ch.latest_max_bytes());
      EXPECT_LE(ch.latest_size(), ch.latest_capacity());
    }
  });
  for (auto& p : publishers) p.join();
  done = true;
  forgetter.join();
  reader.join();
  EXPECT_EQ(ch.last_sequence(), 1200u);
  EXPECT_LE(ch.latest_size(), 40u);
  EXPECT_LE(ch.latest_bytes(), ch.latest_max_bytes());
}

}  // namespace
}  // namespace gpustream
