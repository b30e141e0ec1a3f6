// The OTLP exporter against an in-process OTLP/HTTP receiver (Beast, on the test's io_context):
// delivery with gzip and headers, 429 with Retry-After, a 503 storm against a bounded queue, a
// receiver that hangs, a refused connection, an answer that is not retried; over https://, a
// verified receiver, one whose certificate is refused (unknown CA, another name) and mutual TLS.
#include <deque>
#include <random>

#include <gtest/gtest.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json.hpp>

#include "gpustream/log.hpp"
#include "gpustream/transport/otlp.hpp"
#include "support/log_capture.hpp"
#include "transport/harness.hpp"
#include "transport/tls_pki.hpp"
#include "wire/gzip.hpp"
#include "wire/tls_context.hpp"

namespace gpustream::transport::test {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using boost::system::error_code;

/// A scripted OTLP/HTTP receiver: each request gets the next reply of `script` (then
/// `fallback`): an answer with a status and headers, a hang (the request is read, never
/// answered) or a close. With a TLS context it is an https:// receiver.
class Receiver : public std::enable_shared_from_this<Receiver> {
 public:
  enum class Mode { answer, hang, close };
  struct Reply {
    Mode mode = Mode::answer;
    unsigned status = 200;
    std::map<std::string, std::string> headers;
  };
  struct Request {
    std::string target;
    std::map<std::string, std::string> headers;  // lower-case names
    std::string body;
  };

  explicit Receiver(asio::io_context& io, std::shared_ptr<asio::ssl::context> tls = nullptr)
      : acceptor_(io, {asio::ip::address_v4::loopback(), 0}), tls_(std::move(tls)) {}
  void start() { accept(); }
  void close() {
    error_code ignored;
    acceptor_.close(ignored);
    for (auto& closer : held_) closer();
    held_.clear();
  }
  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  std::string url(const std::string& host = "127.0.0.1") const {
    return std::string(tls_ ? "https://" : "http://") + host + ":" + std::to_string(port()) +
           "/v1/metrics";
  }

  std::deque<Reply> script;
  Reply fallback;
  std::vector<Request> requests;
  int handshakes_failed = 0;  // https://: TLS handshakes that did not complete

 private:
  template <class Stream>
  struct Conn {
    template <class... Args>
    explicit Conn(Args&&... args) : stream(std::forward<Args>(args)...) {}
    Stream stream;
    beast::flat_buffer buffer;
    http::request_parser<http::string_body> parser;
    http::response<http::string_body> res;
    tcp::socket& socket() { return beast::get_lowest_layer(stream); }
  };
  using PlainConn = Conn<tcp::socket>;
  using TlsConn = Conn<asio::ssl::stream<tcp::socket>>;

  void accept() {
    acceptor_.async_accept([self = shared_from_this()](error_code ec, tcp::socket s) {
      if (ec) return;
      if (self->tls_) {
        auto c = std::make_shared<TlsConn>(std::move(s), *self->tls_);
        c->parser.body_limit(std::uint64_t{64} << 20);
        c->stream.async_handshake(asio::ssl::stream_base::server, [self, c](error_code ec2) {
          if (ec2) {
            ++self->handshakes_failed;
            return;
          }
          self->serve(c);
        });
      } else {
        auto c = std::make_shared<PlainConn>(std::move(s));
        c->parser.body_limit(std::uint64_t{64} << 20);
        self->serve(c);
      }
      self->accept();
    });
  }

  template <class C>
  void serve(const std::shared_ptr<C>& c) {
    http::async_read(c->stream, c->buffer, c->parser,
                     [self = shared_from_this(), c](error_code ec, std::size_t) {
                       if (ec) return;
                       const auto& req = c->parser.get();
                       Request r{std::string(req.target()), {}, req.body()};
                       for (const auto& f : req) {
                         std::string name(f.name_string());
                         for (auto& ch : name) ch = static_cast<char>(std::tolower(ch));
                         r.headers[name] = std::string(f.value());
                       }
                       self->requests.push_back(std::move(r));
                       Reply reply = self->fallback;
                       if (!self->script.empty()) {
                         reply = self->script.front();
                         self->script.pop_front();
                       }
                       if (reply.mode == Mode::hang) {
                         self->held_.push_back([c] {
                           error_code ignored;
                           c->socket().close(ignored);
                         });
                         return;
                       }
                       if (reply.mode == Mode::close) {
                         error_code ignored;
                         c->socket().close(ignored);
                         return;
                       }
                       c->res.result(reply.status);
                       c->res.version(11);
                       for (const auto& [k, v] : reply.headers) c->res.set(k, v);
                       c->res.set(http::field::content_type, "application/json");
                       c->res.body() = reply.status == 200 ? "{}" : "{\"message\":\"not now\"}";
                       c->res.keep_alive(false);
                       c->res.prepare_payload();
                       http::async_write(c->stream, c->res, [c](error_code, std::size_t) {
                         error_code ignored;
                         c->socket().shutdown(tcp::socket::shutdown_both, ignored);
                       });
                     });
  }

  tcp::acceptor acceptor_;
  std::shared_ptr<asio::ssl::context> tls_;
  std::vector<std::function<void()>> held_;  // closes a connection left hanging
};

struct OtlpExport : ::testing::Test {
  OtlpExport() : channel(io.get_executor()) {
    receiver = std::make_shared<Receiver>(io);
    receiver->start();
  }
  ~OtlpExport() override {
    exporter.reset();
    receiver->close();
    io.restart();
    io.run_for(20ms);
  }

  bool run_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout = kDeadline) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      if (io.stopped()) io.restart();
      io.run_one_for(10ms);
    }
    return true;
  }

  OtlpOptions options() {
    OtlpOptions o;
    o.url = receiver->url();
    o.interval = std::chrono::hours(1);  // exports are made by export_now()
    o.timeout = 2s;
    o.backoff_initial = 10ms;
    o.backoff_max = 20ms;
    o.resource = {"test-host", "test-host:1", "0.1.0"};
    return o;
  }

  void make(OtlpOptions o) {
    exporter = std::make_unique<OtlpExporter>(io.get_executor(), channel, std::move(o));
    exporter->start();
  }

  OtlpStats stats() const { return exporter->stats(); }

  asio::io_context io;
  SnapshotChannel channel;
  std::shared_ptr<Receiver> receiver;
  std::unique_ptr<OtlpExporter> exporter;
};

TEST_F(OtlpExport, DeliversGzippedJsonWithTheHeaders) {
  auto o = options();
  o.headers = {{"Authorization", "Bearer s3cret"}, {"X-Scope-OrgID", "team-a"}};
  make(o);
  channel.publish(make_snapshot("sim", 2));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_ok == 1; }));
  ASSERT_EQ(receiver->requests.size(), 1u);
  const auto& r = receiver->requests[0];
  EXPECT_EQ(r.target, "/v1/metrics");
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  EXPECT_EQ(r.headers.at("content-encoding"), "gzip");
  EXPECT_EQ(r.headers.at("authorization"), "Bearer s3cret");
  EXPECT_EQ(r.headers.at("x-scope-orgid"), "team-a");
  EXPECT_EQ(r.headers.at("host"), "127.0.0.1:" + std::to_string(receiver->port()));
  const auto body = gunzip(r.body, 64u << 20);
  ASSERT_TRUE(body) << "not a gzip body";
  const auto req = boost::json::parse(*body).as_object();
  EXPECT_EQ(req.at("resourceMetrics").as_array().size(), 1u);
  const auto s = stats();
  EXPECT_EQ(s.encoded, 1u);
  EXPECT_EQ(s.queue_bytes, 0u);
  EXPECT_EQ(s.queue_exports, 0u);
  EXPECT_GT(s.encode_ns, 0u);
  // Nothing new in the channel: the next tick sends nothing.
  exporter->export_now();
  io.restart();
  io.run_for(50ms);
  EXPECT_EQ(receiver->requests.size(), 1u);
  EXPECT_EQ(stats().encoded, 1u);
}

TEST_F(OtlpExport, IdentityWithCompressionNone) {
  auto o = options();
  o.gzip = false;
  make(o);
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_ok == 1; }));
  EXPECT_EQ(receiver->requests[0].headers.count("content-encoding"), 0u);
  EXPECT_TRUE(boost::json::parse(receiver->requests[0].body).is_object());
}

TEST_F(OtlpExport, TicksExportEveryInterval) {
  auto o = options();
  o.interval = 20ms;
  make(o);
  channel.publish(make_snapshot("sim", 1));
  ASSERT_TRUE(run_until([&] { return stats().exports_ok == 1; }));
  channel.publish(make_snapshot("sim", 1));
  ASSERT_TRUE(run_until([&] { return stats().exports_ok == 2; }));
  EXPECT_EQ(receiver->requests.size(), 2u);
}

TEST_F(OtlpExport, HonoursRetryAfterOn429) {
  auto o = options();
  o.backoff_initial = o.backoff_max = std::chrono::hours(1);  // only Retry-After can bring it back
  make(o);
  receiver->script.push_back({Receiver::Mode::answer, 429, {{"Retry-After", "1"}}});
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_ok == 1; }));
  const auto s = stats();
  EXPECT_EQ(s.exports_retried, 1u);
  EXPECT_EQ(s.exports_rejected, 0u);
  ASSERT_EQ(receiver->requests.size(), 2u);
  EXPECT_EQ(receiver->requests[0].body, receiver->requests[1].body);  // the same export again
}

TEST_F(OtlpExport, HonoursRetryAfterAsAnHttpDateAgainstTheAnswersOwnDate) {
  auto o = options();
  o.backoff_initial = o.backoff_max = std::chrono::hours(1);  // only Retry-After can bring it back
  make(o);
  // One second after the receiver's own clock, whatever ours says (2026 or not).
  receiver->script.push_back({Receiver::Mode::answer,
                              503,
                              {{"Date", "Fri, 27 Nov 2026 11:00:00 GMT"},
                               {"Retry-After", "Fri, 27 Nov 2026 11:00:01 GMT"}}});
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_ok == 1; }));
  EXPECT_EQ(stats().exports_retried, 1u);
  ASSERT_EQ(receiver->requests.size(), 2u);
}

TEST_F(OtlpExport, RetriesTheRetryableStatuses) {
  make(options());
  for (const unsigned status : {502u, 503u, 504u, 429u})
    receiver->script.push_back({Receiver::Mode::answer, status, {}});
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_ok == 1; }));
  EXPECT_EQ(stats().exports_retried, 4u);
  EXPECT_EQ(receiver->requests.size(), 5u);
}

TEST_F(OtlpExport, OtherAnswersAreDroppedNotRetried) {
  make(options());
  receiver->script.push_back({Receiver::Mode::answer, 400, {}});
  receiver->script.push_back({Receiver::Mode::answer, 500, {}});
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_rejected == 1; }));
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_rejected == 2; }));
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_ok == 1; }));
  EXPECT_EQ(stats().exports_retried, 0u);
  EXPECT_EQ(receiver->requests.size(), 3u);  // each export once
  EXPECT_EQ(stats().queue_exports, 0u);
}

/// The worst input: big exports (64 devices with long random names, no compression) while the
/// receiver answers 503 to everything. The queue never holds more than its bound in bytes;
/// every export is accounted for (delivered, in the queue, or counted as dropped).
TEST_F(OtlpExport, A503StormKeepsTheQueueWithinItsBytes) {
  auto o = options();
  o.gzip = false;
  o.queue_bytes = 400 * 1024;  // two exports of this size
  o.queue_exports = 1000;
  make(o);
  receiver->fallback = {Receiver::Mode::answer, 503, {}};
  std::mt19937 rng(3);
  std::size_t largest = 0;
  std::uint64_t max_queue = 0;
  for (int i = 0; i < 40; ++i) {
    auto s = make_snapshot("sim", 64);
    for (auto& d : s.devices) {
      d.name.clear();
      for (int k = 0; k < 100; ++k) d.name += static_cast<char>('a' + rng() % 26);
    }
    channel.publish(std::move(s));
    exporter->export_now();
    io.restart();
    io.run_for(5ms);
    max_queue = std::max(max_queue, stats().queue_bytes);
    ASSERT_LE(stats().queue_bytes, o.queue_bytes);
  }
  ASSERT_TRUE(run_until([&] { return receiver->requests.size() >= 10; }));
  for (const auto& r : receiver->requests) largest = std::max(largest, r.body.size());
  const auto s = stats();
  EXPECT_GT(largest, 60'000u);  // each export is big: only a few fit
  EXPECT_LE(max_queue, o.queue_bytes);
  EXPECT_GT(s.exports_dropped, 30u);
  EXPECT_GT(s.dropped_bytes, 30u * 60'000);
  EXPECT_GT(s.exports_retried, 5u);
  EXPECT_EQ(s.exports_ok, 0u);
  EXPECT_EQ(s.encoded, s.exports_dropped + s.queue_exports);
  // The receiver comes back: what is queued (the newest) is delivered.
  receiver->fallback = {};
  const auto queued = s.queue_exports;
  ASSERT_TRUE(run_until([&] { return stats().queue_exports == 0; }));
  EXPECT_EQ(stats().exports_ok, queued);
  EXPECT_EQ(stats().queue_bytes, 0u);
}

TEST_F(OtlpExport, AnExportLargerThanTheQueueIsDroppedAndCounted) {
  auto o = options();
  o.queue_bytes = 1024;
  make(o);
  channel.publish(make_snapshot("sim", 8));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_dropped == 1; }));
  EXPECT_GT(stats().dropped_bytes, 1024u);
  EXPECT_EQ(stats().queue_bytes, 0u);
  io.restart();
  io.run_for(20ms);
  EXPECT_TRUE(receiver->requests.empty());
}

/// Other work on the exporter's io_context: a timer every 5 ms, counted.
struct OtherWork {
  explicit OtherWork(asio::io_context& io) : timer(io) {}
  asio::steady_timer timer;
  int ticks = 0;
  bool stopped = false;
};

void tick_every_5ms(const std::shared_ptr<OtherWork>& w) {
  w->timer.expires_after(5ms);
  w->timer.async_wait([w](error_code ec) {
    if (ec || w->stopped) return;
    ++w->ticks;
    tick_every_5ms(w);
  });
}

TEST_F(OtlpExport, AHangingReceiverTimesOutWithoutStallingOtherWork) {
  auto o = options();
  o.timeout = 1s;
  make(o);
  receiver->script.push_back({Receiver::Mode::hang, 0, {}});
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  // Other work on the same io_context goes on while the request hangs: timers due long before
  // the request's deadline run while it is pending.
  // The ticker is owned by its pending wait, not by this scope: a completion already queued
  // when the test ends (or an ASSERT returns) runs later, in the fixture's destructor.
  auto other = std::make_shared<OtherWork>(io);
  tick_every_5ms(other);
  ASSERT_TRUE(run_until([&] { return receiver->requests.size() == 1 && other->ticks >= 5; }));
  EXPECT_EQ(stats().exports_retried, 0u);  // still waiting for its answer
  ASSERT_TRUE(run_until([&] { return stats().exports_ok == 1; }));
  other->stopped = true;
  other->timer.cancel();
  EXPECT_EQ(stats().exports_retried, 1u);  // the timeout, then delivered on a new connection
  EXPECT_EQ(receiver->requests.size(), 2u);
}

TEST_F(OtlpExport, ARefusedConnectionIsRetriedAndKept) {
  // A port where nothing listens.
  tcp::acceptor probe(io, {asio::ip::address_v4::loopback(), 0});
  const auto port = probe.local_endpoint().port();
  probe.close();
  auto o = options();
  o.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/metrics";
  make(o);
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_retried >= 3; }));
  const auto s = stats();
  EXPECT_EQ(s.exports_ok, 0u);
  EXPECT_EQ(s.exports_dropped, 0u);
  EXPECT_EQ(s.queue_exports, 1u);  // kept for the next attempt
  EXPECT_GT(s.queue_bytes, 0u);
}

TEST_F(OtlpExport, StopCancelsTheRequestAndDropsTheQueue) {
  make(options());
  receiver->fallback = {Receiver::Mode::hang, 0, {}};
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return receiver->requests.size() == 1; }));
  exporter->stop();
  ASSERT_TRUE(run_until([&] { return stats().queue_exports == 0; }));
  EXPECT_EQ(stats().queue_bytes, 0u);
  EXPECT_EQ(stats().exports_ok, 0u);
}

/// An https:// receiver with a certificate for 127.0.0.1 and localhost from a test CA.
struct OtlpExportTls : OtlpExport {
  OtlpExportTls() {
    receiver->close();
    receiver = std::make_shared<Receiver>(io, make_server_tls_context(files()).context);
    receiver->start();
  }
  TlsFiles files() { return {server.cert_file, server.key_file, {}}; }
  OtlpOptions options() {
    auto o = OtlpExport::options();
    o.url = receiver->url();
    o.tls_ca_file = ca.cert_file;
    return o;
  }

  TestPki pki;
  TestPki::Issued ca = pki.ca("gpustream OTLP test CA");
  TestPki::Issued server =
      pki.leaf(ca, {.cn = "collector", .sans = "IP:127.0.0.1,DNS:localhost"}, "collector");
};

TEST_F(OtlpExportTls, DeliversOverHttpsToAVerifiedReceiver) {
  auto o = options();
  o.headers = {{"Authorization", "Bearer s3cret"}};
  make(o);
  channel.publish(make_snapshot("sim", 2));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_ok == 1; }));
  ASSERT_EQ(receiver->requests.size(), 1u);
  const auto& r = receiver->requests[0];
  EXPECT_EQ(r.headers.at("authorization"), "Bearer s3cret");
  EXPECT_EQ(r.headers.at("host"), "127.0.0.1:" + std::to_string(receiver->port()));
  const auto body = gunzip(r.body, 64u << 20);
  ASSERT_TRUE(body) << "not a gzip body";
  EXPECT_EQ(boost::json::parse(*body).as_object().at("resourceMetrics").as_array().size(), 1u);
  // A name the certificate carries works as well as the address.
  channel.publish(make_snapshot("sim", 2));
  exporter.reset();
  o.url = receiver->url("localhost");
  make(o);
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_ok == 1; }));
  EXPECT_EQ(receiver->requests.size(), 2u);
}

TEST_F(OtlpExportTls, ARefusedCertificateIsRetriedAndSaidOnceInOpenSslsWords) {
  gpustream::test::LogCapture log(spdlog::level::warn);
  TestPki other;
  const auto stranger = other.ca("not the receiver's CA");
  auto o = options();
  o.tls_ca_file = stranger.cert_file;
  make(o);
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_retried >= 3; }));
  const auto s = stats();
  EXPECT_EQ(s.exports_ok, 0u);
  EXPECT_EQ(s.queue_exports, 1u);  // kept: the receiver may be fixed
  EXPECT_TRUE(receiver->requests.empty());
  EXPECT_EQ(log.count("certificate verify failed"), 1u) << log.text();
  EXPECT_EQ(log.count("unable to get local issuer certificate"), 1u) << log.text();
}

TEST_F(OtlpExportTls, AReceiverWhoseCertificateNamesAnotherHostIsRefused) {
  gpustream::test::LogCapture log(spdlog::level::warn);
  const auto other = pki.leaf(ca, {.cn = "other", .sans = "DNS:other.example"}, "other");
  receiver->close();
  receiver = std::make_shared<Receiver>(
      io, make_server_tls_context({other.cert_file, other.key_file, {}}).context);
  receiver->start();
  make(options());  // to 127.0.0.1, which the certificate does not name
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_retried >= 1; }));
  EXPECT_EQ(stats().exports_ok, 0u);
  EXPECT_TRUE(receiver->requests.empty());
  EXPECT_NE(log.text().find("certificate verify failed: IP address mismatch"), std::string::npos)
      << log.text();
}

TEST_F(OtlpExportTls, AReceiverSilentInTheHandshakeTimesOutAndIsRetried) {
  // Accepts the connection and never answers the ClientHello: the request's timeout covers the
  // handshake too.
  tcp::acceptor silent(io, {asio::ip::address_v4::loopback(), 0});
  std::vector<tcp::socket> held;
  std::function<void()> accept = [&] {
    silent.async_accept([&](error_code ec, tcp::socket s) {
      if (ec) return;
      held.push_back(std::move(s));
      accept();
    });
  };
  accept();
  auto o = options();
  o.url = "https://127.0.0.1:" + std::to_string(silent.local_endpoint().port()) + "/v1/metrics";
  o.timeout = 200ms;
  make(o);
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_retried >= 2; }));
  EXPECT_GE(held.size(), 2u);  // each attempt a fresh connection, the stale one closed
  const auto s = stats();
  EXPECT_EQ(s.exports_ok, 0u);
  EXPECT_EQ(s.queue_exports, 1u);
  exporter.reset();
  silent.close();
}

/// A receiver that asks for a client certificate from the test CA (mutual TLS).
struct OtlpExportMutualTls : OtlpExportTls {
  TlsFiles files() { return {server.cert_file, server.key_file, ca.cert_file}; }
  OtlpExportMutualTls() {
    receiver->close();
    receiver = std::make_shared<Receiver>(io, make_server_tls_context(files()).context);
    receiver->start();
  }
  TestPki::Issued client = pki.leaf(ca, {.cn = "gpu-node-7"}, "client");
};

TEST_F(OtlpExportMutualTls, PresentsItsCertificateWhenGivenOneAndIsRefusedWithout) {
  gpustream::test::LogCapture log(spdlog::level::warn);
  make(options());  // no client certificate
  channel.publish(make_snapshot("sim", 1));
  exporter->export_now();
  ASSERT_TRUE(
      run_until([&] { return stats().exports_retried >= 1 && receiver->handshakes_failed >= 1; }));
  EXPECT_EQ(stats().exports_ok, 0u);
  EXPECT_TRUE(receiver->requests.empty());
  exporter.reset();
  auto o = options();
  o.tls_cert_file = client.cert_file;
  o.tls_key_file = client.key_file;
  make(o);
  exporter->export_now();
  ASSERT_TRUE(run_until([&] { return stats().exports_ok == 1; }));
  EXPECT_EQ(receiver->requests.size(), 1u);
}

TEST(OtlpTlsCheck, TlsFilesAreCheckedAtStart) {
  TestPki pki;
  const auto ca = pki.ca("ca");
  OtlpOptions o;
  o.url = "https://collector/v1/metrics";
  EXPECT_NO_THROW(check_otlp_tls(o));  // the system's CAs
  o.tls_ca_file = ca.cert_file;
  EXPECT_NO_THROW(check_otlp_tls(o));
  o.tls_ca_file = pki.write("garbage.pem", "not a certificate\n");
  EXPECT_THROW(check_otlp_tls(o), std::invalid_argument);
  o.tls_ca_file = ca.cert_file;
  o.tls_cert_file = ca.cert_file;  // without its key
  EXPECT_THROW(check_otlp_tls(o), std::invalid_argument);
  o.tls_key_file = ca.key_file;
  EXPECT_NO_THROW(check_otlp_tls(o));
  o.url = "http://collector/v1/metrics";  // TLS files for a plain URL
  EXPECT_THROW(check_otlp_tls(o), std::invalid_argument);
  o = {};
  o.url = "https://collector/v1/metrics";
  o.tls_ca_file = "/nonexistent/ca.pem";
  try {
    check_otlp_tls(o);
    ADD_FAILURE() << "a missing CA file accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/ca.pem"), std::string::npos) << e.what();
  }
}

TEST(OtlpMetricsText, FamiliesAndValues) {
  OtlpStats s;
  s.exports_ok = 3;
  s.exports_retried = 2;
  s.exports_rejected = 1;
  s.exports_dropped = 4;
  s.dropped_bytes = 1000;
  s.queue_bytes = 10;
  s.queue_exports = 1;
  s.queue_bytes_limit = 16;
  const auto text = otlp_metrics(s);
  for (const std::string line :
       {"gpustream_otlp_exports_total{result=\"ok\"} 3",
        "gpustream_otlp_exports_total{result=\"retried\"} 2",
        "gpustream_otlp_exports_total{result=\"rejected\"} 1",
        "gpustream_otlp_exports_total{result=\"dropped\"} 4",
        "gpustream_otlp_dropped_bytes_total 1000", "gpustream_otlp_queue_bytes 10",
        "gpustream_otlp_queue_exports 1", "gpustream_otlp_queue_bytes_limit 16"})
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line;
  EXPECT_TRUE(boost::json::parse("{" + otlp_stats_json(s) + "}").is_object());
}

}  // namespace
}  // namespace gpustream::transport::test
