// One HTTP/1.1 connection.
#include "server/http_session.hpp"

#include <algorithm>

#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "server/tls_accept.hpp"
#include "server/ws_session.hpp"
#include "wire/gzip.hpp"
#include "wire/request_target.hpp"

namespace gpustream::transport {
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

namespace {
// TLS: how long the close_notify exchange may take before the socket is closed anyway.
constexpr std::chrono::milliseconds kTlsCloseTimeout{1000};

boost::asio::ip::address peer_of(const tcp::socket& s) {
  error_code ec;
  const auto ep = s.remote_endpoint(ec);
  return ec ? boost::asio::ip::address{} : ep.address();
}
}  // namespace

/// A streamed body being written: its source, the gzip stream, the chunk in the making.
struct HttpSession::Streamed {
  std::unique_ptr<BodySource> body;
  std::optional<GzipWriter> gzip;
  http::response<http::empty_body> head;
  std::optional<http::response_serializer<http::empty_body>> serializer;
  std::string text;      // one piece of text before compression (gzip only)
  std::string out;       // the chunk being written
  bool chunked = true;   // HTTP/1.1; false: HTTP/1.0, the raw bytes then a close
  bool ended = false;    // the source gave its last piece (and gzip its trailer)
  bool last = false;     // the last chunk is being written
  std::size_t held = 0;  // counted in ServerMetrics::http_stream_bytes
  /// limits.stream_timeout after the request: every write's timer ends by then at the latest.
  std::chrono::steady_clock::time_point deadline;
};

std::size_t stream_held_bound(bool gzip) noexcept {
  return kStreamChunkBytes + 2 * kStreamPieceBytes +
         (gzip ? 2 * kStreamPieceBytes + GzipWriter::kStateBytes : 0);
}

HttpSession::HttpSession(std::shared_ptr<ServerCore> core, tcp::socket socket, ConnKind kind)
    : Connection(kind, peer_of(socket)), core_(std::move(core)), stream_(std::move(socket)) {}

HttpSession::~HttpSession() {
  if (streamed_) ctx().metrics.http_stream_bytes.fetch_sub(streamed_->held);
  if (response_id_) core_->end_response(response_id_);
  if (registered_) core_->remove(this);
}

void HttpSession::run() {
  registered_ = true;
  ctx().registry.add(this, weak_from_this());
  if (auto tls = core_->tls_context())
    start_tls(std::move(tls));
  else
    do_read();
}

void HttpSession::start_tls(std::shared_ptr<boost::asio::ssl::context> context) {
  // Waiting for a handshake is waiting for a request: this connection may give way when HTTP is
  // full, like one that sends its request slowly.
  idle_since_ = Clock::now();
  handshaking_ = true;
  accept_tls(stream_, buffer_, std::move(context), ctx().limits.handshake_timeout,
             plaintext_http_answer(), "HTTP", ctx().metrics, [self = shared_from_this()](bool ok) {
               self->handshaking_ = false;
               if (ok)
                 self->do_read();
               else
                 self->close();
             });
}

void HttpSession::do_read() {
  const auto& l = ctx().limits;
  parser_.emplace();
  parser_->header_limit(16 * 1024);
  parser_->body_limit(l.max_message_bytes);
  // The first request must come within the handshake timeout; later ones within the idle one.
  stream_.next_layer().expires_after(first_ ? l.handshake_timeout : l.idle_timeout);
  idle_since_ = Clock::now();
  reading_ = true;
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](error_code ec, std::size_t) {
                     self->reading_ = false;
                     self->on_read(ec);
                   });
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
  const auto path = target_path(std::string_view(req.target().data(), req.target().size()));
  if (kind() == ConnKind::http_reserved && !reserved_path(path)) {
    // Admitted beyond the HTTP limit while every slot was busy: for /healthz and /metrics.
    ServerMetrics::bump(ctx().metrics.http_busy);
    auto res = text_response(req, http::status::service_unavailable,
                             "busy: every HTTP connection is in use (this one may ask for "
                             "/healthz and /metrics only)\n");
    res.set(http::field::retry_after, "1");
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
  std::shared_ptr<const std::string> shared;
  std::unique_ptr<BodySource> streamed;
  auto res = handle_http_request(*core_, req, &shared, &streamed);
  if (streamed) {
    send_streamed(std::move(res), std::move(streamed));
    return;
  }
  send(std::move(res), std::move(shared), reserved_path(path));
}

void HttpSession::upgrade(HttpRequest req) {
  done_ = true;
  // The WebSocket session is its own connection from now on.
  ctx().registry.remove(this);
  registered_ = false;
  stream_.next_layer().expires_never();
  std::make_shared<WsSession>(core_, std::move(stream_), peer())->run(std::move(req));
}

void HttpSession::send(HttpResponse res, std::shared_ptr<const std::string> shared, bool exempt) {
  // Bodies of a few kilobytes (errors, /api/v1/stats) are never refused; they still count.
  constexpr std::size_t kSmallBody = 64 * 1024;
  const void* id = shared ? static_cast<const void*>(shared.get()) : nullptr;
  const std::size_t bytes = shared ? shared->size() : res.body().size();
  response_.reset();
  shared_response_.reset();
  shared_body_.reset();
  if (shared) {
    shared_body_ = std::move(shared);
    shared_response_.emplace();
    shared_response_->base() = std::move(res.base());
    shared_response_->body() = {shared_body_->data(), shared_body_->size()};
    shared_response_->prepare_payload();
  } else {
    response_ = std::move(res);
    response_->prepare_payload();
    id = response_->body().data();
  }
  if (!core_->begin_response(id, bytes, exempt || bytes <= kSmallBody)) {
    // Over limits.http_response_bytes: what is being written to others must drain first.
    HttpRequest dummy;
    dummy.version(11);
    auto busy = text_response(dummy, http::status::service_unavailable,
                              "busy: too many response bytes in flight; retry\n");
    busy.set(http::field::retry_after, "1");
    busy.keep_alive(false);
    shared_response_.reset();
    shared_body_.reset();
    response_ = std::move(busy);
    response_->prepare_payload();
    id = response_->body().data();
    core_->begin_response(id, response_->body().size(), true);
  }
  response_id_ = id;
  writing_ = true;
  stream_.next_layer().expires_after(ctx().limits.write_timeout);
  auto done = [self = shared_from_this()](error_code ec, std::size_t) { self->written(ec); };
  if (shared_response_)
    http::async_write(stream_, *shared_response_, std::move(done));
  else
    http::async_write(stream_, *response_, std::move(done));
}

void HttpSession::written(error_code ec) {
  writing_ = false;
  core_->end_response(response_id_);
  response_id_ = nullptr;
  const bool keep =
      response_ ? response_->keep_alive() : shared_response_ && shared_response_->keep_alive();
  response_.reset();
  shared_response_.reset();
  shared_body_.reset();
  if (ec || !keep || core_->stopping()) {
    close();
    return;
  }
  do_read();
}

void HttpSession::send_streamed(HttpResponse head, std::unique_ptr<BodySource> body) {
  streamed_ = std::make_unique<Streamed>();
  auto& st = *streamed_;
  st.body = std::move(body);
  if (head[http::field::content_encoding] == "gzip") {
    st.gzip.emplace(kGzipLevel);
    st.text.reserve(2 * kStreamPieceBytes);
  }
  // Sized once: a chunk, and the piece (or deflater output) that passes it.
  st.out.reserve(kStreamChunkBytes + 2 * kStreamPieceBytes);
  if (!fill()) return;
  if (st.ended) {
    // The whole body fit in the first chunk: an ordinary response with its Content-Length.
    head.body() = std::move(st.out);
    ctx().metrics.http_stream_bytes.fetch_sub(st.held);
    streamed_.reset();
    send(std::move(head), nullptr, true);
    return;
  }
  // Counted in the response budget at what it can hold, not at the body's size (unknown).
  // Like every /metrics answer it is never refused (reserved_path), only counted.
  response_id_ = streamed_.get();
  core_->begin_response(response_id_, stream_held_bound(st.gzip.has_value()), true);
  st.head.base() = std::move(head.base());
  if (st.head.version() >= 11) {
    st.head.chunked(true);
  } else {
    st.chunked = false;  // HTTP/1.0 has no chunks: the body ends with the connection
    st.head.keep_alive(false);
  }
  st.serializer.emplace(st.head);
  writing_ = true;
  st.deadline = std::chrono::steady_clock::now() + ctx().limits.stream_timeout;
  arm_stream_timer();
  http::async_write_header(
      stream_, *st.serializer,
      [self = shared_from_this()](error_code ec, std::size_t) { self->chunk_written(ec); });
}

bool HttpSession::fill() {
  auto& st = *streamed_;
  st.out.clear();
  try {
    while (!st.ended && st.out.size() < kStreamChunkBytes) {
      if (st.gzip) {
        st.text.clear();
        if (st.body->next(st.text, kStreamPieceBytes)) {
          st.gzip->write(st.text, st.out);
        } else {
          st.gzip->finish(st.out);
          st.ended = true;
        }
      } else if (!st.body->next(st.out, kStreamChunkBytes)) {
        st.ended = true;
      }
    }
  } catch (const std::exception&) {
    // Out of memory, or the deflater failed: nothing sensible to send; the client sees the
    // connection end without the last chunk (a truncated body, never a wrong one).
    ServerMetrics::bump(ctx().metrics.messages_rejected);
    end_stream(false);
    return false;
  }
  // What the buffers took from the heap (an empty string's inline capacity is not).
  const auto heap = [](const std::string& s) {
    return s.capacity() > std::string().capacity() ? s.capacity() : 0;
  };
  const std::size_t held = heap(st.text) + heap(st.out) + (st.gzip ? GzipWriter::kStateBytes : 0);
  if (held > st.held)
    ctx().metrics.http_stream_bytes.fetch_add(held - st.held);
  else
    ctx().metrics.http_stream_bytes.fetch_sub(st.held - held);
  st.held = held;
  return true;
}

void HttpSession::arm_stream_timer() {
  const auto stalled = std::chrono::steady_clock::now() + ctx().limits.write_timeout;
  stream_.next_layer().expires_at(std::min(stalled, streamed_->deadline));
}

void HttpSession::write_chunk() {
  auto& st = *streamed_;
  auto done = [self = shared_from_this()](error_code ec, std::size_t) { self->chunk_written(ec); };
  arm_stream_timer();
  if (st.out.empty()) {
    st.last = true;
    if (st.chunked) {
      boost::asio::async_write(stream_, http::make_chunk_last(), std::move(done));
    } else {
      end_stream(true);
    }
    return;
  }
  if (st.chunked)
    boost::asio::async_write(stream_, http::make_chunk(boost::asio::buffer(st.out)),
                             std::move(done));
  else
    boost::asio::async_write(stream_, boost::asio::buffer(st.out), std::move(done));
}

void HttpSession::chunk_written(error_code ec) {
  if (!streamed_) return;
  if (ec) {
    // The scraper went away, stalled past the write timeout or read too slowly to have the
    // body whole by the stream's deadline: everything goes now.
    if (ec == beast::error::timeout && std::chrono::steady_clock::now() >= streamed_->deadline)
      ServerMetrics::bump(ctx().metrics.slow_clients_disconnected);
    end_stream(false);
    return;
  }
  auto& st = *streamed_;
  if (st.last) {
    end_stream(true);
    return;
  }
  // After the header the first chunk is ready; after a chunk, the next is made now.
  if (st.serializer) {
    st.serializer.reset();
  } else if (st.ended) {
    st.out.clear();
  } else if (!fill()) {
    return;
  }
  write_chunk();
}

void HttpSession::end_stream(bool ok) {
  const bool keep = ok && streamed_ && streamed_->chunked && streamed_->head.keep_alive();
  if (streamed_) ctx().metrics.http_stream_bytes.fetch_sub(streamed_->held);
  streamed_.reset();
  writing_ = false;
  if (response_id_) core_->end_response(response_id_);
  response_id_ = nullptr;
  if (!keep || core_->stopping()) {
    close();
    return;
  }
  do_read();
}

void HttpSession::close() {
  if (done_) return;
  done_ = true;
  auto& tcp = stream_.next_layer();
  if (auto* ssl = stream_.ssl();
      ssl && !handshaking_ && !reading_ && !writing_ && tcp.socket().is_open()) {
    // TLS: a close_notify first (clients built on OpenSSL 3 call a bare FIN an "unexpected
    // eof"), then the close once the client answers or after a second at most. Not while a read
    // or write is pending (a forced close): an SSL stream takes one operation of each kind.
    tcp.expires_after(
        std::min<std::chrono::milliseconds>(kTlsCloseTimeout, ctx().limits.write_timeout));
    ssl->async_shutdown([self = shared_from_this()](error_code) {
      error_code ignored;
      self->stream_.next_layer().socket().close(ignored);
    });
    return;
  }
  error_code ec;
  // Over TLS too: a FIN after the last response, without a close_notify (HTTP's own framing
  // says where a response ends).
  stream_.next_layer().socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.next_layer().close();
}

void HttpSession::shutdown(bool graceful) {
  // A response being written is finished (bounded by the write timeout); an idle keep-alive
  // connection is closed now.
  if (graceful && writing_) return;
  close();
}

}  // namespace gpustream::transport
