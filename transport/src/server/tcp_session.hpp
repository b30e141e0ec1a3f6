// One TCP client: JSON lines both ways. With a token, the first line must be
// {"type":"auth","token":"..."} (within the handshake timeout) before anything is sent.
//
// Reading: the bytes read are scanned once; every whole line in them is handled, then the
// consumed prefix is dropped in one step, so the work per byte is constant however short the
// lines. Empty lines are keep-alives. When the client shuts down its sending side (`nc -N`),
// the stream goes on until it closes its reading side (a write fails) or the server ends it.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "server/stream_session.hpp"
#include "wire/tls_stream.hpp"

namespace gpustream::transport {

class TcpSession final : public StreamSession {
 public:
  TcpSession(std::shared_ptr<ServerCore> core, tcp::socket socket);
  void run();

 private:
  bool write(std::shared_ptr<const std::string> msg) override;
  void close_transport(bool graceful) override;
  void start();
  void tls_shutdown();
  void do_read();
  void on_read(const boost::system::error_code& ec, std::size_t n);
  void on_line(std::string_view line);
  static boost::asio::ip::address peer_of(const tcp::socket& s);
  std::shared_ptr<TcpSession> self() {
    return std::static_pointer_cast<TcpSession>(shared_from_this());
  }

  MaybeTlsStream stream_;
  boost::beast::flat_buffer tls_buffer_;  // what the TLS detection read (the handshake's)
  std::string rbuf_;                      // bytes read and not yet consumed
  std::size_t scanned_ = 0;               // rbuf_[0, scanned_) holds no '\n'
  boost::asio::steady_timer timer_;       // auth deadline, then the graceful-close deadline
  bool started_ = false;                  // past the TLS handshake (or plaintext): reading lines
  bool plain_nonblocking_ = false;        // plaintext, socket non-blocking: write() tries at once
  bool tls_closing_ = false;              // graceful close over TLS: close_notify next
  bool authorized_ = false;
  bool reading_ = false;
  bool draining_ = false;   // graceful close: FIN sent, reading until the peer closes
  bool peer_done_ = false;  // the client shut down its sending side
};

}  // namespace gpustream::transport
