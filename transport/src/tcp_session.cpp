// One TCP client: JSON lines.
#include "tcp_session.hpp"

#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>

namespace gpustream::transport {
namespace asio = boost::asio;
using boost::system::error_code;

TcpSession::TcpSession(std::shared_ptr<Hub> hub, tcp::socket socket)
    : StreamSession(std::move(hub), ConnKind::tcp),
      socket_(std::move(socket)),
      timer_(this->hub().strand()) {}

void TcpSession::run() {
  register_self();
  if (hub().access().token_required()) {
    timer_.expires_after(hub().limits().handshake_timeout);
    timer_.async_wait([self = self()](error_code ec) {
      if (ec || self->authorized_ || self->closing()) return;
      self->hub().stats_counters().requests_unauthorized.fetch_add(1);
      self->send_error(kErrUnauthorized, "no auth message within the handshake timeout", true);
    });
  } else {
    authorized_ = true;
    open();
  }
  do_read();
}

void TcpSession::do_read() {
  if (reading_ || closed()) return;
  reading_ = true;
  // +1: room for the '\n' after a message of exactly max_message_bytes.
  asio::async_read_until(socket_, asio::dynamic_buffer(rbuf_, hub().limits().max_message_bytes + 1),
                         '\n', [self = self()](error_code ec, std::size_t n) {
                           self->reading_ = false;
                           self->on_read(ec, n);
                         });
}

void TcpSession::on_read(const error_code& ec, std::size_t n) {
  if (draining_) {
    // Graceful close: discard what the peer still sends until it closes too.
    if (ec && ec != asio::error::not_found) {
      error_code ignored;
      socket_.close(ignored);
      timer_.cancel();
      return;
    }
    drain();
    return;
  }
  if (ec == asio::error::not_found) {  // the buffer filled up without a newline
    hub().stats_counters().messages_rejected.fetch_add(1);
    rbuf_.clear();
    send_error(kErrTooLarge,
               "message longer than " + std::to_string(hub().limits().max_message_bytes) + " bytes",
               true);
    return;
  }
  if (ec) {
    // EOF: the client closed its sending side; it may still read (e.g. `nc -N`). Keep
    // streaming until a write fails. Anything else: the connection is gone.
    if (ec == asio::error::eof && authorized_ && !closing()) return;
    transport_failed();
    return;
  }
  std::string_view line(rbuf_.data(), n - 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  on_line(line);
  rbuf_.erase(0, n);
  if (!closing()) do_read();
}

void TcpSession::on_line(std::string_view line) {
  if (authorized_) {
    if (!line.empty()) handle_message(line);
    return;
  }
  bool ok = false;
  try {
    const auto m = parse_client_message(line);
    ok = m.kind == ClientMessage::Kind::auth && hub().access().token_matches(m.token);
  } catch (const ProtocolError&) {
  }
  if (!ok) {
    hub().stats_counters().requests_unauthorized.fetch_add(1);
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

void TcpSession::write(std::shared_ptr<const std::string> msg) {
  const auto* data = msg->data();
  const auto size = msg->size();
  asio::async_write(
      socket_, asio::buffer(data, size),
      [self = self(), msg = std::move(msg)](error_code ec, std::size_t) { self->write_done(ec); });
}

void TcpSession::close_transport(bool graceful) {
  error_code ec;
  if (!graceful) {
    socket_.close(ec);
    timer_.cancel();
    return;
  }
  // Send FIN after what is written, then read until the peer closes (closing with unread input
  // would reset the connection and could destroy our last messages), for at most the shutdown
  // timeout.
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) {
    socket_.close(ec);
    return;
  }
  draining_ = true;
  timer_.expires_after(hub().limits().shutdown_timeout);
  timer_.async_wait([self = self()](error_code e) {
    if (e) return;
    error_code ignored;
    self->socket_.close(ignored);
  });
  drain();
}

void TcpSession::drain() {
  if (reading_) return;  // the pending read sees draining_ when it completes
  reading_ = true;
  rbuf_.clear();
  asio::async_read_until(socket_, asio::dynamic_buffer(rbuf_, 4096), '\n',
                         [self = self()](error_code ec, std::size_t n) {
                           self->reading_ = false;
                           self->on_read(ec, n);
                         });
}

}  // namespace gpustream::transport
