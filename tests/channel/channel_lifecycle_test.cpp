// Subscriptions: unsubscribe (inside the callback, from another thread), resume from history,
// lifetimes of the channel, the io_context and the handle.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include "channel_test_util.hpp"

namespace gpustream {
namespace {

using test::Collector;
using test::iota_seq;
using test::make_snapshot;

TEST(ChannelLifecycle, ResetInsideItsOwnCallbackStopsFurtherCallbacks) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Subscription sub;
  int calls = 0;
  sub = ch.subscribe({}, [&](const SnapshotPtr&) {
    ++calls;
    sub.reset();
  });
  for (int i = 0; i < 5; ++i) ch.publish(make_snapshot("a"));
  io.run();
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(sub.active());
  EXPECT_EQ(ch.subscriber_count(), 0u);
}

TEST(ChannelLifecycle, DestroyingTheHandleInsideItsCallbackIsSafe) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  auto holder = std::make_unique<Subscription>();
  int calls = 0;
  *holder = ch.subscribe({}, [&](const SnapshotPtr&) {
    ++calls;
    holder.reset();  // destroys the Subscription, and with it this lambda's owner
  });
  ch.publish(make_snapshot("a"));
  ch.publish(make_snapshot("a"));
  io.run();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ch.subscriber_count(), 0u);
}

TEST(ChannelLifecycle, ResetBeforeDeliveryDeliversNothing) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector c;
  auto sub = ch.subscribe({}, c.on_snapshot());
  ch.publish(make_snapshot("a"));  // delivery posted
  sub.reset();
  io.run();
  EXPECT_EQ(c.snapshots(), 0u);
}

TEST(ChannelLifecycle, ResetFromAnotherThreadWhilePublishing) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  SnapshotChannel ch(io.get_executor());
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> calls{0};
    std::atomic<bool> stop{false};
    auto sub = ch.subscribe({}, [&](const SnapshotPtr&) { calls.fetch_add(1); });
    std::thread publisher([&] {
      while (!stop.load()) ch.publish(make_snapshot("a"));
    });
    // Wait until deliveries flow, then unsubscribe while the publisher keeps going.
    Collector first;
    auto probe_sub = ch.subscribe({}, first.on_snapshot());
    ASSERT_TRUE(first.wait_for_snapshots(3));
    sub.reset();
    const int after_reset = calls.load();
    // Let more snapshots go through another subscriber: the reset one must stay silent.
    const auto seen = first.snapshots();
    ASSERT_TRUE(first.wait_for_snapshots(seen + 50));
    stop = true;
    publisher.join();
    EXPECT_EQ(calls.load(), after_reset) << "a callback started after reset() returned";
    EXPECT_GT(after_reset, 0);
  }
  guard.reset();
  runner.join();
}

TEST(ChannelLifecycle, ResetWaitsForARunningCallback) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  SnapshotChannel ch(io.get_executor());
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false, finished = false, reset_returned = false;
  auto sub = ch.subscribe({}, [&](const SnapshotPtr&) {
    std::unique_lock lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return release; });
    finished = true;
  });
  ch.publish(make_snapshot("a"));
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return entered; }));
  }
  bool finished_when_reset_returned = false;
  std::thread resetter([&] {
    sub.reset();
    std::lock_guard lock(mu);
    finished_when_reset_returned = finished;
    reset_returned = true;
    cv.notify_all();
  });
  {
    // reset() must not return while the callback runs. Correct code never returns here, so
    // this short wait cannot fail spuriously; it only gives a broken reset() time to show.
    std::unique_lock lock(mu);
    EXPECT_FALSE(cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return reset_returned; }));
    release = true;
    cv.notify_all();
  }
  resetter.join();
  EXPECT_TRUE(finished_when_reset_returned);
  guard.reset();
  runner.join();
}

TEST(ChannelLifecycle, DestroySubscriptionsOnOtherThreadsWithAThreadPoolExecutor) {
  // Callbacks on two io threads, publishers and destroyers on others (exercised under TSan).
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::thread r1([&] { io.run(); }), r2([&] { io.run(); });
  SnapshotChannel ch(io.get_executor());
  std::atomic<bool> stop{false};
  std::thread publisher([&] {
    while (!stop.load()) ch.publish(make_snapshot("a"));
  });
  for (int i = 0; i < 50; ++i) {
    std::atomic<int> calls{0};
    std::atomic<bool> gone{false};
    std::atomic<bool> late{false};
    auto sub = std::make_unique<Subscription>(ch.subscribe({}, [&](const SnapshotPtr&) {
      if (gone.load()) late = true;
      calls.fetch_add(1);
    }));
    std::thread killer([&] {
      sub.reset();
      gone = true;
    });
    killer.join();
    EXPECT_FALSE(late.load());
  }
  stop = true;
  publisher.join();
  guard.reset();
  r1.join();
  r2.join();
  EXPECT_EQ(ch.subscriber_count(), 0u);
}

TEST(ChannelLifecycle, ResumeFromHistoryWithoutGapOrDuplicate) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 16);
  for (int i = 0; i < 5; ++i) ch.publish(make_snapshot("a"));
  Collector c;
  SubscribeOptions o;
  o.since = 2;
  auto sub = ch.subscribe(o, c.on_snapshot(), c.on_gap());
  for (int i = 0; i < 3; ++i) ch.publish(make_snapshot("a"));
  io.run();
  EXPECT_EQ(c.sequences(), iota_seq(3, 8));
  EXPECT_TRUE(c.gaps().empty());
}

TEST(ChannelLifecycle, ResumeFromTheNewestGivesOnlyLiveSnapshots) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 16);
  for (int i = 0; i < 5; ++i) ch.publish(make_snapshot("a"));
  auto o = SubscribeOptions{};
  o.since = ch.last_sequence();
  auto q = ch.subscribe_queue(o);
  EXPECT_FALSE(q->try_pop());
  ch.publish(make_snapshot("a"));
  auto item = q->try_pop();
  ASSERT_TRUE(item);
  EXPECT_EQ(std::get<SnapshotPtr>(*item)->sequence, 6u);
}

TEST(ChannelLifecycle, ResumeTooOldStartsWithAGap) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 4);
  for (int i = 0; i < 10; ++i) ch.publish(make_snapshot("a"));  // history: 7..10
  Collector c;
  SubscribeOptions o;
  o.since = 3;
  auto sub = ch.subscribe(o, c.on_snapshot(), c.on_gap());
  io.run();
  auto items = c.items();
  ASSERT_EQ(items.size(), 5u);
  ASSERT_TRUE(items[0].gap);
  EXPECT_EQ(*items[0].gap, (Gap{3, 3, "history_too_old"}));
  EXPECT_EQ(c.sequences(), iota_seq(7, 10));
}

TEST(ChannelLifecycle, ResumeTooOldWithEmptyHistoryStillReportsTheGap) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 0);
  for (int i = 0; i < 4; ++i) ch.publish(make_snapshot("a"));
  SubscribeOptions o;
  o.since = 1;
  auto q = ch.subscribe_queue(o);
  auto item = q->try_pop();
  ASSERT_TRUE(item && std::holds_alternative<Gap>(*item));
  EXPECT_EQ(std::get<Gap>(*item), (Gap{1, 3, "history_too_old"}));
}

TEST(ChannelLifecycle, ResumeAppliesTheFilter) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  for (const char* p : {"a", "b", "a", "b"}) ch.publish(make_snapshot(p));
  Collector c;
  SubscribeOptions o;
  o.since = 0;
  o.filter.probes = {"b"};
  auto sub = ch.subscribe(o, c.on_snapshot());
  io.run();
  EXPECT_EQ(c.sequences(), (std::vector<std::uint64_t>{2, 4}));
}

TEST(ChannelLifecycle, ChannelDestroyedBeforeTheSubscription) {
  boost::asio::io_context io;
  Collector c;
  Subscription sub;
  {
    SnapshotChannel ch(io.get_executor());
    sub = ch.subscribe({}, c.on_snapshot());
    ch.publish(make_snapshot("a"));
  }
  EXPECT_FALSE(sub.active());
  io.run();  // what was queued is still delivered
  EXPECT_EQ(c.snapshots(), 1u);
  sub.reset();
}

TEST(ChannelLifecycle, IoContextDestroyedWithPendingDeliveries) {
  Collector c;
  auto io = std::make_unique<boost::asio::io_context>();
  SnapshotChannel ch(io->get_executor());
  {
    auto sub = ch.subscribe({}, c.on_snapshot());
    ch.publish(make_snapshot("a"));
    io.reset();  // destroys the posted delivery task (and its memory) without running it
  }
  EXPECT_EQ(c.snapshots(), 0u);
}

TEST(ChannelLifecycle, MovedSubscriptionKeepsWorking) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector c;
  Subscription a = ch.subscribe({}, c.on_snapshot());
  Subscription b = std::move(a);
  EXPECT_FALSE(a.active());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_TRUE(b.active());
  ch.publish(make_snapshot("a"));
  io.run();
  EXPECT_EQ(c.snapshots(), 1u);
  b = Subscription{};
  EXPECT_EQ(ch.subscriber_count(), 0u);
}

TEST(ChannelLifecycle, CallbacksOfOneSubscriptionNeverOverlap) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::vector<std::thread> runners;
  for (int i = 0; i < 3; ++i) runners.emplace_back([&] { io.run(); });
  SnapshotChannel ch(io.get_executor());
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  Collector c;
  auto cb = c.on_snapshot();
  auto sub = ch.subscribe({}, [&](const SnapshotPtr& s) {
    if (inside.fetch_add(1) != 0) overlapped = true;
    cb(s);
    inside.fetch_sub(1);
  });
  for (int i = 0; i < 2000; ++i) ch.publish(make_snapshot("a"));
  ASSERT_TRUE(c.wait_for_snapshots(64));  // at least the last queue's worth arrives
  sub.reset();
  guard.reset();
  for (auto& t : runners) t.join();
  EXPECT_FALSE(overlapped.load());
}

TEST(ChannelLifecycle, WorksThroughAStrandExecutor) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector c;
  SubscribeOptions o;
  o.executor = boost::asio::make_strand(io);
  auto sub = ch.subscribe(o, c.on_snapshot());
  for (int i = 0; i < 3; ++i) ch.publish(make_snapshot("a"));
  io.run();
  EXPECT_EQ(c.sequences(), iota_seq(1, 3));
}

}  // namespace
}  // namespace gpustream
