// RemoteConnection over TCP lines and over WebSocket (Boost.Beast), and URL parsing
// (Boost.URL).
#include "client/remote_connection.hpp"

#include <stdexcept>

#include <openssl/ssl.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include "gpustream/transport/address.hpp"
#include "gpustream/transport/protocol.hpp"
#include "wire/tls_context.hpp"
#include "wire/tls_stream.hpp"

namespace gpustream::transport {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using boost::system::error_code;
using tcp = asio::ip::tcp;

namespace {

[[noreturn]] void bad_url(std::string_view url, const std::string& why) {
  throw std::invalid_argument(
      "invalid server URL '" + redact_url_credentials(url) + "': " + why +
      " (expected tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT/ws or wss://HOST:PORT/ws)");
}

auto on_error(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

/// Over TLS: the client handshake on `s` (already connected), verifying the server's certificate
/// against the context's CAs and `host`. Sets `detail` to OpenSSL's words on a failure.
asio::awaitable<error_code> start_tls(MaybeTlsStream& s, const RemoteUrl& url,
                                      const RemoteConnectionOptions& o, std::string& detail) {
  if (!url.tls) co_return error_code{};
  if (!o.tls) co_return make_error_code(boost::system::errc::protocol_not_supported);
  s.use_tls(o.tls);
  SSL* ssl = s.ssl()->native_handle();
  if (!set_tls_peer_name(ssl, url.host)) {
    detail = "TLS: cannot verify the server name '" + url.host + "'";
    co_return make_error_code(boost::system::errc::invalid_argument);
  }
  error_code ec;
  co_await s.ssl()->async_handshake(asio::ssl::stream_base::client, on_error(ec));
  if (ec) detail = describe_client_tls_failure(ec, ssl);
  co_return ec;
}

/// Resolves and connects `stream`; the common first half of both framings.
asio::awaitable<error_code> resolve_and_connect(tcp::resolver& resolver, beast::tcp_stream& stream,
                                                const RemoteUrl& url) {
  error_code ec;
  const auto results = co_await resolver.async_resolve(url.host, url.port, on_error(ec));
  if (ec) co_return ec;
  co_await stream.async_connect(results, on_error(ec));
  if (ec) co_return ec;
  stream.socket().set_option(tcp::no_delay(true), ec);
  stream.socket().set_option(asio::socket_base::keep_alive(true), ec);
  co_return error_code{};
}

class TcpLineConnection final : public RemoteConnection {
 public:
  TcpLineConnection(const asio::any_io_executor& ex, RemoteUrl url, RemoteConnectionOptions o)
      : url_(std::move(url)), options_(std::move(o)), resolver_(ex), stream_(ex) {}

  asio::awaitable<error_code> open() override {
    auto ec = co_await resolve_and_connect(resolver_, stream_.next_layer(), url_);
    if (ec) co_return ec;
    ec = co_await start_tls(stream_, url_, options_, failure_detail_);
    if (ec || options_.token.empty()) co_return ec;
    const boost::json::object auth{{"type", "auth"}, {"token", options_.token}};
    co_return co_await write(to_compact_json(auth));
  }

  asio::awaitable<error_code> read(std::string_view& message) override {
    rbuf_.erase(0, consumed_);
    consumed_ = 0;
    error_code ec;
    const std::size_t n = co_await asio::async_read_until(
        stream_, asio::dynamic_buffer(rbuf_, options_.max_message_bytes + 1), '\n', on_error(ec));
    if (ec == asio::error::not_found) {
      failure_detail_ =
          "a message longer than " + std::to_string(options_.max_message_bytes) + " bytes";
      co_return make_error_code(boost::system::errc::message_size);
    }
    if (ec) co_return ec;
    consumed_ = n;
    message = std::string_view(rbuf_.data(), n - 1);
    if (!message.empty() && message.back() == '\r') message.remove_suffix(1);
    co_return error_code{};
  }

  asio::awaitable<error_code> write(std::string message) override {
    message.push_back('\n');
    error_code ec;
    co_await asio::async_write(stream_, asio::buffer(message), on_error(ec));
    co_return ec;
  }

  void close(bool /*graceful*/) override {
    // A client has nothing left to flush: closing now is graceful enough.
    error_code ignored;
    resolver_.cancel();
    stream_.next_layer().socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.next_layer().socket().close(ignored);
  }

 private:
  RemoteUrl url_;
  RemoteConnectionOptions options_;
  tcp::resolver resolver_;
  MaybeTlsStream stream_;
  std::string rbuf_;
  std::size_t consumed_ = 0;
};

class WsConnection final : public RemoteConnection {
 public:
  WsConnection(asio::any_io_executor ex, RemoteUrl url, RemoteConnectionOptions o)
      : url_(std::move(url)), options_(std::move(o)), resolver_(ex), ws_(ex) {}

  asio::awaitable<error_code> open() override {
    auto ec = co_await resolve_and_connect(resolver_, beast::get_lowest_layer(ws_), url_);
    if (ec) co_return ec;
    ec = co_await start_tls(ws_.next_layer(), url_, options_, failure_detail_);
    if (ec) co_return ec;
    beast::get_lowest_layer(ws_).expires_never();  // the WebSocket timeouts take over
    websocket::stream_base::timeout t;
    t.handshake_timeout = websocket::stream_base::none();  // the caller's deadline bounds it
    if (options_.idle_timeout.count() > 0) {
      t.idle_timeout = options_.idle_timeout;
      t.keep_alive_pings = true;
    } else {
      t.idle_timeout = websocket::stream_base::none();
      t.keep_alive_pings = false;
    }
    ws_.set_option(t);
    ws_.set_option(
        websocket::stream_base::decorator([token = options_.token](websocket::request_type& req) {
          req.set(beast::http::field::user_agent, kServerName);
          if (!token.empty()) req.set(beast::http::field::authorization, "Bearer " + token);
        }));
    ws_.read_message_max(options_.max_message_bytes);
    websocket::response_type res;
    co_await ws_.async_handshake(res, url_.authority, url_.target, on_error(ec));
    if (ec == websocket::error::upgrade_declined) {
      failure_detail_ =
          "HTTP " + std::to_string(res.result_int()) + " " + std::string(res.reason());
      auto body = res.body();
      while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
      if (!body.empty()) failure_detail_ += ": " + body.substr(0, 200);
    }
    co_return ec;
  }

  asio::awaitable<error_code> read(std::string_view& message) override {
    buf_.consume(buf_.size());
    error_code ec;
    co_await ws_.async_read(buf_, on_error(ec));
    if (ec == websocket::error::closed) {
      const auto& r = ws_.reason();
      failure_detail_ = "closed by the server (code " + std::to_string(r.code);
      if (!r.reason.empty())
        failure_detail_ += ": " + std::string(r.reason.data(), r.reason.size());
      failure_detail_ += ")";
    }
    if (ec) co_return ec;
    message = std::string_view(static_cast<const char*>(buf_.data().data()), buf_.size());
    co_return error_code{};
  }

  asio::awaitable<error_code> write(std::string message) override {
    ws_.text(true);
    error_code ec;
    co_await ws_.async_write(asio::buffer(message), on_error(ec));
    co_return ec;
  }

  void close(bool graceful) override {
    if (closing_) return;
    closing_ = true;
    resolver_.cancel();
    if (!graceful || !ws_.is_open()) {
      error_code ignored;
      beast::get_lowest_layer(ws_).socket().close(ignored);
      return;
    }
    websocket::stream_base::timeout t;
    ws_.get_option(t);
    t.handshake_timeout = options_.close_timeout;  // bounds the close handshake too
    ws_.set_option(t);
    auto self = std::static_pointer_cast<WsConnection>(shared_from_this());
    ws_.async_close(websocket::close_code::normal, [self](error_code) {
      error_code ignored;
      beast::get_lowest_layer(self->ws_).socket().close(ignored);
    });
  }

 private:
  RemoteUrl url_;
  RemoteConnectionOptions options_;
  tcp::resolver resolver_;
  websocket::stream<MaybeTlsStream> ws_;
  beast::flat_buffer buf_;
  bool closing_ = false;
};

}  // namespace

RemoteUrl parse_remote_url(std::string_view text) {
  const auto parsed = boost::urls::parse_uri(boost::core::string_view(text.data(), text.size()));
  if (!parsed) bad_url(text, "not a URL");
  const boost::urls::url_view& u = *parsed;
  RemoteUrl r;
  const auto scheme = u.scheme();
  if (scheme == "tcp" || scheme == "tls") {
    r.scheme = RemoteUrl::Scheme::tcp;
    r.tls = scheme == "tls";
  } else if (scheme == "ws" || scheme == "wss") {
    r.scheme = RemoteUrl::Scheme::ws;
    r.tls = scheme == "wss";
  } else {
    bad_url(text, "unknown scheme '" + std::string(scheme) + "'");
  }
  if (!u.has_authority() || u.host_address().empty()) bad_url(text, "no host");
  if (u.has_userinfo()) bad_url(text, "user:password@ is not supported; use a token");
  if (u.has_fragment()) bad_url(text, "a #fragment is not allowed");
  r.host = u.host_address();
  if (u.has_port()) {
    if (u.port_number() == 0) bad_url(text, "bad port '" + std::string(u.port()) + "'");
    r.port = std::to_string(u.port_number());
  } else if (r.scheme == RemoteUrl::Scheme::ws) {
    r.port = r.tls ? "443" : "80";
  } else {
    bad_url(text, std::string(scheme) + ":// needs a port");
  }
  r.authority = std::string(u.encoded_host_and_port());
  if (!u.has_port()) r.authority = std::string(u.encoded_host());
  if (r.scheme == RemoteUrl::Scheme::tcp) {
    if (!u.encoded_path().empty() && u.encoded_path() != "/")
      bad_url(text, "a " + std::string(scheme) + ":// URL has no path");
    if (u.has_query())
      bad_url(text, "a " + std::string(scheme) + ":// URL has no query; use the token option");
  } else {
    r.target = u.encoded_path().empty() ? std::string("/ws") : std::string(u.encoded_path());
    if (u.has_query()) r.target += "?" + std::string(u.encoded_query());
  }
  return r;
}

std::shared_ptr<RemoteConnection> make_remote_connection(asio::any_io_executor ex,
                                                         const RemoteUrl& url,
                                                         const RemoteConnectionOptions& options) {
  if (url.scheme == RemoteUrl::Scheme::ws)
    return std::make_shared<WsConnection>(std::move(ex), url, options);
  return std::make_shared<TcpLineConnection>(std::move(ex), url, options);
}

}  // namespace gpustream::transport
