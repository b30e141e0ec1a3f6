// The `fit` message's exclusions and health rule (docs/protocol.md, "fit"): `exclude` and
// `fatal_event_window_s` parsed and bounded (count, bytes per id, bytes together, the worst
// input refused before it is copied), the answer's `excluded` entries with their reason, the
// real Server leaving out excluded and sick devices (its own events; a fit source's entries
// under the request's exclusions), RemoteSubscriber::fit with FitOptions and called from
// on_hello, and hello's `devices_pending` on a freshly started server.
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"
#include "gpustream/transport/remote_subscriber.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

constexpr std::uint64_t kGiB = 1ULL << 30;

std::string refusal(const std::string& text) {
  try {
    parse_client_message(text);
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.code(), "bad_request");
    EXPECT_EQ(e.id(), "x") << "the id is echoed: " << text.substr(0, 200);
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << text.substr(0, 200);
  return {};
}

TEST(TransportFitExclusions, ParsesExclusionsAndTheWindowAndEncodesThemBack) {
  auto m = parse_client_message(
      R"({"type":"fit","bytes":1,"exclude":["GPU-a","MIG-b"],"fatal_event_window_s":600})");
  EXPECT_EQ(m.fit.exclude, (std::vector<std::string>{"GPU-a", "MIG-b"}));
  EXPECT_EQ(m.fit.fatal_event_window_s, 600U);
  EXPECT_EQ(parse_client_message(encode_fit(m.fit)).fit, m.fit);
  const auto o = fit_options(m.fit);
  EXPECT_EQ(o.exclude, m.fit.exclude);
  EXPECT_EQ(o.fatal_event_window, std::chrono::seconds{600});
  // Absent: no exclusions, the default window.
  m = parse_client_message(R"({"type":"fit","bytes":1})");
  EXPECT_TRUE(m.fit.exclude.empty());
  EXPECT_FALSE(m.fit.fatal_event_window_s);
  EXPECT_EQ(fit_options(m.fit).fatal_event_window, kDefaultFatalEventWindow);
  EXPECT_EQ(encode_fit(m.fit).find("exclude"), std::string::npos);
  // The bounds themselves are accepted.
  std::string full = R"({"type":"fit","bytes":1,"fatal_event_window_s":604800,"exclude":[)";
  for (std::size_t i = 0; i < kFitMaxExclude; ++i)
    full += std::string(i ? "," : "") + "\"" + std::string(60, 'a') + std::to_string(i) + "\"";
  m = parse_client_message(full + "]}");
  EXPECT_EQ(m.fit.exclude.size(), kFitMaxExclude);
}

TEST(TransportFitExclusions, RefusesBadOrOversizedExclusionsNamingThem) {
  const std::string head = R"({"type":"fit","id":"x","bytes":1,)";
  EXPECT_NE(refusal(head + R"("exclude":"GPU-a"})").find("fit.exclude"), std::string::npos);
  EXPECT_NE(refusal(head + R"("exclude":["GPU-a",7]})").find("fit.exclude"), std::string::npos);
  EXPECT_NE(refusal(head + R"("exclude":[""]})").find("an empty device id"), std::string::npos);
  EXPECT_NE(refusal(head + R"("exclude":[")" + std::string(kMaxNameLength + 1, 'l') + "\"]}")
                .find("longer than 256 bytes"),
            std::string::npos);
  EXPECT_NE(refusal(head + R"("fatal_event_window_s":-1})").find("fit.fatal_event_window_s"),
            std::string::npos);
  EXPECT_NE(refusal(head + R"("fatal_event_window_s":604801})").find("from 0 to 604800"),
            std::string::npos);
  EXPECT_NE(refusal(head + R"("fatal_event_window_s":"1h"})").find("fit.fatal_event_window_s"),
            std::string::npos);
  // The worst inputs: one id more than the count bound (short ids), and ids within the count
  // and each within kMaxNameLength but past kFitMaxExcludeBytes together.
  std::string many = head + R"("exclude":[)";
  for (std::size_t i = 0; i <= kFitMaxExclude; ++i) many += std::string(i ? "," : "") + "\"d\"";
  EXPECT_NE(refusal(many + "]}").find("more than 256 device ids"), std::string::npos);
  std::string heavy = head + R"("exclude":[)";
  for (std::size_t i = 0; i < kFitMaxExcludeBytes / kMaxNameLength + 1; ++i)
    heavy += std::string(i ? "," : "") + "\"" + std::string(kMaxNameLength, 'h') + "\"";
  EXPECT_NE(refusal(heavy + "]}").find("16384 bytes together"), std::string::npos);
}

FitEntry entry(int i, std::size_t name_bytes = 10) {
  FitEntry e;
  e.device = "GPU-" + std::to_string(i);
  e.name = std::string(name_bytes, 'n');
  e.probe = "nvidia";
  e.vendor = "nvidia";
  e.free_bytes = (1000ULL - static_cast<std::uint64_t>(i)) * kGiB;
  e.source = "nvml";
  return e;
}

TEST(TransportFitExclusions, TheAnswerCarriesTheExcludedWithTheirReasonWithinItsBound) {
  FitAnswer a;
  a.fits = {entry(1), entry(2)};
  auto x = entry(0);
  x.reason = "fatal_event";
  x.detail = "xid 79 12 s ago (event #3, nvidia)";
  a.excluded = {x};
  auto m = parse_server_message(fit_result_message("q", 0, a, 16));
  ASSERT_EQ(m.kind, ServerMessage::Kind::fit_result);
  EXPECT_EQ(m.fit.fits, a.fits);
  EXPECT_EQ(m.fit.excluded, a.excluded);  // reason and detail come back
  EXPECT_EQ(m.fit.total, 2U);
  EXPECT_FALSE(m.fit.truncated);
  EXPECT_EQ(to_compact_json(to_json(a.fits[0])).find("reason"), std::string::npos);
  // An older server's answer has no `excluded`: none.
  m = parse_server_message(R"({"type":"fit_result","bytes":1,"fits":[]})");
  EXPECT_TRUE(m.fit.excluded.empty());
  // /api/v1/fit's document lists them too.
  const auto doc = boost::json::parse(fit_json(a, 0));
  EXPECT_EQ(doc.at("excluded").at(0).at("reason"), "fatal_event");

  // The worst answer: as many fits and excluded devices as can be, with long names: within
  // kFitMaxReplyBytes, cut, and said so.
  FitAnswer huge;
  for (int i = 0; i < 1000; ++i) {
    huge.fits.push_back(entry(i, 300));
    auto e = entry(i, 300);
    e.reason = "excluded";
    e.detail = "in the request's exclusions";
    huge.excluded.push_back(e);
  }
  const auto text = fit_result_message("q", 0, huge, kFitMaxLimit);
  EXPECT_LE(text.size(), kFitMaxReplyBytes);
  m = parse_server_message(text);
  EXPECT_TRUE(m.fit.truncated);
  EXPECT_LE(m.fit.excluded.size(), kFitMaxLimit);
  // Few fits leave room for the excluded, at most kFitMaxLimit of them.
  FitAnswer excluded_only;
  for (int i = 0; i < 1000; ++i) excluded_only.excluded.push_back(huge.excluded[i]);
  for (auto& e : excluded_only.excluded) e.name = "n";
  m = parse_server_message(fit_result_message("q", 0, excluded_only, 1));
  EXPECT_EQ(m.fit.excluded.size(), kFitMaxLimit);
  EXPECT_TRUE(m.fit.truncated);
}

GpuEvent xid_event(std::string device, std::uint64_t number) {
  GpuEvent e;
  e.time_unix_ns = wall_now_ns();
  e.probe = "sim";
  e.device_id = std::move(device);
  e.kind = EventKind::xid;
  e.data = number;
  return e;
}

std::vector<std::string> devices(const std::vector<FitEntry>& list) {
  std::vector<std::string> out;
  for (const auto& e : list) out.push_back(e.device);
  return out;
}

TEST(TransportFitExclusions, ServeLeavesOutExcludedAndSickDevicesAndSaysWhy) {
  Fixture f;
  f.start();
  f.publish("sim", 3);  // sim-gpu0..2, 7 GiB free each
  f.channel.events().publish(xid_event("sim-gpu1", 79));
  f.channel.events().publish(xid_event("sim-gpu0", 13));  // an application's Xid: not fatal
  auto c = connected_tcp(f);
  c->send(R"({"type":"fit","bytes":0,"id":"a","exclude":["sim-gpu2"]})");
  c->send(R"({"type":"fit","bytes":0,"id":"b","fatal_event_window_s":0})");
  c->send(R"({"type":"fit","bytes":0,"id":"c"})");
  ASSERT_TRUE(f.run_until([&] { return c->count("fit_result") == 3; }));
  std::vector<FitResult> r;
  for (const auto& o : c->of_type("fit_result"))
    r.push_back(parse_server_message(boost::json::serialize(o)).fit);
  EXPECT_EQ(devices(r[0].fits), std::vector<std::string>{"sim-gpu0"});
  EXPECT_EQ(r[0].total, 1U);
  ASSERT_EQ(devices(r[0].excluded), (std::vector<std::string>{"sim-gpu1", "sim-gpu2"}));
  EXPECT_EQ(r[0].excluded[0].reason, "fatal_event");
  EXPECT_EQ(r[0].excluded[0].detail.rfind("xid 79 ", 0), 0U) << r[0].excluded[0].detail;
  EXPECT_EQ(r[0].excluded[0].free_bytes, 7 * kGiB);
  EXPECT_EQ(r[0].excluded[1].reason, "excluded");
  EXPECT_EQ(devices(r[1].fits).size(), 3U) << "the health rule off";
  EXPECT_TRUE(r[1].excluded.empty());
  EXPECT_EQ(devices(r[2].fits), (std::vector<std::string>{"sim-gpu0", "sim-gpu2"}))
      << "the default window applies without fatal_event_window_s";
  // A storm of other events does not wash the fatal one out of the server's memory.
  for (int i = 0; i < 2000; ++i) {
    auto e = xid_event("sim-gpu0", 0);
    e.kind = EventKind::clock_event;
    f.channel.events().publish(e);
  }
  c->send(R"({"type":"fit","bytes":0,"id":"d"})");
  ASSERT_TRUE(f.run_until([&] { return c->count("fit_result") == 4; }));
  const auto d = parse_server_message(boost::json::serialize(c->of_type("fit_result").at(3))).fit;
  EXPECT_EQ(devices(d.excluded), std::vector<std::string>{"sim-gpu1"});
  EXPECT_TRUE(f.stop());
}

TEST(TransportFitExclusions, AFitSourcesEntriesAreFilteredByTheRequest) {
  Fixture f;
  ServerOptions o;
  o.fit_source = [](std::uint64_t) {
    std::vector<FitEntry> out;
    for (int i = 0; i < 4; ++i) out.push_back(entry(i));
    return out;
  };
  f.start(o);
  auto c = connected_tcp(f);
  c->send(R"({"type":"fit","bytes":0,"exclude":["GPU-1","GPU-3"]})");
  ASSERT_TRUE(f.run_until([&] { return c->count("fit_result") == 1; }));
  const auto r = parse_server_message(boost::json::serialize(c->of_type("fit_result").at(0))).fit;
  EXPECT_EQ(devices(r.fits), (std::vector<std::string>{"GPU-0", "GPU-2"}));
  EXPECT_EQ(devices(r.excluded), (std::vector<std::string>{"GPU-1", "GPU-3"}));
  EXPECT_EQ(r.excluded[0].reason, "excluded");
  EXPECT_TRUE(f.stop());
}

TEST(TransportFitExclusions, RemoteSubscriberFitsFromOnHelloAndWithOptions) {
  for (const bool tcp : {true, false}) {
    Fixture f;
    f.start();
    f.publish("sim", 3);
    f.channel.events().publish(xid_event("sim-gpu1", 48));
    RemoteSubscriberOptions o;
    o.url = tcp ? "tcp://127.0.0.1:" + std::to_string(f.tcp_port())
                : "ws://127.0.0.1:" + std::to_string(f.http_port()) + "/ws";
    RemoteSubscriber sub(f.io.get_executor(), o);
    std::vector<RemoteFitAnswer> answers;
    std::vector<std::string> order;
    sub.on_status([&](const RemoteStatus& s) {
      if (s.state == RemoteStatus::State::connected) order.push_back("connected");
    });
    sub.on_hello([&](const RemoteHello&) {
      order.push_back("hello");
      // Asked from on_hello: was "not connected" (refused until the subscribe's ack).
      sub.fit(0, [&](RemoteFitAnswer a) {
        order.push_back("answer");
        answers.push_back(std::move(a));
      });
      FitOptions fo;
      fo.exclude = {"sim-gpu0"};
      fo.fatal_event_window = std::chrono::seconds{0};
      sub.fit(0, fo, [&](RemoteFitAnswer a) { answers.push_back(std::move(a)); });
    });
    sub.start();
    ASSERT_TRUE(f.run_until([&] { return answers.size() == 2 && order.size() >= 3; }));
    ASSERT_TRUE(answers[0].result) << answers[0].error;
    EXPECT_EQ(devices(answers[0].result->fits), (std::vector<std::string>{"sim-gpu0", "sim-gpu2"}));
    EXPECT_EQ(devices(answers[0].result->excluded), std::vector<std::string>{"sim-gpu1"});
    ASSERT_TRUE(answers[1].result) << answers[1].error;
    EXPECT_EQ(devices(answers[1].result->fits), (std::vector<std::string>{"sim-gpu1", "sim-gpu2"}));
    EXPECT_EQ(devices(answers[1].result->excluded), std::vector<std::string>{"sim-gpu0"});
    EXPECT_EQ(order[0], "hello");
    sub.stop();
    EXPECT_TRUE(f.stop());
  }
}

TEST(TransportFitExclusions, HelloSaysWhichProbesDevicesAreNotKnownYet) {
  Fixture f;
  std::vector<ProbeStats> stats(3);
  stats[0].probe = "sim";
  stats[0].state = ProbeState::available;
  stats[1].probe = "late";
  stats[1].state = ProbeState::available;  // available, no snapshot yet
  stats[2].probe = "nvidia";
  stats[2].state = ProbeState::detecting;
  f.start({}, [&] { return stats; });
  auto c = connected_tcp(f);
  auto hello = parse_server_message(boost::json::serialize(c->of_type("hello").at(0))).hello;
  EXPECT_TRUE(hello.devices.empty());
  ASSERT_TRUE(hello.devices_pending);
  EXPECT_EQ(*hello.devices_pending, (std::vector<std::string>{"sim", "late", "nvidia"}));
  f.publish("sim", 2);
  stats[2].state = ProbeState::unavailable;  // detection said no: nothing pending from it
  auto d = connected_tcp(f);
  hello = parse_server_message(boost::json::serialize(d->of_type("hello").at(0))).hello;
  EXPECT_EQ(hello.devices.size(), 2U);
  EXPECT_EQ(*hello.devices_pending, std::vector<std::string>{"late"});
  // Without statistics the server cannot say: the key is left out (nullopt), as from an older
  // server.
  EXPECT_FALSE(parse_server_message(R"({"type":"hello","schema":"gpustream/1","last_sequence":0})")
                   .hello.devices_pending);
  EXPECT_TRUE(f.stop());
}

}  // namespace
}  // namespace gpustream::transport::test
