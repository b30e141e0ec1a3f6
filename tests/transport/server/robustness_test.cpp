// Hostile and unlucky clients: garbage, oversized input, slow readers, many connections, limits,
// timeouts, and a clean stop.
#include <sys/resource.h>

#include <gtest/gtest.h>

#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

bool contiguous(const std::vector<std::uint64_t>& v) {
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i] != v[i - 1] + 1) return false;
  return true;
}

TEST(TransportRobustness, GarbageGetsAnErrorAndOtherClientsDoNotNotice) {
  Fixture f;
  f.start();
  auto bad_tcp = connected_tcp(f);
  auto bad_ws = connected_ws(f);
  auto good = connected_ws(f);
  bad_tcp->send("{{{ not json");
  bad_tcp->send("\xff\xfe\x80 bytes");
  bad_tcp->send(std::string(200, '[') + std::string(200, ']'));  // deeper than allowed
  bad_tcp->send("[1,2,3]");
  bad_ws->send("}{");
  ASSERT_TRUE(
      f.run_until([&] { return bad_tcp->count("error") == 4 && bad_ws->count("error") == 1; }));
  for (const auto& e : bad_tcp->of_type("error")) EXPECT_EQ(e.at("code"), "bad_request");
  EXPECT_TRUE(bad_tcp->garbage().empty());  // the error texts are valid JSON themselves
  f.publish();
  ASSERT_TRUE(f.run_until([&] {
    return good->count("snapshot") == 1 && bad_tcp->count("snapshot") == 1 &&
           bad_ws->count("snapshot") == 1;
  }));
  EXPECT_EQ(good->count("error"), 0u);
  EXPECT_FALSE(bad_tcp->ended());
  EXPECT_EQ(f.server->counters().messages_rejected, 5u);
  EXPECT_TRUE(f.stop());
}

TEST(TransportRobustness, AnOversizedLineIsRefusedAndClosed) {
  Fixture f;
  ServerOptions o;
  o.limits.max_message_bytes = 1024;
  f.start(o);
  auto big = connected_tcp(f);
  auto other = connected_tcp(f);
  big->send_raw(std::string(5000, 'a'));
  ASSERT_TRUE(f.run_until([&] { return big->ended(); }));
  ASSERT_EQ(big->count("error"), 1u);
  EXPECT_EQ(big->of_type("error").at(0).at("code"), "too_large");
  f.publish();
  ASSERT_TRUE(f.run_until([&] { return other->count("snapshot") == 1; }));
  EXPECT_EQ(f.server->counters().messages_rejected, 1u);
  EXPECT_TRUE(f.stop());
}

TEST(TransportRobustness, AnOversizedFrameClosesTheWebSocketWithTooBig) {
  Fixture f;
  ServerOptions o;
  o.limits.max_message_bytes = 1024;
  f.start(o);
  auto big = connected_ws(f);
  auto other = connected_ws(f);
  big->send(std::string(5000, ' '));
  ASSERT_TRUE(f.run_until([&] { return big->ended(); }));
  EXPECT_EQ(big->close_code(), 1009) << big->end_reason();
  f.publish();
  ASSERT_TRUE(f.run_until([&] { return other->count("snapshot") == 1; }));
  EXPECT_EQ(f.server->counters().messages_rejected, 1u);
  EXPECT_TRUE(f.stop());
}

TEST(TransportRobustness, ABinaryFrameGetsAnError) {
  Fixture f;
  f.start();
  auto c = connected_ws(f);
  c->send_raw(std::string("\x01\x02\x03", 3));
  ASSERT_TRUE(f.run_until([&] { return c->count("error") == 1; }));
  EXPECT_EQ(c->of_type("error").at(0).at("code"), "bad_request");
  EXPECT_FALSE(c->ended());
  EXPECT_TRUE(f.stop());
}

TEST(TransportRobustness, ASlowClientIsDisconnectedWhileTheOthersKeepEverySnapshot) {
  Fixture f(16);
  ServerOptions o;
  o.limits.send_queue_messages = 4;
  o.limits.slow_client_timeout = 300ms;
  o.limits.write_timeout = 1000ms;
  o.limits.socket_send_buffer = 16 * 1024;
  f.start(o);
  Client::Options slow_opts;
  slow_opts.read = false;  // connects, never reads
  slow_opts.receive_buffer = 4096;
  auto slow = Client::tcp(f, slow_opts);
  slow->connect();
  ASSERT_TRUE(f.run_until([&] { return slow->connected(); }));
  auto tcp_reader = connected_tcp(f);
  auto ws_reader = connected_ws(f);

  // Big snapshots fill the socket buffers of the client that does not read quickly.
  std::size_t published = 0;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (f.server->counters().slow_clients_disconnected == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    f.publish("sim", 2, 40);
    ++published;
    ASSERT_TRUE(f.run_until([&] {
      return tcp_reader->count("snapshot") == published &&
             ws_reader->count("snapshot") == published;
    })) << "a reading client fell behind at snapshot "
        << published;
  }
  EXPECT_EQ(f.server->counters().slow_clients_disconnected, 1u) << published << " published";
  EXPECT_GT(f.server->counters().snapshots_dropped, 0u);
  for (const auto* c : {&tcp_reader, &ws_reader}) {
    EXPECT_EQ((*c)->count("gap"), 0u);
    EXPECT_TRUE(contiguous((*c)->sequences()));
    EXPECT_FALSE((*c)->ended());
  }
  EXPECT_TRUE(f.run_until([&] { return f.server->counters().tcp_open == 1; }));  // slow one gone
  EXPECT_TRUE(f.stop());
}

TEST(TransportRobustness, FiveHundredClientsAtOnce) {
  constexpr int kClients = 500;
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  const rlim_t want = 2 * kClients + 200;
  if (lim.rlim_cur < want) {
    ASSERT_GE(lim.rlim_max, want) << "RLIMIT_NOFILE hard limit " << lim.rlim_max
                                  << " is too low for " << kClients << " connections";
    lim.rlim_cur = want;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
  }
  Fixture f;
  ServerOptions o;
  o.limits.max_connections = kClients + 10;
  o.limits.max_connections_per_address = kClients + 10;
  f.start(o);
  std::vector<std::shared_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(i % 2 ? Client::ws(f) : Client::tcp(f));
    clients.back()->connect();
  }
  const auto all = [&](std::string_view type) {
    return [&, type] {
      for (const auto& c : clients)
        if (c->count(type) == 0) return false;
      return true;
    };
  };
  ASSERT_TRUE(f.run_until(all("hello"), 3 * kDeadline));
  EXPECT_EQ(f.server->counters().tcp_open, kClients / 2u);
  EXPECT_EQ(f.server->counters().websocket_open, kClients / 2u);
  f.publish();
  ASSERT_TRUE(f.run_until(all("snapshot"), 3 * kDeadline));
  EXPECT_EQ(f.server->counters().serializations, 1u);
  EXPECT_TRUE(f.stop());
  EXPECT_TRUE(f.run_until([&] {
    for (const auto& c : clients)
      if (!c->ended()) return false;
    return true;
  }));
}

TEST(TransportRobustness, ConnectionsBeyondTheLimitAreRefusedPerTransport) {
  Fixture f;
  ServerOptions o;
  o.limits.max_connections = 1;  // one WebSocket and one TCP connection
  f.start(o);
  auto a = connected_tcp(f);
  auto b = connected_ws(f);
  auto c = Client::tcp(f);
  c->connect();
  ASSERT_TRUE(f.run_until([&] { return c->ended(); }));
  ASSERT_EQ(c->count("error"), 1u);
  EXPECT_EQ(c->of_type("error").at(0).at("code"), "limit");
  EXPECT_EQ(c->count("hello"), 0u);
  auto d = Client::ws(f);
  d->connect();
  ASSERT_TRUE(f.run_until([&] { return d->ended(); }));
  EXPECT_EQ(d->refused_status(), 503);
  EXPECT_EQ(http_request(f, "/healthz").status, 200);  // HTTP has slots of its own
  EXPECT_EQ(f.server->counters().connections_rejected, 2u);
  f.publish();
  ASSERT_TRUE(f.run_until([&] { return a->count("snapshot") == 1 && b->count("snapshot") == 1; }));
  EXPECT_TRUE(f.stop());
}

TEST(TransportRobustness, SilentConnectionsAreClosedAfterTheHandshakeTimeout) {
  Fixture f;
  ServerOptions o;
  o.limits.handshake_timeout = 200ms;
  o.token = "secret";
  f.start(o);
  Client::Options http_port;
  http_port.port = f.http_port();
  auto silent_http = Client::tcp(f, http_port);
  auto silent_tcp = Client::tcp(f);  // a token is required: it must authenticate first
  silent_http->connect();
  silent_tcp->connect();
  ASSERT_TRUE(f.run_until([&] { return silent_http->ended() && silent_tcp->ended(); }));
  EXPECT_EQ(silent_tcp->count("hello"), 0u);
  ASSERT_EQ(silent_tcp->count("error"), 1u);
  EXPECT_EQ(silent_tcp->of_type("error").at(0).at("code"), "unauthorized");
  EXPECT_TRUE(f.stop());
}

TEST(TransportRobustness, StopClosesEveryConnectionCleanly) {
  Fixture f;
  f.start();
  auto t = connected_tcp(f);
  auto w = connected_ws(f);
  f.publish();
  ASSERT_TRUE(f.run_until([&] { return t->count("snapshot") == 1 && w->count("snapshot") == 1; }));
  ASSERT_TRUE(f.stop());
  ASSERT_TRUE(f.run_until([&] { return t->ended() && w->ended(); }));
  EXPECT_EQ(w->close_code(), 1001);  // going away
  const auto c = f.server->counters();
  EXPECT_EQ(c.tcp_open + c.websocket_open + c.http_open, 0u);
  auto late = Client::tcp(f);
  late->connect();
  ASSERT_TRUE(f.run_until([&] { return late->ended(); }));
  EXPECT_FALSE(late->connected());
}

}  // namespace
}  // namespace gpustream::transport::test
