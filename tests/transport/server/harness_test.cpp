// The transport test harness (declared in harness.hpp), plus tests of the harness itself.
#include <deque>

#include <gtest/gtest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>

#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace json = boost::json;
using asio::ip::tcp;
using boost::system::error_code;

GpuSnapshot make_snapshot(const std::string& probe, int devices, int processes, bool host) {
  GpuSnapshot s;
  s.probe = probe;
  s.time_unix_ns = 1'700'000'000'000'000'000;
  s.monotonic_ns = 123'456'789;
  s.sample_duration_ns = 250'000;
  for (int i = 0; i < devices; ++i) {
    DeviceSample d;
    d.id = probe + "-gpu" + std::to_string(i);
    d.vendor = Vendor::simulated;
    d.index = i;
    d.name = "Simulated GPU " + std::to_string(i);
    d.pci_bus_id = "0000:0" + std::to_string(i + 1) + ":00.0";
    d.metrics.set(Metric::utilization_percent, 42.5 + i, Source::simulated);
    d.metrics.set(Metric::memory_used_bytes, 1073741824.0, Source::simulated);
    d.metrics.set(Metric::memory_total_bytes, 8589934592.0, Source::simulated);
    d.metrics.set(Metric::temperature_celsius, 61, Source::simulated);
    d.metrics.set(Metric::power_watts, 123.25, Source::simulated);
    d.metrics.set(Metric::energy_joules, 5000.5, Source::simulated);
    d.energy_kind = EnergyKind::counter;
    d.metrics.set(Metric::clock_graphics_mhz, 1500, Source::simulated);
    d.metrics.set(Metric::fan_percent, 30, Source::simulated);
    d.metrics.fill_absent(Absence::unsupported);
    d.power_state = PowerState::active;
    d.engines.push_back({"graphics", Reading::of(40, Source::simulated)});
    for (int p = 0; p < processes; ++p) {
      ProcessSample ps;
      ps.pid = 1000 + p;
      ps.name = "worker-" + std::to_string(p) + std::string(200, 'x');
      ps.gpu_memory_bytes = 1u << 20;
      d.processes.push_back(std::move(ps));
    }
    s.devices.push_back(std::move(d));
  }
  if (host) {
    HostSample h;
    h.memory_total_bytes = 16ull << 30;
    h.memory_used_bytes = 4ull << 30;
    s.host = h;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Fixture

Fixture::Fixture(std::size_t history) : channel(io.get_executor(), history) {}

Fixture::~Fixture() {
  for (auto& w : clients)
    if (auto c = w.lock()) c->close();
  server.reset();
  run_for(20ms);
}

void Fixture::start(ServerOptions o, Server::StatsSource stats) {
  if (!o.http || o.http->port() == 9400)
    o.http = tcp::endpoint(asio::ip::address_v4::loopback(), 0);
  if (!o.tcp) o.tcp = tcp::endpoint(asio::ip::address_v4::loopback(), 0);
  server = std::make_unique<Server>(io.get_executor(), channel, std::move(o), std::move(stats));
  server->start();
}

bool Fixture::stop() {
  auto done = std::make_shared<bool>(false);  // may complete after a failed wait
  server->stop([done] { *done = true; });
  return run_until([&] { return *done; });
}

bool Fixture::run_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (io.stopped()) io.restart();
    io.run_one_for(10ms);
  }
  return true;
}

void Fixture::run_for(std::chrono::milliseconds d) {
  if (io.stopped()) io.restart();
  io.run_for(d);
}

SnapshotPtr Fixture::publish(const std::string& probe, int devices, int processes) {
  return channel.publish(make_snapshot(probe, devices, processes));
}

unsigned short Fixture::http_port() const { return server->http_endpoint()->port(); }
unsigned short Fixture::tcp_port() const { return server->tcp_endpoint()->port(); }

// ---------------------------------------------------------------------------------------------
// Clients

void Client::on_text(std::string_view text) {
  error_code ec;
  auto v = json::parse(json::string_view(text.data(), text.size()), ec);
  if (ec || !v.is_object()) {
    garbage_.emplace_back(text);
    return;
  }
  messages_.push_back(std::move(v.as_object()));
}

std::vector<json::object> Client::of_type(std::string_view type) const {
  std::vector<json::object> out;
  for (const auto& m : messages_)
    if (const auto* t = m.if_contains("type"); t && t->is_string() && t->get_string() == type)
      out.push_back(m);
  return out;
}

std::size_t Client::count(std::string_view type) const {
  std::size_t n = 0;
  for (const auto& m : messages_)
    if (const auto* t = m.if_contains("type"); t && t->is_string() && t->get_string() == type) ++n;
  return n;
}

std::vector<std::uint64_t> Client::sequences() const {
  std::vector<std::uint64_t> out;
  for (const auto& m : of_type("snapshot"))
    out.push_back(m.at("sequence").to_number<std::uint64_t>());
  return out;
}

namespace {

class TcpClient final : public Client {
 public:
  TcpClient(Fixture& f, Options o) : f_(f), o_(std::move(o)), sock_(f.io) {}

  void connect() override {
    const tcp::endpoint ep(asio::ip::address_v4::loopback(), o_.port.value_or(f_.tcp_port()));
    if (o_.receive_buffer) {
      sock_.open(tcp::v4());
      sock_.set_option(asio::socket_base::receive_buffer_size(*o_.receive_buffer));
    }
    sock_.async_connect(ep, [self = self()](error_code ec) {
      if (ec) {
        self->ended_ = true;
        return;
      }
      self->connected_ = true;
      if (self->o_.read) self->read();
      self->write_next();
    });
  }
  void send(const std::string& text) override { send_raw(text + "\n"); }
  void send_raw(const std::string& bytes) override {
    wq_.push_back(bytes);
    if (connected_) write_next();
  }
  void close() override {
    error_code ec;
    sock_.close(ec);
  }
  void shutdown_send() override {
    shutdown_pending_ = true;
    if (connected_) write_next();
  }
  void start_reading() override {
    if (reading_ || !connected_) return;
    read();
  }

 private:
  std::shared_ptr<TcpClient> self() {
    return std::static_pointer_cast<TcpClient>(shared_from_this());
  }
  void read() {
    reading_ = true;
    asio::async_read_until(sock_, asio::dynamic_buffer(rbuf_), '\n',
                           [self = self()](error_code ec, std::size_t n) {
                             if (ec) {
                               // Like a real client: the server closed, so close too.
                               self->partial_ = self->rbuf_;
                               self->ended_ = true;
                               self->end_reason_ = ec.message();
                               self->close();
                               return;
                             }
                             self->on_text(std::string_view(self->rbuf_).substr(0, n - 1));
                             self->rbuf_.erase(0, n);
                             self->read();
                           });
  }
  void write_next() {
    if (writing_) return;
    if (wq_.empty()) {
      if (shutdown_pending_) {
        shutdown_pending_ = false;
        error_code ec;
        sock_.shutdown(tcp::socket::shutdown_send, ec);
      }
      return;
    }
    writing_ = true;
    asio::async_write(sock_, asio::buffer(wq_.front()),
                      [self = self()](error_code ec, std::size_t) {
                        self->writing_ = false;
                        self->wq_.pop_front();
                        if (!ec) self->write_next();
                      });
  }

  Fixture& f_;
  Options o_;
  tcp::socket sock_;
  std::string rbuf_;
  std::deque<std::string> wq_;
  bool writing_ = false;
  bool reading_ = false;
  bool shutdown_pending_ = false;
};

class WsClient final : public Client {
 public:
  WsClient(Fixture& f, Options o) : f_(f), o_(std::move(o)), ws_(f.io) {}

  void connect() override {
    const tcp::endpoint ep(asio::ip::address_v4::loopback(), f_.http_port());
    beast::get_lowest_layer(ws_).async_connect(ep, [self = self()](error_code ec) {
      if (ec) {
        self->ended_ = true;
        return;
      }
      auto headers = self->o_.headers;
      self->ws_.set_option(
          websocket::stream_base::decorator([headers](websocket::request_type& req) {
            for (const auto& [k, v] : headers) req.set(k, v);
          }));
      const std::string host =
          self->o_.host.value_or("127.0.0.1:" + std::to_string(self->f_.http_port()));
      self->ws_.async_handshake(self->res_, host, self->o_.target, [self](error_code ec2) {
        if (ec2) {
          self->refused_status_ = static_cast<int>(self->res_.result_int());
          self->ended_ = true;
          return;
        }
        self->connected_ = true;
        if (self->o_.read) self->read();
        self->write_next();
      });
    });
  }
  void send(const std::string& text) override {
    wq_.emplace_back(text, false);
    if (connected_) write_next();
  }
  void send_raw(const std::string& bytes) override {
    wq_.emplace_back(bytes, true);
    if (connected_) write_next();
  }
  void close() override {
    error_code ec;
    beast::get_lowest_layer(ws_).socket().close(ec);
  }
  void start_reading() override {
    if (reading_ || !connected_) return;
    read();
  }

 private:
  std::shared_ptr<WsClient> self() {
    return std::static_pointer_cast<WsClient>(shared_from_this());
  }
  void read() {
    reading_ = true;
    ws_.async_read(buf_, [self = self()](error_code ec, std::size_t) {
      if (ec) {
        // The close frame's code, also when answering it failed (the peer may already be gone).
        self->close_code_ = self->ws_.reason().code;
        self->ended_ = true;
        self->end_reason_ = ec.message();
        self->close();
        return;
      }
      self->on_text(beast::buffers_to_string(self->buf_.data()));
      self->buf_.consume(self->buf_.size());
      self->read();
    });
  }
  void write_next() {
    if (writing_ || wq_.empty()) return;
    writing_ = true;
    ws_.binary(wq_.front().second);
    ws_.async_write(asio::buffer(wq_.front().first), [self = self()](error_code ec, std::size_t) {
      self->writing_ = false;
      self->wq_.pop_front();
      if (!ec) self->write_next();
    });
  }

  Fixture& f_;
  Options o_;
  websocket::stream<beast::tcp_stream> ws_;
  websocket::response_type res_;
  beast::flat_buffer buf_;
  std::deque<std::pair<std::string, bool>> wq_;
  bool writing_ = false;
  bool reading_ = false;
};

}  // namespace

std::shared_ptr<Client> Client::tcp(Fixture& f, Options o) {
  auto c = std::make_shared<TcpClient>(f, std::move(o));
  f.clients.push_back(c);
  return c;
}

std::shared_ptr<Client> Client::ws(Fixture& f, Options o) {
  auto c = std::make_shared<WsClient>(f, std::move(o));
  f.clients.push_back(c);
  return c;
}

namespace {
std::shared_ptr<Client> connected(Fixture& f, std::shared_ptr<Client> c) {
  c->connect();
  if (!f.run_until([&] { return c->count("hello") > 0 || c->ended(); }) || c->count("hello") == 0)
    ADD_FAILURE() << "no hello from the server";
  return c;
}
}  // namespace

std::shared_ptr<Client> connected_tcp(Fixture& f) { return connected(f, Client::tcp(f)); }
std::shared_ptr<Client> connected_ws(Fixture& f) { return connected(f, Client::ws(f)); }

HttpResult http_request(Fixture& f, const std::string& target,
                        std::map<std::string, std::string> headers, const std::string& method,
                        const std::string& body) {
  struct State {
    explicit State(asio::io_context& io) : stream(io) {}
    beast::tcp_stream stream;
    http::request<http::string_body> req;
    http::response<http::string_body> res;
    beast::flat_buffer buf;
    bool done = false;
    bool ok = false;
  };
  auto st = std::make_shared<State>(f.io);
  st->req.method_string(method);
  st->req.target(target);
  st->req.version(11);
  st->req.set(http::field::host, "127.0.0.1:" + std::to_string(f.http_port()));
  for (const auto& [k, v] : headers) st->req.set(k, v);
  st->req.body() = body;
  st->req.prepare_payload();
  const tcp::endpoint ep(asio::ip::address_v4::loopback(), f.http_port());
  st->stream.async_connect(ep, [st](error_code ec) {
    if (ec) {
      st->done = true;
      return;
    }
    http::async_write(st->stream, st->req, [st](error_code ec2, std::size_t) {
      if (ec2) {
        st->done = true;
        return;
      }
      http::async_read(st->stream, st->buf, st->res, [st](error_code ec3, std::size_t) {
        st->ok = !ec3;
        st->done = true;
      });
    });
  });
  HttpResult r;
  if (!f.run_until([&] { return st->done; })) {
    ADD_FAILURE() << "HTTP request " << target << " timed out";
    return r;
  }
  error_code ignored;
  st->stream.socket().close(ignored);
  if (!st->ok) return r;
  r.status = static_cast<int>(st->res.result_int());
  r.body = st->res.body();
  for (const auto& field : st->res) {
    std::string name(field.name_string());
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    r.headers[name] = std::string(field.value());
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Tests of the harness itself

TEST(TransportHarness, SnapshotHasWhatTheTestsRelyOn) {
  const auto s = make_snapshot("sim", 3, 2, true);
  ASSERT_EQ(s.devices.size(), 3u);
  EXPECT_EQ(s.devices[1].id, "sim-gpu1");
  EXPECT_TRUE(s.devices[0].metrics[Metric::power_watts].has_value());
  EXPECT_FALSE(s.devices[0].metrics[Metric::fan_rpm].has_value());
  EXPECT_EQ(s.devices[0].processes.size(), 2u);
  EXPECT_TRUE(s.host.has_value());
}

TEST(TransportHarness, RunUntilReportsATimeout) {
  Fixture f;
  EXPECT_FALSE(f.run_until([] { return false; }, 30ms));
  EXPECT_TRUE(f.run_until([] { return true; }, 30ms));
}

}  // namespace gpustream::transport::test
