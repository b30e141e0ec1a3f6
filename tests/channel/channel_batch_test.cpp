// Wake-ups batched per io_context: the subscribers of one io_context that a publish wakes share
// one delivery task, run in subscription order; other executors are woken one by one. Wake-ups
// deferred on a thread (detail::DeferredWakes): the snapshots are stored and queued at once, the
// subscribers woken once at flush().
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include "channel_test_util.hpp"
#include "gpustream/detail/deferred_wakes.hpp"

namespace gpustream {
namespace {

using test::Collector;
using test::iota_seq;
using test::make_snapshot;

TEST(ChannelBatch, OnePublishWakesTheSubscribersOfAnIoContextWithOneTask) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);  // poll() does not stop the context
  SnapshotChannel ch(io.get_executor());
  std::vector<Collector> collectors(5);
  std::vector<Subscription> subs;
  for (auto& c : collectors) subs.push_back(ch.subscribe({}, c.on_snapshot()));
  ch.publish(make_snapshot("a"));
  EXPECT_EQ(io.poll(), 1u);  // one handler delivered to all five
  ch.publish(make_snapshot("a"));
  EXPECT_EQ(io.poll(), 1u);
  for (auto& c : collectors) EXPECT_EQ(c.sequences(), iota_seq(1, 2));
}

TEST(ChannelBatch, AnAlreadyScheduledSubscriberIsNotPostedAgain) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector a;
  Collector b;
  auto sa = ch.subscribe({}, a.on_snapshot());
  auto sb = ch.subscribe({}, b.on_snapshot());
  for (int i = 0; i < 3; ++i) ch.publish(make_snapshot("a"));
  EXPECT_EQ(io.poll(), 1u);  // the first publish's task delivered all three
  EXPECT_EQ(a.sequences(), iota_seq(1, 3));
  EXPECT_EQ(b.sequences(), iota_seq(1, 3));
}

TEST(ChannelBatch, EachIoContextGetsItsOwnTask) {
  boost::asio::io_context io1;
  boost::asio::io_context io2;
  SnapshotChannel ch(io1.get_executor());
  Collector c1;
  Collector c2;
  Collector c3;
  SubscribeOptions on2;
  on2.executor = io2.get_executor();
  auto s1 = ch.subscribe({}, c1.on_snapshot());
  auto s2 = ch.subscribe(on2, c2.on_snapshot());
  auto s3 = ch.subscribe(on2, c3.on_snapshot());
  ch.publish(make_snapshot("a"));
  EXPECT_EQ(io1.poll(), 1u);
  EXPECT_EQ(c1.sequences(), iota_seq(1, 1));
  EXPECT_EQ(c2.snapshots(), 0u);  // io2 has not run
  EXPECT_EQ(io2.poll(), 1u);
  EXPECT_EQ(c2.sequences(), iota_seq(1, 1));
  EXPECT_EQ(c3.sequences(), iota_seq(1, 1));
}

TEST(ChannelBatch, DeliversInSubscriptionOrder) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  std::vector<int> order;
  std::vector<Subscription> subs;
  for (int i = 0; i < 4; ++i)
    subs.push_back(ch.subscribe({}, [&order, i](const SnapshotPtr&) { order.push_back(i); }));
  ch.publish(make_snapshot("a"));
  io.poll();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(ChannelBatch, AStrandSubscriberIsWokenOnItsOwn) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector plain1;
  Collector plain2;
  Collector stranded;
  SubscribeOptions o;
  o.executor = boost::asio::make_strand(io);
  auto s1 = ch.subscribe({}, plain1.on_snapshot());
  auto s2 = ch.subscribe(o, stranded.on_snapshot());
  auto s3 = ch.subscribe({}, plain2.on_snapshot());
  ch.publish(make_snapshot("a"));
  io.poll();
  EXPECT_EQ(plain1.sequences(), iota_seq(1, 1));
  EXPECT_EQ(plain2.sequences(), iota_seq(1, 1));
  EXPECT_EQ(stranded.sequences(), iota_seq(1, 1));
}

TEST(ChannelBatch, DestroyingALaterSubscriptionOfTheSameTaskInsideACallback) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  SnapshotChannel ch(io.get_executor());
  auto later = std::make_unique<Subscription>();
  int first_calls = 0;
  int later_calls = 0;
  auto first = ch.subscribe({}, [&](const SnapshotPtr&) {
    ++first_calls;
    later.reset();  // the task still names it: it must neither call it nor touch freed memory
  });
  *later = ch.subscribe({}, [&](const SnapshotPtr&) { ++later_calls; });
  ch.publish(make_snapshot("a"));
  io.poll();
  ch.publish(make_snapshot("a"));
  io.poll();
  EXPECT_EQ(first_calls, 2);
  EXPECT_EQ(later_calls, 0);
  EXPECT_EQ(ch.subscriber_count(), 1u);
}

TEST(ChannelBatch, IoContextDestroyedWithATaskWhoseSubscriptionsAreGone) {
  Collector c;
  auto io = std::make_unique<boost::asio::io_context>();
  SnapshotChannel ch(io->get_executor());
  {
    auto a = ch.subscribe({}, c.on_snapshot());
    auto b = ch.subscribe({}, c.on_snapshot());
    ch.publish(make_snapshot("a"));
  }            // the task alone keeps the two subscribers now
  io.reset();  // destroys it without running it: it releases them
  EXPECT_EQ(c.snapshots(), 0u);
  EXPECT_EQ(ch.subscriber_count(), 0u);
  // The channel still works with a new io_context (the task's memory slot was given back).
  boost::asio::io_context io2;
  SubscribeOptions o;
  o.executor = io2.get_executor();
  Collector c2;
  auto s = ch.subscribe(o, c2.on_snapshot());
  ch.publish(make_snapshot("a"));
  EXPECT_EQ(io2.poll(), 1u);
  EXPECT_EQ(c2.sequences(), iota_seq(2, 2));
}

TEST(ChannelBatch, DeferredWakesStoreAtOnceAndWakeEachSubscriberOnceAtFlush) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  SnapshotChannel ch(io.get_executor());
  Collector plain1;
  Collector plain2;
  Collector stranded;
  SubscribeOptions o;
  o.executor = boost::asio::make_strand(io);
  auto s1 = ch.subscribe({}, plain1.on_snapshot());
  auto s2 = ch.subscribe(o, stranded.on_snapshot());
  auto s3 = ch.subscribe({}, plain2.on_snapshot());
  {
    detail::DeferredWakes wakes;
    EXPECT_TRUE(wakes.active());
    for (int i = 0; i < 3; ++i) ch.publish(make_snapshot("a"));
    // Numbered, stored and queued, but nobody woken yet.
    EXPECT_EQ(ch.last_sequence(), 3u);
    ASSERT_NE(ch.latest("a"), nullptr);
    EXPECT_EQ(ch.latest("a")->sequence, 3u);
    EXPECT_EQ(ch.history_since(0).size(), 3u);
    EXPECT_EQ(io.poll(), 0u);
    EXPECT_EQ(plain1.snapshots() + plain2.snapshots() + stranded.snapshots(), 0u);
    wakes.flush();
    io.poll();
    EXPECT_EQ(plain1.sequences(), iota_seq(1, 3));
    EXPECT_EQ(plain2.sequences(), iota_seq(1, 3));
    EXPECT_EQ(stranded.sequences(), iota_seq(1, 3));
    wakes.flush();  // nothing since: nothing posted
    EXPECT_EQ(io.poll(), 0u);
    ch.publish(make_snapshot("a"));
    EXPECT_EQ(io.poll(), 0u);
  }  // the end of the scope wakes them
  io.poll();
  EXPECT_EQ(plain1.sequences(), iota_seq(1, 4));
  EXPECT_EQ(stranded.sequences(), iota_seq(1, 4));
  // Not deferred any more.
  ch.publish(make_snapshot("a"));
  io.poll();
  EXPECT_EQ(plain2.sequences(), iota_seq(1, 5));
  EXPECT_EQ(stranded.sequences(), iota_seq(1, 5));
}

TEST(ChannelBatch, ASecondDeferredWakesOnTheThreadLeavesTheWakingToTheFirst) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  SnapshotChannel ch(io.get_executor());
  Collector c;
  auto s = ch.subscribe({}, c.on_snapshot());
  detail::DeferredWakes outer;
  {
    detail::DeferredWakes inner;
    EXPECT_FALSE(inner.active());
    ch.publish(make_snapshot("a"));
    inner.flush();
  }
  EXPECT_EQ(io.poll(), 0u);
  outer.flush();
  EXPECT_EQ(io.poll(), 1u);
  EXPECT_EQ(c.sequences(), iota_seq(1, 1));
}

TEST(ChannelBatch, DeferredWakesDeferOnlyTheirOwnThreadsPublishes) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  SnapshotChannel ch(io.get_executor());
  Collector c;
  auto s = ch.subscribe({}, c.on_snapshot());
  detail::DeferredWakes wakes;
  std::thread([&] { ch.publish(make_snapshot("a")); }).join();
  EXPECT_EQ(io.poll(), 1u);  // woken by the other thread's publish
  EXPECT_EQ(c.sequences(), iota_seq(1, 1));
}

}  // namespace
}  // namespace gpustream
