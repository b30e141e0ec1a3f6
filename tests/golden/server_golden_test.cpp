// Golden bytes as the real server sends them (gpustream/transport/server.hpp on loopback): the
// TCP lines and WebSocket frames of a connection (hello, subscribed, the history replayed as
// snapshot messages, with and without a projection), and the bodies of /api/v1/snapshot,
// /api/v1/devices and /api/v1/events.
//
// Normalised: hello's "instance" (random per channel) becomes "<instance>". Nothing else of
// these outputs depends on the run. WebSocket frames are stored one per line (a frame has no
// '\n'; each must equal the TCP line without its '\n').
#include <sys/socket.h>
#include <sys/time.h>

#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "golden/golden.hpp"
#include "golden/golden_fixtures.hpp"
#include "gpustream/channel.hpp"
#include "gpustream/transport/protocol.hpp"
#include "gpustream/transport/server.hpp"
#include "wire/encoder.hpp"  // transport/src/wire: Projection::of, to know which snapshots a filter keeps

namespace gpustream::golden {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using asio::ip::tcp;

/// A server over a channel holding the fixtures, run on its own thread.
class LiveServer {
 public:
  LiveServer() : channel_(io_.get_executor(), 64), work_(asio::make_work_guard(io_)) {
    const auto sim = simulated_snapshots();
    for (const auto& s : {full_snapshot(), sim[0], failed_snapshot(), sim[1], extremes_snapshot()})
      published_.push_back(channel_.publish(s));
    for (const auto& e : events()) channel_.events().publish(e);  // renumbered 1, 2, ...
    transport::ServerOptions o;
    o.http = tcp::endpoint(asio::ip::address_v4::loopback(), 0);
    o.tcp = tcp::endpoint(asio::ip::address_v4::loopback(), 0);
    server_ = std::make_unique<transport::Server>(io_.get_executor(), channel_, std::move(o),
                                                  [] { return probe_stats(); });
    server_->start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~LiveServer() {
    // Stop gracefully on the server's thread, destroy the server there, then let io_ run out of
    // work (bounded: after 10 s it is stopped) and run what is left here, while the channel lives.
    std::promise<void> stopped;
    asio::post(io_, [&] { server_->stop([&] { stopped.set_value(); }); });
    stopped.get_future().wait_for(std::chrono::seconds(10));
    asio::post(io_, [this] { server_.reset(); });
    work_.reset();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!io_.stopped() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    io_.stop();
    thread_.join();
    server_.reset();
    io_.restart();
    io_.poll();
  }
  unsigned short http_port() const { return server_->http_endpoint()->port(); }
  unsigned short tcp_port() const { return server_->tcp_endpoint()->port(); }
  const std::vector<SnapshotPtr>& published() const { return published_; }

 private:
  asio::io_context io_;
  SnapshotChannel channel_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::unique_ptr<transport::Server> server_;
  std::vector<SnapshotPtr> published_;
  std::thread thread_;
};

/// A blocking read that gives up after 10 s (a wrong expectation fails instead of hanging).
void set_receive_timeout(tcp::socket& s) {
  timeval tv{10, 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

std::string normalise_instance(std::string msg) {
  const std::string key = "\"instance\":\"";
  const auto at = msg.find(key);
  if (at == std::string::npos) return msg;
  const auto end = msg.find('"', at + key.size());
  return msg.substr(0, at + key.size()) + "<instance>" + msg.substr(end);
}

/// The number of messages after hello that a subscribe with since 0 and `projection` gets:
/// subscribed, then every published snapshot it keeps a device of.
struct Case {
  std::string name;
  std::string subscribe;
  transport::Projection projection;
  std::string probe;  // the subscribe's only probe; empty: every probe
};

std::size_t expected_after_hello(const LiveServer& srv, const Case& c) {
  std::size_t n = 1;
  for (const auto& s : srv.published())
    if ((c.probe.empty() || s->probe == c.probe) && c.projection.of(*s).any) ++n;
  return n;
}

std::vector<Case> cases() {
  const std::string gpu = "GPU-8f6c2b1e-0000-4a5b-9c1d-123456789abc";
  const std::string sim = simulated_device_id(7, 1);
  return {
      {"plain", R"({"type":"subscribe","since":0})", {}, ""},
      {"fields",
       R"({"type":"subscribe","since":0,"fields":["power_watts","memory_used_bytes","fan_rpm"]})",
       transport::Projection::make(
           {}, {Metric::power_watts, Metric::memory_used_bytes, Metric::fan_rpm}),
       ""},
      {"devices_fields",
       R"({"type":"subscribe","since":0,"devices":[")" + gpu + R"(",")" + sim +
           R"(","unknown"],"fields":["utilization_percent"]})",
       transport::Projection::make({gpu, sim, "unknown"}, {Metric::utilization_percent}), ""},
      {"probes", R"({"type":"subscribe","since":0,"probes":["simulated"]})", {}, "simulated"},
  };
}

std::vector<std::string> tcp_session(const LiveServer& srv, const Case& c, std::size_t after) {
  asio::io_context io;
  tcp::socket s(io);
  s.connect({asio::ip::address_v4::loopback(), srv.tcp_port()});
  set_receive_timeout(s);
  std::string buf;
  std::vector<std::string> lines;
  auto read_line = [&] {
    boost::system::error_code ec;
    const auto n = asio::read_until(s, asio::dynamic_buffer(buf), '\n', ec);
    if (ec) {
      ADD_FAILURE() << c.name << ": TCP read: " << ec.message();
      return false;
    }
    lines.push_back(buf.substr(0, n));
    buf.erase(0, n);
    return true;
  };
  if (!read_line()) return lines;  // hello
  asio::write(s, asio::buffer(c.subscribe + "\n"));
  for (std::size_t i = 0; i < after; ++i)
    if (!read_line()) break;
  return lines;
}

std::vector<std::string> ws_session(const LiveServer& srv, const Case& c, std::size_t after) {
  asio::io_context io;
  websocket::stream<tcp::socket> ws(io);
  ws.next_layer().connect({asio::ip::address_v4::loopback(), srv.http_port()});
  set_receive_timeout(ws.next_layer());
  ws.handshake("127.0.0.1:" + std::to_string(srv.http_port()), "/ws");
  std::vector<std::string> frames;
  auto read_frame = [&] {
    beast::flat_buffer b;
    boost::system::error_code ec;
    ws.read(b, ec);
    if (ec) {
      ADD_FAILURE() << c.name << ": WebSocket read: " << ec.message();
      return false;
    }
    frames.push_back(beast::buffers_to_string(b.data()));
    return true;
  };
  if (!read_frame()) return frames;
  ws.write(asio::buffer(c.subscribe));
  for (std::size_t i = 0; i < after; ++i)
    if (!read_frame()) break;
  return frames;
}

std::string http_get(const LiveServer& srv, const std::string& target) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.connect(tcp::endpoint(asio::ip::address_v4::loopback(), srv.http_port()));
  set_receive_timeout(stream.socket());
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "127.0.0.1:" + std::to_string(srv.http_port()));
  http::write(stream, req);
  beast::flat_buffer b;
  http::response<http::string_body> res;
  http::read(stream, b, res);
  std::string out = std::to_string(res.result_int()) + " " +
                    std::string(res[http::field::content_type]) + "\n" + res.body();
  return out;
}

TEST(GoldenServer, TcpAndWebSocketMessagesAsSent) {
  LiveServer srv;
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto after = expected_after_hello(srv, c);
    const auto lines = tcp_session(srv, c, after);
    ASSERT_EQ(lines.size(), after + 1);
    std::string tcp_text;
    for (const auto& l : lines) tcp_text += normalise_instance(l);
    expect_golden("server/tcp." + c.name + ".txt", tcp_text);

    const auto frames = ws_session(srv, c, after);
    ASSERT_EQ(frames.size(), after + 1);
    std::string ws_text;
    for (std::size_t i = 0; i < frames.size(); ++i) {
      EXPECT_EQ(frames[i] + "\n", lines[i]) << "frame " << i;
      ws_text += normalise_instance(frames[i]) + "\n";
    }
    expect_golden("server/ws." + c.name + ".txt", ws_text);
  }
}

TEST(GoldenServer, HttpApiBodies) {
  LiveServer srv;
  expect_golden("server/api_v1_snapshot.txt", http_get(srv, "/api/v1/snapshot"));
  expect_golden("server/api_v1_snapshot.node.txt", http_get(srv, "/api/v1/snapshot?node=node-7"));
  expect_golden("server/api_v1_devices.txt", http_get(srv, "/api/v1/devices"));
  expect_golden("server/api_v1_events.txt", http_get(srv, "/api/v1/events"));
}

}  // namespace
}  // namespace gpustream::golden
