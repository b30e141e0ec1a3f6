// SnapshotChannel in a fleet: the latest cache and the `latest` policy keep one per (probe, node).
#include <boost/asio/io_context.hpp>

#include "channel_test_util.hpp"

namespace gpustream {
namespace {

using test::make_snapshot;

GpuSnapshot of_node(const std::string& probe, const std::string& node) {
  auto s = make_snapshot(probe);
  s.node = node;
  return s;
}

TEST(ChannelNode, LatestKeepsNewestPerProbeAndNode) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  ch.publish(of_node("simulated", "n1"));
  ch.publish(of_node("simulated", "n2"));
  ch.publish(make_snapshot("simulated"));  // this machine's own: node ""
  const auto n1 = ch.publish(of_node("simulated", "n1"));
  const auto all = ch.latest();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0], n1);
  EXPECT_EQ(all[1]->node, "n2");
  EXPECT_EQ(all[2]->node, "");
}

TEST(ChannelNode, LatestPolicyReplacesOnlyTheSameProbeOfTheSameNode) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  SubscribeOptions o;
  o.policy = Backpressure::latest;
  o.capacity = 8;
  auto q = ch.subscribe_queue(o);
  ch.publish(of_node("simulated", "n1"));
  ch.publish(of_node("simulated", "n2"));
  ch.publish(of_node("simulated", "n1"));  // replaces n1's first, not n2's
  std::vector<std::string> nodes;
  while (auto item = q->try_pop())
    if (const auto* s = std::get_if<SnapshotPtr>(&*item)) nodes.push_back((*s)->node);
  EXPECT_EQ(nodes, (std::vector<std::string>{"n2", "n1"}));
  EXPECT_EQ(q->dropped(), 1u);
}

}  // namespace
}  // namespace gpustream
