// SnapshotChannel: numbering, shared objects, latest cache, history, filters.
#include <boost/asio/io_context.hpp>

#include "channel_test_util.hpp"

namespace gpustream {
namespace {

using test::Collector;
using test::iota_seq;
using test::make_snapshot;

TEST(ChannelBasic, NumbersSnapshotsWithoutGaps) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  EXPECT_EQ(ch.last_sequence(), 0u);
  for (std::uint64_t i = 1; i <= 5; ++i) {
    auto s = make_snapshot("a");
    s.sequence = 999;  // whatever the probe wrote is replaced
    EXPECT_EQ(ch.publish(std::move(s))->sequence, i);
  }
  EXPECT_EQ(ch.last_sequence(), 5u);
}

TEST(ChannelBasic, InstanceIdIsStableAndDiffersBetweenChannels) {
  boost::asio::io_context io;
  SnapshotChannel a(io.get_executor());
  SnapshotChannel b(io.get_executor());
  const std::string first = a.instance();
  ASSERT_EQ(first.size(), 16u);
  EXPECT_EQ(first.find_first_not_of("0123456789abcdef"), std::string::npos) << first;
  a.publish(make_snapshot("a"));
  EXPECT_EQ(a.instance(), first);
  EXPECT_NE(a.instance(), b.instance());
}

TEST(ChannelBasic, EverySubscriberGetsTheSameObject) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector a, b, c;
  auto sa = ch.subscribe({}, a.on_snapshot());
  auto sb = ch.subscribe({}, b.on_snapshot());
  auto qc = ch.subscribe_queue({});
  EXPECT_EQ(ch.subscriber_count(), 3u);
  auto published = ch.publish(make_snapshot("a"));
  io.run();
  ASSERT_EQ(a.items().size(), 1u);
  ASSERT_EQ(b.items().size(), 1u);
  EXPECT_EQ(a.items()[0].object, published.get());
  EXPECT_EQ(b.items()[0].object, published.get());
  auto item = qc->try_pop();
  ASSERT_TRUE(item);
  EXPECT_EQ(std::get<SnapshotPtr>(*item).get(), published.get());
  EXPECT_FALSE(qc->try_pop());
}

TEST(ChannelBasic, PublishDoesNotRunCallbacksInline) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector a;
  auto sub = ch.subscribe({}, a.on_snapshot());
  ch.publish(make_snapshot("a"));
  EXPECT_EQ(a.snapshots(), 0u);  // posted, not run
  io.run();
  EXPECT_EQ(a.sequences(), iota_seq(1, 1));
}

TEST(ChannelBasic, LatestKeepsNewestPerProbe) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  EXPECT_TRUE(ch.latest().empty());
  EXPECT_EQ(ch.latest("a"), nullptr);
  ch.publish(make_snapshot("a"));
  ch.publish(make_snapshot("b"));
  auto a3 = ch.publish(make_snapshot("a"));
  auto all = ch.latest();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0], a3);
  EXPECT_EQ(all[1]->sequence, 2u);
  EXPECT_EQ(ch.latest("a"), a3);
  EXPECT_EQ(ch.latest("zzz"), nullptr);
}

TEST(ChannelBasic, HistorySinceReturnsNewerInOrder) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 4);
  EXPECT_EQ(ch.history_capacity(), 4u);
  std::optional<Gap> gap;
  EXPECT_TRUE(ch.history_since(0, &gap).empty());
  EXPECT_FALSE(gap);
  for (int i = 0; i < 6; ++i) ch.publish(make_snapshot("a"));  // history keeps 3..6
  auto h = ch.history_since(4, &gap);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0]->sequence, 5u);
  EXPECT_EQ(h[1]->sequence, 6u);
  EXPECT_FALSE(gap);
  EXPECT_TRUE(ch.history_since(6, &gap).empty());
  EXPECT_FALSE(gap);
  EXPECT_EQ(ch.history_since(2, &gap).size(), 4u);  // 3 is the oldest kept: no gap
  EXPECT_FALSE(gap);
  h = ch.history_since(0, &gap);
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h.front()->sequence, 3u);
  ASSERT_TRUE(gap);
  EXPECT_EQ(*gap, (Gap{0, 2, "history_too_old"}));
}

TEST(ChannelBasic, ZeroHistoryReportsEverythingAsTooOld) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 0);
  ch.publish(make_snapshot("a"));
  ch.publish(make_snapshot("a"));
  std::optional<Gap> gap;
  EXPECT_TRUE(ch.history_since(0, &gap).empty());
  ASSERT_TRUE(gap);
  EXPECT_EQ(gap->missed, 2u);
  EXPECT_TRUE(ch.history_since(2, &gap).empty());
  EXPECT_FALSE(gap);
}

TEST(ChannelBasic, FilterMatches) {
  auto s = make_snapshot("nvidia", {"gpu0", "gpu1"}, {Metric::power_watts});
  s.devices[1].metrics.set_absent(Metric::power_watts, Absence::unsupported);
  s.devices[1].metrics.set(Metric::temperature_celsius, 50, Source::nvml);
  SubscriptionFilter f;
  EXPECT_TRUE(f.empty());
  EXPECT_TRUE(f.matches(s));
  f.probes = {"amd", "nvidia"};
  EXPECT_TRUE(f.matches(s));
  f.probes = {"amd"};
  EXPECT_FALSE(f.matches(s));
  f = {};
  f.devices = {"gpu1"};
  EXPECT_TRUE(f.matches(s));
  f.devices = {"gpu7"};
  EXPECT_FALSE(f.matches(s));
  f = {};
  f.metrics = {Metric::temperature_celsius};
  EXPECT_TRUE(f.matches(s));
  f.metrics = {Metric::fan_rpm};
  EXPECT_FALSE(f.matches(s));
  // An absent metric does not count as present.
  auto t = make_snapshot("nvidia", {"gpu0"}, {});
  t.devices[0].metrics.set_absent(Metric::fan_rpm, Absence::unsupported);
  EXPECT_FALSE(f.matches(t));
  // All non-empty parts must match.
  f = {};
  f.probes = {"nvidia"};
  f.devices = {"gpu9"};
  EXPECT_FALSE(f.matches(s));
}

TEST(ChannelBasic, SubscribersReceiveOnlyWhatTheirFilterMatches) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Collector by_probe, by_device, by_metric, all;
  SubscribeOptions o1;
  o1.filter.probes = {"amd"};
  SubscribeOptions o2;
  o2.filter.devices = {"gpu1"};
  SubscribeOptions o3;
  o3.filter.metrics = {Metric::energy_joules};
  auto s1 = ch.subscribe(o1, by_probe.on_snapshot());
  auto s2 = ch.subscribe(o2, by_device.on_snapshot());
  auto s3 = ch.subscribe(o3, by_metric.on_snapshot());
  auto s4 = ch.subscribe({}, all.on_snapshot());
  ch.publish(make_snapshot("nvidia", {"gpu0"}));                          // 1
  ch.publish(make_snapshot("amd", {"gpu1"}));                             // 2
  ch.publish(make_snapshot("intel", {"gpu2"}, {Metric::energy_joules}));  // 3
  ch.publish(make_snapshot("amd", {"gpu3"}));                             // 4
  io.run();
  EXPECT_EQ(by_probe.sequences(), (std::vector<std::uint64_t>{2, 4}));
  EXPECT_EQ(by_device.sequences(), (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(by_metric.sequences(), (std::vector<std::uint64_t>{3}));
  EXPECT_EQ(all.sequences(), iota_seq(1, 4));
}

TEST(ChannelBasic, CallbacksRunOnTheChosenExecutor) {
  boost::asio::io_context channel_io, other_io;
  SnapshotChannel ch(channel_io.get_executor());
  Collector c;
  SubscribeOptions o;
  o.executor = other_io.get_executor();
  auto sub = ch.subscribe(o, c.on_snapshot());
  ch.publish(make_snapshot("a"));
  channel_io.run();
  EXPECT_EQ(c.snapshots(), 0u);
  other_io.run();
  EXPECT_EQ(c.snapshots(), 1u);
}

TEST(ChannelBasic, AThrowingCallbackDoesNotStopDelivery) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  int calls = 0;
  auto sub = ch.subscribe({}, [&](const SnapshotPtr&) {
    ++calls;
    throw std::runtime_error("boom");
  });
  ch.publish(make_snapshot("a"));
  ch.publish(make_snapshot("a"));
  EXPECT_NO_THROW(io.run());
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(sub.active());
}

TEST(ChannelBasic, BackpressureNames) {
  for (auto p : {Backpressure::latest, Backpressure::drop_oldest, Backpressure::lossless})
    EXPECT_EQ(backpressure_from_string(to_string(p)), p);
  EXPECT_FALSE(backpressure_from_string("block"));
}

}  // namespace
}  // namespace gpustream
