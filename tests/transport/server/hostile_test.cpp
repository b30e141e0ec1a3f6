// Hostile input (issue 11): what an outside client could do to the server's memory, its work
// per byte, its connection slots and the bytes it sends back. Each test sends the worst input
// the limits allow and asserts the bound, not the time.
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

namespace json = boost::json;

/// One real device id followed by `unique` distinct 245-byte ids no device has.
json::array hostile_devices(int client, int unique) {
  json::array a;
  a.emplace_back("sim-gpu0");
  for (int i = 0; i < unique; ++i) {
    std::string id = "c" + std::to_string(client) + "-" + std::to_string(i) + "-";
    id.resize(245, 'z');
    a.emplace_back(id);
  }
  return a;
}

std::string subscribe_text(const json::array& devices) {
  return serialize(json::object{{"type", "subscribe"}, {"devices", devices}});
}

// Defect 1: 3.1 GB RSS from 200 clients with long unique device lists. Unknown ids must not
// reach the encoding cache's keys: every client below wants the same bytes (one device), so
// each snapshot is serialized once for all of them, and the cache stays within its budget.
TEST(TransportHostile, UniqueUnknownDeviceIdsShareOneEncodingAndTheCacheStaysInBudget) {
  constexpr int kClients = 24;
  constexpr int kSnapshots = 40;
  Fixture f;
  ServerOptions o;
  o.encoded_cache = 8;
  o.encoded_cache_bytes = 64 * 1024;
  f.start(o);
  std::vector<std::shared_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(i % 2 ? connected_ws(f) : connected_tcp(f));
    clients.back()->send(subscribe_text(hostile_devices(i, 240)));
  }
  ASSERT_TRUE(f.run_until([&] {
    for (const auto& c : clients)
      if (c->count("subscribed") == 0) return false;
    return true;
  }));
  const auto before = f.server->counters().serializations;
  for (int n = 0; n < kSnapshots; ++n) {
    f.publish("sim", 2, 4);
    ASSERT_TRUE(f.run_until([&] {
      for (const auto& c : clients)
        if (c->count("snapshot") < static_cast<std::size_t>(n + 1)) return false;
      return true;
    }));
    const auto c = f.server->counters();
    EXPECT_LE(c.encoded_cache_bytes, o.encoded_cache_bytes);
    EXPECT_LE(c.encoded_cache_entries, o.encoded_cache * 2);
  }
  // One projection (device sim-gpu0), one serialization per snapshot for all the clients.
  EXPECT_EQ(f.server->counters().serializations - before, static_cast<std::uint64_t>(kSnapshots));
  for (const auto& c : clients) {
    const auto snap = c->of_type("snapshot").back();
    ASSERT_EQ(snap.at("devices").as_array().size(), 1u);
    EXPECT_EQ(snap.at("devices").as_array()[0].at("id"), "sim-gpu0");
  }
  EXPECT_TRUE(f.stop());
}

// The byte budget holds whatever the projections: many distinct `fields` sets over big
// snapshots keep the cache under its byte budget, and each client still gets its bytes.
TEST(TransportHostile, DistinctProjectionsOverBigSnapshotsStayWithinTheByteBudget) {
  Fixture f;
  ServerOptions o;
  o.encoded_cache_bytes = 48 * 1024;
  f.start(o);
  const std::vector<std::string> metrics = {"utilization_percent", "power_watts",
                                            "temperature_celsius", "memory_used_bytes",
                                            "energy_joules",       "fan_percent"};
  std::vector<std::shared_ptr<Client>> clients;
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    clients.push_back(connected_tcp(f));
    json::array fields{json::value(metrics[i])};
    clients.back()->send(serialize(json::object{{"type", "subscribe"}, {"fields", fields}}));
  }
  ASSERT_TRUE(f.run_until([&] {
    for (const auto& c : clients)
      if (c->count("subscribed") == 0) return false;
    return true;
  }));
  for (int n = 1; n <= 20; ++n) {
    f.publish("sim", 4, 8);  // about 10 KB per encoding
    ASSERT_TRUE(f.run_until([&] {
      for (const auto& c : clients)
        if (c->count("snapshot") < static_cast<std::size_t>(n)) return false;
      return true;
    }));
    EXPECT_LE(f.server->counters().encoded_cache_bytes, o.encoded_cache_bytes);
  }
  EXPECT_GT(f.server->counters().encoded_cache_bytes, 0u);
  EXPECT_TRUE(f.stop());
}

// Defect 2: repeated `auth` (or any message) after authentication was accepted silently and
// without limit. Now each one is answered and counted, and the connection's message budget ends
// it.
TEST(TransportHostile, MessagesAfterAuthenticationAreCountedAndLimited) {
  Fixture f;
  ServerOptions o;
  o.token = "secret";
  o.limits.max_client_messages = 20;
  f.start(o);
  auto c = Client::tcp(f);
  c->connect();
  c->send(R"({"type":"auth","token":"secret"})");
  ASSERT_TRUE(f.run_until([&] { return c->count("hello") == 1; }));
  for (int i = 0; i < 30; ++i) c->send(R"({"type":"auth","token":"secret"})");
  ASSERT_TRUE(f.run_until([&] { return c->ended(); }));
  const auto errors = c->of_type("error");
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors.front().at("code"), "bad_request");
  EXPECT_NE(std::string(errors.front().at("message").as_string()).find("already"),
            std::string::npos);
  EXPECT_EQ(errors.back().at("code"), "limit");
  EXPECT_GE(f.server->counters().messages_rejected, 19u);
  EXPECT_TRUE(f.stop());
}

// Defect 2, work per byte: a buffer full of short lines is consumed in one pass (empty lines
// are keep-alives and cost nothing), and the one real message in it is handled.
TEST(TransportHostile, ABufferOfShortLinesIsConsumedAndItsMessageHandled) {
  Fixture f;
  ServerOptions o;
  o.limits.max_message_bytes = 64 * 1024;
  f.start(o);
  auto c = connected_tcp(f);
  std::string burst(60 * 1024, '\n');
  burst += R"({"type":"subscribe","probes":["sim"]})";
  burst += '\n';
  burst += std::string(60 * 1024, '\n');
  c->send_raw(burst);
  ASSERT_TRUE(f.run_until([&] { return c->count("subscribed") == 1; }));
  f.publish("sim");
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 1; }));
  EXPECT_EQ(c->count("error"), 0u);
  EXPECT_EQ(f.server->counters().messages_rejected, 0u);
  EXPECT_TRUE(f.stop());
}

// Defect 3: `nc -N` sends its subscribe, then shuts down its sending side. It still reads.
TEST(TransportHostile, TcpHalfCloseKeepsTheStreamGoing) {
  Fixture f;
  f.start();
  auto c = connected_tcp(f);
  c->send(R"({"type":"subscribe","probes":["sim"]})");
  c->shutdown_send();
  ASSERT_TRUE(f.run_until([&] { return c->count("subscribed") == 1; }));
  for (int i = 0; i < 3; ++i) {
    f.publish("sim");
    f.run_for(20ms);
  }
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 3 || c->ended(); }));
  EXPECT_EQ(c->count("snapshot"), 3u);
  EXPECT_FALSE(c->ended()) << c->end_reason();
  EXPECT_EQ(f.server->counters().tcp_open, 1u);
  EXPECT_TRUE(f.stop());
}

// Defect 8: 1 / 1e-12 s overflowed the duration cast and turned rate limiting off.
TEST(TransportHostile, ATinyMaxRateStillLimits) {
  Fixture f;
  f.start();
  auto c = connected_tcp(f);
  c->send(R"({"type":"subscribe","max_rate_hz":1e-12})");
  ASSERT_TRUE(f.run_until([&] { return c->count("subscribed") == 1; }));
  for (int i = 0; i < 3; ++i) f.publish("sim");
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") >= 1; }));
  f.run_for(100ms);
  EXPECT_EQ(c->count("snapshot"), 1u);
  EXPECT_TRUE(f.stop());
}

// Defect 9: one shared limit let idle TCP clients lock out /metrics. Each transport has its
// own limit, HTTP keeps answering (an idle HTTP connection gives way to a new one), and one
// address cannot take every slot.
TEST(TransportHostile, IdleTcpClientsDoNotLockOutMetricsAndHealthz) {
  Fixture f;
  ServerOptions o;
  o.limits.max_connections = 4;
  o.limits.max_http_connections = 3;
  f.start(o);
  std::vector<std::shared_ptr<Client>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(Client::tcp(f));
    idle.back()->connect();
  }
  Client::Options http_port;
  http_port.port = f.http_port();
  http_port.read = false;
  for (int i = 0; i < 5; ++i) {  // more idle HTTP connections than the HTTP limit
    idle.push_back(Client::tcp(f, http_port));
    idle.back()->connect();
  }
  ASSERT_TRUE(f.run_until([&] { return f.server->counters().connections_rejected >= 4; }));
  f.run_for(50ms);
  EXPECT_EQ(f.server->counters().tcp_open, 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(http_request(f, "/metrics").status, 200);
    EXPECT_EQ(http_request(f, "/healthz").status, 200);
  }
  auto ws = connected_ws(f);  // WebSocket has its own slots too
  EXPECT_FALSE(ws->ended());
  EXPECT_LE(f.server->counters().http_open, 3u);
  EXPECT_TRUE(f.stop());
}

TEST(TransportHostile, OneAddressCannotTakeEverySlot) {
  Fixture f;
  ServerOptions o;
  o.limits.max_connections = 10;
  o.limits.max_connections_per_address = 2;
  f.start(o);
  auto a = connected_tcp(f);
  auto b = connected_tcp(f);
  auto c = Client::tcp(f);
  c->connect();
  ASSERT_TRUE(f.run_until([&] { return c->ended(); }));
  ASSERT_EQ(c->count("error"), 1u);
  EXPECT_EQ(c->of_type("error").at(0).at("code"), "limit");
  EXPECT_NE(std::string(c->of_type("error").at(0).at("message").as_string()).find("address"),
            std::string::npos);
  EXPECT_EQ(http_request(f, "/healthz").status, 200);  // per transport: HTTP is not affected
  EXPECT_TRUE(f.stop());
}

TEST(TransportHostile, AnIdleTcpClientIsClosedWithAnError) {
  Fixture f;
  ServerOptions o;
  o.limits.tcp_idle_timeout = 200ms;
  f.start(o);
  auto idle = connected_tcp(f);
  auto talking = connected_tcp(f);
  for (int i = 0; i < 6; ++i) {
    talking->send("");  // an empty line: a keep-alive
    f.run_for(60ms);
  }
  ASSERT_TRUE(f.run_until([&] { return idle->ended(); }));
  ASSERT_EQ(idle->count("error"), 1u);
  EXPECT_EQ(idle->of_type("error").at(0).at("code"), "timeout");
  EXPECT_TRUE(idle->partial().empty());
  EXPECT_FALSE(talking->ended());
  EXPECT_TRUE(f.stop());
}

// Defect 6: a probe reason cut in the middle of a character (tool output cut at a byte limit)
// and a device name with a stray byte reached hello and the API as invalid UTF-8.
TEST(TransportHostile, EveryTextTheServerSendsIsValidUtf8) {
  Fixture f;
  ServerOptions o;
  f.start(o, [] {
    ProbeStats s;
    s.probe = "sim";
    s.state = ProbeState::backoff;
    s.reason = "nvidia-smi: temp 85 \xc2";  // "°" cut after its first byte
    s.last_error = "bad \xff byte";
    return std::vector<ProbeStats>{s};
  });
  auto snap = make_snapshot("sim", 1);
  snap.devices[0].name = "GPU \xe2\x82";  // "€" cut
  f.channel.publish(std::move(snap));
  for (auto c : {connected_tcp(f), connected_ws(f)}) {
    EXPECT_TRUE(c->garbage().empty());
    ASSERT_EQ(c->count("hello"), 1u);
    const auto hello = c->of_type("hello").at(0);
    EXPECT_EQ(hello.at("probes").as_array()[0].at("reason"), "nvidia-smi: temp 85 \xef\xbf\xbd");
    EXPECT_EQ(hello.at("devices").as_array()[0].at("name"), "GPU \xef\xbf\xbd\xef\xbf\xbd");
  }
  for (const char* path : {"/api/v1/devices", "/api/v1/stats", "/api/v1/snapshot"}) {
    const auto r = http_request(f, path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_TRUE(is_valid_utf8(r.body)) << path << ": " << r.body;
  }
  EXPECT_TRUE(f.stop());
}

/// The status line a raw HTTP request got on a plain TCP connection to the HTTP port.
std::string raw_http_status(Fixture& f, const std::string& request) {
  Client::Options o;
  o.port = f.http_port();
  auto c = Client::tcp(f, o);
  c->connect();
  EXPECT_TRUE(f.run_until([&] { return c->connected() || c->ended(); }));
  c->send_raw(request);
  EXPECT_TRUE(f.run_until([&] { return !c->garbage().empty() || c->ended(); }));
  c->close();
  return c->garbage().empty() ? std::string() : c->garbage().front();
}

// Issue 27 (9): two Host fields used the first one. RFC 9112 §3.2: 400, also when the two
// names differ only in case and when both values are allowed ones.
TEST(TransportHostile, TwoHostHeadersAreABadRequest) {
  Fixture f;
  f.start();
  const auto host = "127.0.0.1:" + std::to_string(f.http_port());
  const auto one = raw_http_status(f, "GET /healthz HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
  EXPECT_TRUE(one.starts_with("HTTP/1.1 200")) << one;
  for (const std::string second :
       {std::string("Host: evil.example"), std::string("host: evil.example"), "HOST: " + host}) {
    const auto status = raw_http_status(
        f, "GET /api/v1/stats HTTP/1.1\r\nHost: " + host + "\r\n" + second + "\r\n\r\n");
    EXPECT_TRUE(status.starts_with("HTTP/1.1 400")) << second << ": " << status;
  }
  EXPECT_GE(f.server->counters().messages_rejected, 3u);
  EXPECT_TRUE(f.stop());
}

}  // namespace
}  // namespace gpustream::transport::test
