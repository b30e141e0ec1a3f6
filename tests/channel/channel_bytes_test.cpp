// SnapshotChannel's byte bounds: the history and each subscriber's queue hold at most
// max_bytes of snapshots (approx_bytes), whatever their counts allow.
#include <memory>

#include <boost/asio/io_context.hpp>

#include "channel_test_util.hpp"

namespace gpustream {
namespace {

using test::Collector;
using test::iota_seq;
using test::make_snapshot;

/// A snapshot of `processes` processes on one device: about processes × 100+ bytes.
GpuSnapshot heavy_snapshot(std::string probe, int processes) {
  GpuSnapshot s = make_snapshot(std::move(probe));
  for (int p = 0; p < processes; ++p) {
    ProcessSample ps;
    ps.pid = p + 1;
    ps.name = "a-process-name-past-the-small-buffer-" + std::to_string(p);
    s.devices[0].processes.push_back(std::move(ps));
  }
  s.devices[0].processes.shrink_to_fit();  // as a copy (what publish stores) has it
  return s;
}

SubscribeOptions with(Backpressure p, std::size_t capacity, std::size_t max_bytes) {
  SubscribeOptions o;
  o.policy = p;
  o.capacity = capacity;
  o.max_bytes = max_bytes;
  return o;
}

TEST(ChannelBytes, HistoryKeepsTheNewestThatFitInItsBytes) {
  boost::asio::io_context io;
  const GpuSnapshot heavy = heavy_snapshot("a", 1000);
  const std::size_t each = approx_bytes(heavy);
  SnapshotChannel ch(io.get_executor(), 1024, 10 * each + each / 2);
  for (int i = 0; i < 50; ++i) ch.publish(heavy);
  EXPECT_EQ(ch.history_size(), 10u);
  EXPECT_EQ(ch.history_bytes(), 10 * each);
  EXPECT_LE(ch.history_bytes(), ch.history_max_bytes());

  std::optional<Gap> gap;
  const auto h = ch.history_since(0, &gap);
  ASSERT_EQ(h.size(), 10u);
  EXPECT_EQ(h.front()->sequence, 41u);
  EXPECT_EQ(h.back()->sequence, 50u);
  ASSERT_TRUE(gap);
  EXPECT_EQ(*gap, (Gap{0, 40, "history_too_old"}));

  // Small snapshots again: the count bound takes over as the bytes allow more.
  for (int i = 0; i < 2000; ++i) ch.publish(make_snapshot("a"));
  EXPECT_EQ(ch.history_size(), 1024u);
  EXPECT_EQ(ch.history_bytes(), 1024 * approx_bytes(make_snapshot("a")));
}

TEST(ChannelBytes, HistoryKeepsTheNewestEvenWhenItAloneIsOverTheBound) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 16, 1024);
  ch.publish(make_snapshot("a"));
  ch.publish(heavy_snapshot("a", 100));
  EXPECT_EQ(ch.history_size(), 1u);
  EXPECT_EQ(ch.history_since(0).front()->sequence, 2u);
}

TEST(ChannelBytes, DropOldestDropsByBytesAndReportsTheGap) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  const GpuSnapshot heavy = heavy_snapshot("a", 500);
  const std::size_t each = approx_bytes(heavy);
  Collector c;
  auto sub =
      ch.subscribe(with(Backpressure::drop_oldest, 64, 3 * each), c.on_snapshot(), c.on_gap());
  for (int i = 0; i < 10; ++i) ch.publish(heavy);
  io.run();
  const auto items = c.items();
  ASSERT_EQ(items.size(), 4u);
  ASSERT_TRUE(items[0].gap);
  EXPECT_EQ(*items[0].gap, (Gap{0, 7, "dropped_slow_subscriber"}));
  EXPECT_EQ(c.sequences(), iota_seq(8, 10));
  EXPECT_EQ(sub.dropped(), 7u);
}

TEST(ChannelBytes, LosslessLosesWhatTheBytesCannotHoldAndCountsIt) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  const GpuSnapshot heavy = heavy_snapshot("a", 500);
  const std::size_t each = approx_bytes(heavy);
  auto q = ch.subscribe_queue(with(Backpressure::lossless, 64, 3 * each));
  for (int i = 0; i < 10; ++i) ch.publish(heavy);
  EXPECT_EQ(q->size(), 3u);
  EXPECT_EQ(q->bytes(), 3 * each);
  EXPECT_EQ(q->lost(), 7u);
  std::vector<std::uint64_t> seqs;
  std::optional<Gap> gap;
  while (auto item = q->try_pop()) {
    if (auto* s = std::get_if<SnapshotPtr>(&*item))
      seqs.push_back((*s)->sequence);
    else
      gap = std::get<Gap>(*item);
  }
  EXPECT_EQ(seqs, iota_seq(1, 3));
  ASSERT_TRUE(gap);
  EXPECT_EQ(*gap, (Gap{3, 7, "lossless_bound_exceeded"}));
  EXPECT_EQ(q->bytes(), 0u);
}

TEST(ChannelBytes, LatestKeepsTheNewestProbesThatFit) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  const std::size_t each = approx_bytes(heavy_snapshot("a", 500));
  auto q = ch.subscribe_queue(with(Backpressure::latest, 64, 2 * each + each / 2));
  for (const char* probe : {"a", "b", "c", "a"}) ch.publish(heavy_snapshot(probe, 500));
  // The bytes hold two: c pushes the first a out, the new a pushes b out.
  std::vector<std::string> probes;
  while (auto item = q->try_pop()) probes.push_back(std::get<SnapshotPtr>(*item)->probe);
  EXPECT_EQ(probes, (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(q->dropped(), 2u);
}

TEST(ChannelBytes, AQueueAlwaysTakesOneSnapshotHoweverLarge) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  auto q = ch.subscribe_queue(with(Backpressure::lossless, 8, 1));
  ch.publish(heavy_snapshot("a", 100));
  ch.publish(heavy_snapshot("a", 100));
  EXPECT_EQ(q->size(), 1u);
  EXPECT_EQ(q->lost(), 1u);
}

// The worst input: snapshots of about a megabyte, published far past every bound, to a queue
// nobody pops and a callback subscriber whose executor never runs. What stays alive is what the
// bounds allow, not what was published.
TEST(ChannelBytes, SlowSubscribersAndTheHistoryKeepOnlyTheirBytesAlive) {
  boost::asio::io_context io;  // never run: the callback subscriber never drains
  const GpuSnapshot heavy = heavy_snapshot("a", 8000);
  const std::size_t each = approx_bytes(heavy);
  ASSERT_GT(each, std::size_t{500} << 10);
  const std::size_t history_bytes = 8 * each;
  const std::size_t queue_bytes = 4 * each;
  SnapshotChannel ch(io.get_executor(), 1024, history_bytes);
  auto q = ch.subscribe_queue(with(Backpressure::drop_oldest, 1024, queue_bytes));
  Collector c;
  auto sub = ch.subscribe(with(Backpressure::lossless, 1024, queue_bytes), c.on_snapshot());

  std::vector<std::weak_ptr<const GpuSnapshot>> published;
  for (int i = 0; i < 100; ++i) published.push_back(ch.publish(heavy));
  std::size_t alive = 0;
  for (const auto& w : published) alive += w.expired() ? 0 : 1;
  // The history its newest 8 (93..100; the queue's newest 4 and `latest` are among them), the
  // callback subscriber its first 4. Without the byte bounds all 100 would be alive.
  EXPECT_EQ(alive, 8u + 4u);
  EXPECT_LE(alive * each, history_bytes + 2 * queue_bytes);
  EXPECT_EQ(q->bytes(), queue_bytes);
  EXPECT_EQ(q->dropped(), 96u);
  EXPECT_EQ(sub.lost(), 96u);
}

}  // namespace
}  // namespace gpustream
