// One HTTP/1.1 connection: requests in order (keep-alive), each answered by http_routes; an
// upgrade to WebSocket on /ws hands the socket to a WsSession.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/span_body.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/server_core.hpp"
#include "server/session_registry.hpp"
#include "wire/tls_stream.hpp"

namespace gpustream::transport {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

/// The answer to one request (never throws; an error status with a short text body). With
/// `shared` non-null, a big answer that is the same for every client (/api/v1/snapshot,
/// /api/v1/devices) leaves its body there (ServerCore::shared_body) and the response's empty.
HttpResponse handle_http_request(ServerCore& core, const HttpRequest& req,
                                 std::shared_ptr<const std::string>* shared = nullptr);
/// Paths a reserved connection may ask for (ConnKind::http_reserved); also exempt from
/// limits.http_response_bytes.
bool reserved_path(std::string_view path);
/// A plain-text response with the common headers.
HttpResponse text_response(const HttpRequest& req, boost::beast::http::status status,
                           std::string body,
                           std::string_view content_type = "text/plain; charset=utf-8");

class HttpSession final : public Connection, public std::enable_shared_from_this<HttpSession> {
 public:
  /// kind: ConnKind::http, or ConnKind::http_reserved (only /healthz and /metrics answered).
  HttpSession(std::shared_ptr<ServerCore> core, tcp::socket socket, ConnKind kind);
  ~HttpSession() override;
  void run();
  void shutdown(bool graceful) override;
  std::optional<Clock::time_point> idle_since() const override { return idle_since_; }

 private:
  void start_tls(std::shared_ptr<boost::asio::ssl::context> context);
  void do_read();
  void on_read(boost::system::error_code ec);
  void upgrade(HttpRequest req);
  /// Writes `res` (with `shared` as its body when set), counted in the response budget
  /// unless `exempt`; over the budget, a 503 with Retry-After instead.
  void send(HttpResponse res, std::shared_ptr<const std::string> shared = nullptr,
            bool exempt = true);
  void written(boost::system::error_code ec);
  void close();
  const SessionContext& ctx() const noexcept { return core_->context(); }

  std::shared_ptr<ServerCore> core_;
  MaybeTlsStream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::optional<HttpResponse> response_;
  using SharedResponse = boost::beast::http::response<boost::beast::http::span_body<const char>>;
  std::optional<SharedResponse> shared_response_;
  std::shared_ptr<const std::string> shared_body_;  // shared_response_'s body
  const void* response_id_ = nullptr;               // counted in the core's response budget
  bool registered_ = false;
  bool first_ = true;
  bool writing_ = false;
  bool reading_ = false;                         // a request read is pending
  bool handshaking_ = false;                     // the TLS detection or handshake is pending
  bool done_ = false;                            // upgraded or closed: the stream is no longer ours
  std::optional<Clock::time_point> idle_since_;  // waiting for a request since
};

}  // namespace gpustream::transport
