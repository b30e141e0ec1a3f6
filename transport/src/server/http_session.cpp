// One HTTP/1.1 connection.
#include "server/http_session.hpp"

#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "server/ws_session.hpp"

namespace gpustream::transport {
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

namespace {
boost::asio::ip::address peer_of(const tcp::socket& s) {
  error_code ec;
  const auto ep = s.remote_endpoint(ec);
  return ec ? boost::asio::ip::address{} : ep.address();
}
}  // namespace

HttpSession::HttpSession(std::shared_ptr<ServerCore> core, tcp::socket socket)
    : Connection(ConnKind::http, peer_of(socket)),
      core_(std::move(core)),
      stream_(std::move(socket)) {}

HttpSession::~HttpSession() {
  if (registered_) core_->remove(this);
}

void HttpSession::run() {
  registered_ = true;
  ctx().registry.add(this, weak_from_this());
  do_read();
}

void HttpSession::do_read() {
  const auto& l = ctx().limits;
  parser_.emplace();
  parser_->header_limit(16 * 1024);
  parser_->body_limit(l.max_message_bytes);
  // The first request must come within the handshake timeout; later ones within the idle one.
  stream_.expires_after(first_ ? l.handshake_timeout : l.idle_timeout);
  idle_since_ = Clock::now();
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](error_code ec, std::size_t) { self->on_read(ec); });
}

void HttpSession::on_read(error_code ec) {
  idle_since_.reset();
  if (done_) return;
  if (ec == http::error::body_limit || ec == http::error::header_limit) {
    ServerMetrics::bump(ctx().metrics.messages_rejected);
    HttpRequest dummy;
    auto res = text_response(dummy, http::status::payload_too_large, "request too large\n");
    res.keep_alive(false);
    send(std::move(res));
    return;
  }
  if (ec) {
    // end_of_stream, timeout, reset, or garbage that is not HTTP: just close.
    if (ec == http::error::bad_target || ec == http::error::bad_method ||
        ec == http::error::bad_version || ec == http::error::bad_field ||
        ec == http::error::bad_value || ec == http::error::bad_line_ending)
      ServerMetrics::bump(ctx().metrics.messages_rejected);
    close();
    return;
  }
  first_ = false;
  ServerMetrics::bump(ctx().metrics.http_requests);
  HttpRequest req = parser_->release();
  if (core_->stopping()) {
    auto res = text_response(req, http::status::service_unavailable, "shutting down\n");
    res.keep_alive(false);
    send(std::move(res));
    return;
  }
  if (beast::websocket::is_upgrade(req)) {
    // Checks first (Host, path, Origin, token); a refused upgrade gets a plain HTTP answer.
    auto res = handle_http_request(*core_, req);
    if (res.result() == http::status::switching_protocols) {
      // WebSocket has its own connection slots (and per-address ones).
      const auto admission = ctx().registry.admit(ConnKind::websocket, peer());
      if (admission == SessionRegistry::Admission::ok) {
        upgrade(std::move(req));
        return;
      }
      ServerMetrics::bump(ctx().metrics.connections_rejected);
      res = text_response(req, http::status::service_unavailable,
                          admission == SessionRegistry::Admission::address_full
                              ? "too many connections from this address\n"
                              : "too many connections\n");
    }
    res.keep_alive(false);
    send(std::move(res));
    return;
  }
  send(handle_http_request(*core_, req));
}

void HttpSession::upgrade(HttpRequest req) {
  done_ = true;
  // The WebSocket session is its own connection from now on.
  ctx().registry.remove(this);
  registered_ = false;
  stream_.expires_never();
  std::make_shared<WsSession>(core_, std::move(stream_), peer())->run(std::move(req));
}

void HttpSession::send(HttpResponse res) {
  response_ = std::move(res);
  response_->prepare_payload();
  writing_ = true;
  stream_.expires_after(ctx().limits.write_timeout);
  http::async_write(stream_, *response_, [self = shared_from_this()](error_code ec, std::size_t) {
    self->writing_ = false;
    const bool keep = self->response_ && self->response_->keep_alive();
    self->response_.reset();
    if (ec || !keep || self->core_->stopping()) {
      self->close();
      return;
    }
    self->do_read();
  });
}

void HttpSession::close() {
  if (done_) return;
  done_ = true;
  error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.close();
}

void HttpSession::shutdown(bool graceful) {
  // A response being written is finished (bounded by the write timeout); an idle keep-alive
  // connection is closed now.
  if (graceful && writing_) return;
  close();
}

}  // namespace gpustream::transport
