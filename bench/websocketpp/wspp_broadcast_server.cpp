// The websocketpp side of bench/broadcast_bench.cpp: a WebSocket broadcast server that sends
// every message it is given to every connected client.
//
//   wspp_broadcast_server [--binary]   prints "listening PORT" (127.0.0.1, an ephemeral port)
//
// Messages come on stdin, each as a 4-byte little-endian length and that many bytes (the
// benchmark writes the exact bytes gpustream's server sends for the same snapshot). Each is sent
// as one text frame to every open connection, the way websocketpp's own broadcast example does
// (endpoint::send per connection), using the message_ptr overload so the payload is copied
// once into a message and websocketpp frames it per connection. A new connection gets
// {"type":"hello"} once it is registered, so a client knows it will receive what follows.
// --binary: binary frames instead of text frames. websocketpp validates the UTF-8 of every
// outgoing text frame, once per connection; a binary frame skips that, which shows what the
// rest of its send path costs.
// EOF on stdin: close every connection and exit.
//
// Single-threaded (one io_service run by main), like the gpustream server in the benchmark.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read.hpp>
#include <websocketpp/config/asio_no_tls.hpp>
#include <websocketpp/server.hpp>

namespace {

using Server = websocketpp::server<websocketpp::config::asio>;
using Hdl = websocketpp::connection_hdl;

class Broadcaster {
 public:
  Broadcaster(Server& s, int fd, websocketpp::frame::opcode::value op)
      : server_(s), in_(s.get_io_service(), fd), op_(op) {}

  void open(Hdl h) {
    conns_.insert(h);
    websocketpp::lib::error_code ec;
    server_.send(h, std::string("{\"type\":\"hello\"}"), websocketpp::frame::opcode::text, ec);
  }
  void close(Hdl h) { conns_.erase(h); }

  void read_header() {
    boost::asio::async_read(in_, boost::asio::buffer(header_, 4),
                            [this](const boost::system::error_code& ec, std::size_t) {
                              if (ec) return finish();
                              const std::uint32_t n = header_[0] | (header_[1] << 8) |
                                                      (header_[2] << 16) |
                                                      (std::uint32_t(header_[3]) << 24);
                              body_.resize(n);
                              read_body();
                            });
  }

 private:
  void read_body() {
    boost::asio::async_read(in_, boost::asio::buffer(body_),
                            [this](const boost::system::error_code& ec, std::size_t) {
                              if (ec) return finish();
                              broadcast();
                              read_header();
                            });
  }

  void broadcast() {
    if (conns_.empty()) return;
    websocketpp::lib::error_code ec;
    auto first = server_.get_con_from_hdl(*conns_.begin(), ec);
    if (ec) return;
    auto msg = first->get_message(op_, body_.size());
    msg->set_payload(body_.data(), body_.size());
    for (const auto& h : conns_) {
      auto con = server_.get_con_from_hdl(h, ec);
      if (!ec) con->send(msg);
    }
  }

  void finish() {
    websocketpp::lib::error_code ec;
    server_.stop_listening(ec);
    for (const auto& h : std::vector<Hdl>(conns_.begin(), conns_.end()))
      server_.close(h, websocketpp::close::status::going_away, "", ec);
  }

  Server& server_;
  boost::asio::posix::stream_descriptor in_;
  unsigned char header_[4] = {};
  std::string body_;
  websocketpp::frame::opcode::value op_;
  std::set<Hdl, std::owner_less<Hdl>> conns_;
};

}  // namespace

int main(int argc, char** argv) {
  const bool binary = argc > 1 && std::string(argv[1]) == "--binary";
  Server server;
  server.clear_access_channels(websocketpp::log::alevel::all);
  server.clear_error_channels(websocketpp::log::elevel::all);
  server.init_asio();
  server.set_reuse_addr(true);
  server.set_listen_backlog(1024);
  Broadcaster b(server, ::dup(0),
                binary ? websocketpp::frame::opcode::binary : websocketpp::frame::opcode::text);
  server.set_open_handler([&](Hdl h) { b.open(h); });
  server.set_close_handler([&](Hdl h) { b.close(h); });
  server.set_fail_handler([&](Hdl h) { b.close(h); });

  websocketpp::lib::error_code ec;
  server.listen(boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0), ec);
  if (ec) {
    std::fprintf(stderr, "wspp_broadcast_server: listen: %s\n", ec.message().c_str());
    return 1;
  }
  server.start_accept(ec);
  boost::system::error_code aec;
  const auto ep = server.get_local_endpoint(aec);
  std::printf("listening %u\n", static_cast<unsigned>(ep.port()));
  std::fflush(stdout);
  b.read_header();
  server.run();
  return 0;
}
