// One WebSocket client.
#include "server/ws_session.hpp"

#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>

namespace gpustream::transport {
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using boost::system::error_code;

WsSession::WsSession(std::shared_ptr<ServerCore> core, MaybeTlsStream stream,
                     boost::asio::ip::address peer)
    : StreamSession(std::move(core), ConnKind::websocket, std::move(peer)),
      ws_(std::move(stream)) {}

void WsSession::run(beast::http::request<beast::http::string_body> upgrade) {
  register_self();
  upgrade_ = std::move(upgrade);
  const auto& l = ctx().limits;
  beast::get_lowest_layer(ws_).expires_never();  // the websocket timeouts take over
  websocket::stream_base::timeout t;
  t.handshake_timeout = l.handshake_timeout;
  t.idle_timeout = l.idle_timeout;
  t.keep_alive_pings = true;
  ws_.set_option(t);
  ws_.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(beast::http::field::server, kServerName); }));
  ws_.read_message_max(l.max_message_bytes);
  ws_.auto_fragment(false);
  ws_.async_accept(upgrade_, [self = self()](error_code ec) {
    self->upgrade_ = {};
    if (ec) {
      self->transport_failed();
      return;
    }
    self->accepted_ = true;
    self->open();
    self->do_read();
  });
}

void WsSession::do_read() {
  if (closed()) return;
  ws_.async_read(rbuf_, [self = self()](error_code ec, std::size_t) {
    if (ec) {
      if (ec == websocket::error::message_too_big)
        ServerMetrics::bump(self->ctx().metrics.messages_rejected);
      // Beast has already answered a protocol violation or an oversized message with a close
      // frame; a close from the peer ends here too.
      self->transport_failed();
      return;
    }
    if (!self->ws_.got_text()) {
      ServerMetrics::bump(self->ctx().metrics.messages_rejected);
      self->send_error(kErrBadRequest, "binary frames are not accepted; send JSON text", false);
    } else {
      const auto text = beast::buffers_to_string(self->rbuf_.data());
      self->handle_message(text);
    }
    self->rbuf_.consume(self->rbuf_.size());
    if (!self->closing()) self->do_read();
  });
}

bool WsSession::write(std::shared_ptr<const std::string> msg) {
  ws_.text(true);
  // The message ends in '\n' for TCP; a frame carries the JSON alone.
  const auto* data = msg->data();
  const auto size = msg->size() - (msg->empty() || msg->back() != '\n' ? 0 : 1);
  ws_.async_write(
      boost::asio::buffer(data, size),
      [self = self(), msg = std::move(msg)](error_code ec, std::size_t) { self->write_done(ec); });
  return false;
}

void WsSession::close_transport(bool graceful) {
  if (!graceful || !accepted_) {
    error_code ec;
    beast::get_lowest_layer(ws_).socket().close(ec);
    return;
  }
  // The close handshake is bounded by the handshake timeout set in run().
  const auto code =
      core().stopping() ? websocket::close_code::going_away : websocket::close_code::normal;
  ws_.async_close(code, [self = self()](error_code) {
    error_code ec;
    beast::get_lowest_layer(self->ws_).socket().close(ec);
  });
}

}  // namespace gpustream::transport
