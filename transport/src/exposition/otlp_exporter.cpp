// The OTLP/HTTP exporter: a tick encodes the latest snapshots into the queue; one request at a
// time takes the oldest export to the receiver (Beast HTTP/1.1 over a fresh connection, TLS for
// https://), within a timeout; failures are retried with backoff or dropped, all on one strand.
#include <atomic>
#include <deque>
#include <optional>
#include <random>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "gpustream/log.hpp"
#include "gpustream/transport/address.hpp"
#include "gpustream/transport/otlp.hpp"
#include "gpustream/transport/protocol.hpp"
#include "wire/gzip.hpp"
#include "wire/http_date.hpp"
#include "wire/tls_context.hpp"
#include "wire/tls_stream.hpp"

namespace gpustream::transport {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t kMaxResponseBytes = 64 * 1024;  // a receiver's answer is read up to this

bool retryable(unsigned status) {
  return status == 429 || status == 502 || status == 503 || status == 504;
}

/// Retry-After (RFC 9110 §10.2.3): delta-seconds, or an HTTP-date taken relative to the
/// response's own Date (the receiver's clock; ours when it sent none or an invalid one), a date
/// in the past being "now". Garbage: none (the backoff applies).
std::optional<std::chrono::milliseconds> retry_after(std::string_view v,
                                                     std::optional<std::string_view> date) {
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  if (v.empty()) return std::nullopt;
  if (v.front() < '0' || v.front() > '9') {
    const auto when = parse_http_date(v);
    if (!when) return std::nullopt;
    std::optional<std::int64_t> now;
    if (date) now = parse_http_date(*date);
    if (!now)
      now = std::chrono::duration_cast<std::chrono::seconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
    return std::chrono::milliseconds(std::max<std::int64_t>(0, *when - *now) * 1000);
  }
  if (v.size() > 9) return std::nullopt;
  std::int64_t seconds = 0;
  for (const char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    seconds = seconds * 10 + (c - '0');
  }
  return std::chrono::milliseconds(seconds * 1000);
}

}  // namespace

class OtlpExporter::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(const asio::any_io_executor& ex, const SnapshotChannel& channel, OtlpOptions options)
      : strand_(asio::make_strand(ex)),
        channel_(channel),
        options_(std::move(options)),
        target_(parse_otlp_url(options_.url)),
        tick_(strand_),
        retry_(strand_),
        deadline_(strand_),
        resolver_(strand_),
        rng_(std::random_device{}()) {
    queue_bytes_limit_ = options_.queue_bytes;
    if (target_.tls)
      tls_ = make_client_tls_context(options_.tls_ca_file, options_.tls_cert_file,
                                     options_.tls_key_file);
  }

  void start() {
    asio::post(strand_, [self = shared_from_this()] {
      self->stopped_ = false;
      self->tick_.expires_after(self->options_.interval);
      self->arm_tick();
    });
  }

  void stop() {
    asio::post(strand_, [self = shared_from_this()] { self->do_stop(); });
  }

  void export_now() {
    asio::post(strand_, [self = shared_from_this()] {
      if (self->stopped_) return;
      self->enqueue_export();
      self->send_next();
    });
  }

  OtlpStats stats() const {
    OtlpStats s;
    s.exports_ok = ok_.load();
    s.exports_retried = retried_.load();
    s.exports_rejected = rejected_.load();
    s.exports_dropped = dropped_.load();
    s.dropped_bytes = dropped_bytes_.load();
    s.encoded = encoded_.load();
    s.encode_ns = encode_ns_.load();
    s.queue_bytes = queue_bytes_.load();
    s.queue_exports = queue_exports_.load();
    s.queue_bytes_limit = queue_bytes_limit_;
    return s;
  }

  const OtlpOptions& options() const noexcept { return options_; }

 private:
  void arm_tick() {
    tick_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->stopped_) return;
      self->enqueue_export();
      self->send_next();
      // Drift-free: the next tick one interval after this one was due (skipping missed ones).
      const auto now = std::chrono::steady_clock::now();
      auto next = self->tick_.expiry() + self->options_.interval;
      if (next < now) next = now + self->options_.interval;
      self->tick_.expires_at(next);
      self->arm_tick();
    });
  }

  void do_stop() {
    stopped_ = true;
    ++generation_;
    tick_.cancel();
    retry_.cancel();
    deadline_.cancel();
    resolver_.cancel();
    if (stream_) stream_->next_layer().close();
    in_flight_ = false;
    waiting_ = false;
    queue_.clear();
    current_.clear();
    set_queue(0);
  }

  void set_queue(std::size_t bytes) {
    bytes_ = bytes;
    queue_bytes_.store(bytes);
    queue_exports_.store(queue_.size() + (in_flight_ ? 1 : 0));
  }

  void drop(std::size_t bytes, const char* why) {
    dropped_.fetch_add(1);
    dropped_bytes_.fetch_add(bytes);
    if (log_.first(std::string("drop:") + why))
      logger()->warn(
          "otlp: an export was dropped ({}); dropped exports are counted in "
          "gpustream_otlp_exports_total{{result=\"dropped\"}}",
          why);
  }

  void enqueue_export() {
    const auto t0 = std::chrono::steady_clock::now();
    auto json = encode_otlp_metrics(channel_.latest(), options_.resource, state_);
    if (json.empty()) return;
    std::string body = options_.gzip ? gzip_compress(json) : std::move(json);
    encode_ns_.fetch_add(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count()));
    encoded_.fetch_add(1);
    // The bound counts the export in flight too; it is never dropped mid-request, so when it
    // alone leaves no room the new export is the one dropped.
    if (body.size() > queue_bytes_limit_) {
      drop(body.size(), "one export is larger than --otlp-queue-bytes");
      return;
    }
    std::size_t bytes = bytes_;
    while (!queue_.empty() && (bytes + body.size() > queue_bytes_limit_ ||
                               queue_.size() + 1 + (in_flight_ ? 1 : 0) > options_.queue_exports)) {
      bytes -= queue_.front().size();
      drop(queue_.front().size(), "queue full: the oldest goes");
      queue_.pop_front();
    }
    if (bytes + body.size() > queue_bytes_limit_ ||
        queue_.size() + 1 + (in_flight_ ? 1 : 0) > options_.queue_exports) {
      drop(body.size(), "no room beside the export being sent");
      set_queue(bytes);
      return;
    }
    bytes += body.size();
    queue_.push_back(std::move(body));
    set_queue(bytes);
  }

  void send_next() {
    if (stopped_ || in_flight_ || waiting_ || queue_.empty()) return;
    current_ = std::move(queue_.front());
    queue_.pop_front();
    in_flight_ = true;
    set_queue(bytes_);
    const auto gen = ++generation_;
    req_ = {};
    req_.method(http::verb::post);
    req_.target(target_.path);
    req_.version(11);
    const bool default_port = target_.port == (target_.tls ? "443" : "80");
    const bool v6 = target_.host.find(':') != std::string::npos;
    const std::string host = v6 ? "[" + target_.host + "]" : target_.host;
    req_.set(http::field::host, default_port ? host : host + ":" + target_.port);
    req_.set(http::field::user_agent, kServerName);
    req_.set(http::field::content_type, "application/json");
    if (options_.gzip) req_.set(http::field::content_encoding, "gzip");
    for (const auto& [name, value] : options_.headers) req_.set(name, value);
    req_.keep_alive(false);
    req_.body() = current_;
    req_.prepare_payload();
    timed_out_ = false;
    deadline_.expires_after(options_.timeout);
    deadline_.async_wait([self = shared_from_this(), gen](error_code ec) {
      if (ec || gen != self->generation_ || !self->in_flight_) return;
      self->timed_out_ = true;
      self->resolver_.cancel();
      if (self->stream_) self->stream_->next_layer().close();
    });
    resolver_.async_resolve(
        target_.host, target_.port,
        [self = shared_from_this(), gen](error_code ec, const tcp::resolver::results_type& r) {
          if (gen != self->generation_) return;
          if (ec) return self->failed(ec, "resolve");
          self->stream_.emplace(self->strand_);
          self->stream_->next_layer().async_connect(
              r, [self, gen](error_code ec2, const tcp::endpoint&) {
                if (gen != self->generation_) return;
                if (ec2) return self->failed(ec2, "connect");
                if (self->tls_) return self->handshake(gen);
                self->write_request(gen);
              });
        });
  }

  /// https://: TLS over the connection, the receiver's certificate verified against the CAs and
  /// the URL's host (SNI sent for a name).
  void handshake(std::uint64_t gen) {
    stream_->use_tls(tls_);
    SSL* ssl = stream_->ssl()->native_handle();
    if (!set_tls_peer_name(ssl, target_.host))
      return failed(make_error_code(boost::system::errc::invalid_argument), "TLS",
                    "TLS: cannot verify the receiver's name '" + target_.host + "'");
    stream_->ssl()->async_handshake(asio::ssl::stream_base::client, [self = shared_from_this(),
                                                                     gen](error_code ec) {
      if (gen != self->generation_) return;
      if (ec)
        return self->failed(ec, "TLS handshake",
                            describe_client_tls_failure(ec, self->stream_->ssl()->native_handle()));
      self->write_request(gen);
    });
  }

  void write_request(std::uint64_t gen) {
    http::async_write(*stream_, req_, [self = shared_from_this(), gen](error_code ec, std::size_t) {
      if (gen != self->generation_) return;
      if (ec) return self->failed(ec, "write");
      self->read_response(gen);
    });
  }

  void read_response(std::uint64_t gen) {
    parser_.emplace();
    parser_->header_limit(16 * 1024);
    parser_->body_limit(kMaxResponseBytes);
    buffer_.clear();
    http::async_read(
        *stream_, buffer_, *parser_, [self = shared_from_this(), gen](error_code ec, std::size_t) {
          if (gen != self->generation_) return;
          // A body over the limit still has its status; so has an answer whose TLS connection
          // was closed without a close_notify (common among receivers that close after it).
          const bool answered =
              self->parser_->is_done() ||
              ((ec == http::error::body_limit || ec == asio::ssl::error::stream_truncated) &&
               self->parser_->is_header_done());
          if (ec && !answered) return self->failed(ec, "read");
          self->answered(self->parser_->get());
        });
  }

  void finish() {
    deadline_.cancel();
    if (stream_) {
      error_code ignored;
      stream_->next_layer().socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream_->next_layer().close();
      stream_.reset();
    }
    in_flight_ = false;
  }

  void answered(const http::response<http::string_body>& res) {
    const unsigned status = res.result_int();
    finish();
    if (status >= 200 && status < 300) {
      ok_.fetch_add(1);
      attempt_ = 0;
      set_queue(bytes_ - current_.size());
      current_.clear();
      log_.clear_all();
      return send_next();
    }
    if (retryable(status)) {
      std::optional<std::chrono::milliseconds> after;
      if (const auto it = res.find(http::field::retry_after); it != res.end()) {
        std::optional<std::string_view> date;
        if (const auto d = res.find(http::field::date); d != res.end())
          date = std::string_view(d->value().data(), d->value().size());
        after = retry_after(std::string_view(it->value().data(), it->value().size()), date);
      }
      return retry("the receiver answered " + std::to_string(status), after);
    }
    rejected_.fetch_add(1);
    attempt_ = 0;
    if (log_.first("status:" + std::to_string(status))) {
      std::string said = res.body().substr(0, 200);
      for (auto& c : said)
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
      logger()->warn(
          "otlp: {} answered {} (not retried; the export is dropped and counted in "
          "gpustream_otlp_exports_total{{result=\"rejected\"}}): {}",
          redact_url_credentials(options_.url), status, said);
    }
    set_queue(bytes_ - current_.size());
    current_.clear();
    send_next();
  }

  /// `said`: the failure in words better than the error code's (OpenSSL's, for TLS).
  void failed(error_code ec, const char* step, const std::string& said = {}) {
    const bool timed_out = timed_out_;
    finish();
    retry(timed_out      ? std::string("no answer within the timeout (") + step + ")"
          : said.empty() ? std::string(step) + ": " + ec.message()
                         : said,
          std::nullopt);
  }

  /// The export goes back to the front of the queue; the next attempt after Retry-After or the
  /// backoff (doubling from backoff_initial to backoff_max, a random half of it as jitter).
  void retry(const std::string& why, std::optional<std::chrono::milliseconds> after) {
    retried_.fetch_add(1);
    if (log_.first("retry"))
      logger()->warn(
          "otlp: {}: {}; retrying with backoff (counted in "
          "gpustream_otlp_exports_total{{result=\"retried\"}}, said once until an "
          "export is delivered)",
          redact_url_credentials(options_.url), why);
    queue_.push_front(std::move(current_));
    current_.clear();
    set_queue(bytes_);
    std::chrono::milliseconds delay;
    if (after) {
      delay = std::min(*after, options_.retry_after_max);
    } else {
      auto d = options_.backoff_initial;
      for (unsigned i = 0; i < attempt_ && d < options_.backoff_max; ++i) d *= 2;
      d = std::min(d, options_.backoff_max);
      std::uniform_int_distribution<std::int64_t> jitter(d.count() / 2, d.count());
      delay = std::chrono::milliseconds(jitter(rng_));
    }
    ++attempt_;
    waiting_ = true;
    retry_.expires_after(delay);
    retry_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->stopped_) return;
      self->waiting_ = false;
      self->send_next();
    });
  }

  asio::strand<asio::any_io_executor> strand_;
  const SnapshotChannel& channel_;
  const OtlpOptions options_;
  const OtlpTarget target_;
  asio::steady_timer tick_;
  asio::steady_timer retry_;
  asio::steady_timer deadline_;
  tcp::resolver resolver_;
  std::mt19937_64 rng_;
  std::shared_ptr<asio::ssl::context> tls_;  // https:// only
  OtlpEncoderState state_;
  LogOnce log_;
  // On the strand:
  std::deque<std::string> queue_;  // waiting exports, oldest first
  std::string current_;            // the export in flight (or about to be retried)
  std::size_t bytes_ = 0;          // queue_ + current_
  bool stopped_ = true;
  bool in_flight_ = false;
  bool waiting_ = false;  // a retry is scheduled
  bool timed_out_ = false;
  unsigned attempt_ = 0;
  std::uint64_t generation_ = 0;  // a completion of an older request is ignored
  std::optional<MaybeTlsStream> stream_;
  http::request<http::string_body> req_;
  std::optional<http::response_parser<http::string_body>> parser_;
  beast::flat_buffer buffer_;
  // Read by stats() from any thread:
  std::size_t queue_bytes_limit_ = 0;
  std::atomic<std::uint64_t> ok_{0}, retried_{0}, rejected_{0}, dropped_{0}, dropped_bytes_{0},
      encoded_{0}, encode_ns_{0}, queue_bytes_{0}, queue_exports_{0};
};

void check_otlp_tls(const OtlpOptions& options) {
  const auto target = parse_otlp_url(options.url);
  const bool files = !options.tls_ca_file.empty() || !options.tls_cert_file.empty() ||
                     !options.tls_key_file.empty();
  if (!target.tls) {
    if (files)
      throw std::invalid_argument(
          "--otlp-ca, --otlp-cert and --otlp-key are for an https:// --otlp URL, got '" +
          redact_url_credentials(options.url) + "'");
    return;
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty())
    throw std::invalid_argument(options.tls_cert_file.empty() ? "--otlp-key needs --otlp-cert"
                                                              : "--otlp-cert needs --otlp-key");
  try {
    (void)make_client_tls_context(options.tls_ca_file, options.tls_cert_file, options.tls_key_file);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("--otlp: ") + e.what());
  }
}

OtlpExporter::OtlpExporter(const asio::any_io_executor& ex, const SnapshotChannel& channel,
                           OtlpOptions options)
    : impl_(std::make_shared<Impl>(ex, channel, std::move(options))) {}

OtlpExporter::~OtlpExporter() { impl_->stop(); }
void OtlpExporter::start() { impl_->start(); }
void OtlpExporter::stop() { impl_->stop(); }
void OtlpExporter::export_now() { impl_->export_now(); }
OtlpStats OtlpExporter::stats() const { return impl_->stats(); }
const OtlpOptions& OtlpExporter::options() const noexcept { return impl_->options(); }

}  // namespace gpustream::transport
