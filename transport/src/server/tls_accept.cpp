// TLS or plaintext, then the handshake.
#include "server/tls_accept.hpp"

#include <algorithm>
#include <array>

#include <boost/asio/write.hpp>
#include <boost/beast/core/detect_ssl.hpp>

#include "gpustream/log.hpp"
#include "gpustream/transport/protocol.hpp"
#include "wire/tls_context.hpp"

namespace gpustream::transport {
namespace asio = boost::asio;
namespace beast = boost::beast;
using boost::system::error_code;

namespace {

// After a plaintext client was answered: how long its unread request may still be drained.
constexpr std::chrono::milliseconds kLinger{1000};

// Once per reason and listener for the process; every failure is counted.
LogOnce g_tls_log;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

void count_failure(ServerMetrics& m, TlsFailure f, const char* listener, const std::string& peer,
                   const std::string& detail) {
  ServerMetrics::bump(m.tls_handshake_failures[static_cast<std::size_t>(f)]);
  const std::string what =
      f == TlsFailure::plaintext
          ? "a client spoke plaintext to the TLS listener; it was told to use TLS (https://, "
            "wss://, tls://) and closed"
          : "a TLS handshake failed (" + std::string(to_string(f)) + ": " + detail + ")";
  if (g_tls_log.first(std::string(listener) + ":" + std::string(to_string(f))))
    logger()->warn(
        "gpustream serve: {} listener: {}, from {} (counted in "
        "gpustream_tls_handshake_failures_total{{reason=\"{}\"}}; said once)",
        listener, what, peer, to_string(f));
  else
    logger()->debug("gpustream serve: {} listener: {}, from {}", listener, what, peer);
}

std::string peer_of(beast::tcp_stream& s) {
  error_code ec;
  const auto ep = s.socket().remote_endpoint(ec);
  return ec ? std::string("?") : ep.address().to_string();
}

/// Writes the answer, sends FIN, and reads until the client closes (within the expiry already
/// set), so the answer is not lost to a reset caused by the request's unread bytes.
void answer_plaintext(beast::tcp_stream& s, std::shared_ptr<std::string> answer,
                      std::chrono::milliseconds linger, std::function<void(bool)> done) {
  asio::async_write(
      s, asio::buffer(*answer),
      [&s, answer, linger, done = std::move(done)](error_code ec, std::size_t) mutable {
        if (ec) {
          s.close();
          done(false);
          return;
        }
        error_code ignored;
        s.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
        // The client reads the answer and closes; one that does not is closed a
        // little later.
        s.expires_after(linger);
        auto sink = std::make_shared<std::array<char, 1024>>();
        struct Drain {
          beast::tcp_stream& s;
          std::shared_ptr<std::array<char, 1024>> sink;
          std::function<void(bool)> done;
          void operator()(error_code e, std::size_t) {
            if (e) {
              s.close();
              done(false);
              return;
            }
            s.async_read_some(asio::buffer(*sink), std::move(*this));
          }
        };
        s.async_read_some(asio::buffer(*sink), Drain{s, sink, std::move(done)});
      });
}

/// The end of the server handshake. (A struct, not a lambda: Boost 1.81's ssl_stream asks the
/// buffered handshake's handler to be callable as void(error_code) too.)
struct Handshaken {
  MaybeTlsStream& stream;
  beast::flat_buffer& buffer;
  ServerMetrics& metrics;
  const char* listener;
  std::string peer;
  std::function<void(bool)> done;

  void operator()(error_code ec) { (*this)(ec, 0); }
  void operator()(error_code ec, std::size_t used) {
    buffer.consume(used);
    if (ec) {
      count_failure(metrics, classify_tls_failure(ec), listener, peer, ec.message());
      stream.next_layer().close();
      done(false);
      return;
    }
    ServerMetrics::bump(metrics.tls_handshakes);
    stream.next_layer().expires_never();
    done(true);
  }
};

}  // namespace

std::string plaintext_http_answer() {
  const std::string body =
      "This port speaks TLS: use https:// (or wss:// for the WebSocket stream).\n";
  return "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

std::string plaintext_tcp_answer() {
  return error_message(kErrBadRequest, "this port speaks TLS: connect with tls://HOST:PORT");
}

void accept_tls(MaybeTlsStream& stream, beast::flat_buffer& buffer,
                std::shared_ptr<asio::ssl::context> context, std::chrono::milliseconds timeout,
                std::string plaintext_answer, const char* listener, ServerMetrics& metrics,
                std::function<void(bool)> done) {
  auto& tcp = stream.next_layer();
  tcp.expires_after(timeout);
  beast::async_detect_ssl(
      tcp, buffer,
      [&stream, &buffer, &metrics, context = std::move(context), listener, timeout,
       peer = peer_of(tcp), answer = std::make_shared<std::string>(std::move(plaintext_answer)),
       done = std::move(done)](error_code ec, bool is_tls) mutable {
        auto& tcp = stream.next_layer();
        if (ec) {
          count_failure(metrics, classify_tls_failure(ec), listener, peer, ec.message());
          tcp.close();
          done(false);
          return;
        }
        if (!is_tls) {
          count_failure(metrics, TlsFailure::plaintext, listener, peer, {});
          answer_plaintext(tcp, std::move(answer), std::min(kLinger, timeout), std::move(done));
          return;
        }
        stream.use_tls(std::move(context));
        stream.ssl()->async_handshake(
            asio::ssl::stream_base::server, buffer.data(),
            Handshaken{stream, buffer, metrics, listener, peer, std::move(done)});
      });
}

}  // namespace gpustream::transport
