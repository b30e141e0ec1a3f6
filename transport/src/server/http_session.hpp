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

/// A response body made in pieces while it is sent (/metrics): next() appends the next pieces
/// to `out`, stopping once it holds `want` bytes (one piece over at most), and returns false
/// when nothing is left. Runs on the session's strand, after the request was answered: what it
/// reads it took when it was made (a consistent state of the server's data).
class BodySource {
 public:
  virtual ~BodySource() = default;
  virtual bool next(std::string& out, std::size_t want) = 0;
};

/// How a streamed response is written: the text in pieces of kStreamPieceBytes, gzip'd when the
/// response says `Content-Encoding: gzip`, sent in chunks of about kStreamChunkBytes (HTTP/1.1
/// chunked; to an HTTP/1.0 client, the raw bytes and a close). The next chunk is made only
/// after the previous one was written, so a slow reader pauses the rendering, and what the
/// session holds is bounded by kStreamHeldBytes, whatever the body's size. A body that ends
/// within the first chunk is sent as an ordinary response with its Content-Length.
inline constexpr std::size_t kStreamPieceBytes = 16 * 1024;
inline constexpr std::size_t kStreamChunkBytes = 64 * 1024;
/// What one streamed response holds at most (ServerCounters::http_stream_bytes): its chunk
/// buffer (a chunk and a piece over), with gzip a piece of text and the deflater's state.
std::size_t stream_held_bound(bool gzip) noexcept;

/// The answer to one request (never throws; an error status with a short text body). With
/// `shared` non-null, a big answer that is the same for every client (/api/v1/snapshot,
/// /api/v1/devices) leaves its body there (ServerCore::shared_body) and the response's empty.
/// With `streamed` non-null, a 200 of /metrics leaves its body there (the response has its
/// headers only: the session writes the body with send_streamed); without, the body is made
/// whole.
HttpResponse handle_http_request(ServerCore& core, const HttpRequest& req,
                                 std::shared_ptr<const std::string>* shared = nullptr,
                                 std::unique_ptr<BodySource>* streamed = nullptr);
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
  /// Writes `head` and then `body` in chunks (see kStreamChunkBytes).
  void send_streamed(HttpResponse head, std::unique_ptr<BodySource> body);
  /// The next chunk of a streamed body into its buffer; false when the body had ended before.
  bool fill();
  /// The write timer of a streamed body: write_timeout from now, or its deadline if sooner.
  void arm_stream_timer();
  void write_chunk();
  void chunk_written(boost::system::error_code ec);
  /// The streamed response is over (`ok`: all of it written): its memory goes, and the
  /// connection reads the next request or closes.
  void end_stream(bool ok);
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
  struct Streamed;                                  // a streamed body being written
  std::unique_ptr<Streamed> streamed_;
  bool registered_ = false;
  bool first_ = true;
  bool writing_ = false;
  bool reading_ = false;                         // a request read is pending
  bool handshaking_ = false;                     // the TLS detection or handshake is pending
  bool done_ = false;                            // upgraded or closed: the stream is no longer ours
  std::optional<Clock::time_point> idle_since_;  // waiting for a request since
};

}  // namespace gpustream::transport
