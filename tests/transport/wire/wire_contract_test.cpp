// The wire contract as a client author reads docs/protocol.md (issue 18, items 9-13): number
// formats under projections, resuming from hello, what signals loss, subscriptions the server
// cannot serve, and how connections end (the lifecycle table, one test per row that is not
// covered elsewhere; the table names each test).
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

namespace json = boost::json;

std::vector<std::uint64_t> range(std::uint64_t from, std::uint64_t to) {
  std::vector<std::uint64_t> v;
  for (auto i = from; i <= to; ++i) v.push_back(i);
  return v;
}

/// Same value and the same JSON type (an integer is not a double), recursively.
void expect_same(const json::value& a, const json::value& b, const std::string& where) {
  ASSERT_EQ(a.kind(), b.kind()) << where << ": " << serialize(a) << " vs " << serialize(b);
  if (a.is_object()) {
    ASSERT_EQ(a.get_object().size(), b.get_object().size()) << where;
    for (const auto& kv : a.get_object()) {
      ASSERT_TRUE(b.get_object().contains(kv.key())) << where << "." << kv.key();
      expect_same(kv.value(), b.get_object().at(kv.key()), where + "." + std::string(kv.key()));
    }
  } else if (a.is_array()) {
    ASSERT_EQ(a.get_array().size(), b.get_array().size()) << where;
    for (std::size_t i = 0; i < a.get_array().size(); ++i)
      expect_same(a.get_array()[i], b.get_array()[i], where + "[" + std::to_string(i) + "]");
  } else {
    EXPECT_EQ(a, b) << where;
  }
}

GpuSnapshot rich_snapshot() {
  auto s = make_snapshot("sim", 2, 2, true);
  for (auto& d : s.devices) {
    d.metrics.set(Metric::temperature_celsius, 46, Source::simulated);  // whole double
    d.metrics.set(Metric::utilization_percent, 55, Source::simulated);
    for (auto& p : d.processes) p.gpu_utilization_percent = 80;
  }
  return s;
}

// Item 9: doubles went out as integers with any `fields`, also in engines and processes, and an
// empty "absent_sources":{} appeared.
TEST(TransportWireContract, ProjectionsKeepEveryValueAndItsJsonType) {
  Fixture f;
  f.start();
  auto plain = connected_tcp(f);
  auto projected = connected_ws(f);
  projected->send(
      R"({"type":"subscribe","devices":["sim-gpu1"],)"
      R"("fields":["temperature_celsius","utilization_percent","memory_used_bytes","fan_rpm"]})");
  ASSERT_TRUE(f.run_until([&] { return projected->count("subscribed") == 1; }));
  f.channel.publish(rich_snapshot());
  ASSERT_TRUE(f.run_until(
      [&] { return plain->count("snapshot") == 1 && projected->count("snapshot") == 1; }));
  const auto full = plain->of_type("snapshot").at(0);
  const auto proj = projected->of_type("snapshot").at(0);
  // Both decode as snapshots.
  EXPECT_NO_THROW(parse_server_message(serialize(full)));
  EXPECT_NO_THROW(parse_server_message(serialize(proj)));
  for (const auto& kv : full) {
    if (kv.key() == "devices") continue;
    ASSERT_TRUE(proj.contains(kv.key())) << kv.key();
    expect_same(kv.value(), proj.at(kv.key()), std::string(kv.key()));
  }
  const auto& fd = full.at("devices").as_array().at(1).as_object();
  const auto& pd = proj.at("devices").as_array().at(0).as_object();
  ASSERT_EQ(proj.at("devices").as_array().size(), 1u);
  for (const auto& kv : fd) {
    const std::string key(kv.key());
    if (key == "metrics" || key == "sources" || key == "absent" || key == "absent_sources") {
      if (!pd.contains(key)) {
        EXPECT_EQ(key, "absent_sources");
        continue;
      }
      for (const auto& m : pd.at(key).as_object()) {
        ASSERT_TRUE(kv.value().as_object().contains(m.key())) << key << "." << m.key();
        expect_same(kv.value().at(m.key()), m.value(), key + "." + std::string(m.key()));
      }
      continue;
    }
    ASSERT_TRUE(pd.contains(key)) << key;
    expect_same(kv.value(), pd.at(key), key);  // engines, processes, ... untouched
  }
  EXPECT_EQ(pd.at("metrics").as_object().size(), 3u);
  EXPECT_TRUE(pd.at("metrics").at("temperature_celsius").is_double());
  EXPECT_TRUE(pd.at("metrics").at("memory_used_bytes").is_int64() ||
              pd.at("metrics").at("memory_used_bytes").is_uint64());
  EXPECT_EQ(pd.at("absent").as_object().size(), 1u);  // fan_rpm
  EXPECT_FALSE(pd.contains("absent_sources"));        // none names a source, as unprojected
  EXPECT_TRUE(f.stop());
}

// Item 10: the documented recipe (subscribe with since = hello.last_sequence) must deliver every
// sequence exactly once, however late the subscribe comes.
void resume_from_hello_is_exact(bool websocket) {
  Fixture f;
  f.start();
  for (int i = 0; i < 3; ++i) f.publish();
  auto c = websocket ? connected_ws(f) : connected_tcp(f);
  const auto last = c->of_type("hello").at(0).at("last_sequence").to_number<std::uint64_t>();
  ASSERT_EQ(last, 3u);
  for (int i = 0; i < 4; ++i) f.publish();  // streamed live before the subscribe
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 4; }));
  c->send(R"({"type":"subscribe","since":)" + std::to_string(last) + "}");
  ASSERT_TRUE(f.run_until([&] { return c->count("subscribed") == 1; }));
  for (int i = 0; i < 3; ++i) f.publish();
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") >= 7; }));
  f.run_for(30ms);
  EXPECT_EQ(c->sequences(), range(4, 10));
  EXPECT_EQ(c->count("gap"), 0u);
  EXPECT_TRUE(f.stop());
}

TEST(TransportWireContract, ResumingFromHelloDeliversEverySequenceOnceOverTcp) {
  resume_from_hello_is_exact(false);
}

TEST(TransportWireContract, ResumingFromHelloDeliversEverySequenceOnceOverWebSocket) {
  resume_from_hello_is_exact(true);
}

// A subscribe asking for older history than hello's gets it in order: the replay starts over
// from `since`, so what was streamed before the subscribe comes again after it (a client
// resuming from further back ignores what came before `subscribed`).
TEST(TransportWireContract, ResumingFromBeforeHelloReplaysInOrder) {
  Fixture f;
  f.start();
  for (int i = 0; i < 3; ++i) f.publish();
  auto c = connected_tcp(f);
  f.publish();
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 1; }));
  c->send(R"({"type":"subscribe","since":1})");
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 4; }));
  f.publish();
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 5; }));
  EXPECT_EQ(c->sequences(), (std::vector<std::uint64_t>{4, 2, 3, 4, 5}));
  EXPECT_TRUE(f.stop());
}

// Item 11: under a filter, sequences jump and that is no loss; only `gap` says something was
// lost (protocol.md, "Sequence numbers and loss").
TEST(TransportWireContract, SequenceJumpsUnderAFilterComeWithoutAGap) {
  Fixture f;
  f.start();
  auto c = connected_tcp(f);
  c->send(R"({"type":"subscribe","probes":["a"]})");
  ASSERT_TRUE(f.run_until([&] { return c->count("subscribed") == 1; }));
  for (const char* p : {"a", "b", "b", "a", "b", "a"}) f.publish(p);
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 3; }));
  f.run_for(20ms);
  EXPECT_EQ(c->sequences(), (std::vector<std::uint64_t>{1, 4, 6}));
  EXPECT_EQ(c->count("gap"), 0u);
  EXPECT_TRUE(f.stop());
}

// Item 12: ids and probe names the server does not know are reported in `subscribed`; a new
// subscribe replaces the previous one.
TEST(TransportWireContract, UnknownProbesAndDevicesAreReportedAndASubscribeReplacesTheLast) {
  Fixture f;
  f.start();
  f.publish("sim", 2);
  auto c = connected_ws(f);
  c->send(R"({"type":"subscribe","probes":["sim","nvidai"],"devices":["sim-gpu0","GPU-nope"]})");
  ASSERT_TRUE(f.run_until([&] { return c->count("subscribed") == 1; }));
  const auto ack = c->of_type("subscribed").at(0);
  EXPECT_EQ(ack.at("unknown").at("probes"), json::parse(R"(["nvidai"])"));
  EXPECT_EQ(ack.at("unknown").at("devices"), json::parse(R"(["GPU-nope"])"));
  c->send(R"({"type":"subscribe","probes":["other"]})");
  ASSERT_TRUE(f.run_until([&] { return c->count("subscribed") == 2; }));
  EXPECT_EQ(c->of_type("subscribed").at(1).at("unknown").at("probes"), json::parse(R"(["other"])"));
  f.publish("sim", 2);
  f.publish("other", 1);
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 1; }));
  f.run_for(20ms);
  EXPECT_EQ(c->sequences(), std::vector<std::uint64_t>{3});  // only "other": replaced
  EXPECT_EQ(c->of_type("snapshot").at(0).at("devices").as_array().size(), 1u);
  EXPECT_TRUE(f.stop());
}

// Lifecycle: a slow client gets an `error` (slow_client) after the message being written, then
// the close; its TCP stream never ends inside a line.
TEST(TransportWireContract, ASlowTcpClientGetsAnErrorAndNoCutLine) {
  Fixture f(16);
  ServerOptions o;
  o.limits.send_queue_messages = 2;
  o.limits.slow_client_timeout = 200ms;
  o.limits.write_timeout = 30s;
  o.limits.socket_send_buffer = 8 * 1024;
  f.start(o);
  Client::Options slow_opts;
  slow_opts.read = false;
  slow_opts.receive_buffer = 4096;
  auto slow = Client::tcp(f, slow_opts);
  slow->connect();
  ASSERT_TRUE(f.run_until([&] { return slow->connected(); }));
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (f.server->counters().slow_clients_disconnected == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    f.publish("sim", 2, 40);
    f.run_for(5ms);
  }
  ASSERT_EQ(f.server->counters().slow_clients_disconnected, 1u);
  slow->start_reading();
  ASSERT_TRUE(f.run_until([&] { return slow->ended(); }));
  EXPECT_TRUE(slow->partial().empty()) << slow->partial().size() << " bytes of a cut line";
  EXPECT_TRUE(slow->garbage().empty());
  ASSERT_FALSE(slow->messages().empty());
  EXPECT_EQ(slow->messages().back().at("type"), "error");
  EXPECT_EQ(slow->messages().back().at("code"), "slow_client");
  EXPECT_TRUE(f.stop());
}

// Lifecycle: invalid UTF-8 in a TCP line gets an error that says so (the connection stays); in
// a WebSocket text frame it closes with 1007 (RFC 6455: invalid frame payload data).
TEST(TransportWireContract, InvalidUtf8IsNamedOnTcpAndClosesTheWebSocketWith1007) {
  Fixture f;
  f.start();
  auto t = connected_tcp(f);
  auto w = connected_ws(f);
  t->send("{\"type\":\"subscribe\",\"probes\":[\"\xff\"]}");
  w->send("{\"type\":\"subscribe\",\"probes\":[\"\xff\"]}");
  ASSERT_TRUE(f.run_until([&] { return t->count("error") == 1 && w->ended(); }));
  const auto e = t->of_type("error").at(0);
  EXPECT_EQ(e.at("code"), "bad_request");
  EXPECT_NE(std::string(e.at("message").as_string()).find("UTF-8"), std::string::npos);
  EXPECT_EQ(w->close_code(), 1007);
  f.publish();
  ASSERT_TRUE(f.run_until([&] { return t->count("snapshot") == 1; }));
  EXPECT_FALSE(t->ended());
  EXPECT_TRUE(f.stop());
}

// Lifecycle: the HTTP endpoints answer GET only; HEAD and POST get 405, /healthz included.
TEST(TransportWireContract, HttpAnswersGetOnly) {
  Fixture f;
  f.start();
  for (const char* path : {"/healthz", "/metrics", "/api/v1/stats"}) {
    EXPECT_EQ(http_request(f, path, {}, "POST").status, 405) << path;
    EXPECT_EQ(http_request(f, path).status, 200) << path;
  }
  // HEAD: Beast's reader expects no body after a HEAD, so read the status line by hand.
  Client::Options http_port;
  http_port.port = f.http_port();
  auto raw = Client::tcp(f, http_port);
  raw->connect();
  raw->send_raw("HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(f.http_port()) +
                "\r\n\r\n");
  ASSERT_TRUE(f.run_until([&] { return raw->ended(); }));
  ASSERT_FALSE(raw->garbage().empty());
  EXPECT_EQ(raw->garbage().at(0).rfind("HTTP/1.1 405", 0), 0u) << raw->garbage().at(0);
  EXPECT_TRUE(f.stop());
}

// Lifecycle: the client closes; the server forgets the connection.
TEST(TransportWireContract, AClientThatClosesIsForgotten) {
  Fixture f;
  f.start();
  auto t = connected_tcp(f);
  auto w = connected_ws(f);
  EXPECT_EQ(f.server->counters().tcp_open, 1u);
  t->close();
  w->close();
  // TCP cannot tell a close from a half-close (both are a FIN) until data is sent: the closed
  // client is noticed when a write fails, so the server keeps streaming meanwhile.
  ASSERT_TRUE(f.run_until([&] {
    f.publish();
    const auto c = f.server->counters();
    return c.tcp_open == 0 && c.websocket_open == 0;
  }));
  EXPECT_TRUE(f.stop());
}

}  // namespace
}  // namespace gpustream::transport::test
