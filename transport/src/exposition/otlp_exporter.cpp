// The OTLP/HTTP exporter: a tick encodes the latest snapshots into the queue; one request at a
// time takes the oldest export to the receiver (Beast HTTP/1.1 over a fresh connection), within
// a timeout; failures are retried with backoff or dropped, all on one strand.
#include <atomic>
#include <deque>
#include <optional>
#include <random>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
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

/// Retry-After as delta-seconds (RFC 9110 §10.2.3); an HTTP-date or garbage: none (backoff).
std::optional<std::chrono::milliseconds> retry_after(std::string_view v) {
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  if (v.empty() || v.size() > 9) return std::nullopt;
  std::int64_t seconds = 0;
  for (const char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    seconds = seconds * 10 + (c - '0');
  }
  return std::chrono::milliseconds(seconds * 1000);
}

bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

OtlpTarget parse_otlp_url(std::string_view url) {
  const auto shown = redact_url_credentials(url);
  if (url.starts_with("https://"))
    throw std::invalid_argument(
        "--otlp: https:// is not supported yet; send to a local collector over http:// (or put "
        "a TLS proxy in front), got '" +
        shown + "'");
  if (!url.starts_with("http://"))
    throw std::invalid_argument("--otlp: expected http://HOST[:PORT]/PATH, got '" + shown + "'");
  auto rest = url.substr(7);
  const auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  OtlpTarget t;
  t.path = slash == std::string_view::npos ? "/v1/metrics" : std::string(rest.substr(slash));
  if (authority.find('@') != std::string_view::npos)
    throw std::invalid_argument(
        "--otlp: credentials in the URL are not sent; use --otlp-header 'Authorization: ...' "
        "(got '" +
        shown + "')");
  std::string_view port = "80";
  if (authority.starts_with("[")) {  // [v6]:port
    const auto close = authority.find(']');
    if (close == std::string_view::npos) throw std::invalid_argument("--otlp: bad IPv6 host");
    t.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') throw std::invalid_argument("--otlp: bad port");
      port = authority.substr(close + 2);
    }
  } else {
    const auto colon = authority.rfind(':');
    t.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (t.host.empty()) throw std::invalid_argument("--otlp: no host in '" + shown + "'");
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos)
    throw std::invalid_argument("--otlp: bad port in '" + shown + "'");
  for (const char c : t.path)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      throw std::invalid_argument("--otlp: bad path in '" + shown + "'");
  t.port = std::string(port);
  return t;
}

std::pair<std::string, std::string> parse_otlp_header(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0)
    throw std::invalid_argument("--otlp-header: expected 'Name: value'");
  const auto name = text.substr(0, colon);
  for (const char c : name)
    if (!token_char(c))
      throw std::invalid_argument("--otlp-header: the name '" + std::string(name) +
                                  "' is not an HTTP field name");
  auto value = text.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  for (const char c : value)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
      throw std::invalid_argument("--otlp-header " + std::string(name) +
                                  ": a control character in the value");
  const auto n = lower(name);
  for (const std::string_view own : {"host", "content-length", "content-type", "content-encoding",
                                     "transfer-encoding", "connection"})
    if (n == own)
      throw std::invalid_argument("--otlp-header: " + std::string(name) +
                                  " is set by the exporter itself");
  return {std::string(name), std::string(value)};
}

class OtlpExporter::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::any_io_executor ex, const SnapshotChannel& channel, OtlpOptions options)
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
    if (stream_) stream_->close();
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
    req_.set(http::field::host,
             target_.port == "80" ? target_.host : target_.host + ":" + target_.port);
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
      if (self->stream_) self->stream_->close();
    });
    resolver_.async_resolve(
        target_.host, target_.port,
        [self = shared_from_this(), gen](error_code ec, const tcp::resolver::results_type& r) {
          if (gen != self->generation_) return;
          if (ec) return self->failed(ec, "resolve");
          self->stream_.emplace(self->strand_);
          self->stream_->async_connect(r, [self, gen](error_code ec2, const tcp::endpoint&) {
            if (gen != self->generation_) return;
            if (ec2) return self->failed(ec2, "connect");
            http::async_write(*self->stream_, self->req_, [self, gen](error_code ec3, std::size_t) {
              if (gen != self->generation_) return;
              if (ec3) return self->failed(ec3, "write");
              self->read_response(gen);
            });
          });
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
          // A body over the limit still has its status.
          if (ec && !(ec == http::error::body_limit && self->parser_->is_header_done()))
            return self->failed(ec, "read");
          self->answered(self->parser_->get());
        });
  }

  void finish() {
    deadline_.cancel();
    if (stream_) {
      error_code ignored;
      stream_->socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream_->close();
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
      if (const auto it = res.find(http::field::retry_after); it != res.end())
        after = retry_after(std::string_view(it->value().data(), it->value().size()));
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

  void failed(error_code ec, const char* step) {
    const bool timed_out = timed_out_;
    finish();
    retry(timed_out ? std::string("no answer within the timeout (") + step + ")"
                    : std::string(step) + ": " + ec.message(),
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
  std::optional<beast::tcp_stream> stream_;
  http::request<http::string_body> req_;
  std::optional<http::response_parser<http::string_body>> parser_;
  beast::flat_buffer buffer_;
  // Read by stats() from any thread:
  std::size_t queue_bytes_limit_ = 0;
  std::atomic<std::uint64_t> ok_{0}, retried_{0}, rejected_{0}, dropped_{0}, dropped_bytes_{0},
      encoded_{0}, encode_ns_{0}, queue_bytes_{0}, queue_exports_{0};
};

OtlpExporter::OtlpExporter(asio::any_io_executor ex, const SnapshotChannel& channel,
                           OtlpOptions options)
    : impl_(std::make_shared<Impl>(std::move(ex), channel, std::move(options))) {}

OtlpExporter::~OtlpExporter() { impl_->stop(); }
void OtlpExporter::start() { impl_->start(); }
void OtlpExporter::stop() { impl_->stop(); }
void OtlpExporter::export_now() { impl_->export_now(); }
OtlpStats OtlpExporter::stats() const { return impl_->stats(); }
const OtlpOptions& OtlpExporter::options() const noexcept { return impl_->options(); }

std::string otlp_metrics(const OtlpStats& s) {
  std::string out =
      "# HELP gpustream_otlp_exports_total OTLP exports by result: ok (delivered), retried (an "
      "attempt failed and is retried), rejected (an answer that is not retried: dropped), "
      "dropped (the queue was full).\n"
      "# TYPE gpustream_otlp_exports_total counter\n";
  for (const auto& [result, v] : {std::pair<const char*, std::uint64_t>{"ok", s.exports_ok},
                                  {"retried", s.exports_retried},
                                  {"rejected", s.exports_rejected},
                                  {"dropped", s.exports_dropped}})
    out += std::string("gpustream_otlp_exports_total{result=\"") + result + "\"} " +
           std::to_string(v) + "\n";
  const auto one = [&](const char* name, const char* type, const char* help, std::string value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + value + "\n";
  };
  one("gpustream_otlp_dropped_bytes_total", "counter",
      "Bytes of the OTLP exports dropped from a full queue.", std::to_string(s.dropped_bytes));
  one("gpustream_otlp_queue_bytes", "gauge",
      "Bytes of the OTLP exports waiting or in flight (compressed).",
      std::to_string(s.queue_bytes));
  one("gpustream_otlp_queue_exports", "gauge", "OTLP exports waiting or in flight.",
      std::to_string(s.queue_exports));
  one("gpustream_otlp_queue_bytes_limit", "gauge",
      "The OTLP queue's bound in bytes (--otlp-queue-bytes).", std::to_string(s.queue_bytes_limit));
  one("gpustream_otlp_encode_seconds_total", "counter",
      "Time spent encoding and compressing OTLP exports.",
      std::to_string(static_cast<double>(s.encode_ns) / 1e9));
  return out;
}

std::string otlp_stats_json(const OtlpStats& s) {
  return "\"exports_ok\":" + std::to_string(s.exports_ok) +
         ",\"exports_retried\":" + std::to_string(s.exports_retried) +
         ",\"exports_rejected\":" + std::to_string(s.exports_rejected) +
         ",\"exports_dropped\":" + std::to_string(s.exports_dropped) +
         ",\"dropped_bytes\":" + std::to_string(s.dropped_bytes) +
         ",\"encoded\":" + std::to_string(s.encoded) +
         ",\"encode_ns\":" + std::to_string(s.encode_ns) +
         ",\"queue_bytes\":" + std::to_string(s.queue_bytes) +
         ",\"queue_exports\":" + std::to_string(s.queue_exports) +
         ",\"queue_bytes_limit\":" + std::to_string(s.queue_bytes_limit);
}

}  // namespace gpustream::transport
