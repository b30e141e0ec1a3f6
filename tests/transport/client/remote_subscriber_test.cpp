// RemoteSubscriber against the real Server (tests/transport/harness.hpp): both framings,
// filters, resume after a server restart, gaps, tokens, stop, and the CLI's run_remote_watch
// (cli/remote_watch.hpp).
#include "gpustream/transport/remote_subscriber.hpp"

#include <algorithm>
#include <numeric>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/executor_work_guard.hpp>

#include "remote_watch.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

enum class Scheme { tcp, ws };

std::string url_of(Fixture& f, Scheme s) {
  return s == Scheme::tcp ? "tcp://127.0.0.1:" + std::to_string(f.tcp_port())
                          : "ws://127.0.0.1:" + std::to_string(f.http_port()) + "/ws";
}

/// What the callbacks saw.
struct SubscriberSeen {
  std::vector<SnapshotPtr> snapshots;
  std::vector<Gap> gaps;
  std::vector<RemoteStatus> statuses;
  std::vector<RemoteHello> hellos;

  std::vector<std::uint64_t> sequences() const {
    std::vector<std::uint64_t> out;
    for (const auto& s : snapshots) out.push_back(s->sequence);
    return out;
  }
  std::size_t connected() const {
    return static_cast<std::size_t>(std::count_if(
        statuses.begin(), statuses.end(),
        [](const RemoteStatus& s) { return s.state == RemoteStatus::State::connected; }));
  }
  bool disconnected() const {
    return !statuses.empty() && statuses.back().state == RemoteStatus::State::disconnected;
  }
};

std::unique_ptr<RemoteSubscriber> make_subscriber(Fixture& f, RemoteSubscriberOptions o,
                                                  SubscriberSeen& seen) {
  if (o.reconnect_initial == RemoteSubscriberOptions{}.reconnect_initial) {
    o.reconnect_initial = std::chrono::milliseconds(20);
    o.reconnect_max = std::chrono::milliseconds(100);
  }
  auto sub = std::make_unique<RemoteSubscriber>(f.io.get_executor(), std::move(o));
  sub->on_snapshot([&seen](const SnapshotPtr& s) { seen.snapshots.push_back(s); });
  sub->on_gap([&seen](const Gap& g) { seen.gaps.push_back(g); });
  sub->on_status([&seen](const RemoteStatus& s) { seen.statuses.push_back(s); });
  sub->on_hello([&seen](const RemoteHello& h) { seen.hellos.push_back(h); });
  return sub;
}

std::vector<std::uint64_t> iota(std::uint64_t first, std::uint64_t last) {
  std::vector<std::uint64_t> v(last - first + 1);
  std::iota(v.begin(), v.end(), first);
  return v;
}

ServerOptions same_ports(Fixture& f) {
  ServerOptions o;
  o.http = boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), f.http_port());
  o.tcp = boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), f.tcp_port());
  return o;
}

class RemoteSubscriberTest : public ::testing::TestWithParam<Scheme> {};

INSTANTIATE_TEST_SUITE_P(Framing, RemoteSubscriberTest, ::testing::Values(Scheme::tcp, Scheme::ws),
                         [](const auto& info) {
                           return info.param == Scheme::tcp ? "Tcp" : "WebSocket";
                         });

TEST_P(RemoteSubscriberTest, ReceivesLiveSnapshotsEqualToThePublishedOnes) {
  Fixture f;
  f.start();
  f.publish("before");  // history: not replayed without `since`
  SubscriberSeen seen;
  auto sub = make_subscriber(f, {.url = url_of(f, GetParam())}, seen);
  sub->start();
  ASSERT_TRUE(f.run_until([&] { return seen.connected() == 1; }));
  ASSERT_EQ(seen.hellos.size(), 1u);
  EXPECT_EQ(seen.hellos[0].schema, "gpustream/1");
  EXPECT_EQ(seen.hellos[0].last_sequence, 1u);
  EXPECT_EQ(seen.hellos[0].devices.size(), 2u);

  std::vector<SnapshotPtr> published{f.publish("a", 2, 3), f.publish("b"), f.publish("a")};
  ASSERT_TRUE(f.run_until([&] { return seen.snapshots.size() >= 3; }));
  ASSERT_EQ(seen.snapshots.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(*seen.snapshots[i], *published[i]) << i;
  const auto c = sub->counters();
  EXPECT_EQ(c.snapshots, 3u);
  EXPECT_EQ(c.last_sequence, 4u);
  EXPECT_EQ(c.connections, 1u);
  EXPECT_EQ(c.decode_errors, 0u);
  EXPECT_EQ(sub->status().state, RemoteStatus::State::connected);
}

TEST_P(RemoteSubscriberTest, DeliversEventsWithTheServersSequenceAndItsDeviceFilter) {
  Fixture f;
  f.start();
  SubscriberSeen seen;
  std::vector<EventPtr> events;
  auto sub = make_subscriber(f, {.url = url_of(f, GetParam()), .devices = {"GPU-b"}}, seen);
  sub->on_event([&](const EventPtr& e) { events.push_back(e); });
  sub->start();
  ASSERT_TRUE(f.run_until([&] { return seen.connected() == 1; }));
  GpuEvent e;
  e.time_unix_ns = 1764135600123456789;
  e.probe = "nvidia";
  e.device_id = "GPU-a";  // not selected: the server does not send it
  e.kind = EventKind::xid;
  e.data = 79;
  f.channel.events().publish(e);
  e.device_id = "GPU-b";
  const auto sent = f.channel.events().publish(e);
  e.kind = EventKind::ecc_double_bit;
  e.data.reset();
  f.channel.events().publish(e);
  ASSERT_TRUE(f.run_until([&] { return events.size() >= 2; }));
  f.run_for(std::chrono::milliseconds(20));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(*events[0], *sent);  // every field, the server's sequence (2) included
  EXPECT_EQ(events[1]->sequence, 3u);
  EXPECT_EQ(events[1]->kind, EventKind::ecc_double_bit);
  EXPECT_FALSE(events[1]->data);
  EXPECT_EQ(sub->counters().events, 2u);
  EXPECT_EQ(sub->counters().decode_errors, 0u);
  EXPECT_TRUE(seen.snapshots.empty());
}

TEST_P(RemoteSubscriberTest, SinceReplaysTheHistoryThenStreamsLiveWithoutDuplicates) {
  Fixture f;
  f.start();
  for (int i = 0; i < 5; ++i) f.publish("a");
  SubscriberSeen seen;
  auto sub = make_subscriber(f, {.url = url_of(f, GetParam()), .since = 2}, seen);
  sub->start();
  ASSERT_TRUE(f.run_until([&] { return seen.snapshots.size() >= 3; }));
  for (int i = 0; i < 3; ++i) f.publish("a");
  ASSERT_TRUE(f.run_until([&] { return seen.snapshots.size() >= 6; }));
  EXPECT_EQ(seen.sequences(), iota(3, 8));
  EXPECT_TRUE(seen.gaps.empty());
}

TEST_P(RemoteSubscriberTest, SnapshotsPublishedBeforeTheSubscribeIsAnsweredComeExactlyOnce) {
  Fixture f;
  f.start();
  SubscriberSeen seen;
  auto sub = make_subscriber(f, {.url = url_of(f, GetParam())}, seen);
  // Published after the server's hello and before it reads our subscribe: the server streams
  // them live, then replays them after `since` = hello.last_sequence.
  sub->on_hello([&](const RemoteHello&) {
    f.publish("a");
    f.publish("a");
  });
  sub->start();
  ASSERT_TRUE(f.run_until([&] { return seen.connected() == 1 && seen.snapshots.size() >= 2; }));
  f.publish("a");
  ASSERT_TRUE(f.run_until([&] { return seen.snapshots.size() >= 3; }));
  f.run_for(std::chrono::milliseconds(0));
  EXPECT_EQ(seen.sequences(), iota(1, 3));
}

TEST_P(RemoteSubscriberTest, FiltersProbesDevicesAndFields) {
  Fixture f;
  f.start();
  SubscriberSeen seen;
  const auto device = make_snapshot("a").devices.at(1).id;
  auto sub = make_subscriber(f,
                             {.url = url_of(f, GetParam()),
                              .probes = {"a"},
                              .devices = {device},
                              .fields = {Metric::utilization_percent, Metric::power_watts}},
                             seen);
  sub->start();
  ASSERT_TRUE(f.run_until([&] { return seen.connected() == 1; }));
  const auto a1 = f.publish("a");
  f.publish("b");
  const auto a2 = f.publish("a");
  ASSERT_TRUE(f.run_until([&] { return seen.snapshots.size() >= 2; }));
  f.run_for(std::chrono::milliseconds(0));
  EXPECT_EQ(seen.sequences(), (std::vector<std::uint64_t>{a1->sequence, a2->sequence}));
  for (const auto& s : seen.snapshots) {
    EXPECT_EQ(s->probe, "a");
    ASSERT_EQ(s->devices.size(), 1u);
    const auto& d = s->devices[0];
    EXPECT_EQ(d.id, device);
    const auto& original = *a1->find_device(device);
    // Projected fields keep their value (or their absence); the others are not sent, so they
    // read as not collected, never as 0.
    EXPECT_EQ(d.metrics[Metric::utilization_percent],
              original.metrics[Metric::utilization_percent]);
    EXPECT_EQ(d.metrics[Metric::power_watts], original.metrics[Metric::power_watts]);
    EXPECT_FALSE(d.metrics[Metric::memory_used_bytes].has_value());
    EXPECT_EQ(d.metrics[Metric::memory_used_bytes].reason(), Absence::not_collected);
  }
}

TEST_P(RemoteSubscriberTest, ResumesAfterAServerRestartOnTheSamePortWithoutLoss) {
  Fixture f;
  f.start();
  SubscriberSeen seen;
  auto sub = make_subscriber(f, {.url = url_of(f, GetParam())}, seen);
  sub->start();
  ASSERT_TRUE(f.run_until([&] { return seen.connected() == 1; }));
  for (int i = 0; i < 3; ++i) f.publish("a");
  ASSERT_TRUE(f.run_until([&] { return seen.snapshots.size() == 3; }));

  const auto options = same_ports(f);
  ASSERT_TRUE(f.stop());
  ASSERT_TRUE(f.run_until([&] { return seen.disconnected(); }));
  f.server.reset();
  for (int i = 0; i < 4; ++i) f.publish("a");  // published while the server is down
  f.start(options);
  ASSERT_TRUE(f.run_until([&] { return seen.connected() == 2; }));
  for (int i = 0; i < 2; ++i) f.publish("a");
  ASSERT_TRUE(f.run_until([&] { return seen.snapshots.size() >= 9; }));
  f.run_for(std::chrono::milliseconds(0));
  EXPECT_EQ(seen.sequences(), iota(1, 9));
  EXPECT_TRUE(seen.gaps.empty());
  EXPECT_EQ(sub->counters().connections, 2u);
}

TEST_P(RemoteSubscriberTest, ReportsAGapWhenTheHistoryNoLongerReachesBack) {
  Fixture f(4);  // the channel keeps 4 snapshots
  f.start();
  SubscriberSeen seen;
  auto sub = make_subscriber(f, {.url = url_of(f, GetParam())}, seen);
  sub->start();
  ASSERT_TRUE(f.run_until([&] { return seen.connected() == 1; }));
  f.publish("a");
  f.publish("a");
  ASSERT_TRUE(f.run_until([&] { return seen.snapshots.size() == 2; }));

  const auto options = same_ports(f);
  ASSERT_TRUE(f.stop());
  f.server.reset();
  for (int i = 0; i < 10; ++i) f.publish("a");  // 3..12; the history keeps 9..12
  f.start(options);
  ASSERT_TRUE(f.run_until([&] { return seen.snapshots.size() >= 6; }));
  ASSERT_EQ(seen.gaps.size(), 1u);
  EXPECT_EQ(seen.gaps[0], (Gap{2, 6, std::string(kGapHistoryTooOld)}));
  EXPECT_EQ(seen.sequences(), (std::vector<std::uint64_t>{1, 2, 9, 10, 11, 12}));
  EXPECT_EQ(sub->counters().gaps, 1u);
}

/// A subscriber that has received `before` snapshots of "old" from `f`'s server, which is then
/// replaced, on the same ports, by a server over a fresh channel already holding `after`
/// snapshots of "new" (numbered 1..after again).
class RestartedServer {
  Fixture& f_;  // first: the members below are built from it

 public:
  RestartedServer(Fixture& f, Scheme scheme, int before, int after) : f_(f) {
    f_.start();
    sub_ = make_subscriber(f_, {.url = url_of(f_, scheme), .since = 0}, seen);
    for (int i = 0; i < before; ++i) f_.publish("old");
    sub_->start();
    EXPECT_TRUE(f_.run_until([&] { return seen.snapshots.size() == std::size_t(before); }));
    const auto options = same_ports(f_);
    EXPECT_TRUE(f_.stop());
    f_.server.reset();
    for (int i = 0; i < after; ++i) fresh.publish(make_snapshot("new"));
    server_ = std::make_unique<Server>(f_.io.get_executor(), fresh, options);
    server_->start();
  }
  ~RestartedServer() {
    sub_->stop();
    bool stopped = false;
    server_->stop([&] { stopped = true; });
    EXPECT_TRUE(f_.run_until([&] { return stopped; }));
  }

  SubscriberSeen seen;
  SnapshotChannel fresh{f_.io.get_executor()};

 private:
  std::unique_ptr<RemoteSubscriber> sub_;
  std::unique_ptr<Server> server_;
};

TEST_P(RemoteSubscriberTest, FollowsAServerRestartedWithAFreshChannel) {
  Fixture f;
  RestartedServer r(f, GetParam(), 5, 2);
  // The client asks for > 5; the new server only has 1..2: its new instance tells the client to
  // start again from 0.
  ASSERT_TRUE(f.run_until([&] { return r.seen.snapshots.size() >= 7; }));
  EXPECT_EQ(r.seen.snapshots[5]->probe, "new");
  EXPECT_EQ(r.seen.snapshots[5]->sequence, 1u);
  EXPECT_EQ(r.seen.snapshots[6]->sequence, 2u);
  ASSERT_EQ(r.seen.gaps.size(), 1u);
  EXPECT_EQ(r.seen.gaps[0], (Gap{5, 0, std::string(kGapServerRestarted)}));
  ASSERT_EQ(r.seen.hellos.size(), 2u);
  EXPECT_NE(r.seen.hellos[0].instance, r.seen.hellos[1].instance);
  EXPECT_EQ(r.seen.hellos[1].instance, r.fresh.instance());
}

TEST_P(RemoteSubscriberTest, FollowsARestartedServerThatIsAlreadyPastItsSince) {
  // The case a sequence comparison alone cannot see: the new server has published more than
  // the client had received from the old one, so the client's `since` (3) looks valid there.
  Fixture f;
  RestartedServer r(f, GetParam(), 3, 6);
  ASSERT_TRUE(f.run_until([&] { return r.seen.snapshots.size() >= 9; }));
  f.run_for(std::chrono::milliseconds(0));
  ASSERT_EQ(r.seen.snapshots.size(), 9u);
  for (std::size_t i = 3; i < 9; ++i) {
    EXPECT_EQ(r.seen.snapshots[i]->probe, "new");
    EXPECT_EQ(r.seen.snapshots[i]->sequence, i - 2);  // 1..6: nothing of the new server skipped
  }
  ASSERT_EQ(r.seen.gaps.size(), 1u);
  EXPECT_EQ(r.seen.gaps[0], (Gap{3, 0, std::string(kGapServerRestarted)}));
}

TEST_P(RemoteSubscriberTest, SendsTheTokenAndReportsARefusal) {
  Fixture f;
  ServerOptions o;
  o.token = "s3cret";
  f.start(o);
  SubscriberSeen good, bad;
  auto ok = make_subscriber(f, {.url = url_of(f, GetParam()), .token = "s3cret"}, good);
  auto refused = make_subscriber(f, {.url = url_of(f, GetParam()), .token = "wrong"}, bad);
  ok->start();
  refused->start();
  ASSERT_TRUE(f.run_until([&] { return good.connected() == 1 && bad.disconnected(); }));
  const auto reason = bad.statuses.back().reason;
  EXPECT_TRUE(reason.find("unauthorized") != std::string::npos ||
              reason.find("401") != std::string::npos)
      << reason;
  EXPECT_EQ(bad.statuses.back().attempts, 1u);
  EXPECT_GT(bad.statuses.back().retry_in.count(), 0);
  f.publish("a");
  ASSERT_TRUE(f.run_until([&] { return good.snapshots.size() == 1; }));
  EXPECT_TRUE(bad.snapshots.empty());
}

TEST_P(RemoteSubscriberTest, StopFromInsideACallbackEndsDeliveryAndClosesTheConnection) {
  Fixture f;
  f.start();
  SubscriberSeen seen;
  RemoteSubscriber* self = nullptr;
  auto sub = make_subscriber(f, {.url = url_of(f, GetParam())}, seen);
  sub->on_snapshot([&](const SnapshotPtr& s) {
    seen.snapshots.push_back(s);
    self->stop();
    self->stop();  // idempotent
  });
  self = sub.get();
  sub->start();
  sub->start();  // idempotent
  ASSERT_TRUE(f.run_until([&] { return seen.connected() == 1; }));
  f.publish("a");
  f.publish("a");
  f.publish("a");
  // Over TCP the server notices the close when a write fails (a FIN is also what a half-close
  // sends), so it goes on streaming until then.
  ASSERT_TRUE(f.run_until([&] {
    f.publish("a");
    const auto c = f.server->counters();
    return c.tcp_open + c.websocket_open == 0;
  }));
  EXPECT_EQ(seen.snapshots.size(), 1u);
  EXPECT_EQ(sub->status().state, RemoteStatus::State::stopped);
  sub->start();  // a stopped subscriber does not start again
  f.publish("a");
  f.run_for(std::chrono::milliseconds(50));
  EXPECT_EQ(f.server->counters().connections_accepted, 1u);
}

TEST(RemoteSubscriber, RetriesWithBackoffWhileTheServerIsUnreachable) {
  Fixture f;
  // A port nobody listens on: bind one, note it, close it.
  boost::asio::ip::tcp::acceptor a(f.io, {boost::asio::ip::address_v4::loopback(), 0});
  const auto port = a.local_endpoint().port();
  a.close();
  SubscriberSeen seen;
  auto sub = make_subscriber(f,
                             {.url = "tcp://127.0.0.1:" + std::to_string(port),
                              .reconnect_initial = std::chrono::milliseconds(5),
                              .reconnect_max = std::chrono::milliseconds(40)},
                             seen);
  sub->start();
  ASSERT_TRUE(f.run_until([&] { return sub->status().attempts >= 4; }));
  const auto s = sub->status();
  EXPECT_EQ(s.state, RemoteStatus::State::disconnected);
  EXPECT_NE(s.reason.find("refused"), std::string::npos) << s.reason;
  for (const auto& st : seen.statuses)
    if (st.state == RemoteStatus::State::disconnected)
      EXPECT_LE(st.retry_in.count(), 48);  // max + 20% jitter
  sub->stop();
  EXPECT_EQ(sub->status().state, RemoteStatus::State::stopped);
}

TEST(RemoteSubscriber, RejectsUrlsItCannotUse) {
  for (const char* url :
       {"", "not a url", "http://127.0.0.1:9400/ws", "https://127.0.0.1/ws", "tcp://127.0.0.1",
        "tcp://127.0.0.1:0", "tcp://127.0.0.1:9401/path", "tls://127.0.0.1",
        "tls://127.0.0.1:9401/path", "tls://h:1?token=x", "ws://user:pw@127.0.0.1:9400/ws",
        "wss://user:pw@h/ws", "ws://:9400/ws"}) {
    EXPECT_THROW(validate_remote_url(url), std::invalid_argument) << url;
  }
  for (const char* url : {"tcp://127.0.0.1:9401", "ws://127.0.0.1:9400/ws", "ws://localhost:9400",
                          "ws://[::1]:9400/ws?token=x", "tcp://[::1]:1", "tls://gpu-box:9401",
                          "wss://gpu-box/ws", "wss://[::1]:9400/ws"}) {
    EXPECT_NO_THROW(validate_remote_url(url)) << url;
  }
  boost::asio::io_context io;
  EXPECT_THROW(RemoteSubscriber(io.get_executor(), {.url = "udp://x:1"}), std::invalid_argument);
}

TEST(RemoteSubscriber, RunRemoteWatchDeliversOnTheCallingThreadAndEndsAtTheCount) {
  Fixture f;
  f.start();
  for (int i = 0; i < 4; ++i) f.publish("a");
  auto guard = boost::asio::make_work_guard(f.io);
  std::thread server_thread([&] { f.io.run(); });
  const auto caller = std::this_thread::get_id();
  std::vector<std::uint64_t> seqs;
  bool other_thread = false;
  std::atomic<bool> interrupted{false};
  RemoteWatchHandlers h;
  h.on_snapshot = [&](const GpuSnapshot& s) {
    seqs.push_back(s.sequence);
    other_thread |= std::this_thread::get_id() != caller;
  };
  const int rc = run_remote_watch(
      {.url = "ws://127.0.0.1:" + std::to_string(f.http_port()) + "/ws", .since = 1}, {.count = 3},
      h, interrupted);
  guard.reset();
  boost::asio::post(f.io, [&] { f.server->stop(); });
  server_thread.join();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(seqs, (std::vector<std::uint64_t>{2, 3, 4}));
  EXPECT_FALSE(other_thread);
}

TEST(RemoteSubscriber, RunRemoteWatchEndsWhenInterruptedAndSaysNothingCame) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::address_v4::loopback(), 0});
  const auto port = a.local_endpoint().port();
  a.close();
  std::atomic<bool> interrupted{false};
  RemoteWatchHandlers h;
  h.on_status = [&](const RemoteStatus& s) {
    if (s.state == RemoteStatus::State::disconnected) interrupted = true;
  };
  const RemoteSubscriberOptions o{.url = "tcp://127.0.0.1:" + std::to_string(port)};
  EXPECT_EQ(run_remote_watch(o, {}, h, interrupted), 1);
  EXPECT_THROW(run_remote_watch({.url = "bad"}, {}, h, interrupted), std::invalid_argument);
}

}  // namespace
}  // namespace gpustream::transport::test
