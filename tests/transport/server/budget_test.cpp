// Issue 27 (5, 6): what one client that does not read can cost the server. Every message a
// client references — the hello and the message being written included — counts in its send
// budget, a message larger than the budget is never queued, shared buffers are counted once,
// and slow readers of big HTTP responses neither multiply the bodies nor lock /healthz and
// /metrics out. Each test sends the worst input and asserts the bound, not a time.
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "gpustream/transport/protocol.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

namespace json = boost::json;

constexpr int kBigDevices = 2000;  // a fleet's worth: a hello and a snapshot of hundreds of KB

/// A client that connects and never reads, its socket buffers small (so a big write stays in
/// flight instead of landing in the kernel).
std::shared_ptr<Client> never_reading(Fixture& f, std::optional<unsigned short> port = {}) {
  Client::Options o;
  o.read = false;
  o.receive_buffer = 4096;
  o.port = port;
  auto c = Client::tcp(f, o);
  c->connect();
  EXPECT_TRUE(f.run_until([&] { return c->connected() || c->ended(); }));
  return c;
}

/// Sizes of the hello listing kBigDevices devices and of the snapshot message of
/// kSnapshotDevices of them, as a server sends them.
constexpr int kSnapshotDevices = 100;
std::pair<std::size_t, std::size_t> big_message_sizes() {
  Fixture f;
  f.start();
  f.publish("sim", kBigDevices);
  auto c = connected_tcp(f);
  f.publish("sim", kSnapshotDevices);
  EXPECT_TRUE(f.run_until([&] { return c->count("snapshot") == 1; }));
  const auto hello = json::serialize(c->of_type("hello").at(0)).size();
  const auto snapshot = json::serialize(c->of_type("snapshot").at(0)).size();
  EXPECT_TRUE(f.stop());
  return {hello, snapshot};
}

// The hello lists every device and used to be left out of the budget (only what waited in the
// queue counted, not the message being written), and an empty queue took any snapshot: 120
// clients that never read a 5.8 MB hello took RSS from 227 MB to 1.65 GB.
TEST(TransportBudget, TheHelloBeingWrittenCountsInTheBudgetAndIsSharedByEveryClient) {
  const auto [hello, snapshot] = big_message_sizes();
  ASSERT_GT(hello, 100'000u);
  ASSERT_LT(snapshot, hello);
  Fixture f;
  ServerOptions o;
  o.limits.send_queue_bytes = hello + snapshot / 2;  // the hello fits; hello + snapshot do not
  o.limits.socket_send_buffer = 4096;
  f.start(o);
  f.publish("sim", kBigDevices);
  constexpr int kClients = 20;
  std::vector<std::shared_ptr<Client>> slow;
  for (int i = 0; i < kClients; ++i) slow.push_back(never_reading(f));
  ASSERT_TRUE(f.run_until([&] { return f.server->counters().tcp_open == kClients; }));
  f.run_for(50ms);
  f.publish("sim", kSnapshotDevices);
  ASSERT_TRUE(f.run_until([&] { return f.server->counters().snapshots_dropped == kClients; }))
      << "hello " << hello << " B, snapshot " << snapshot << " B; sent "
      << f.server->counters().snapshots_sent << ", dropped "
      << f.server->counters().snapshots_dropped;
  const auto c = f.server->counters();
  EXPECT_EQ(c.snapshots_sent, 0u);  // no client had room next to its hello being written
  // One hello and one snapshot encoding alive (plus the cache's older snapshot), not 20 hellos.
  EXPECT_LE(c.encoded_bytes_live, 2 * hello + 2 * snapshot) << c.encoded_bytes_live;
  EXPECT_GE(c.encoded_bytes_live, hello);
  for (auto& s : slow) s->close();
  EXPECT_TRUE(f.stop());
}

// A 98.8 MB snapshot line per client: the encoding cache did not keep it, so each client
// serialized its own, and an empty queue took it. Now it is made once, refused for every
// client whose budget it cannot fit, and each of them is told once.
TEST(TransportBudget, ASnapshotLargerThanTheBudgetIsNeverQueuedAndTheClientIsToldOnce) {
  Fixture f;
  ServerOptions o;
  o.limits.send_queue_bytes = 64 * 1024;
  f.start(o);
  f.publish("small", 1);
  std::vector<std::shared_ptr<Client>> clients;
  for (int i = 0; i < 5; ++i) clients.push_back(connected_tcp(f));
  clients.push_back(connected_ws(f));
  f.publish("big", kBigDevices);  // far over 64 KiB
  f.publish("big", kBigDevices);
  f.publish("small", 1);
  for (auto& c : clients) {
    ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 1; }));
    ASSERT_EQ(c->count("error"), 1u);
    const auto err = c->of_type("error").at(0);
    EXPECT_EQ(err.at("code"), "message_too_large");
    EXPECT_NE(json::value_to<std::string>(err.at("message")).find("65536 bytes"),
              std::string::npos);
    EXPECT_EQ(c->sequences(), (std::vector<std::uint64_t>{4}));
    EXPECT_FALSE(c->ended());
  }
  const auto c = f.server->counters();
  EXPECT_EQ(c.messages_too_large, 2u * clients.size());
  EXPECT_EQ(c.serializations, 3u);  // each big one once, refused for all; the small one once
  EXPECT_TRUE(f.stop());
}

// The cache did not keep an encoding larger than its byte budget: each client made its own.
TEST(TransportBudget, ASnapshotLargerThanTheCacheIsSerializedOnceForEveryClient) {
  Fixture f;
  ServerOptions o;
  o.encoded_cache_bytes = 4096;  // far below one snapshot of kSnapshotDevices devices
  f.start(o);
  std::vector<std::shared_ptr<Client>> clients;
  for (int i = 0; i < 10; ++i) clients.push_back(i % 2 ? connected_ws(f) : connected_tcp(f));
  const auto before = f.server->counters().serializations;
  for (int n = 1; n <= 3; ++n) {
    f.publish("sim", kSnapshotDevices);
    ASSERT_TRUE(f.run_until([&] {
      for (const auto& c : clients)
        if (c->count("snapshot") < static_cast<std::size_t>(n)) return false;
      return true;
    }));
  }
  EXPECT_EQ(f.server->counters().serializations - before, 3u);  // not 30
  EXPECT_EQ(f.server->counters().messages_too_large, 0u);
  EXPECT_TRUE(f.stop());
}

// Clients that stop reading at different points each hold different snapshots: within their
// own budgets, together unbounded but for the connection limit. limits.retained_bytes bounds the
// distinct buffers alive; a client that keeps up still gets every snapshot.
TEST(TransportBudget, ClientsThatStopReadingAtDifferentPointsStayWithinTheRetainedBytes) {
  Fixture f;
  ServerOptions o;
  o.encoded_cache_bytes = 4096;
  o.limits.retained_bytes = 1024 * 1024;
  o.limits.socket_send_buffer = 4096;
  o.limits.slow_client_timeout = 60s;  // they are held, not disconnected, during the test
  f.start(o);
  auto reader = connected_tcp(f);
  std::vector<std::shared_ptr<Client>> slow;
  std::size_t snapshot = 0, published = 0, peak = 0;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(never_reading(f));  // joins after the previous ones stopped reading
    for (int n = 0; n < 8; ++n) {
      f.publish("sim", kSnapshotDevices);
      ++published;
      ASSERT_TRUE(f.run_until([&] { return reader->count("snapshot") == published; }));
      peak = std::max<std::size_t>(peak, f.server->counters().encoded_bytes_live);
    }
  }
  snapshot = json::serialize(reader->of_type("snapshot").back()).size();
  const auto c = f.server->counters();
  EXPECT_GT(c.snapshots_dropped, 0u);
  // The bound, plus at most two snapshots per client (the one being written and one waiting)
  // and the one being fanned out. Without it, the slow clients held every snapshot published
  // since the first one stopped reading (each within its 8 MiB): 64 of them.
  EXPECT_LE(peak, o.limits.retained_bytes + (2 * slow.size() + 1) * snapshot)
      << peak << " bytes alive, snapshots of " << snapshot;
  EXPECT_LT(peak, 32 * snapshot);
  EXPECT_EQ(reader->count("gap"), 0u);
  EXPECT_EQ(reader->sequences().size(), published);
  for (auto& s : slow) s->close();
  EXPECT_TRUE(f.stop());
}

TEST(TransportBudget, TheApiLeavesOutASnapshotLargerThanTheBudgetAndSaysSo) {
  Fixture f;
  ServerOptions o;
  o.limits.send_queue_bytes = 64 * 1024;
  f.start(o);
  f.publish("big", kBigDevices);
  f.publish("small", 1);
  const auto r = http_request(f, "/api/v1/snapshot");
  ASSERT_EQ(r.status, 200);
  const auto body = json::parse(r.body).as_object();
  ASSERT_EQ(body.at("snapshots").as_array().size(), 1u);
  EXPECT_EQ(body.at("snapshots").as_array()[0].at("probe"), "small");
  EXPECT_EQ(body.at("too_large"), 1);
  EXPECT_LT(r.body.size(), 64u * 1024);
  EXPECT_TRUE(f.stop());
}

TEST(TransportBudget, AHelloLargerThanTheBudgetIsRefusedWithAnError) {
  Fixture f;
  ServerOptions o;
  o.limits.send_queue_bytes = 64 * 1024;
  f.start(o);
  f.publish("big", kBigDevices);
  auto c = Client::tcp(f);
  c->connect();
  ASSERT_TRUE(f.run_until([&] { return c->ended(); }));
  EXPECT_EQ(c->count("hello"), 0u);
  ASSERT_EQ(c->count("error"), 1u);
  EXPECT_EQ(c->of_type("error").at(0).at("code"), "message_too_large");
  EXPECT_EQ(f.server->counters().messages_too_large, 1u);
  EXPECT_TRUE(f.stop());
}

/// Sends `target` on a new connection that never reads its answer.
std::shared_ptr<Client> slow_http_reader(Fixture& f, const std::string& target) {
  auto c = never_reading(f, f.http_port());
  c->send_raw("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(f.http_port()) +
              "\r\n\r\n");
  return c;
}

// 64 slow readers of /api/v1/devices made /healthz 503: admission closed only idle connections
// and every one was busy writing. /healthz and /metrics have slots of their own.
TEST(TransportBudget, SlowReadersOfBigResponsesDoNotLockOutHealthzAndMetrics) {
  Fixture f;
  ServerOptions o;
  o.limits.max_http_connections = 4;
  o.limits.reserved_http_connections = 2;
  o.limits.socket_send_buffer = 4096;
  f.start(o);
  f.publish("sim", kBigDevices);
  std::vector<std::shared_ptr<Client>> slow;
  for (int i = 0; i < 4; ++i) slow.push_back(slow_http_reader(f, "/api/v1/devices"));
  ASSERT_TRUE(f.run_until([&] { return f.server->counters().http_requests == 4; }));
  f.run_for(50ms);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(http_request(f, "/healthz").status, 200);
    EXPECT_EQ(http_request(f, "/metrics").status, 200);
  }
  const auto busy = http_request(f, "/api/v1/devices");  // a reserved slot: not for this
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.headers.at("retry-after"), "1");
  EXPECT_GE(f.server->counters().http_busy, 1u);
  for (auto& s : slow) s->close();
  EXPECT_TRUE(f.stop());
}

// 16 slow readers of a fleet's /api/v1/snapshot: RSS 228 MB → 1.9 GB, one body per request.
// Identical answers share one body (counted once in the response budget); a different body
// that would pass the budget gets 503 with Retry-After.
TEST(TransportBudget, IdenticalResponsesShareOneBodyAndTheResponseBudgetRefusesBeyondIt) {
  std::size_t snapshot_body = 0, devices_body = 0;
  {
    Fixture f;
    f.start();
    f.publish("sim", kBigDevices);
    snapshot_body = http_request(f, "/api/v1/snapshot").body.size();
    devices_body = http_request(f, "/api/v1/devices").body.size();
    EXPECT_TRUE(f.stop());
  }
  ASSERT_GT(snapshot_body, 100'000u);
  ASSERT_GT(devices_body, 100'000u);
  Fixture f;
  ServerOptions o;
  o.limits.http_response_bytes = snapshot_body + devices_body / 2;
  o.limits.socket_send_buffer = 4096;
  f.start(o);
  f.publish("sim", kBigDevices);
  std::vector<std::shared_ptr<Client>> slow;
  // Parameters that do not change the answer do not make another body either.
  for (int i = 0; i < 16; ++i)
    slow.push_back(slow_http_reader(f, "/api/v1/snapshot?x=" + std::to_string(i)));
  ASSERT_TRUE(f.run_until([&] { return f.server->counters().http_requests == 16; }));
  f.run_for(50ms);
  auto c = f.server->counters();
  EXPECT_EQ(c.http_response_bytes, snapshot_body);  // 16 responses, one body
  EXPECT_EQ(c.http_busy, 0u);
  EXPECT_LT(c.encoded_bytes_live, 2 * snapshot_body + 2 * devices_body);
  const auto refused = http_request(f, "/api/v1/devices");
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.headers.at("retry-after"), "1");
  EXPECT_EQ(f.server->counters().http_busy, 1u);
  EXPECT_EQ(http_request(f, "/healthz").status, 200);  // exempt
  for (auto& s : slow) s->close();
  ASSERT_TRUE(f.run_until([&] { return f.server->counters().http_response_bytes == 0; }));
  EXPECT_EQ(http_request(f, "/api/v1/devices").status, 200);  // room again
  EXPECT_TRUE(f.stop());
}

}  // namespace
}  // namespace gpustream::transport::test
