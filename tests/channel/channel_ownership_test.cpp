// Who holds a published snapshot: it lives exactly as long as a subscriber's queue entry, the
// history, the latest cache or a user still holds it, so the last delivery (or the drop or
// unsubscribe that discards the last entry) frees it; a subscriber unsubscribed, or whose
// io_context went, while a delivery task names it leaves nothing behind (LeakSanitizer). The
// parts snapshots share (a process's container: gpustream/shared_optional.hpp) are copied,
// written (copy-on-write) and dropped by subscribers on several threads at once (the suite
// runs under ThreadSanitizer).
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "channel_test_util.hpp"

namespace gpustream {
namespace {

using test::Collector;
using test::iota_seq;
using test::make_snapshot;

using WeakSnapshot = std::weak_ptr<const GpuSnapshot>;

/// No history; publishing a second snapshot of the same probe takes the first out of the
/// latest cache, so only the subscribers' queues hold the first one.
WeakSnapshot publish_then_replace(SnapshotChannel& ch) {
  WeakSnapshot first = ch.publish(make_snapshot("a"));
  ch.publish(make_snapshot("a"));
  return first;
}

TEST(ChannelOwnership, ASnapshotOutlivesASlowSubscriberAndTheLastDeliveryFreesIt) {
  boost::asio::io_context fast_io;
  boost::asio::io_context slow_io;
  SnapshotChannel ch(fast_io.get_executor(), /*history_capacity=*/0);
  Collector fast;
  bool alive_in_last_delivery = false;
  SubscribeOptions on_slow;
  on_slow.executor = slow_io.get_executor();
  auto s1 = ch.subscribe({}, fast.on_snapshot());
  WeakSnapshot first;
  auto s2 = ch.subscribe(on_slow, [&](const SnapshotPtr& s) {
    if (s->sequence == 1) alive_in_last_delivery = !first.expired();
  });
  first = publish_then_replace(ch);
  EXPECT_FALSE(first.expired());  // queued for both
  fast_io.poll();
  EXPECT_EQ(fast.sequences(), iota_seq(1, 2));
  EXPECT_FALSE(first.expired());  // the slow subscriber has not had it yet
  slow_io.poll();
  EXPECT_TRUE(alive_in_last_delivery);
  EXPECT_TRUE(first.expired());  // its delivery was the last holder
}

TEST(ChannelOwnership, AUserCopyKeepsTheSnapshotAfterEveryDelivery) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 0);
  SnapshotPtr kept;
  auto sub = ch.subscribe({}, [&](const SnapshotPtr& s) {
    if (s->sequence == 1) kept = s;
  });
  const WeakSnapshot first = publish_then_replace(ch);
  io.poll();
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->sequence, 1u);
  EXPECT_FALSE(first.expired());
  kept.reset();
  EXPECT_TRUE(first.expired());
}

TEST(ChannelOwnership, UnsubscribingDuringABatchReleasesTheLaterSubscribersEntries) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 0);
  Subscription later;
  int later_calls = 0;
  int first_calls = 0;
  auto sub = ch.subscribe({}, [&](const SnapshotPtr&) {
    ++first_calls;
    later.reset();  // the next subscriber of this very batch
  });
  later = ch.subscribe({}, [&](const SnapshotPtr&) { ++later_calls; });
  const WeakSnapshot first = publish_then_replace(ch);
  EXPECT_EQ(io.poll(), 1u);  // one batch
  EXPECT_EQ(first_calls, 2);
  EXPECT_EQ(later_calls, 0);
  EXPECT_TRUE(first.expired());
}

TEST(ChannelOwnership, ASubscriptionDestroyedWhileItsBatchIsPendingIsNotDeliveredTo) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 0);
  int calls = 0;
  WeakSnapshot first;
  {
    auto sub = ch.subscribe({}, [&](const SnapshotPtr&) { ++calls; });
    first = publish_then_replace(ch);
    EXPECT_FALSE(first.expired());
  }                              // unsubscribed with a batch naming it still posted
  EXPECT_TRUE(first.expired());  // its queue was discarded
  EXPECT_EQ(io.poll(), 1u);      // the batch runs, finds it gone (LeakSanitizer: and lets it go)
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(ch.subscriber_count(), 0u);
}

TEST(ChannelOwnership, AnIoContextDestroyedWithABatchPendingLeavesNothingBehind) {
  auto io = std::make_unique<boost::asio::io_context>();
  SnapshotChannel ch(io->get_executor(), 0);
  int calls = 0;
  auto sub = ch.subscribe({}, [&](const SnapshotPtr&) { ++calls; });
  const WeakSnapshot first = publish_then_replace(ch);
  io.reset();  // the batch is destroyed without running
  // The subscriber still counts as scheduled: a publish does not post to the dead io_context.
  const WeakSnapshot third = ch.publish(make_snapshot("b"));
  EXPECT_FALSE(first.expired());  // still queued for the subscriber
  sub.reset();
  EXPECT_TRUE(first.expired());
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(third.expired());  // the latest cache holds it
}

TEST(ChannelOwnership, AQueuePopGivesAReferenceOfItsOwn) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 0);
  auto q = ch.subscribe_queue({});
  const WeakSnapshot first = publish_then_replace(ch);
  auto item = q->try_pop();
  ASSERT_TRUE(item.has_value());
  auto* snap = std::get_if<SnapshotPtr>(&*item);
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ((*snap)->sequence, 1u);
  q->close();  // discards the second
  EXPECT_FALSE(first.expired());
  item.reset();
  EXPECT_TRUE(first.expired());
}

TEST(ChannelOwnership, DroppedAndLostEntriesReleaseTheirShare) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 0);
  SubscribeOptions drop;
  drop.capacity = 1;  // drop_oldest
  SubscribeOptions lossless;
  lossless.capacity = 1;
  lossless.policy = Backpressure::lossless;
  auto a = ch.subscribe_queue(drop);
  auto b = ch.subscribe_queue(lossless);
  const WeakSnapshot first = ch.publish(make_snapshot("a"));
  const WeakSnapshot second = ch.publish(make_snapshot("a"));  // a drops #1, b loses #2
  ch.publish(make_snapshot("a"));  // the latest cache lets #2 go; a drops #2, b loses #3
  EXPECT_FALSE(first.expired());   // b holds it
  EXPECT_TRUE(second.expired());
  EXPECT_EQ(a->dropped(), 2u);
  EXPECT_EQ(b->lost(), 2u);
  b->close();
  EXPECT_TRUE(first.expired());
}

TEST(ChannelOwnership, EverySnapshotIsFreedWhenPublishersDeliveriesAndUnsubscribesRace) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  SnapshotChannel ch(io.get_executor(), 4);
  std::vector<Subscription> subs;
  std::atomic<std::uint64_t> last_seen{0};
  for (int i = 0; i < 8; ++i)
    subs.push_back(ch.subscribe({}, [&](const SnapshotPtr& s) { last_seen.store(s->sequence); }));
  std::thread runner([&] { io.run(); });
  constexpr int kPublishes = 400;
  std::vector<WeakSnapshot> published;
  published.reserve(kPublishes);
  std::thread publisher([&] {
    for (int i = 0; i < kPublishes; ++i)
      published.push_back(ch.publish(make_snapshot(i % 2 ? "a" : "b")));
  });
  for (std::size_t i = 0; i < subs.size(); i += 2) subs[i].reset();  // while deliveries run
  publisher.join();
  for (auto& s : subs) s.reset();
  guard.reset();
  runner.join();
  EXPECT_LE(last_seen.load(), static_cast<std::uint64_t>(kPublishes));
  // What the channel keeps: the history's 4 and the latest of each probe (among them).
  std::size_t alive = 0;
  for (const auto& w : published) alive += w.expired() ? 0 : 1;
  EXPECT_EQ(alive, 4u);
  for (std::size_t i = 0; i + 4 < published.size(); ++i)
    EXPECT_TRUE(published[i].expired()) << "snapshot " << i + 1;
}

/// A snapshot whose processes run in containers: copies of it share each container's block.
GpuSnapshot with_containers() {
  GpuSnapshot s = make_snapshot("a");
  s.devices.resize(1);
  for (int p = 0; p < 8; ++p) {
    ProcessSample ps;
    ps.pid = 100 + p;
    ps.container =
        ProcessContainer{"containerd", std::string(64, static_cast<char>('a' + p)), "", ""};
    s.devices[0].processes.push_back(std::move(ps));
  }
  return s;
}

TEST(ChannelOwnership, SubscribersOnSeveralThreadsCopyWriteAndDropSharedPlacements) {
  constexpr int kThreads = 4;
  constexpr int kPublishes = 200;
  const GpuSnapshot origin = with_containers();
  const auto& origin_container = origin.devices[0].processes[0].container;
  ASSERT_EQ(origin_container.use_count(), 1);
  std::vector<std::unique_ptr<boost::asio::io_context>> ios;
  std::vector<std::thread> threads;
  boost::asio::io_context publisher_io;
  std::atomic<int> delivered{0};
  std::atomic<int> saw_other_id{0};
  {
    SnapshotChannel ch(publisher_io.get_executor(), /*history_capacity=*/16);
    std::vector<Subscription> subs;
    for (int t = 0; t < kThreads; ++t) {
      ios.push_back(std::make_unique<boost::asio::io_context>());
      SubscribeOptions o;
      o.executor = ios.back()->get_executor();
      o.capacity = kPublishes;  // none dropped
      subs.push_back(ch.subscribe(o, [&, t](const SnapshotPtr& s) {
        GpuSnapshot copy = *s;  // shares every container's block
        auto& mine = copy.devices[0].processes[static_cast<std::size_t>(t)].container;
        mine->id = "thread-" + std::to_string(t);  // copy-on-write: the others never see it
        for (const auto& p : s->devices[0].processes)
          if (p.container->id.rfind("thread-", 0) == 0) ++saw_other_id;
        ++delivered;
      }));
    }
    for (auto& io : ios) {
      threads.emplace_back([io = io.get()] {
        auto guard = boost::asio::make_work_guard(*io);
        io->run();  // until stop()
      });
    }
    for (int i = 0; i < kPublishes; ++i) ch.publish(origin);  // each a copy sharing the blocks
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (delivered.load() < kThreads * kPublishes && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polled; the bound fails a hang
    for (auto& io : ios) io->stop();
    for (auto& th : threads) th.join();
    EXPECT_EQ(delivered.load(), kThreads * kPublishes);
  }
  EXPECT_EQ(saw_other_id.load(), 0) << "a write through a shared block reached another snapshot";
  EXPECT_EQ(origin_container->id, std::string(64, 'a'));
  EXPECT_EQ(origin_container.use_count(), 1) << "every copy's share was given back";
}

}  // namespace
}  // namespace gpustream
