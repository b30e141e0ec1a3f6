// Listener: binds, accepts, and admits through the registry; a refused client is told why
// (the TCP error line, the HTTP 503) and closed, and the counters say so.
#include "server/listener.hpp"

#include <array>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>

#include "gpustream/transport/protocol.hpp"

namespace gpustream::transport::test {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

/// What the accepted sockets become: a registered connection (as a session would do).
class Accepted : public Connection {
 public:
  Accepted(ConnKind kind, tcp::socket s)
      : Connection(kind, s.remote_endpoint().address()), socket(std::move(s)) {}
  void shutdown(bool) override {
    error_code ec;
    socket.close(ec);
  }
  tcp::socket socket;
};

struct ListenerTest : ::testing::Test {
  ListenerTest() {
    limits.max_connections = 1;
    limits.max_http_connections = 1;
    limits.max_connections_per_address = 8;
    listener = std::make_shared<Listener>(strand, limits, registry, metrics,
                                          [this](tcp::socket s, ConnKind kind) {
                                            auto c = std::make_shared<Accepted>(kind, std::move(s));
                                            registry.add(c.get(), c);
                                            accepted.push_back(c);
                                          });
    const tcp::endpoint loopback(asio::ip::address_v4::loopback(), 0);
    listener->bind(loopback, loopback);
    listener->start();
  }
  ~ListenerTest() override {
    listener->close();
    io.run_for(std::chrono::milliseconds(50));
  }

  /// Connects to `ep` and reads until the server closes (or `wait` passes).
  struct Client {
    explicit Client(asio::io_context& io) : socket(io) {}
    tcp::socket socket;
    std::string received;
    bool closed = false;
    std::array<char, 512> buf{};
  };
  std::shared_ptr<Client> connect(const tcp::endpoint& ep) {
    auto c = std::make_shared<Client>(io);
    c->socket.connect(ep);
    read(c);
    return c;
  }
  void read(const std::shared_ptr<Client>& c) {
    c->socket.async_read_some(asio::buffer(c->buf), [this, c](error_code ec, std::size_t n) {
      c->received.append(c->buf.data(), n);
      if (ec) {
        c->closed = true;
        return;
      }
      read(c);
    });
  }
  template <class Pred>
  bool run_until(Pred done) {
    for (int i = 0; i < 200 && !done(); ++i) io.run_for(std::chrono::milliseconds(10));
    return done();
  }

  asio::io_context io;
  Strand strand{asio::make_strand(io)};
  ServerLimits limits;
  ServerMetrics metrics;
  SessionRegistry registry{limits, metrics};
  std::shared_ptr<Listener> listener;
  std::vector<std::shared_ptr<Accepted>> accepted;
};

TEST_F(ListenerTest, BindsBothEndpointsOnEphemeralPorts) {
  ASSERT_TRUE(listener->http_bound());
  ASSERT_TRUE(listener->tcp_bound());
  EXPECT_NE(listener->http_bound()->port(), 0);
  EXPECT_NE(listener->tcp_bound()->port(), 0);
  EXPECT_NE(listener->http_bound()->port(), listener->tcp_bound()->port());
}

TEST_F(ListenerTest, AdmitsUpToTheLimitThenRefusesTcpWithAnErrorLine) {
  auto first = connect(*listener->tcp_bound());
  ASSERT_TRUE(run_until([&] { return accepted.size() == 1; }));
  EXPECT_EQ(accepted[0]->kind(), ConnKind::tcp);
  auto second = connect(*listener->tcp_bound());
  ASSERT_TRUE(run_until([&] { return second->closed; }));
  EXPECT_EQ(second->received,
            refusal_text(ConnKind::tcp, SessionRegistry::Admission::transport_full));
  EXPECT_EQ(second->received, error_message(kErrLimit, "too many connections"));
  EXPECT_FALSE(first->closed);
  EXPECT_EQ(accepted.size(), 1u);
  EXPECT_EQ(metrics.connections_accepted.load(), 2u);
  EXPECT_EQ(metrics.connections_rejected.load(), 1u);
  // Room again once the first one is gone.
  registry.remove(accepted[0].get());
  auto third = connect(*listener->tcp_bound());
  ASSERT_TRUE(run_until([&] { return accepted.size() == 2; }));
  EXPECT_EQ(metrics.connections_rejected.load(), 1u);
}

// Every HTTP slot busy: a reserved slot (ConnKind::http_reserved, for /healthz and /metrics
// only; issue 27), and when those are taken too, a 503.
TEST_F(ListenerTest, AdmitsToAReservedSlotThenRefusesHttpWith503WhenNoConnectionIsIdle) {
  limits.reserved_http_connections = 1;
  auto first = connect(*listener->http_bound());
  ASSERT_TRUE(run_until([&] { return accepted.size() == 1; }));
  EXPECT_EQ(accepted[0]->kind(), ConnKind::http);
  auto reserved = connect(*listener->http_bound());
  ASSERT_TRUE(run_until([&] { return accepted.size() == 2; }));
  EXPECT_EQ(accepted[1]->kind(), ConnKind::http_reserved);
  auto second = connect(*listener->http_bound());
  ASSERT_TRUE(run_until([&] { return second->closed; }));
  EXPECT_EQ(second->received.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u);
  EXPECT_NE(second->received.find("\r\n\r\ntoo many connections\n"), std::string::npos);
  EXPECT_EQ(metrics.connections_rejected.load(), 1u);
}

TEST(RefusalText, SaysWhichBoundWasHit) {
  using A = SessionRegistry::Admission;
  EXPECT_EQ(refusal_text(ConnKind::tcp, A::address_full),
            error_message(kErrLimit, "too many connections from this address"));
  const auto http = refusal_text(ConnKind::websocket, A::address_full);
  const std::string body = "too many connections from this address\n";
  EXPECT_EQ(http,
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
            "Content-Length: " +
                std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
}

}  // namespace
}  // namespace gpustream::transport::test
