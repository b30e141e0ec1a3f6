// One TCP client: JSON lines.
#include "server/tcp_session.hpp"

#include <algorithm>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "server/tls_accept.hpp"

namespace gpustream::transport {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {
constexpr std::size_t kReadChunk = 16 * 1024;
}  // namespace

asio::ip::address TcpSession::peer_of(const tcp::socket& s) {
  error_code ec;
  const auto ep = s.remote_endpoint(ec);
  return ec ? asio::ip::address{} : ep.address();
}

TcpSession::TcpSession(std::shared_ptr<ServerCore> core, tcp::socket socket)
    : StreamSession(std::move(core), ConnKind::tcp, peer_of(socket)),
      stream_(std::move(socket)),
      timer_(ctx().strand) {}

void TcpSession::run() {
  register_self();
  auto tls = core().tls_context();
  if (!tls) {
    start();
    return;
  }
  accept_tls(stream_, tls_buffer_, std::move(tls), ctx().limits.handshake_timeout,
             plaintext_tcp_answer(), "TCP", ctx().metrics, [self = self()](bool ok) {
               if (ok && !self->closing())
                 self->start();
               else
                 self->transport_failed();
             });
}

void TcpSession::start() {
  started_ = true;
  if (!stream_.tls()) {
    // write() tries each line at once and must not block the strand on a full socket.
    error_code ec;
    stream_.next_layer().socket().non_blocking(true, ec);
    plain_nonblocking_ = !ec;
  }
  if (ctx().access.token_required()) {
    timer_.expires_after(ctx().limits.handshake_timeout);
    timer_.async_wait([self = self()](error_code ec) {
      if (ec || self->authorized_ || self->closing()) return;
      ServerMetrics::bump(self->ctx().metrics.requests_unauthorized);
      self->send_error(kErrUnauthorized, "no auth message within the handshake timeout", true);
    });
  } else {
    authorized_ = true;
    open();
  }
  do_read();
}

void TcpSession::do_read() {
  if (reading_ || peer_done_ || (closed() && !draining_)) return;
  reading_ = true;
  const auto old = rbuf_.size();
  rbuf_.resize(old + kReadChunk);
  stream_.async_read_some(asio::buffer(rbuf_.data() + old, kReadChunk),
                          [self = self(), old](error_code ec, std::size_t n) {
                            self->reading_ = false;
                            self->rbuf_.resize(old + n);
                            self->on_read(ec, n);
                          });
}

void TcpSession::on_read(const error_code& ec, std::size_t n) {
  if (tls_closing_) {
    // The read was cancelled (or completed) for the close: the close_notify now.
    rbuf_.clear();
    tls_shutdown();
    return;
  }
  if (draining_) {
    // Graceful close: discard what the peer still sends until it closes too.
    rbuf_.clear();
    if (ec) {
      error_code ignored;
      stream_.next_layer().socket().close(ignored);
      timer_.cancel();
      return;
    }
    do_read();
    return;
  }
  if (ec) {
    // EOF: the client shut down its sending side; it may still read (`nc -N`). Keep streaming
    // until a write fails or the server ends the connection. Anything else: it is gone.
    if (ec == asio::error::eof && authorized_ && !closing()) {
      peer_done_ = true;
      rbuf_.clear();
      // No read is pending any more: something must keep the session alive between writes
      // (the registry holds it weakly). The timer waits until the connection is closed.
      timer_.expires_at(boost::asio::steady_timer::time_point::max());
      timer_.async_wait([self = self()](error_code) {});
      return;
    }
    transport_failed();
    return;
  }
  if (n > 0) touched();
  // Every whole line in what was read, in one pass; then drop the consumed prefix once.
  const auto max = ctx().limits.max_message_bytes;
  std::size_t start = 0;
  bool too_long = false;
  for (;;) {
    const auto nl = rbuf_.find('\n', std::max(start, scanned_));
    if (nl == std::string::npos) break;
    std::string_view line(rbuf_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = nl + 1;
    scanned_ = start;
    if (line.size() > max) {
      too_long = true;  // reported below
      break;
    }
    on_line(line);
    if (closing()) return;
  }
  rbuf_.erase(0, start);
  scanned_ = rbuf_.size();
  if (too_long || rbuf_.size() > max + 1) {  // +1: the '\r' of a "\r\n" after a full message
    ServerMetrics::bump(ctx().metrics.messages_rejected);
    rbuf_.clear();
    scanned_ = 0;
    send_error(kErrTooLarge, "message longer than " + std::to_string(max) + " bytes", true);
    return;
  }
  do_read();
}

void TcpSession::on_line(std::string_view line) {
  if (authorized_) {
    if (!line.empty()) handle_message(line);
    return;
  }
  bool ok = false;
  try {
    const auto m = parse_client_message(line);
    ok = m.kind == ClientMessage::Kind::auth && ctx().access.token_matches(m.token);
  } catch (const ProtocolError&) {}
  if (!ok) {
    ServerMetrics::bump(ctx().metrics.requests_unauthorized);
    send_error(kErrUnauthorized,
               "the first line must be {\"type\":\"auth\",\"token\":\"...\"} "
               "with the server's token",
               true);
    return;
  }
  authorized_ = true;
  timer_.cancel();
  open();
}

void TcpSession::tls_shutdown() {
  stream_.ssl()->async_shutdown([self = self()](error_code) {
    error_code ignored;
    self->stream_.next_layer().socket().close(ignored);
    self->timer_.cancel();
  });
}

bool TcpSession::write(std::shared_ptr<const std::string> msg) {
  const auto* data = msg->data();
  const auto size = msg->size();
  std::size_t done = 0;
  if (plain_nonblocking_) {
    // Plaintext: one send(2) now. A socket with room for the line (a client that keeps up)
    // takes it whole, and the line costs that one system call: no asynchronous operation, no
    // completion handler (issue 32: they were a fifth of the io thread's time at 100 clients).
    // The socket is non-blocking (start()): a full one takes part or nothing, and the rest is
    // written asynchronously as before.
    error_code ec;
    done = stream_.next_layer().socket().write_some(asio::buffer(data, size), ec);
    if (!ec && done == size) return true;
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
      // Failed (the peer reset): reported like an asynchronous failure, from the strand.
      asio::post(ctx().strand, [self = self(), ec] { self->write_done(ec); });
      return false;
    }
    if (ec) done = 0;
  }
  asio::async_write(
      stream_, asio::buffer(data + done, size - done),
      [self = self(), msg = std::move(msg)](error_code ec, std::size_t) { self->write_done(ec); });
  return false;
}

void TcpSession::close_transport(bool graceful) {
  error_code ec;
  auto& socket = stream_.next_layer().socket();
  if (!graceful || !started_) {  // !started_: the TLS handshake is pending (it fails now)
    // An abort (a stalled write): reset rather than FIN, so the client sees an error, not a
    // stream that ends inside a line.
    socket.set_option(asio::socket_base::linger(true, 0), ec);
    socket.close(ec);
    timer_.cancel();
    return;
  }
  if (stream_.tls() && !tls_closing_) {
    // TLS: a close_notify after what is written (clients built on OpenSSL 3 call a bare FIN an
    // "unexpected eof"), then the close once the client answers it, within the shutdown
    // timeout. An SSL stream takes one read at a time: a pending read is cancelled first.
    tls_closing_ = true;
    timer_.expires_after(ctx().limits.shutdown_timeout);
    timer_.async_wait([self = self()](error_code e) {
      if (e) return;
      error_code ignored;
      self->stream_.next_layer().socket().close(ignored);
    });
    if (reading_)
      socket.cancel(ec);  // on_read starts the shutdown
    else
      tls_shutdown();
    return;
  }
  // Send FIN after what is written, then read until the peer closes (closing with unread input
  // would reset the connection and could destroy our last messages), for at most the shutdown
  // timeout. Over TLS too: a FIN without a close_notify (the lines say where messages end).
  socket.shutdown(tcp::socket::shutdown_send, ec);
  if (ec || peer_done_) {
    socket.close(ec);
    timer_.cancel();
    return;
  }
  draining_ = true;
  timer_.expires_after(ctx().limits.shutdown_timeout);
  timer_.async_wait([self = self()](error_code e) {
    if (e) return;
    error_code ignored;
    self->stream_.next_layer().socket().close(ignored);
  });
  rbuf_.clear();
  do_read();
}

}  // namespace gpustream::transport
