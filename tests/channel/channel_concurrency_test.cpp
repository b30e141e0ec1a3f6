// Concurrent publishers, callback subscribers on several io threads, and queue consumers.
#include <algorithm>
#include <atomic>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "channel_test_util.hpp"

namespace gpustream {
namespace {

using test::Collector;
using test::make_snapshot;

constexpr int kPublishers = 4;
constexpr int kPerPublisher = 400;
constexpr std::uint64_t kTotal = kPublishers * kPerPublisher;

void publish_concurrently(SnapshotChannel& ch) {
  std::vector<std::thread> publishers;
  for (int p = 0; p < kPublishers; ++p)
    publishers.emplace_back([&ch, p] {
      for (int i = 0; i < kPerPublisher; ++i) ch.publish(make_snapshot("p" + std::to_string(p)));
    });
  for (auto& t : publishers) t.join();
}

bool strictly_increasing(const std::vector<std::uint64_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), std::greater_equal<>()) == v.end();
}

TEST(ChannelConcurrency, ConcurrentPublishersAndLosslessSubscribers) {
  boost::asio::thread_pool pool(2);
  SnapshotChannel ch(pool.get_executor(), 16);
  SubscribeOptions all;
  all.policy = Backpressure::lossless;
  all.capacity = kTotal;
  SubscribeOptions only_p1 = all;
  only_p1.filter.probes = {"p1"};
  std::vector<std::unique_ptr<Collector>> collectors;
  std::vector<Subscription> subs;
  for (int i = 0; i < 4; ++i) {
    collectors.push_back(std::make_unique<Collector>());
    subs.push_back(ch.subscribe(i == 3 ? only_p1 : all, collectors.back()->on_snapshot(),
                                collectors.back()->on_gap()));
  }
  publish_concurrently(ch);
  EXPECT_EQ(ch.last_sequence(), kTotal);
  for (int i = 0; i < 4; ++i) {
    const std::size_t want = i == 3 ? kPerPublisher : kTotal;
    ASSERT_TRUE(collectors[i]->wait_for_snapshots(want)) << "subscriber " << i;
    auto seqs = collectors[i]->sequences();
    EXPECT_EQ(seqs.size(), want);
    EXPECT_TRUE(strictly_increasing(seqs)) << "subscriber " << i;
    EXPECT_TRUE(collectors[i]->gaps().empty());
    EXPECT_EQ(subs[i].lost(), 0u);
  }
  subs.clear();
  pool.join();
}

TEST(ChannelConcurrency, SlowSubscribersCountExactlyWhatTheyMiss) {
  // Deliveries run only after everything was published: the bound is certainly exceeded.
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 16);
  SubscribeOptions lossless;
  lossless.policy = Backpressure::lossless;
  lossless.capacity = 100;
  SubscribeOptions drop = lossless;
  drop.policy = Backpressure::drop_oldest;
  Collector lc, dc;
  auto ls = ch.subscribe(lossless, lc.on_snapshot(), lc.on_gap());
  auto ds = ch.subscribe(drop, dc.on_snapshot(), dc.on_gap());
  publish_concurrently(ch);
  io.run();
  EXPECT_EQ(ls.lost(), kTotal - 100);
  EXPECT_EQ(lc.snapshots(), 100u);
  ASSERT_EQ(lc.gaps().size(), 1u);
  EXPECT_EQ(lc.gaps()[0].missed, kTotal - 100);
  EXPECT_EQ(ds.dropped(), kTotal - 100);
  EXPECT_EQ(dc.snapshots(), 100u);
  ASSERT_EQ(dc.gaps().size(), 1u);
  EXPECT_EQ(dc.gaps()[0].missed, kTotal - 100);
  EXPECT_TRUE(strictly_increasing(lc.sequences()));
  EXPECT_TRUE(strictly_increasing(dc.sequences()));
  EXPECT_EQ(dc.sequences().front(), kTotal - 99);
}

TEST(ChannelConcurrency, SubscribeAndUnsubscribeWhilePublishing) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::thread r1([&] { io.run(); }), r2([&] { io.run(); });
  SnapshotChannel ch(io.get_executor(), 64);
  std::atomic<bool> stop{false};
  std::thread publisher([&] {
    while (!stop.load()) ch.publish(make_snapshot("a"));
  });
  std::vector<std::thread> churners;
  for (int t = 0; t < 2; ++t)
    churners.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        SubscribeOptions o;
        o.since = ch.last_sequence();
        o.policy = i % 2 ? Backpressure::lossless : Backpressure::drop_oldest;
        o.capacity = 8;
        std::atomic<std::uint64_t> last{0};
        std::atomic<bool> out_of_order{false};
        auto sub = ch.subscribe(o, [&](const SnapshotPtr& s) {
          if (s->sequence <= last.load()) out_of_order = true;
          last = s->sequence;
        });
        auto q = ch.subscribe_queue(o);
        (void)q->try_pop();
        sub.reset();
        EXPECT_FALSE(out_of_order.load());
      }
    });
  for (auto& t : churners) t.join();
  stop = true;
  publisher.join();
  guard.reset();
  r1.join();
  r2.join();
  EXPECT_EQ(ch.subscriber_count(), 0u);
}

TEST(ChannelConcurrency, QueueConsumersOnSeveralThreadsShareTheStream) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  SubscribeOptions o;
  o.policy = Backpressure::lossless;
  o.capacity = kTotal;
  auto q = ch.subscribe_queue(o);
  std::atomic<std::uint64_t> popped{0};
  std::vector<std::vector<std::uint64_t>> seen(2);
  std::vector<std::thread> consumers;
  for (int c = 0; c < 2; ++c)
    consumers.emplace_back([&, c] {
      while (popped.load() < kTotal) {
        auto item = q->pop_for(std::chrono::milliseconds(20));
        if (!item) continue;
        seen[c].push_back(std::get<SnapshotPtr>(*item)->sequence);
        popped.fetch_add(1);
      }
    });
  publish_concurrently(ch);
  for (auto& t : consumers) t.join();
  std::vector<std::uint64_t> all;
  for (auto& v : seen) {
    EXPECT_TRUE(strictly_increasing(v));
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, test::iota_seq(1, kTotal));
}

}  // namespace
}  // namespace gpustream
