// Resume positions beyond the channel's last sequence (a client's stale or hostile `since`, up
// to UINT64_MAX): nothing is replayed, no gap is invented, and the stream goes on live from the
// channel's current sequence with gaps numbered from there.
#include <cstdint>
#include <limits>

#include <boost/asio/io_context.hpp>

#include "channel_test_util.hpp"

namespace gpustream {
namespace {

using test::Collector;
using test::make_snapshot;

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

TEST(ChannelSince, HistorySinceBeyondTheLastSequenceIsEmptyWithoutAGap) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 4);
  for (int i = 0; i < 6; ++i) ch.publish(make_snapshot("a"));  // history: 3..6
  for (const std::uint64_t since : {std::uint64_t{7}, std::uint64_t{1000}, kMax - 1, kMax}) {
    std::optional<Gap> gap = Gap{};
    EXPECT_TRUE(ch.history_since(since, &gap).empty()) << since;
    EXPECT_FALSE(gap) << since;
  }
}

TEST(ChannelSince, SubscribeSinceMaxDeliversOnlyLiveSnapshotsWithoutAGap) {
  for (const std::uint64_t since : {kMax, kMax - 1}) {
    boost::asio::io_context io;
    SnapshotChannel ch(io.get_executor(), 4);
    for (int i = 0; i < 3; ++i) ch.publish(make_snapshot("a"));
    Collector c;
    SubscribeOptions o;
    o.since = since;
    auto sub = ch.subscribe(o, c.on_snapshot(), c.on_gap());
    ch.publish(make_snapshot("a"));
    ch.publish(make_snapshot("a"));
    io.run();
    EXPECT_TRUE(c.gaps().empty()) << since;
    EXPECT_EQ(c.sequences(), (std::vector<std::uint64_t>{4, 5})) << since;
  }
}

TEST(ChannelSince, QueueSinceMaxOnAnEmptyChannelStartsAtTheFirstSnapshot) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 0);  // no history at all: everything would be "too old"
  SubscribeOptions o;
  o.since = kMax;
  auto q = ch.subscribe_queue(o);
  EXPECT_FALSE(q->try_pop());
  ch.publish(make_snapshot("a"));
  auto item = q->try_pop();
  ASSERT_TRUE(item);
  ASSERT_TRUE(std::holds_alternative<SnapshotPtr>(*item));
  EXPECT_EQ(std::get<SnapshotPtr>(*item)->sequence, 1u);
}

// A gap right after the resume point is numbered from where the stream really resumed (the
// channel's last sequence), not from the requested position that never existed.
TEST(ChannelSince, AGapAfterAResumeBeyondTheEndCountsFromTheLastSequence) {
  for (const std::uint64_t since : {std::uint64_t{100}, kMax}) {
    boost::asio::io_context io;
    SnapshotChannel ch(io.get_executor(), 8);
    for (int i = 0; i < 5; ++i) ch.publish(make_snapshot("a"));
    SubscribeOptions o;
    o.since = since;
    o.capacity = 1;
    o.policy = Backpressure::drop_oldest;
    auto q = ch.subscribe_queue(o);
    ch.publish(make_snapshot("a"));  // 6, dropped by 7
    ch.publish(make_snapshot("a"));  // 7
    auto item = q->try_pop();
    ASSERT_TRUE(item && std::holds_alternative<Gap>(*item)) << since;
    EXPECT_EQ(std::get<Gap>(*item), (Gap{5, 1, "dropped_slow_subscriber"})) << since;
    item = q->try_pop();
    ASSERT_TRUE(item && std::holds_alternative<SnapshotPtr>(*item)) << since;
    EXPECT_EQ(std::get<SnapshotPtr>(*item)->sequence, 7u);
  }
}

}  // namespace
}  // namespace gpustream
