// The client side of bench/broadcast_bench.cpp, run in a child process (the benchmark re-executes
// itself with --client-fleet) so that the clients' CPU is never counted as the server's.
//
//   broadcast_bench --client-fleet URL CLIENTS MESSAGES WARMUP
//
// Opens CLIENTS WebSocket connections to URL (ws://HOST:PORT/PATH) on one thread. Each waits for
// its first message (the server's hello: from then on it is registered for the broadcast);
// when all have one, the fleet prints "ready". For each snapshot message it reads "sequence"
// and "monotonic_ns" (the publish time) and records now − monotonic_ns; when every client has
// a sequence it prints "got SEQ". After MESSAGES snapshots per client it prints
// "latency_us P50 P99 MAX" over all (snapshot, client) pairs after the first WARMUP sequences,
// and exits.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>

#include "gpustream/model.hpp"

namespace gpustream::bench {

struct Fleet {
  int clients = 0;
  std::uint64_t messages = 0;
  std::uint64_t warmup = 0;
  int ready = 0;
  int done = 0;
  std::vector<int> got;                 // per sequence: clients that received it
  std::vector<std::int64_t> latencies;  // ns
  boost::asio::io_context io{1};

  void say(const std::string& line) {
    std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
  }
};

inline std::uint64_t number_after(std::string_view text, std::string_view key) {
  const auto at = text.find(key);
  if (at == std::string_view::npos) return 0;
  return std::strtoull(text.data() + at + key.size(), nullptr, 10);
}

class FleetClient : public std::enable_shared_from_this<FleetClient> {
 public:
  FleetClient(Fleet& f, std::string host, std::string target)
      : f_(f), host_(std::move(host)), target_(std::move(target)), ws_(f.io) {}

  void start(const boost::asio::ip::tcp::endpoint& ep) {
    ws_.next_layer().async_connect(ep, [self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return self->fail("connect", ec);
      self->ws_.read_message_max(64 * 1024 * 1024);
      self->ws_.async_handshake(self->host_, self->target_, [self](boost::system::error_code e) {
        if (e) return self->fail("handshake", e);
        self->read();
      });
    });
  }

 private:
  void read() {
    ws_.async_read(buf_, [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
      if (ec) return self->fail("read", ec);
      self->on_message(
          std::string_view(static_cast<const char*>(self->buf_.data().data()), self->buf_.size()));
      self->buf_.consume(self->buf_.size());
      if (self->received_ < self->f_.messages) self->read();
    });
  }

  void on_message(std::string_view text) {
    if (!hello_) {
      hello_ = true;
      if (++f_.ready == f_.clients) f_.say("ready");
      return;
    }
    if (text.substr(0, 40).find("\"snapshot\"") == std::string_view::npos) return;
    const auto now = steady_now_ns();
    const auto head = text.substr(0, 400);
    const auto seq = number_after(head, "\"sequence\":");
    const auto mono = static_cast<std::int64_t>(number_after(head, "\"monotonic_ns\":"));
    if (seq > f_.warmup) f_.latencies.push_back(now - mono);
    if (seq < f_.got.size() && ++f_.got[seq] == f_.clients) f_.say("got " + std::to_string(seq));
    if (++received_ == f_.messages) {
      boost::system::error_code ignored;
      ws_.next_layer().close(ignored);
      if (++f_.done == f_.clients) finish();
    }
  }

  void finish() {
    auto& l = f_.latencies;
    std::sort(l.begin(), l.end());
    auto pct = [&](double p) {
      if (l.empty()) return 0.0;
      const auto i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(l.size() - 1) + 0.5);
      return static_cast<double>(l[std::min(i, l.size() - 1)]) / 1000.0;
    };
    char line[128];
    std::snprintf(line, sizeof line, "latency_us %.1f %.1f %.1f", pct(50), pct(99), pct(100));
    f_.say(line);
    f_.io.stop();
  }

  void fail(const char* what, const boost::system::error_code& ec) {
    if (received_ >= f_.messages) return;
    std::fprintf(stderr, "fleet client: %s: %s\n", what, ec.message().c_str());
    std::exit(3);
  }

  Fleet& f_;
  std::string host_, target_;
  boost::beast::websocket::stream<boost::asio::ip::tcp::socket> ws_;
  boost::beast::flat_buffer buf_;
  bool hello_ = false;
  std::uint64_t received_ = 0;
};

/// argv: URL CLIENTS MESSAGES WARMUP.
inline int run_client_fleet(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: --client-fleet ws://HOST:PORT/PATH CLIENTS MESSAGES WARMUP\n");
    return 2;
  }
  const std::string url = argv[0];
  const auto hostport_begin = url.find("//") + 2;
  const auto path_begin = url.find('/', hostport_begin);
  const auto hostport = url.substr(hostport_begin, path_begin - hostport_begin);
  const auto colon = hostport.rfind(':');
  Fleet f;
  f.clients = std::atoi(argv[1]);
  f.messages = std::strtoull(argv[2], nullptr, 10);
  f.warmup = std::strtoull(argv[3], nullptr, 10);
  f.got.assign(f.messages + 2, 0);
  f.latencies.reserve(static_cast<std::size_t>(f.clients) * f.messages);
  const boost::asio::ip::tcp::endpoint ep(
      boost::asio::ip::make_address(hostport.substr(0, colon)),
      static_cast<unsigned short>(std::atoi(hostport.c_str() + colon + 1)));
  for (int i = 0; i < f.clients; ++i)
    std::make_shared<FleetClient>(f, hostport, url.substr(path_begin))->start(ep);
  f.io.run();
  return 0;
}

}  // namespace gpustream::bench
