// One HTTP/1.1 connection: requests in order (keep-alive), each answered by http_routes; an
// upgrade to WebSocket on /ws hands the socket to a WsSession.
#pragma once

#include <memory>
#include <optional>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/server_core.hpp"
#include "server/session_registry.hpp"

namespace gpustream::transport {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

/// The answer to one request (never throws; an error status with a short text body).
HttpResponse handle_http_request(ServerCore& core, const HttpRequest& req);
/// A plain-text response with the common headers.
HttpResponse text_response(const HttpRequest& req, boost::beast::http::status status,
                           std::string body,
                           std::string_view content_type = "text/plain; charset=utf-8");

class HttpSession final : public Connection, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(std::shared_ptr<ServerCore> core, tcp::socket socket);
  ~HttpSession() override;
  void run();
  void shutdown(bool graceful) override;
  std::optional<Clock::time_point> idle_since() const override { return idle_since_; }

 private:
  void do_read();
  void on_read(boost::system::error_code ec);
  void upgrade(HttpRequest req);
  void send(HttpResponse res);
  void close();
  const SessionContext& ctx() const noexcept { return core_->context(); }

  std::shared_ptr<ServerCore> core_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::optional<HttpResponse> response_;
  bool registered_ = false;
  bool first_ = true;
  bool writing_ = false;
  bool done_ = false;                            // upgraded or closed: the stream is no longer ours
  std::optional<Clock::time_point> idle_since_;  // waiting for a request since
};

}  // namespace gpustream::transport
