// MaybeTlsStream: a TCP stream (Beast's tcp_stream, with its timeouts) that speaks TLS or not,
// chosen at run time, behind one AsyncStream interface. The server's sessions and the client's
// connections are written once over it; HTTP (Beast), WebSocket (Beast) and the JSON-lines
// framing work the same over both.
//
//   MaybeTlsStream s(std::move(socket));   // plain
//   s.use_tls(context);                    // from now on TLS (handshake() next)
//
// TLS is Asio's ssl::stream (through Beast's ssl_stream) over the system's OpenSSL. The stream
// keeps the context it was given alive, so a server may swap its context for new connections
// while older ones go on with theirs.
//
// Thread safety: as a socket (one read and one write in flight, on one strand). Cancellation:
// closing the lowest layer (next_layer().socket()) ends what is pending with an error.
#pragma once

#include <memory>
#include <optional>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/beast/websocket/teardown.hpp>

namespace gpustream::transport {

class MaybeTlsStream {
 public:
  using next_layer_type = boost::beast::tcp_stream;
  using executor_type = next_layer_type::executor_type;
  using SslStream = boost::beast::ssl_stream<next_layer_type>;

  explicit MaybeTlsStream(boost::asio::ip::tcp::socket socket) : plain_(std::move(socket)) {}
  explicit MaybeTlsStream(const executor_type& ex) : plain_(ex) {}
  MaybeTlsStream(MaybeTlsStream&&) = default;
  MaybeTlsStream& operator=(MaybeTlsStream&&) = delete;

  /// From now on the stream speaks TLS over the same connection (the handshake is the
  /// caller's: ssl()->async_handshake). Call once, before any TLS I/O.
  void use_tls(std::shared_ptr<boost::asio::ssl::context> context) {
    tls_.emplace(std::move(plain_), *context);
    context_ = std::move(context);
  }
  bool tls() const noexcept { return tls_.has_value(); }
  /// The TLS stream; null when plain.
  SslStream* ssl() noexcept { return tls_ ? &*tls_ : nullptr; }

  next_layer_type& next_layer() noexcept { return tls_ ? tls_->next_layer() : plain_; }
  executor_type get_executor() noexcept { return next_layer().get_executor(); }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const MutableBuffers& b) {
          if (tls_)
            tls_->async_read_some(b, std::move(handler));
          else
            plain_.async_read_some(b, std::move(handler));
        },
        token, buffers);
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const ConstBuffers& b) {
          if (tls_)
            tls_->async_write_some(b, std::move(handler));
          else
            plain_.async_write_some(b, std::move(handler));
        },
        token, buffers);
  }

  // WebSocket's end of a connection (Beast finds these by argument-dependent lookup): over TLS
  // a close_notify, then the TCP close; plain, Beast's TCP teardown.
  friend void teardown(boost::beast::role_type role, MaybeTlsStream& s,
                       boost::system::error_code& ec) {
    if (s.tls_)
      boost::beast::teardown(role, *s.tls_, ec);
    else
      boost::beast::teardown(role, s.plain_, ec);
  }
  template <class Handler>
  friend void async_teardown(boost::beast::role_type role, MaybeTlsStream& s, Handler&& handler) {
    if (s.tls_)
      boost::beast::async_teardown(role, *s.tls_, std::forward<Handler>(handler));
    else
      boost::beast::async_teardown(role, s.plain_, std::forward<Handler>(handler));
  }

 private:
  next_layer_type plain_;  // moved into tls_ by use_tls()
  std::optional<SslStream> tls_;
  std::shared_ptr<boost::asio::ssl::context> context_;
};

}  // namespace gpustream::transport
