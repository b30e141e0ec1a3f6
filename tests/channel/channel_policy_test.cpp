// SnapshotChannel backpressure: latest, drop_oldest, lossless; callbacks and queues.
#include <thread>

#include <boost/asio/io_context.hpp>

#include "channel_test_util.hpp"

namespace gpustream {
namespace {

using test::Collector;
using test::iota_seq;
using test::make_snapshot;

SubscribeOptions with(Backpressure p, std::size_t capacity) {
  SubscribeOptions o;
  o.policy = p;
  o.capacity = capacity;
  return o;
}

std::uint64_t seq_of(const std::optional<QueueItem>& item) {
  return item ? std::get<SnapshotPtr>(*item)->sequence : 0;
}

Gap gap_of(const std::optional<QueueItem>& item) {
  return item && std::holds_alternative<Gap>(*item) ? std::get<Gap>(*item) : Gap{};
}

TEST(ChannelPolicy, LatestKeepsOnlyTheNewestPerProbe) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector c;
  auto sub = ch.subscribe(with(Backpressure::latest, 64), c.on_snapshot(), c.on_gap());
  for (const char* p : {"a", "b", "a", "a", "b", "c"}) ch.publish(make_snapshot(p));
  io.run();
  EXPECT_EQ(c.sequences(), (std::vector<std::uint64_t>{4, 5, 6}));
  EXPECT_TRUE(c.gaps().empty());
  EXPECT_EQ(sub.dropped(), 3u);
  EXPECT_EQ(sub.lost(), 0u);
}

TEST(ChannelPolicy, LatestBoundedByCapacityDropsTheOldestProbe) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector c;
  auto sub = ch.subscribe(with(Backpressure::latest, 2), c.on_snapshot(), c.on_gap());
  for (const char* p : {"a", "b", "c"}) ch.publish(make_snapshot(p));
  io.run();
  EXPECT_EQ(c.sequences(), (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(sub.dropped(), 1u);
}

TEST(ChannelPolicy, DropOldestKeepsTheNewestAndReportsTheGap) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector c;
  auto sub = ch.subscribe(with(Backpressure::drop_oldest, 3), c.on_snapshot(), c.on_gap());
  for (int i = 0; i < 10; ++i) ch.publish(make_snapshot("a"));
  io.run();
  auto items = c.items();
  ASSERT_EQ(items.size(), 4u);
  ASSERT_TRUE(items[0].gap);
  EXPECT_EQ(*items[0].gap, (Gap{0, 7, "dropped_slow_subscriber"}));
  EXPECT_EQ(c.sequences(), iota_seq(8, 10));
  EXPECT_EQ(sub.dropped(), 7u);
  EXPECT_EQ(sub.lost(), 0u);

  // Catching up later: the gap names the last snapshot this subscriber received.
  ch.publish(make_snapshot("a"));  // 11
  io.restart();
  io.run();
  for (int i = 0; i < 5; ++i) ch.publish(make_snapshot("a"));  // 12..16, 12 and 13 dropped
  io.restart();
  io.run();
  auto gaps = c.gaps();
  ASSERT_EQ(gaps.size(), 2u);
  EXPECT_EQ(gaps[1], (Gap{11, 2, "dropped_slow_subscriber"}));
  auto seqs = c.sequences();
  EXPECT_EQ(std::vector<std::uint64_t>(seqs.begin() + 3, seqs.end()),
            (std::vector<std::uint64_t>{11, 14, 15, 16}));
  EXPECT_EQ(sub.dropped(), 9u);
}

TEST(ChannelPolicy, DropOldestWithoutGapHandlerStillDelivers) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector c;
  auto sub = ch.subscribe(with(Backpressure::drop_oldest, 1), c.on_snapshot());
  for (int i = 0; i < 3; ++i) ch.publish(make_snapshot("a"));
  io.run();
  EXPECT_EQ(c.sequences(), iota_seq(3, 3));
  EXPECT_EQ(sub.dropped(), 2u);
}

TEST(ChannelPolicy, LosslessDeliversUpToTheBoundThenCountsExactly) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector c;
  auto sub = ch.subscribe(with(Backpressure::lossless, 3), c.on_snapshot(), c.on_gap());
  for (int i = 0; i < 10; ++i) ch.publish(make_snapshot("a"));
  io.run();
  auto items = c.items();
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0].sequence, 1u);
  EXPECT_EQ(items[2].sequence, 3u);
  ASSERT_TRUE(items[3].gap);
  EXPECT_EQ(*items[3].gap, (Gap{3, 7, "lossless_bound_exceeded"}));
  EXPECT_EQ(sub.lost(), 7u);
  EXPECT_EQ(sub.dropped(), 0u);

  ch.publish(make_snapshot("a"));  // 11: room again, nothing more is lost
  io.restart();
  io.run();
  EXPECT_EQ(c.sequences().back(), 11u);
  EXPECT_EQ(c.gaps().size(), 1u);
  EXPECT_EQ(sub.lost(), 7u);
}

TEST(ChannelPolicy, LosslessGapSitsBetweenTheKeptAndTheLaterSnapshots) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  auto q = ch.subscribe_queue(with(Backpressure::lossless, 3));
  for (int i = 0; i < 5; ++i) ch.publish(make_snapshot("a"));  // 4 and 5 are lost
  EXPECT_EQ(q->size(), 3u);
  EXPECT_EQ(seq_of(q->try_pop()), 1u);
  ch.publish(make_snapshot("a"));  // 6 fits
  EXPECT_EQ(seq_of(q->try_pop()), 2u);
  EXPECT_EQ(seq_of(q->try_pop()), 3u);
  EXPECT_EQ(gap_of(q->try_pop()), (Gap{3, 2, "lossless_bound_exceeded"}));
  EXPECT_EQ(seq_of(q->try_pop()), 6u);
  EXPECT_FALSE(q->try_pop());
  EXPECT_EQ(q->lost(), 2u);
}

TEST(ChannelPolicy, LosslessExactCountWithAFilter) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  auto o = with(Backpressure::lossless, 2);
  o.filter.probes = {"a"};
  auto q = ch.subscribe_queue(o);
  // 10 of "a" interleaved with 10 of "b": only the 8 "a" beyond the bound are lost.
  for (int i = 0; i < 10; ++i) {
    ch.publish(make_snapshot("a"));
    ch.publish(make_snapshot("b"));
  }
  EXPECT_EQ(q->lost(), 8u);
  EXPECT_EQ(seq_of(q->try_pop()), 1u);
  EXPECT_EQ(seq_of(q->try_pop()), 3u);
  EXPECT_EQ(gap_of(q->try_pop()), (Gap{3, 8, "lossless_bound_exceeded"}));
  EXPECT_FALSE(q->try_pop());
}

TEST(ChannelPolicy, QueueDropOldest) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  auto q = ch.subscribe_queue(with(Backpressure::drop_oldest, 2));
  for (int i = 0; i < 5; ++i) ch.publish(make_snapshot("a"));
  EXPECT_EQ(gap_of(q->try_pop()), (Gap{0, 3, "dropped_slow_subscriber"}));
  // A drop after the gap was taken but before its snapshot was: reported exactly, too.
  ch.publish(make_snapshot("a"));  // 6: drops 4
  EXPECT_EQ(gap_of(q->try_pop()), (Gap{0, 1, "dropped_slow_subscriber"}));
  EXPECT_EQ(seq_of(q->try_pop()), 5u);
  EXPECT_EQ(seq_of(q->try_pop()), 6u);
  EXPECT_EQ(q->dropped(), 4u);
}

TEST(ChannelPolicy, QueueLatest) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  auto q = ch.subscribe_queue(with(Backpressure::latest, 8));
  for (const char* p : {"a", "b", "a"}) ch.publish(make_snapshot(p));
  EXPECT_EQ(seq_of(q->try_pop()), 2u);
  EXPECT_EQ(seq_of(q->try_pop()), 3u);
  EXPECT_FALSE(q->try_pop());
  EXPECT_EQ(q->dropped(), 1u);
}

TEST(ChannelPolicy, PopForTimesOutWhenNothingComes) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  auto q = ch.subscribe_queue({});
  EXPECT_FALSE(q->pop_for(std::chrono::milliseconds(1)));
  EXPECT_FALSE(q->closed());
}

TEST(ChannelPolicy, PublishWakesAWaitingPop) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  auto q = ch.subscribe_queue({});
  std::optional<QueueItem> got;
  std::thread consumer([&] { got = q->pop_for(std::chrono::hours(1)); });
  ch.publish(make_snapshot("a"));
  consumer.join();  // hangs (and the test times out) if the publish did not wake it
  EXPECT_EQ(seq_of(got), 1u);
}

TEST(ChannelPolicy, CloseWakesAWaitingPopAndUnsubscribes) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  auto q = ch.subscribe_queue({});
  ch.publish(make_snapshot("a"));
  EXPECT_EQ(seq_of(q->pop_for(std::chrono::hours(1))), 1u);
  std::optional<QueueItem> got = QueueItem{Gap{}};
  std::thread consumer([&] { got = q->pop_for(std::chrono::hours(1)); });
  q->close();
  consumer.join();
  EXPECT_FALSE(got);
  EXPECT_TRUE(q->closed());
  EXPECT_EQ(ch.subscriber_count(), 0u);
  ch.publish(make_snapshot("a"));
  EXPECT_FALSE(q->try_pop());
  q->close();  // twice is fine
}

TEST(ChannelPolicy, DroppingTheQueueUnsubscribes) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  auto q = ch.subscribe_queue({});
  EXPECT_EQ(ch.subscriber_count(), 1u);
  q.reset();
  EXPECT_EQ(ch.subscriber_count(), 0u);
}

TEST(ChannelPolicy, QueueOutlivingTheChannelDrainsThenStopsWaiting) {
  std::shared_ptr<SnapshotQueue> q;
  {
    boost::asio::io_context io;
    SnapshotChannel ch(io.get_executor());
    q = ch.subscribe_queue({});
    ch.publish(make_snapshot("a"));
  }
  EXPECT_TRUE(q->closed());
  EXPECT_EQ(seq_of(q->pop_for(std::chrono::hours(1))), 1u);
  EXPECT_FALSE(q->pop_for(std::chrono::hours(1)));  // returns at once: hangs if not
}

}  // namespace
}  // namespace gpustream
