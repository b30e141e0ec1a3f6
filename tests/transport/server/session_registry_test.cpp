// SessionRegistry: admission per transport and per address, HTTP making room by closing its
// longest-idle connection, the open gauges, and close_all.
#include "server/session_registry.hpp"

#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

namespace gpustream::transport::test {
namespace {

using Admission = SessionRegistry::Admission;
namespace ip = boost::asio::ip;

/// A connection that records how it was shut down.
class FakeConnection : public Connection {
 public:
  FakeConnection(ConnKind kind, ip::address peer) : Connection(kind, std::move(peer)) {}
  void shutdown(bool graceful) override { shutdowns.push_back(graceful); }
  std::optional<Clock::time_point> idle_since() const override { return idle; }

  std::vector<bool> shutdowns;
  std::optional<Clock::time_point> idle;
};

ip::address addr(const char* a) { return ip::make_address(a); }

struct RegistryTest : ::testing::Test {
  RegistryTest() {
    limits.max_connections = 3;
    limits.max_http_connections = 2;
    limits.max_connections_per_address = 2;
  }

  /// Admits, then adds, a connection of `kind` from `peer`; nullptr when refused.
  std::shared_ptr<FakeConnection> open(ConnKind kind, const char* peer, Admission* why = nullptr) {
    const auto a = registry.admit(kind, addr(peer));
    if (why) *why = a;
    if (a == Admission::reserved)
      kind = ConnKind::http_reserved;  // as the listener does
    else if (a != Admission::ok)
      return nullptr;
    auto c = std::make_shared<FakeConnection>(kind, addr(peer));
    registry.add(c.get(), c);
    conns.push_back(c);
    return c;
  }

  ServerLimits limits;
  ServerMetrics metrics;
  SessionRegistry registry{limits, metrics};
  std::vector<std::shared_ptr<FakeConnection>> conns;
};

TEST_F(RegistryTest, StreamingTransportsAreBoundedByMaxConnectionsEach) {
  EXPECT_TRUE(open(ConnKind::tcp, "10.0.0.1"));
  EXPECT_TRUE(open(ConnKind::tcp, "10.0.0.2"));
  EXPECT_TRUE(open(ConnKind::tcp, "10.0.0.3"));
  Admission why{};
  EXPECT_FALSE(open(ConnKind::tcp, "10.0.0.4", &why));
  EXPECT_EQ(why, Admission::transport_full);
  // The bound is per transport: WebSocket has its own.
  EXPECT_TRUE(open(ConnKind::websocket, "10.0.0.4"));
  EXPECT_EQ(metrics.tcp_open.load(), 3u);
  EXPECT_EQ(metrics.websocket_open.load(), 1u);
  EXPECT_EQ(registry.size(), 4u);
}

TEST_F(RegistryTest, EachAddressIsBoundedPerTransport) {
  EXPECT_TRUE(open(ConnKind::tcp, "10.0.0.1"));
  EXPECT_TRUE(open(ConnKind::tcp, "10.0.0.1"));
  Admission why{};
  EXPECT_FALSE(open(ConnKind::tcp, "10.0.0.1", &why));
  EXPECT_EQ(why, Admission::address_full);
  EXPECT_TRUE(open(ConnKind::tcp, "10.0.0.2"));
  EXPECT_TRUE(open(ConnKind::websocket, "10.0.0.1"));
}

TEST_F(RegistryTest, RemovingGivesTheRoomBackAndIsIdempotent) {
  auto a = open(ConnKind::tcp, "10.0.0.1");
  auto b = open(ConnKind::tcp, "10.0.0.1");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(registry.admit(ConnKind::tcp, addr("10.0.0.1")), Admission::address_full);
  registry.remove(a.get());
  registry.remove(a.get());
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_EQ(metrics.tcp_open.load(), 1u);
  EXPECT_EQ(registry.admit(ConnKind::tcp, addr("10.0.0.1")), Admission::ok);
}

TEST_F(RegistryTest, AddingTheSameConnectionTwiceCountsItOnce) {
  auto a = open(ConnKind::websocket, "10.0.0.1");
  registry.add(a.get(), a);
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_EQ(metrics.websocket_open.load(), 1u);
}

TEST_F(RegistryTest, FullHttpClosesTheConnectionIdleTheLongest) {
  const auto now = Connection::Clock::now();
  auto older = open(ConnKind::http, "10.0.0.1");
  auto newer = open(ConnKind::http, "10.0.0.2");
  ASSERT_TRUE(older && newer);
  older->idle = now - std::chrono::seconds(10);
  newer->idle = now - std::chrono::seconds(1);
  auto third = open(ConnKind::http, "10.0.0.3");
  ASSERT_TRUE(third);
  EXPECT_EQ(older->shutdowns, std::vector<bool>{false});
  EXPECT_TRUE(newer->shutdowns.empty());
  EXPECT_EQ(metrics.idle_closed.load(), 1u);
  EXPECT_EQ(metrics.http_open.load(), 2u);
  EXPECT_EQ(registry.size(), 2u);
}

// Issue 27 (6): with every HTTP connection busy writing a big answer, a new one was refused,
// /healthz and /metrics included. It gets a reserved slot (for those paths only); when the
// reserved slots are taken too, the longest idle of them gives way, and only then is it refused.
TEST_F(RegistryTest, FullHttpWithEveryConnectionBusyAdmitsToAReservedSlot) {
  limits.reserved_http_connections = 1;
  ASSERT_TRUE(open(ConnKind::http, "10.0.0.1"));
  ASSERT_TRUE(open(ConnKind::http, "10.0.0.2"));  // both handling a request: idle_since unset
  Admission why{};
  auto reserved = open(ConnKind::http, "10.0.0.3", &why);
  ASSERT_TRUE(reserved);
  EXPECT_EQ(why, Admission::reserved);
  EXPECT_EQ(reserved->kind(), ConnKind::http_reserved);
  EXPECT_EQ(metrics.http_open.load(), 3u);  // reserved ones are HTTP connections too
  EXPECT_EQ(metrics.idle_closed.load(), 0u);
  // The reserved slot is busy (answering /metrics): the next one is refused.
  EXPECT_FALSE(open(ConnKind::http, "10.0.0.4", &why));
  EXPECT_EQ(why, Admission::transport_full);
  // Once it waits for a request, it gives way.
  reserved->idle = Connection::Clock::now();
  ASSERT_TRUE(open(ConnKind::http, "10.0.0.4", &why));
  EXPECT_EQ(why, Admission::reserved);
  EXPECT_EQ(reserved->shutdowns, std::vector<bool>{false});
  EXPECT_EQ(metrics.idle_closed.load(), 1u);
  EXPECT_EQ(metrics.http_open.load(), 3u);
}

TEST_F(RegistryTest, NoReservedSlotsRefusesWhenEveryConnectionIsBusy) {
  limits.reserved_http_connections = 0;
  ASSERT_TRUE(open(ConnKind::http, "10.0.0.1"));
  ASSERT_TRUE(open(ConnKind::http, "10.0.0.2"));
  Admission why{};
  EXPECT_FALSE(open(ConnKind::http, "10.0.0.3", &why));
  EXPECT_EQ(why, Admission::transport_full);
}

TEST_F(RegistryTest, TheAddressBoundComesBeforeMakingRoom) {
  auto a = open(ConnKind::http, "10.0.0.1");
  auto b = open(ConnKind::http, "10.0.0.1");
  ASSERT_TRUE(a && b);
  a->idle = Connection::Clock::now();
  Admission why{};
  EXPECT_FALSE(open(ConnKind::http, "10.0.0.1", &why));
  EXPECT_EQ(why, Admission::address_full);
  EXPECT_TRUE(a->shutdowns.empty());
}

TEST_F(RegistryTest, CloseAllShutsEveryLiveConnectionDown) {
  auto a = open(ConnKind::http, "10.0.0.1");
  auto b = open(ConnKind::tcp, "10.0.0.1");
  auto gone = open(ConnKind::websocket, "10.0.0.1");
  gone.reset();
  conns.pop_back();  // expired: close_all skips it
  registry.close_all(true);
  EXPECT_EQ(a->shutdowns, std::vector<bool>{true});
  EXPECT_EQ(b->shutdowns, std::vector<bool>{true});
  registry.close_all(false);
  EXPECT_EQ(a->shutdowns, (std::vector<bool>{true, false}));
}

}  // namespace
}  // namespace gpustream::transport::test
