// The protocol's `fit` request and its `fit_result` answer: parsing (good, garbage, bytes=0,
// the largest N), the bounded answer, and the real Server answering over TCP and WebSocket —
// with its own devices, or with a fit source (what `gpustream fleet` sets) — while a client
// that sends garbage or an oversized request never disturbs another. RemoteSubscriber::fit
// against the same server; hello's `requests` list, and RemoteSubscriber::fit against a scripted
// server whose hello lists no `fit` (fails at once) or has no list (asks, as before).
#include <algorithm>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"
#include "gpustream/transport/remote_subscriber.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

constexpr std::uint64_t kFitGiB = 1ULL << 30;

FitEntry fit_entry(int i, std::size_t name_bytes = 10) {
  FitEntry e;
  e.node = "node-" + std::to_string(i);
  e.device = "GPU-" + std::to_string(i);
  e.name = std::string(name_bytes, 'n');
  e.probe = "nvidia";
  e.vendor = "nvidia";
  e.free_bytes = (1000ULL - static_cast<std::uint64_t>(i)) * kFitGiB;
  e.source = "nvml";
  e.age_seconds = 0.25;
  return e;
}

TEST(TransportFitMessage, ParsesARequestAndEncodesItBack) {
  auto m = parse_client_message(R"({"type":"fit","bytes":8589934592,"limit":3,"id":"q1","x":1})");
  ASSERT_EQ(m.kind, ClientMessage::Kind::fit);
  EXPECT_EQ(m.fit.bytes, 8 * kFitGiB);
  EXPECT_EQ(m.fit.limit, 3U);
  EXPECT_EQ(m.fit.id, "q1");
  EXPECT_EQ(parse_client_message(encode_fit(m.fit)).fit, m.fit);
  // bytes 0 is a real question (every device with a known free figure); no limit: the default.
  m = parse_client_message(R"({"type":"fit","bytes":0})");
  EXPECT_EQ(m.fit.bytes, 0U);
  EXPECT_EQ(m.fit.limit, kFitDefaultLimit);
  EXPECT_EQ(m.fit.id, "");
  // The largest whole number of bytes is accepted (nothing fits it, and that is an answer).
  m = parse_client_message(R"({"type":"fit","bytes":18446744073709551615})");
  EXPECT_EQ(m.fit.bytes, UINT64_MAX);
}

TEST(TransportFitMessage, RefusesGarbageNamingTheFieldAndEchoingTheId) {
  struct Case {
    const char* text;
    const char* names;  // the refusal's message contains this
    const char* id;     // echoed id
  };
  for (const auto& c : {
           Case{R"({"type":"fit"})", "fit.bytes: required", ""},
           Case{R"({"type":"fit","bytes":null,"id":"a"})", "fit.bytes: required", "a"},
           Case{R"({"type":"fit","bytes":-1,"id":"b"})", "fit.bytes", "b"},
           Case{R"({"type":"fit","bytes":1.5,"id":"c"})", "fit.bytes", "c"},
           Case{R"({"type":"fit","bytes":"100","id":"d"})", "fit.bytes", "d"},
           Case{R"({"type":"fit","bytes":1e30,"id":"e"})", "fit.bytes", "e"},
           Case{R"({"type":"fit","bytes":18446744073709551616,"id":"f"})", "fit.bytes", "f"},
           Case{R"({"type":"fit","bytes":1,"limit":0,"id":"g"})", "fit.limit", "g"},
           Case{R"({"type":"fit","bytes":1,"limit":257,"id":"h"})", "fit.limit", "h"},
           Case{R"({"type":"fit","bytes":1,"limit":true})", "fit.limit", ""},
           Case{R"({"type":"fit","bytes":1,"id":7})", "fit.id", ""},
       }) {
    try {
      parse_client_message(c.text);
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.code(), "bad_request") << c.text;
      EXPECT_NE(std::string(e.what()).find(c.names), std::string::npos) << e.what();
      EXPECT_EQ(e.id(), c.id) << c.text;
    }
  }
  // An id longer than its bound is refused, and not echoed (it is what is wrong).
  const std::string long_id =
      R"({"type":"fit","bytes":1,"id":")" + std::string(kFitMaxIdBytes + 1, 'i') + "\"}";
  try {
    parse_client_message(long_id);
    ADD_FAILURE() << "accepted a long id";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("fit.id"), std::string::npos);
    EXPECT_EQ(e.id(), "");
  }
  // The error message carries the id for the client to match.
  const auto err = parse_server_message(error_message(kErrBadRequest, "fit.bytes: x", "q9"));
  EXPECT_EQ(err.kind, ServerMessage::Kind::error);
  EXPECT_EQ(err.error.id, "q9");
}

TEST(TransportFitMessage, TheAnswerIsCutToTheLimitAndToItsByteBound) {
  std::vector<FitEntry> all;
  for (int i = 0; i < 5; ++i) all.push_back(fit_entry(i));
  auto text = fit_result_message("q1", 3 * kFitGiB, all, 3);
  auto m = parse_server_message(text);
  ASSERT_EQ(m.kind, ServerMessage::Kind::fit_result);
  EXPECT_EQ(m.fit.id, "q1");
  EXPECT_EQ(m.fit.bytes, 3 * kFitGiB);
  EXPECT_EQ(m.fit.total, 5U);
  EXPECT_TRUE(m.fit.truncated);
  ASSERT_EQ(m.fit.fits.size(), 3U);
  EXPECT_EQ(m.fit.fits[0], all[0]);  // every field comes back
  EXPECT_EQ(m.fit.fits[2], all[2]);
  EXPECT_EQ(text.back(), '\n');

  // The worst answer: the most entries a client may ask for, each as long as names get.
  std::vector<FitEntry> huge;
  for (int i = 0; i < 10000; ++i) huge.push_back(fit_entry(i, 1000));
  text = fit_result_message("q2", 0, huge, kFitMaxLimit);
  EXPECT_LE(text.size(), kFitMaxReplyBytes);
  m = parse_server_message(text);
  EXPECT_EQ(m.fit.total, 10000U);
  EXPECT_TRUE(m.fit.truncated);
  EXPECT_GT(m.fit.fits.size(), 10U);
  EXPECT_LT(m.fit.fits.size(), kFitMaxLimit);

  // Nothing fits: an empty list, not truncated.
  m = parse_server_message(fit_result_message("", UINT64_MAX, std::vector<FitEntry>{}, 16));
  EXPECT_EQ(m.fit.bytes, UINT64_MAX);
  EXPECT_EQ(m.fit.total, 0U);
  EXPECT_FALSE(m.fit.truncated);
  EXPECT_TRUE(m.fit.fits.empty());
}

/// The fit_result messages a client received, decoded.
std::vector<FitResult> results(const Client& c) {
  std::vector<FitResult> out;
  for (const auto& o : c.of_type("fit_result"))
    out.push_back(parse_server_message(boost::json::serialize(o)).fit);
  return out;
}

TEST(TransportFitMessage, ServeAnswersWithItsOwnDevicesOverTcpAndWebSocket) {
  Fixture f;
  f.start();
  f.publish("sim", 3);  // 3 devices, 7 GiB free each (8 total − 1 used: derived)
  auto tcp = connected_tcp(f);
  auto ws = connected_ws(f);
  tcp->send(R"({"type":"fit","bytes":0,"id":"all"})");
  ws->send(R"({"type":"fit","bytes":4294967296,"limit":2,"id":"two"})");
  tcp->send(R"({"type":"fit","bytes":18446744073709551615,"id":"none"})");
  ASSERT_TRUE(
      f.run_until([&] { return tcp->count("fit_result") == 2 && ws->count("fit_result") == 1; }));
  const auto t = results(*tcp);
  EXPECT_EQ(t[0].id, "all");
  EXPECT_EQ(t[0].total, 3U);
  ASSERT_EQ(t[0].fits.size(), 3U);
  EXPECT_EQ(t[0].fits[0].node, "");  // the server's own device
  EXPECT_EQ(t[0].fits[0].device, "sim-gpu0");
  EXPECT_EQ(t[0].fits[0].free_bytes, 7 * kFitGiB);
  EXPECT_EQ(t[0].fits[0].source, "derived");
  EXPECT_EQ(t[0].fits[0].state, "up");
  EXPECT_GT(t[0].fits[0].age_seconds, 0.0);  // the snapshot is from 2023
  EXPECT_EQ(t[1].id, "none");
  EXPECT_EQ(t[1].total, 0U);
  EXPECT_TRUE(t[1].fits.empty());
  const auto w = results(*ws);
  EXPECT_EQ(w[0].id, "two");
  EXPECT_EQ(w[0].fits.size(), 2U);
  EXPECT_TRUE(w[0].truncated);
  EXPECT_EQ(f.server->counters().messages_rejected, 0U);
  EXPECT_TRUE(f.stop());
}

TEST(TransportFitMessage, GarbageAndOversizedFitsGetErrorsAndOtherClientsDoNotNotice) {
  Fixture f;
  ServerOptions o;
  o.limits.max_message_bytes = 1024;
  f.start(o);
  f.publish("sim", 2);
  auto garbage = connected_tcp(f);
  auto garbage_ws = connected_ws(f);
  auto big = connected_tcp(f);
  auto big_ws = connected_ws(f);
  auto good = connected_ws(f);
  garbage->send(R"({"type":"fit","bytes":-5,"id":"neg"})");
  garbage->send(R"({"type":"fit","bytes":{"x":1}})");
  garbage_ws->send(R"({"type":"fit","bytes":1e400,"id":"inf"})");
  big->send(R"({"type":"fit","bytes":1,"id":")" + std::string(5000, 'x') + "\"}");
  big_ws->send(R"({"type":"fit","bytes":1,"id":")" + std::string(5000, 'x') + "\"}");
  ASSERT_TRUE(f.run_until([&] {
    return garbage->count("error") == 2 && garbage_ws->count("error") == 1 && big->ended() &&
           big_ws->ended();
  }));
  const auto errors = garbage->of_type("error");
  EXPECT_EQ(errors[0].at("code"), "bad_request");
  EXPECT_EQ(errors[0].at("id"), "neg");
  EXPECT_NE(std::string(errors[0].at("message").as_string()).find("fit.bytes"), std::string::npos);
  EXPECT_FALSE(errors[1].contains("id"));
  EXPECT_EQ(big->of_type("error").at(0).at("code"), "too_large");
  EXPECT_EQ(big_ws->close_code(), 1009);
  // The clients that sent garbage stay open and can still ask; the others never noticed.
  garbage->send(R"({"type":"fit","bytes":1})");
  good->send(R"({"type":"fit","bytes":1,"id":"g"})");
  f.publish("sim", 2);
  ASSERT_TRUE(f.run_until([&] {
    return garbage->count("fit_result") == 1 && good->count("fit_result") == 1 &&
           good->count("snapshot") == 1 && garbage_ws->count("snapshot") == 1;
  }));
  EXPECT_FALSE(garbage->ended());
  EXPECT_FALSE(garbage_ws->ended());
  EXPECT_EQ(good->count("error"), 0U);
  EXPECT_EQ(results(*good)[0].fits.size(), 2U);
  EXPECT_EQ(f.server->counters().messages_rejected, 5U);
  EXPECT_TRUE(f.stop());
}

TEST(TransportFitMessage, AFitSourceAnswersInsteadOfTheLocalDevices) {
  Fixture f;
  ServerOptions o;
  std::uint64_t asked = 0;
  o.fit_source = [&asked](std::uint64_t bytes) {
    asked = bytes;
    std::vector<FitEntry> out;
    for (int i = 0; i < 400; ++i) out.push_back(fit_entry(i));
    return out;
  };
  f.start(o);
  auto c = connected_tcp(f);
  c->send(R"({"type":"fit","bytes":123,"limit":256})");
  ASSERT_TRUE(f.run_until([&] { return c->count("fit_result") == 1; }));
  EXPECT_EQ(asked, 123U);
  const auto r = results(*c)[0];
  EXPECT_EQ(r.total, 400U);
  EXPECT_EQ(r.fits.size(), 256U);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.fits[1].node, "node-1");
  EXPECT_TRUE(f.stop());
}

TEST(TransportFitMessage, RemoteSubscriberAsksAndGetsTheAnswerOrAnError) {
  for (const bool tcp : {true, false}) {
    Fixture f;
    f.start();
    f.publish("sim", 2);
    RemoteSubscriberOptions o;
    o.url = tcp ? "tcp://127.0.0.1:" + std::to_string(f.tcp_port())
                : "ws://127.0.0.1:" + std::to_string(f.http_port()) + "/ws";
    RemoteSubscriber sub(f.io.get_executor(), o);
    std::vector<RemoteFitAnswer> answers;
    // Before it is connected: an error, at once.
    sub.fit(1, [&](RemoteFitAnswer a) { answers.push_back(std::move(a)); });
    ASSERT_TRUE(f.run_until([&] { return answers.size() == 1; }));
    EXPECT_FALSE(answers[0].result);
    EXPECT_EQ(answers[0].error, "not connected");
    sub.start();
    ASSERT_TRUE(f.run_until([&] { return sub.status().state == RemoteStatus::State::connected; }));
    sub.fit(kFitGiB, [&](RemoteFitAnswer a) { answers.push_back(std::move(a)); });
    sub.fit(
        UINT64_MAX, [&](RemoteFitAnswer a) { answers.push_back(std::move(a)); }, 1);
    sub.fit(
        1, [&](RemoteFitAnswer a) { answers.push_back(std::move(a)); }, 0);
    ASSERT_TRUE(f.run_until([&] { return answers.size() == 4; }));
    // The bad limit is refused by the client itself, before the two answers come.
    EXPECT_NE(answers[1].error.find("limit"), std::string::npos);
    ASSERT_TRUE(answers[2].result) << answers[2].error;
    EXPECT_EQ(answers[2].result->bytes, kFitGiB);
    ASSERT_EQ(answers[2].result->fits.size(), 2U);
    EXPECT_EQ(answers[2].result->fits[0].free_bytes, 7 * kFitGiB);
    ASSERT_TRUE(answers[3].result);
    EXPECT_TRUE(answers[3].result->fits.empty());
    sub.stop();
    EXPECT_TRUE(f.stop());
  }
}

TEST(TransportFitMessage, HelloListsTheRequestsTheServerAnswers) {
  Fixture f;
  f.start();
  auto tcp = connected_tcp(f);
  auto ws = connected_ws(f);
  for (const auto& c : {tcp, ws}) {
    const auto hello = c->of_type("hello").at(0);
    ASSERT_TRUE(hello.contains("requests"));
    const auto& requests = hello.at("requests").as_array();
    ASSERT_EQ(requests.size(), 2U);
    EXPECT_EQ(requests[0], "subscribe");
    EXPECT_EQ(requests[1], "fit");
    // The decoder gives the list back; the C++ client reads it from there.
    const auto m = parse_server_message(boost::json::serialize(hello));
    ASSERT_TRUE(m.hello.requests);
    EXPECT_EQ(*m.hello.requests, (std::vector<std::string>{"subscribe", "fit"}));
  }
  // Every listed request is one the server parses (not "unknown message type").
  for (const auto r : kClientRequests) {
    const std::string text = R"({"type":")" + std::string(r) + R"(","bytes":0})";
    EXPECT_NO_THROW(parse_client_message(text)) << text;
  }
  EXPECT_THROW(parse_client_message(R"({"type":"unsubscribe"})"), ProtocolError);
  // An older server's hello has no list: nullopt, which is not an empty list.
  auto m = parse_server_message(R"({"type":"hello","schema":"gpustream/1","last_sequence":0})");
  EXPECT_FALSE(m.hello.requests);
  m = parse_server_message(
      R"({"type":"hello","schema":"gpustream/1","last_sequence":0,"requests":[]})");
  ASSERT_TRUE(m.hello.requests);
  EXPECT_TRUE(m.hello.requests->empty());
  EXPECT_THROW(parse_server_message(
                   R"({"type":"hello","schema":"gpustream/1","last_sequence":0,"requests":[1]})"),
               JsonError);
  EXPECT_TRUE(f.stop());
}

/// What a scripted server received, line by line, and whether the client closed.
struct ScriptLog {
  std::vector<std::string> lines;
  bool ended = false;
};

/// A TCP server of another version: sends `hello`, answers a subscribe with `subscribed` and a
/// fit as a server that does not know `fit` does (bad_request, no id); records every line.
boost::asio::awaitable<void> scripted_server(boost::asio::ip::tcp::acceptor* a, std::string hello,
                                             ScriptLog* log) {
  namespace asio = boost::asio;
  auto sock = co_await a->async_accept(asio::use_awaitable);
  co_await asio::async_write(sock, asio::buffer(hello), asio::use_awaitable);
  std::string buf;
  for (;;) {
    boost::system::error_code ec;
    const auto n = co_await asio::async_read_until(sock, asio::dynamic_buffer(buf), '\n',
                                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    log->lines.push_back(buf.substr(0, n - 1));
    buf.erase(0, n);
    const auto m = parse_client_message(log->lines.back());
    const auto reply = m.kind == ClientMessage::Kind::subscribe
                           ? subscribed_message({m.subscribe, {}, {}})
                           : error_message(kErrBadRequest, "unknown message type 'fit'");
    co_await asio::async_write(sock, asio::buffer(reply), asio::use_awaitable);
  }
  log->ended = true;
}

/// RemoteSubscriber::fit against a scripted server whose hello lists `requests` (nullopt: no
/// list). Returns the answer; `log` gets what the server received, up to the client's close.
RemoteFitAnswer fit_against(std::optional<std::vector<std::string>> requests, ScriptLog& log) {
  Fixture f;
  boost::asio::ip::tcp::acceptor acceptor(f.io, {boost::asio::ip::address_v4::loopback(), 0});
  Hello h;
  h.server = "gpustream/0.0.9";
  h.instance = "0123456789abcdef";
  h.requests = std::move(requests);
  boost::asio::co_spawn(f.io, scripted_server(&acceptor, hello_message(h), &log),
                        boost::asio::detached);
  RemoteSubscriberOptions o;
  o.url = "tcp://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  RemoteSubscriber sub(f.io.get_executor(), o);
  sub.start();
  EXPECT_TRUE(f.run_until([&] { return sub.status().state == RemoteStatus::State::connected; }));
  std::vector<RemoteFitAnswer> answers;
  sub.fit(kFitGiB, [&](RemoteFitAnswer a) { answers.push_back(std::move(a)); });
  EXPECT_TRUE(f.run_until([&] { return answers.size() == 1; }));
  sub.stop();
  EXPECT_TRUE(f.run_until([&] { return log.ended; }));  // every line it sent has been read
  return answers.empty() ? RemoteFitAnswer{} : std::move(answers[0]);
}

TEST(TransportFitMessage, RemoteSubscriberFailsAtOnceWhenHelloListsNoFit) {
  ScriptLog log;
  const auto a = fit_against(std::vector<std::string>{"subscribe"}, log);
  EXPECT_FALSE(a.result);
  EXPECT_EQ(a.error,
            "the server (gpustream/0.0.9) does not support fit: its hello lists the requests "
            "[subscribe]");
  // Nothing was asked: the server got the subscribe only (a fit would have got its
  // "unknown message type" answer instead of the error above).
  ASSERT_EQ(log.lines.size(), 1U);
  EXPECT_EQ(parse_client_message(log.lines[0]).kind, ClientMessage::Kind::subscribe);
}

TEST(TransportFitMessage, RemoteSubscriberStillAsksAServerWhoseHelloHasNoList) {
  ScriptLog log;
  const auto a = fit_against(std::nullopt, log);
  EXPECT_FALSE(a.result);
  EXPECT_EQ(a.error, "bad_request: unknown message type 'fit'");
  ASSERT_EQ(log.lines.size(), 2U);
  EXPECT_EQ(parse_client_message(log.lines[1]).kind, ClientMessage::Kind::fit);
  // A list with `fit` (a newer server's): the fit is sent too.
  ScriptLog listed;
  const auto b = fit_against(std::vector<std::string>{"subscribe", "fit", "later"}, listed);
  EXPECT_EQ(b.error, "bad_request: unknown message type 'fit'");  // the script's answer
  EXPECT_EQ(listed.lines.size(), 2U);
}

}  // namespace
}  // namespace gpustream::transport::test
