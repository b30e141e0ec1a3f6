// EventChannel: numbering, filters, recent ring, totals, and the bounds that keep an event
// storm from growing memory (per subscriber queue, recent ring, label sets).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/events.hpp"

namespace gpustream {
namespace {

GpuEvent xid(std::string device, std::uint64_t number) {
  GpuEvent e;
  e.probe = "nvidia";
  e.device_id = std::move(device);
  e.kind = EventKind::xid;
  e.data = number;
  e.time_unix_ns = 1764135600000000000;
  return e;
}

TEST(EventChannel, KindNamesRoundTrip) {
  for (std::size_t i = 0; i < kEventKindCount; ++i) {
    const auto k = static_cast<EventKind>(i);
    EXPECT_EQ(event_kind_from_string(to_string(k)), k);
  }
  EXPECT_EQ(to_string(EventKind::xid), "xid");
  EXPECT_EQ(to_string(EventKind::ecc_double_bit), "ecc_double_bit");
  EXPECT_FALSE(event_kind_from_string("Xid"));
}

TEST(EventChannel, NumbersDeliversInOrderAndFilters) {
  boost::asio::io_context io;
  EventChannel ch(io.get_executor());
  std::vector<EventPtr> all, gpu1;
  auto s1 = ch.subscribe([&](const EventPtr& e) { all.push_back(e); });
  EventSubscribeOptions only1;
  only1.devices = {"GPU-1"};
  auto s2 = ch.subscribe([&](const EventPtr& e) { gpu1.push_back(e); }, only1);
  const auto p = ch.publish(xid("GPU-0", 79));
  ch.publish(xid("GPU-1", 48));
  EXPECT_EQ(p->sequence, 1U);
  EXPECT_TRUE(all.empty());  // delivered on the executor, not inside publish
  io.run();
  ASSERT_EQ(all.size(), 2U);
  EXPECT_EQ(all[0].get(), p.get());  // the same object, not a copy
  EXPECT_EQ(all[1]->sequence, 2U);
  ASSERT_EQ(gpu1.size(), 1U);
  EXPECT_EQ(gpu1[0]->device_id, "GPU-1");
  EXPECT_EQ(*gpu1[0]->data, 48U);
  EXPECT_EQ(ch.last_sequence(), 2U);
}

TEST(EventChannel, ResetStopsDeliveries) {
  boost::asio::io_context io;
  EventChannel ch(io.get_executor());
  int n = 0;
  auto s = ch.subscribe([&](const EventPtr&) { ++n; });
  ch.publish(xid("GPU-0", 13));
  s.reset();
  ch.publish(xid("GPU-0", 13));
  io.run();
  EXPECT_EQ(n, 0);
  EXPECT_FALSE(s.active());
}

TEST(EventChannel, TotalsCountByDeviceKindAndXid) {
  boost::asio::io_context io;
  EventChannel ch(io.get_executor());
  ch.publish(xid("GPU-0", 79));
  ch.publish(xid("GPU-0", 79));
  ch.publish(xid("GPU-0", 48));
  GpuEvent ecc;
  ecc.device_id = "GPU-1";
  ecc.kind = EventKind::ecc_single_bit;
  ch.publish(ecc);
  const auto t = ch.totals();
  EXPECT_EQ((t.by_kind.at({"GPU-0", EventKind::xid})), 3U);
  EXPECT_EQ((t.by_kind.at({"GPU-1", EventKind::ecc_single_bit})), 1U);
  EXPECT_EQ((t.by_xid.at({"GPU-0", "79"})), 2U);
  EXPECT_EQ((t.by_xid.at({"GPU-0", "48"})), 1U);
  EXPECT_EQ(t.counters.published, 4U);
}

// The worst input: a storm of distinct Xid numbers on devices with long ids, to a subscriber
// that never runs. Every structure stays within its bound; the losses are counted exactly.
TEST(EventChannel, StormIsBoundedInCountAndBytes) {
  boost::asio::io_context io;  // never run: the subscriber falls behind from the start
  EventLimits limits;
  limits.recent = 32;
  limits.recent_bytes = 64 * 1024;
  limits.queue = 100;
  limits.queue_bytes = 16 * 1024;  // the tighter bound here
  limits.xid_labels = 8;
  limits.devices = 4;
  EventChannel ch(io.get_executor(), limits);
  auto sub = ch.subscribe([](const EventPtr&) {});
  constexpr std::uint64_t kStorm = 20000;
  const std::string long_id(1000, 'x');
  for (std::uint64_t i = 0; i < kStorm; ++i) ch.publish(xid(long_id + std::to_string(i % 10), i));

  const auto recent = ch.recent();
  EXPECT_LE(recent.size(), limits.recent);
  std::size_t bytes = 0;
  for (const auto& e : recent) bytes += event_bytes(*e);
  EXPECT_LE(bytes, limits.recent_bytes);
  EXPECT_EQ(recent.back()->sequence, kStorm);

  const auto per_event = event_bytes(*recent.back());
  const auto queued = limits.queue_bytes / per_event;  // what fits in the subscriber's bytes
  ASSERT_GT(queued, 0U);
  EXPECT_EQ(sub.dropped(), kStorm - queued);
  EXPECT_EQ(ch.counters().dropped, kStorm - queued);
  EXPECT_EQ(ch.counters().published, kStorm);

  const auto t = ch.totals();
  // 4 devices kept, the other 6 counted under "other"; per device at most 8 Xid labels + other.
  std::vector<std::string> devices;
  for (const auto& [key, n] : t.by_kind) devices.push_back(key.first);
  EXPECT_EQ(devices.size(), limits.devices + 1);
  EXPECT_TRUE(std::find(devices.begin(), devices.end(), "other") != devices.end());
  EXPECT_LE(t.by_xid.size(), (limits.devices + 1) * (limits.xid_labels + 1));
  std::uint64_t sum = 0;
  for (const auto& [key, n] : t.by_xid) sum += n;
  EXPECT_EQ(sum, kStorm);  // nothing uncounted, only folded
}

TEST(EventChannel, SinkOutlivingTheChannelDoesNothing) {
  boost::asio::io_context io;
  std::function<void(GpuEvent)> sink;
  {
    EventChannel ch(io.get_executor());
    sink = ch.sink();
    sink(xid("GPU-0", 79));
    EXPECT_EQ(ch.last_sequence(), 1U);
  }
  sink(xid("GPU-0", 79));  // the channel is gone: dropped (no use after free under ASan)
}

TEST(EventQueue, PopsInOrderAndFilters) {
  boost::asio::io_context io;  // never run: a queue needs no executor
  EventChannel ch(io.get_executor());
  auto all = ch.subscribe_queue();
  EventSubscribeOptions only1;
  only1.devices = {"GPU-1"};
  auto gpu1 = ch.subscribe_queue(only1);
  EXPECT_EQ(all->try_pop(), nullptr);
  EXPECT_EQ(all->pop_for(std::chrono::milliseconds(1)), nullptr);  // nothing yet: times out
  const auto p = ch.publish(xid("GPU-0", 79));
  const auto p2 = ch.publish(xid("GPU-1", 48));
  EXPECT_EQ(all->size(), 2U);
  EXPECT_EQ(all->bytes(), event_bytes(*p) + event_bytes(*p2));
  EXPECT_EQ(all->try_pop().get(), p.get());                 // the same object, not a copy
  const auto second = all->pop_for(std::chrono::hours(1));  // queued: no wait
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->sequence, 2U);
  EXPECT_EQ(all->try_pop(), nullptr);
  EXPECT_EQ(all->bytes(), 0U);
  const auto only = gpu1->try_pop();
  ASSERT_NE(only, nullptr);
  EXPECT_EQ(only->device_id, "GPU-1");
  EXPECT_EQ(gpu1->try_pop(), nullptr);
  EXPECT_FALSE(all->closed());
}

// The worst input for one queue nobody pops: every bound holds, the losses are exact, and what
// is left is the newest.
TEST(EventQueue, StormIsBoundedInCountAndBytes) {
  boost::asio::io_context io;
  EventLimits limits;
  limits.queue = 100;
  limits.queue_bytes = 16 * 1024;  // the tighter bound here
  EventChannel ch(io.get_executor(), limits);
  auto q = ch.subscribe_queue();
  constexpr std::uint64_t kStorm = 20000;
  const std::string long_id(1000, 'x');
  for (std::uint64_t i = 0; i < kStorm; ++i) ch.publish(xid(long_id, i));
  const auto per_event = event_bytes(*ch.recent().back());
  const auto queued = limits.queue_bytes / per_event;
  ASSERT_GT(queued, 0U);
  EXPECT_EQ(q->size(), queued);
  EXPECT_LE(q->bytes(), limits.queue_bytes);
  EXPECT_EQ(q->dropped(), kStorm - queued);
  const auto oldest = q->try_pop();
  ASSERT_NE(oldest, nullptr);
  EXPECT_EQ(oldest->sequence, kStorm - queued + 1);
}

TEST(EventQueue, CloseWakesAWaiterAndDiscards) {
  boost::asio::io_context io;
  EventChannel ch(io.get_executor());
  auto q = ch.subscribe_queue();
  ch.publish(xid("GPU-0", 79));
  EventPtr got = ch.recent().back();
  std::thread waiter([&] {
    while (q->pop_for(std::chrono::hours(1))) {  // takes the queued one, then waits
    }
    got = nullptr;
  });
  q->close();  // before or while the waiter waits: either way it returns at once
  waiter.join();
  EXPECT_EQ(got, nullptr);
  EXPECT_TRUE(q->closed());
  ch.publish(xid("GPU-0", 79));  // no longer subscribed
  EXPECT_EQ(q->size(), 0U);
  EXPECT_EQ(q->try_pop(), nullptr);
}

TEST(EventQueue, OutlivesItsChannel) {
  boost::asio::io_context io;
  std::shared_ptr<EventQueue> q;
  {
    EventChannel ch(io.get_executor());
    q = ch.subscribe_queue();
    ch.publish(xid("GPU-0", 79));
  }
  EXPECT_TRUE(q->closed());
  const auto e = q->pop_for(std::chrono::hours(1));  // still queued: popped
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(*e->data, 79U);
  EXPECT_EQ(q->pop_for(std::chrono::hours(1)), nullptr);  // the channel is gone: no wait
}

TEST(EventChannel, SnapshotChannelOwnsOne) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  ch.events().publish(xid("GPU-0", 31));
  EXPECT_EQ(ch.events().last_sequence(), 1U);
  EXPECT_EQ(ch.last_sequence(), 0U);  // separate sequence spaces
}

TEST(EventChannel, KeepsTheNewestFatalEventOfEachDeviceApartFromRecent) {
  boost::asio::io_context io;
  EventLimits limits;
  limits.recent = 4;
  limits.devices = 3;
  EventChannel ch(io.get_executor(), limits);
  ch.publish(xid("GPU-0", 48));
  ch.publish(xid("GPU-0", 79));  // replaces GPU-0's Xid 48
  ch.publish(xid("GPU-1", 95));
  ch.publish(xid("GPU-1", 13));  // not fatal: GPU-1 keeps its Xid 95
  GpuEvent ecc = xid("GPU-2", 0);
  ecc.kind = EventKind::ecc_double_bit;
  ecc.data.reset();
  ch.publish(ecc);
  // A storm of events that are not fatal pushes everything out of recent(), not out of fatal().
  for (int i = 0; i < 100; ++i) {
    GpuEvent c = xid("GPU-1", 0);
    c.kind = EventKind::clock_event;
    ch.publish(c);
  }
  auto fatal = ch.fatal();
  ASSERT_EQ(fatal.size(), 3u);
  EXPECT_EQ(fatal[0]->device_id, "GPU-0");
  EXPECT_EQ(fatal[0]->data, 79u);
  EXPECT_EQ(fatal[1]->device_id, "GPU-1");
  EXPECT_EQ(fatal[1]->data, 95u);
  EXPECT_EQ(fatal[2]->kind, EventKind::ecc_double_bit);
  for (const auto& e : ch.recent()) EXPECT_EQ(e->kind, EventKind::clock_event);

  // The worst input: a fatal event on ever new devices. The kept ones stay at the bound (the
  // oldest device is forgotten first), so garbage device ids cannot grow memory.
  for (int i = 0; i < 1000; ++i) ch.publish(xid("GPU-new-" + std::to_string(i), 79));
  fatal = ch.fatal();
  ASSERT_EQ(fatal.size(), limits.devices);
  EXPECT_EQ(fatal[0]->device_id, "GPU-new-997");
  EXPECT_EQ(fatal[2]->device_id, "GPU-new-999");
}

}  // namespace
}  // namespace gpustream
