// The two framings RemoteSubscriber speaks: TCP (one JSON message per line) and WebSocket (one
// message per text frame), behind one small coroutine interface. Private to the transport.
//
// Thread safety: a connection lives on one strand; every member is called there.
// Cancellation: close() cancels whatever is pending (it completes with an error).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>

namespace gpustream::transport {

/// A parsed remote URL.
struct RemoteUrl {
  enum class Scheme { tcp, ws };
  Scheme scheme = Scheme::tcp;
  bool tls = false;       // tls:// or wss://
  std::string host;       // for the resolver: "127.0.0.1", "::1", "gpu-box"
  std::string port;       // "9400"
  std::string authority;  // for the Host header: "127.0.0.1:9400", "[::1]:9400"
  std::string target;     // WebSocket request target: "/ws", "/ws?token=x"
};

/// Throws std::invalid_argument with a message for the user.
RemoteUrl parse_remote_url(std::string_view url);

struct RemoteConnectionOptions {
  std::string token;
  /// TLS (a tls:// or wss:// URL): the client context (trusted CAs, client certificate). The
  /// server's name or address (RemoteUrl::host) is verified against its certificate.
  std::shared_ptr<boost::asio::ssl::context> tls;
  std::chrono::milliseconds idle_timeout{0};  // WebSocket only; zero: none
  std::chrono::milliseconds close_timeout{1000};
  std::size_t max_message_bytes = 0;
};

class RemoteConnection : public std::enable_shared_from_this<RemoteConnection> {
 public:
  virtual ~RemoteConnection() = default;

  /// Resolves, connects and performs the handshake (WebSocket upgrade; on TCP with a token,
  /// sends the auth line). Not bounded by itself: the caller closes on its own deadline.
  virtual boost::asio::awaitable<boost::system::error_code> open() = 0;
  /// The next message (without the line end). `message` stays valid until the next read.
  virtual boost::asio::awaitable<boost::system::error_code> read(std::string_view& message) = 0;
  /// Sends one message (the line end is added on TCP).
  virtual boost::asio::awaitable<boost::system::error_code> write(std::string message) = 0;
  /// graceful: a WebSocket close frame (bounded by close_timeout; the connection keeps itself
  /// alive until it is done) or a FIN, then close. Otherwise the socket is closed now.
  /// Pending operations complete with an error. Idempotent.
  virtual void close(bool graceful) = 0;

  /// More about the last failure than its error code says (e.g. the HTTP status and body of a
  /// refused WebSocket upgrade); empty when there is nothing more.
  const std::string& failure_detail() const noexcept { return failure_detail_; }

 protected:
  std::string failure_detail_;
};

/// `ex` should be a strand: the connection's handlers run there.
std::shared_ptr<RemoteConnection> make_remote_connection(boost::asio::any_io_executor ex,
                                                         const RemoteUrl& url,
                                                         const RemoteConnectionOptions& options);

}  // namespace gpustream::transport
