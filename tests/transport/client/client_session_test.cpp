// ClientSession, RemoteSubscriber's protocol without sockets: messages in, actions out.
#include "client/client_session.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"
#include "gpustream/transport/protocol_event.hpp"

namespace gpustream::transport::test {
namespace {

namespace act = client_action;
using std::chrono::milliseconds;

std::string without_newline(std::string s) {
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

std::string hello(std::uint64_t last_sequence, std::string instance = "i1",
                  std::optional<std::vector<std::string>> requests = std::vector<std::string>{
                      "subscribe", "fit"}) {
  Hello h;
  h.instance = std::move(instance);
  h.last_sequence = last_sequence;
  h.requests = std::move(requests);
  return without_newline(hello_message(h));
}

GpuSnapshot snapshot(std::uint64_t sequence, std::string probe = "gpu",
                     std::vector<std::string> devices = {"GPU-0", "GPU-1"}) {
  GpuSnapshot s;
  s.probe = std::move(probe);
  s.sequence = sequence;
  for (auto& id : devices) {
    DeviceSample d;
    d.id = std::move(id);
    d.metrics.set(Metric::utilization_percent, 50.0, Source::nvml);
    d.metrics.set(Metric::temperature_celsius, 60.0, Source::nvml);
    s.devices.push_back(std::move(d));
  }
  return s;
}

std::string snapshot_text(const GpuSnapshot& s) {
  return without_newline(snapshot_message(to_json_string(s)));
}
std::string snapshot_text(std::uint64_t sequence) { return snapshot_text(snapshot(sequence)); }

std::string subscribed(std::optional<std::uint64_t> since) {
  Subscribed s;
  s.request.since = since;
  return without_newline(subscribed_message(s));
}

GpuEvent event(std::string probe, std::string device) {
  GpuEvent e;
  e.sequence = 1;
  e.probe = std::move(probe);
  e.device_id = std::move(device);
  e.kind = EventKind::xid;
  e.data = 79;
  return e;
}

/// Feeds messages and keeps every action.
struct Driver {
  explicit Driver(RemoteSubscriberOptions o = {}) : session(std::move(o), 42) {}

  ClientActions feed(const std::string& text) {
    ClientActions out;
    session.received(text, out);
    return out;
  }
  /// opened(), hello and the ack: a subscribed connection. Returns the subscribe sent.
  SubscribeRequest connect(std::uint64_t last_sequence, std::string instance = "i1") {
    session.opened();
    const auto out = feed(hello(last_sequence, std::move(instance)));
    const auto* send = out.empty() ? nullptr : std::get_if<act::Send>(&out.back());
    EXPECT_NE(send, nullptr);
    auto r = parse_client_message(send ? send->message : "{}").subscribe;
    feed(subscribed(r.since));
    EXPECT_TRUE(session.subscribed());
    return r;
  }
  ClientActions close(const std::string& reason) {
    ClientActions out;
    session.closed(reason, out);
    return out;
  }

  ClientSession session;
};

std::vector<std::uint64_t> delivered(const ClientActions& actions) {
  std::vector<std::uint64_t> out;
  for (const auto& a : actions)
    if (const auto* s = std::get_if<act::Snapshot>(&a)) out.push_back(s->snapshot->sequence);
  return out;
}

template <class T>
std::vector<T> of(const ClientActions& actions) {
  std::vector<T> out;
  for (const auto& a : actions)
    if (const auto* t = std::get_if<T>(&a)) out.push_back(*t);
  return out;
}

TEST(ClientSession, HelloIsAnsweredWithASubscribeFromItsSequenceAndTheFilters) {
  RemoteSubscriberOptions o;
  o.probes = {"gpu"};
  o.devices = {"GPU-1"};
  o.fields = {Metric::temperature_celsius};
  o.max_rate_hz = 2.0;
  Driver d(o);
  d.session.opened();
  const auto out = d.feed(hello(17));
  ASSERT_EQ(out.size(), 2u);
  ASSERT_TRUE(std::holds_alternative<act::HelloReceived>(out[0]));
  EXPECT_EQ(std::get<act::HelloReceived>(out[0]).hello.last_sequence, 17u);
  ASSERT_TRUE(std::holds_alternative<act::Send>(out[1]));
  const auto m = parse_client_message(std::get<act::Send>(out[1]).message);
  ASSERT_EQ(m.kind, ClientMessage::Kind::subscribe);
  EXPECT_EQ(m.subscribe.since, 17u);
  EXPECT_EQ(m.subscribe.probes, o.probes);
  EXPECT_EQ(m.subscribe.devices, o.devices);
  EXPECT_EQ(m.subscribe.fields, o.fields);
  EXPECT_EQ(m.subscribe.max_rate_hz, 2.0);
  EXPECT_FALSE(d.session.subscribed());
}

TEST(ClientSession, SinceOptionIsTheFirstSubscribesResumePoint) {
  RemoteSubscriberOptions o;
  o.since = 3;
  Driver d(o);
  EXPECT_EQ(d.connect(10).since, 3u);
}

TEST(ClientSession, TheAckReportsConnectedAndCountsAConnection) {
  Driver d;
  d.session.opened();
  d.feed(hello(0));
  const auto out = d.feed(subscribed(0));
  ASSERT_EQ(out.size(), 1u);
  const auto& s = std::get<act::Status>(out[0]).status;
  EXPECT_EQ(s.state, RemoteStatus::State::connected);
  EXPECT_EQ(s.attempts, 0u);
  EXPECT_TRUE(d.session.subscribed());
  EXPECT_EQ(d.session.counters().connections, 1u);
}

TEST(ClientSession, DeliversSnapshotsInOrderAndDropsDuplicates) {
  Driver d;
  d.connect(0);
  ClientActions all;
  for (const std::uint64_t seq : {1, 2, 2, 3, 1, 4}) {
    auto out = d.feed(snapshot_text(seq));
    all.insert(all.end(), out.begin(), out.end());
  }
  EXPECT_EQ(delivered(all), (std::vector<std::uint64_t>{1, 2, 3, 4}));
  const auto c = d.session.counters();
  EXPECT_EQ(c.snapshots, 4u);
  EXPECT_EQ(c.duplicates, 2u);
  EXPECT_EQ(c.last_sequence, 4u);
  EXPECT_EQ(d.session.resume(), 4u);
}

TEST(ClientSession, BeforeTheAckSnapshotsAreFilteredLocallyWhenResumingAtHellosSequence) {
  RemoteSubscriberOptions o;
  o.probes = {"gpu"};
  o.devices = {"GPU-1"};
  o.fields = {Metric::temperature_celsius};
  Driver d(o);
  d.session.opened();
  d.feed(hello(5));  // since = 5 = last_sequence: what comes before the ack is ours
  EXPECT_TRUE(delivered(d.feed(snapshot_text(snapshot(6, "other")))).empty());
  EXPECT_TRUE(delivered(d.feed(snapshot_text(snapshot(7, "gpu", {"GPU-0"})))).empty());
  const auto out = d.feed(snapshot_text(snapshot(8)));
  ASSERT_EQ(delivered(out), (std::vector<std::uint64_t>{8}));
  const auto& s = *std::get<act::Snapshot>(out[0]).snapshot;
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].id, "GPU-1");
  EXPECT_TRUE(s.devices[0].metrics[Metric::temperature_celsius].get().has_value());
  EXPECT_FALSE(s.devices[0].metrics[Metric::utilization_percent].get().has_value());
}

TEST(ClientSession, BeforeTheAckSnapshotsAreSkippedWhenResumingFromFurtherBack) {
  RemoteSubscriberOptions o;
  o.since = 2;
  Driver d(o);
  d.session.opened();
  d.feed(hello(5));  // the replay sends 3.. again, in order, after the ack
  EXPECT_TRUE(delivered(d.feed(snapshot_text(6))).empty());
  d.feed(subscribed(2));
  EXPECT_EQ(delivered(d.feed(snapshot_text(3))), (std::vector<std::uint64_t>{3}));
}

TEST(ClientSession, GapsAreDeliveredAndMoveTheResumePoint) {
  Driver d;
  d.connect(0);
  d.feed(snapshot_text(1));
  const auto out = d.feed(without_newline(gap_message(Gap{1, 5, "history_too_old"})));
  const auto gaps = of<act::GapFound>(out);
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_EQ(gaps[0].gap, (Gap{1, 5, "history_too_old"}));
  EXPECT_EQ(d.session.resume(), 6u);
  EXPECT_EQ(d.session.counters().gaps, 1u);
  EXPECT_TRUE(delivered(d.feed(snapshot_text(6))).empty());
  EXPECT_EQ(delivered(d.feed(snapshot_text(7))), (std::vector<std::uint64_t>{7}));
}

TEST(ClientSession, GapsBeforeTheAckAreIgnored) {
  Driver d;
  d.session.opened();
  d.feed(hello(0));
  EXPECT_TRUE(d.feed(without_newline(gap_message(Gap{0, 3, "history_too_old"}))).empty());
  EXPECT_EQ(d.session.counters().gaps, 0u);
}

TEST(ClientSession, ResumesAfterADisconnectFromTheLastDeliveredSequence) {
  Driver d;
  d.connect(0);
  d.feed(snapshot_text(1));
  d.feed(snapshot_text(2));
  d.close("the server closed the connection");
  d.session.retry("the server closed the connection");
  EXPECT_EQ(d.connect(9).since, 2u);  // same instance: from what was delivered
  EXPECT_EQ(d.session.counters().connections, 2u);
}

TEST(ClientSession, ANewServerInstanceIsAGapAndASubscribeFromZero) {
  Driver d;
  d.connect(0, "first");
  d.feed(snapshot_text(1));
  d.feed(snapshot_text(2));
  d.close("lost");
  d.session.opened();
  const auto out = d.feed(hello(1, "second"));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(std::get<act::GapFound>(out[0]).gap, (Gap{2, 0, std::string(kGapServerRestarted)}));
  EXPECT_TRUE(std::holds_alternative<act::HelloReceived>(out[1]));
  EXPECT_EQ(parse_client_message(std::get<act::Send>(out[2]).message).subscribe.since, 0u);
  d.feed(subscribed(0));
  EXPECT_EQ(delivered(d.feed(snapshot_text(1))), (std::vector<std::uint64_t>{1}));
}

TEST(ClientSession, FollowsTheEffectiveSinceOfTheAck) {
  RemoteSubscriberOptions o;
  o.since = 50;  // an older server (no instance) that restarted below it answers with 0
  Driver d(o);
  d.session.opened();
  d.feed(hello(3, ""));
  d.feed(subscribed(0));
  EXPECT_EQ(d.session.resume(), 0u);
  EXPECT_EQ(delivered(d.feed(snapshot_text(1))), (std::vector<std::uint64_t>{1}));
}

TEST(ClientSession, BackoffDoublesFromTheInitialDelayUpToTheCap) {
  RemoteSubscriberOptions o;
  o.reconnect_initial = milliseconds(100);
  o.reconnect_max = milliseconds(1000);
  ClientSession s(o);
  EXPECT_EQ(s.backoff_base(1), milliseconds(100));
  EXPECT_EQ(s.backoff_base(2), milliseconds(200));
  EXPECT_EQ(s.backoff_base(3), milliseconds(400));
  EXPECT_EQ(s.backoff_base(4), milliseconds(800));
  EXPECT_EQ(s.backoff_base(5), milliseconds(1000));
  EXPECT_EQ(s.backoff_base(60), milliseconds(1000));
}

TEST(ClientSession, RetriesCountFailedAttemptsWithJitterAndStartAgainAfterASubscribe) {
  RemoteSubscriberOptions o;
  o.reconnect_initial = milliseconds(100);
  o.reconnect_max = milliseconds(400);
  Driver d(o);
  std::vector<RemoteStatus> statuses;
  for (int i = 0; i < 5; ++i) {
    d.session.opened();
    d.close("connection refused");
    EXPECT_EQ(d.session.connecting().attempts, static_cast<unsigned>(i));
    statuses.push_back(d.session.retry("connection refused"));
  }
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    const auto& s = statuses[i];
    EXPECT_EQ(s.state, RemoteStatus::State::disconnected);
    EXPECT_EQ(s.reason, "connection refused");
    EXPECT_EQ(s.attempts, i + 1);
    const auto base = d.session.backoff_base(s.attempts).count();
    EXPECT_GE(s.retry_in.count(), base * 8 / 10) << i;
    EXPECT_LE(s.retry_in.count(), base * 12 / 10) << i;
  }
  EXPECT_LE(statuses.back().retry_in, milliseconds(480));
  // A connection that was subscribed: the next wait is the first one again.
  d.connect(0);
  d.close("lost");
  const auto s = d.session.retry("lost");
  EXPECT_EQ(s.attempts, 1u);
  EXPECT_LE(s.retry_in, milliseconds(120));
}

TEST(ClientSession, ANonPositiveInitialDelayIsOneMillisecond) {
  RemoteSubscriberOptions o;
  o.reconnect_initial = milliseconds(0);
  o.reconnect_max = milliseconds(0);
  ClientSession s(o);
  EXPECT_EQ(s.backoff_base(1), milliseconds(1));
  EXPECT_EQ(s.backoff_base(10), milliseconds(1));
}

struct FitLog {
  std::vector<RemoteFitAnswer> answers;
  FitHandler handler() {
    return [this](RemoteFitAnswer a) { answers.push_back(std::move(a)); };
  }
};

/// Runs the FitAnswer actions of `out`.
void answer(ClientActions& out) {
  for (auto& a : out)
    if (auto* f = std::get_if<act::FitAnswer>(&a)) f->handler(std::move(f->answer));
}

TEST(ClientSession, FitIsRefusedWhenNotConnected) {
  Driver d;
  FitLog log;
  ClientActions out;
  d.session.fit(1024, 4, log.handler(), out);
  d.session.opened();  // no hello yet
  d.session.fit(1024, 4, log.handler(), out);
  answer(out);
  ASSERT_EQ(log.answers.size(), 2u);
  for (const auto& a : log.answers) {
    EXPECT_FALSE(a.result);
    EXPECT_EQ(a.error, "not connected");
  }
  EXPECT_TRUE(of<act::Send>(out).empty());
}

// A fit asked once hello has arrived — from on_hello, before the subscribe is acknowledged —
// is sent (after the subscribe), not refused as "not connected" (it was, before #31).
TEST(ClientSession, FitIsSentOnceHelloArrivedBeforeTheAck) {
  Driver d;
  FitLog log;
  d.session.opened();
  d.feed(hello(0));  // the subscribe is sent; not acknowledged yet
  ClientActions out;
  d.session.fit(1024, 4, log.handler(), out);
  answer(out);
  EXPECT_TRUE(log.answers.empty()) << log.answers[0].error;
  const auto sent = of<act::Send>(out);
  ASSERT_EQ(sent.size(), 1u);
  const auto m = parse_client_message(sent[0].message);
  EXPECT_EQ(m.kind, ClientMessage::Kind::fit);
  EXPECT_EQ(m.fit.bytes, 1024u);
  // After the connection ends, no hello: refused again.
  ClientActions closed;
  d.session.closed("gone", closed);
  answer(closed);
  ASSERT_EQ(log.answers.size(), 1u);  // the fit in flight fails
  d.session.opened();
  ClientActions again;
  d.session.fit(1, 1, log.handler(), again);
  answer(again);
  ASSERT_EQ(log.answers.size(), 2u);
  EXPECT_EQ(log.answers[1].error, "not connected");
}

TEST(ClientSession, FitAnswersAreMatchedToTheirRequestsById) {
  Driver d;
  d.connect(0);
  FitLog first, second;
  ClientActions out;
  d.session.fit(1000, 2, first.handler(), out);
  d.session.fit(2000, 3, second.handler(), out);
  const auto sent = of<act::Send>(out);
  ASSERT_EQ(sent.size(), 2u);
  const auto r1 = parse_client_message(sent[0].message).fit;
  const auto r2 = parse_client_message(sent[1].message).fit;
  EXPECT_EQ(r1.bytes, 1000u);
  EXPECT_EQ(r1.limit, 2u);
  EXPECT_EQ(r2.bytes, 2000u);
  EXPECT_NE(r1.id, r2.id);
  EXPECT_EQ(d.session.fits_in_flight(), 2u);

  auto a2 = d.feed(without_newline(fit_result_message(r2.id, 2000, std::vector<FitEntry>{}, 3)));
  answer(a2);
  ASSERT_EQ(second.answers.size(), 1u);
  ASSERT_TRUE(second.answers[0].result);
  EXPECT_EQ(second.answers[0].result->bytes, 2000u);
  EXPECT_TRUE(first.answers.empty());
  // An answer nobody waits for is dropped.
  EXPECT_TRUE(
      d.feed(without_newline(fit_result_message("f999", 1, std::vector<FitEntry>{}, 1))).empty());
  // A refusal naming the id answers that one.
  auto a1 = d.feed(without_newline(error_message(kErrLimit, "busy", r1.id)));
  answer(a1);
  ASSERT_EQ(first.answers.size(), 1u);
  EXPECT_EQ(first.answers[0].error, "limit: busy");
  EXPECT_EQ(d.session.fits_in_flight(), 0u);
}

TEST(ClientSession, AnOlderServersUnknownTypeErrorAnswersTheOldestFit) {
  Driver d;
  d.session.opened();
  d.feed(hello(0, "i1", std::nullopt));  // no list of requests: a fit is sent
  d.feed(subscribed(0));
  FitLog log;
  ClientActions out;
  d.session.fit(1, 1, log.handler(), out);
  ASSERT_EQ(of<act::Send>(out).size(), 1u);
  auto a = d.feed(without_newline(error_message(kErrBadRequest, "unknown message type 'fit'")));
  answer(a);
  ASSERT_EQ(log.answers.size(), 1u);
  EXPECT_EQ(log.answers[0].error, "bad_request: unknown message type 'fit'");
  EXPECT_EQ(d.session.fits_in_flight(), 0u);
}

TEST(ClientSession, AHelloWithoutFitRefusesFitsAtOnceNamingTheRequests) {
  Driver d;
  d.session.opened();
  d.feed(hello(0, "i1", std::vector<std::string>{"subscribe"}));
  d.feed(subscribed(0));
  FitLog log;
  ClientActions out;
  d.session.fit(1, 1, log.handler(), out);
  answer(out);
  EXPECT_TRUE(of<act::Send>(out).empty());
  ASSERT_EQ(log.answers.size(), 1u);
  EXPECT_EQ(log.answers[0].error,
            std::string("the server (") + std::string(kServerName) +
                ") does not support fit: its hello lists the requests [subscribe]");
}

TEST(ClientSession, FitLimitsAreChecked) {
  Driver d;
  d.connect(0);
  FitLog log;
  ClientActions out;
  d.session.fit(1, 0, log.handler(), out);
  d.session.fit(1, kFitMaxLimit + 1, log.handler(), out);
  answer(out);
  ASSERT_EQ(log.answers.size(), 2u);
  EXPECT_EQ(log.answers[0].error, "limit must be from 1 to " + std::to_string(kFitMaxLimit));
  EXPECT_EQ(log.answers[1].error, log.answers[0].error);

  out.clear();
  for (std::size_t i = 0; i < kMaxFitsInFlight; ++i) d.session.fit(1, 1, log.handler(), out);
  EXPECT_EQ(of<act::Send>(out).size(), kMaxFitsInFlight);
  out.clear();
  d.session.fit(1, 1, log.handler(), out);
  answer(out);
  EXPECT_TRUE(of<act::Send>(out).empty());
  EXPECT_EQ(log.answers.back().error, "too many fit queries in flight (64)");
  EXPECT_EQ(d.session.fits_in_flight(), kMaxFitsInFlight);
}

TEST(ClientSession, FitsInFlightFailWhenTheConnectionEnds) {
  Driver d;
  d.connect(0);
  FitLog log;
  ClientActions out;
  d.session.fit(1, 1, log.handler(), out);
  d.session.fit(2, 1, log.handler(), out);
  auto closed = d.close("the server closed the connection");
  answer(closed);
  ASSERT_EQ(log.answers.size(), 2u);
  for (const auto& a : log.answers)
    EXPECT_EQ(a.error, "the connection ended before the answer: the server closed the connection");
  EXPECT_EQ(d.session.fits_in_flight(), 0u);
  out.clear();
  d.session.fit(1, 1, log.handler(), out);  // closed: not connected
  answer(out);
  EXPECT_EQ(log.answers.back().error, "not connected");
}

TEST(ClientSession, EventsBeforeTheAckAreFilteredHereAndCounted) {
  RemoteSubscriberOptions o;
  o.probes = {"gpu"};
  o.devices = {"GPU-1"};
  Driver d(o);
  d.session.opened();
  d.feed(hello(0));
  EXPECT_TRUE(
      of<act::Event>(d.feed(without_newline(event_message(event("other", "GPU-1"))))).empty());
  EXPECT_TRUE(
      of<act::Event>(d.feed(without_newline(event_message(event("gpu", "GPU-0"))))).empty());
  const auto out = of<act::Event>(d.feed(without_newline(event_message(event("gpu", "GPU-1")))));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(*out[0].event, event("gpu", "GPU-1"));
  EXPECT_EQ(d.session.counters().events, 1u);
  // After the ack the server filtered them: every event is delivered.
  d.feed(subscribed(0));
  EXPECT_EQ(of<act::Event>(d.feed(without_newline(event_message(event("other", "GPU-0"))))).size(),
            1u);
  EXPECT_EQ(d.session.counters().events, 2u);
}

TEST(ClientSession, MessagesThatDoNotDecodeAreCountedAndIgnored) {
  Driver d;
  d.connect(0);
  EXPECT_TRUE(d.feed("not json").empty());
  EXPECT_TRUE(d.feed(R"({"type":"snapshot","sequence":"x"})").empty());
  EXPECT_TRUE(d.feed(R"({"type":"event","sequence":1})").empty());
  EXPECT_EQ(d.session.counters().decode_errors, 3u);
  EXPECT_TRUE(d.feed(R"({"type":"from_the_future"})").empty());
  EXPECT_EQ(d.session.counters().decode_errors, 3u);
  EXPECT_EQ(delivered(d.feed(snapshot_text(1))), (std::vector<std::uint64_t>{1}));
}

TEST(ClientSession, AnErrorBeforeTheAckDropsTheConnection) {
  Driver d;
  d.session.opened();
  const auto out = d.feed(without_newline(error_message(kErrUnauthorized, "wrong token")));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(std::get<act::Drop>(out[0]).reason, "server refused: unauthorized: wrong token");
}

TEST(ClientSession, AnErrorAfterTheAckKeepsTheConnectionAndNamesTheReadFailure) {
  Driver d;
  d.connect(0);
  EXPECT_EQ(d.session.read_failed("eof"), "eof");
  EXPECT_TRUE(d.feed(without_newline(error_message(kErrSlowClient, "too slow"))).empty());
  EXPECT_EQ(d.session.read_failed("eof"), "server error slow_client: too slow");
  d.close("x");
  d.session.opened();  // a new connection forgets it
  EXPECT_EQ(d.session.read_failed("eof"), "eof");
}

}  // namespace
}  // namespace gpustream::transport::test
