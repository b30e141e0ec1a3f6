// A streamed /metrics (issue #32): a body bigger than one chunk is made while it is written
// (HTTP/1.1 chunks, or HTTP/1.0's close-delimited body), gzip'd when accepted; it arrives whole
// and equal to the exposition of the same state; a reader that does not read pauses it with the
// server's buffers at their fixed bound; a reader that goes away mid-body frees everything; one
// too slow to have the body by limits.stream_timeout is cut off there. Under
// `--metrics-compat dcgm` the dcgm-exporter-named families are streamed the same way.
// Time is driven: the io_context runs until nothing is ready, or until a condition holds.
#include <algorithm>
#include <sstream>

#include <gtest/gtest.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "exposition/prometheus_dcgm.hpp"
#include "gpustream/transport/prometheus.hpp"
#include "gpustream/transport/prometheus_events.hpp"
#include "server/http_session.hpp"
#include "transport/harness.hpp"
#include "wire/gzip.hpp"

namespace gpustream::transport::test {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;

constexpr std::size_t kMaxBody = 256u << 20;

/// A raw HTTP client on the fixture's io_context: the request is written at once (it fits in
/// the kernel's buffer), the answer read only when asked to, all of it until the server closes.
struct RawClient {
  RawClient(Fixture& f, std::optional<int> receive_buffer) : socket(f.io) {
    socket.open(tcp::v4());
    if (receive_buffer) socket.set_option(asio::socket_base::receive_buffer_size(*receive_buffer));
    socket.connect({asio::ip::address_v4::loopback(), f.http_port()});
  }

  void send(const std::string& request) { asio::write(socket, asio::buffer(request)); }

  void start_reading() {
    socket.async_read_some(asio::buffer(buf), [this](boost::system::error_code ec, std::size_t n) {
      received.append(buf.data(), n);
      if (ec) {
        ended = true;
        return;
      }
      start_reading();
    });
  }

  tcp::socket socket;
  std::array<char, 16 * 1024> buf{};
  std::string received;
  bool ended = false;
};

std::string metrics_request(Fixture& f, std::string_view version,
                            std::string_view accept_encoding) {
  std::string r = "GET /metrics HTTP/" + std::string(version) +
                  "\r\nHost: 127.0.0.1:" + std::to_string(f.http_port()) +
                  "\r\nConnection: close\r\n";
  if (!accept_encoding.empty()) r += "Accept-Encoding: " + std::string(accept_encoding) + "\r\n";
  return r + "\r\n";
}

struct Parsed {
  bool complete = false;
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

/// The response in `raw` (everything the server sent before it closed), chunks decoded.
Parsed parse_streamed(const std::string& raw) {
  http::response_parser<http::string_body> p;
  p.body_limit(kMaxBody);
  p.eager(true);
  boost::system::error_code ec;
  std::string_view rest = raw;
  while (!p.is_done() && !rest.empty()) {
    const auto n = p.put(asio::buffer(rest.data(), rest.size()), ec);
    if (ec == http::error::need_more && n == 0) break;
    if (ec && ec != http::error::need_more) return {};
    rest.remove_prefix(n);
  }
  if (!p.is_done()) p.put_eof(ec);  // a close-delimited body ends here
  Parsed r;
  r.complete = p.is_done() && !ec && rest.empty();
  const auto& res = p.get();
  r.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = std::string(field.value());
  }
  r.body = res.body();
  return r;
}

/// /metrics without what changes with every request (the server's counters) and what the
/// route adds after the exposition (the GPU counts).
std::string comparable(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line))
    if (line.find("gpustream_server_") == std::string::npos &&
        line.find("gpustream_gpus_") == std::string::npos)
      out += line + "\n";
  return out;
}

/// The exposition of the fixture's state, made whole.
std::string expected_metrics(Fixture& f) {
  const ServerCounters c;
  return comparable(render_prometheus(f.channel.latest(), {}, &c) +
                    render_event_metrics(f.channel.events().totals(), &c));
}

/// Runs the io_context until nothing is ready several times in a row (a write waiting for a
/// full socket stays waiting), calling `each` after every round.
void run_until_quiet(Fixture& f, const std::function<void()>& each) {
  for (int quiet = 0; quiet < 5;) {
    quiet = f.io.poll() == 0 ? quiet + 1 : 0;
    each();
  }
}

struct StreamedMetrics : ::testing::Test {
  void SetUp() override {
    ServerOptions o;
    o.limits.socket_send_buffer = 8192;  // the kernel holds little: the server's bound shows
    f.start(o);
    for (const std::string probe : {"a", "b", "c"}) f.publish(probe, 700);
    f.run_for(5ms);
    expected = expected_metrics(f);
    ASSERT_GT(expected.size(), 2'000'000u);  // dozens of chunks
  }

  std::uint64_t held() const { return f.server->counters().http_stream_bytes; }

  Fixture f;
  std::string expected;
};

TEST_F(StreamedMetrics, ABodyOfManyChunksArrivesWholeIdentityAndGzip) {
  for (const std::string encoding : {"", "gzip"}) {
    RawClient c(f, std::nullopt);
    c.send(metrics_request(f, "1.1", encoding));
    c.start_reading();
    ASSERT_TRUE(f.run_until([&] { return c.ended; })) << encoding;
    const auto r = parse_streamed(c.received);
    ASSERT_TRUE(r.complete) << encoding;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.headers.at("transfer-encoding"), "chunked") << encoding;
    EXPECT_EQ(r.headers.count("content-length"), 0u) << encoding;
    EXPECT_EQ(r.headers.at("vary"), "Accept-Encoding");
    EXPECT_EQ(r.headers.at("content-type"), kPrometheusContentType);
    std::string body = r.body;
    if (encoding == "gzip") {
      EXPECT_EQ(r.headers.at("content-encoding"), "gzip");
      ASSERT_GT(r.body.size(), kStreamChunkBytes);  // more than one chunk of gzip too
      const auto inflated = gunzip(r.body, kMaxBody);
      ASSERT_TRUE(inflated) << "not one valid gzip member";
      body = *inflated;
      EXPECT_LT(r.body.size() * 5, body.size());
    } else {
      EXPECT_EQ(r.headers.count("content-encoding"), 0u);
    }
    EXPECT_EQ(comparable(body), expected) << encoding;
    EXPECT_NE(body.find("gpustream_server_http_requests_total"), std::string::npos);
    EXPECT_NE(body.find("gpustream_gpus_readable"), std::string::npos);
  }
  EXPECT_TRUE(f.run_until([&] { return held() == 0; }));
}

TEST_F(StreamedMetrics, Http10GetsTheBodyUntilTheConnectionCloses) {
  RawClient c(f, std::nullopt);
  c.send(metrics_request(f, "1.0", "gzip"));
  c.start_reading();
  ASSERT_TRUE(f.run_until([&] { return c.ended; }));
  const auto r = parse_streamed(c.received);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.headers.count("transfer-encoding"), 0u);
  EXPECT_EQ(r.headers.count("content-length"), 0u);
  const auto inflated = gunzip(r.body, kMaxBody);
  ASSERT_TRUE(inflated);
  EXPECT_EQ(comparable(*inflated), expected);
}

TEST_F(StreamedMetrics, ASmallBodyKeepsItsContentLength) {
  Fixture small;
  small.start();
  small.publish("sim", 2);
  small.run_for(5ms);
  const auto r = http_request(small, "/metrics", {{"Accept-Encoding", "gzip"}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.count("transfer-encoding"), 0u);
  EXPECT_EQ(r.headers.at("content-length"), std::to_string(r.body.size()));
  EXPECT_TRUE(gunzip(r.body, kMaxBody));
}

// A scraper that stops reading: the server writes what the socket takes and makes nothing more
// until it does; what it holds stays at the fixed bound (not the body's megabytes), then the
// body arrives whole when the reader reads.
TEST_F(StreamedMetrics, ASlowReaderPausesTheBodyAtTheBound) {
  for (const std::string encoding : {"", "gzip"}) {
    const auto bound = stream_held_bound(!encoding.empty());
    ASSERT_LT(bound * 4, expected.size());
    RawClient c(f, 4096);
    c.send(metrics_request(f, "1.1", encoding));
    std::uint64_t peak = 0;
    const auto sample = [&] { peak = std::max(peak, held()); };
    run_until_quiet(f, sample);
    ASSERT_GT(held(), 0u) << encoding << ": a response is being written, paused";
    EXPECT_LE(peak, bound) << encoding;
    EXPECT_LE(f.server->counters().http_response_bytes, bound) << encoding;
    // Still paused after more rounds: nothing was made while the socket stayed full.
    const auto paused = held();
    run_until_quiet(f, sample);
    EXPECT_EQ(held(), paused);
    c.start_reading();
    ASSERT_TRUE(f.run_until([&] {
      sample();
      return c.ended;
    }));
    EXPECT_LE(peak, bound) << encoding;
    const auto r = parse_streamed(c.received);
    ASSERT_TRUE(r.complete) << encoding;
    const auto body = encoding.empty() ? std::optional(r.body) : gunzip(r.body, kMaxBody);
    ASSERT_TRUE(body) << encoding;
    EXPECT_EQ(comparable(*body), expected) << encoding;
    EXPECT_TRUE(f.run_until([&] { return held() == 0; })) << encoding;
  }
}

TEST_F(StreamedMetrics, AReaderGoneMidBodyFreesEverything) {
  for (const std::string encoding : {"", "gzip"}) {
    RawClient c(f, 4096);
    c.send(metrics_request(f, "1.1", encoding));
    run_until_quiet(f, [] {});
    ASSERT_GT(held(), 0u) << encoding;
    // Unread bytes in its buffer: the close is a reset, the server's pending write fails.
    c.socket.close();
    EXPECT_TRUE(f.run_until([&] {
      const auto counters = f.server->counters();
      return counters.http_stream_bytes == 0 && counters.http_response_bytes == 0 &&
             counters.http_open == 0;
    })) << encoding;
  }
  // And the server still answers.
  EXPECT_EQ(http_request(f, "/healthz").status, 200);
}

// A scraper too slow to have the body whole by limits.stream_timeout (here: one that stops
// reading; its writes are far from the write timeout) is cut off at the deadline and counted as
// a slow client; the body it got is truncated (no last chunk), never wrong; the server frees
// what the response held and answers the next request.
TEST(StreamedMetricsDeadline, AScrapeNotWholeByTheDeadlineIsCutOffAndCounted) {
  Fixture f;
  ServerOptions o;
  o.limits.socket_send_buffer = 8192;
  o.limits.write_timeout = std::chrono::seconds(60);
  o.limits.stream_timeout = std::chrono::milliseconds(300);
  f.start(o);
  for (const std::string probe : {"a", "b", "c"}) f.publish(probe, 700);
  f.run_for(5ms);
  RawClient c(f, 4096);
  c.send(metrics_request(f, "1.1", ""));
  run_until_quiet(f, [] {});
  ASSERT_GT(f.server->counters().http_stream_bytes, 0u) << "the body is paused, being written";
  EXPECT_EQ(f.server->counters().slow_clients_disconnected, 0u);
  ASSERT_TRUE(f.run_until([&] { return f.server->counters().slow_clients_disconnected == 1; }))
      << "the deadline did not end the response";
  c.start_reading();
  ASSERT_TRUE(f.run_until([&] { return c.ended; }));
  const auto r = parse_streamed(c.received);
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.complete) << "a body cut off must not look whole";
  EXPECT_TRUE(f.run_until([&] {
    const auto counters = f.server->counters();
    return counters.http_stream_bytes == 0 && counters.http_response_bytes == 0;
  }));
  EXPECT_EQ(http_request(f, "/healthz").status, 200);
}

// `--metrics-compat dcgm`: the device families under dcgm-exporter's names come first and are
// made as they are sent too (not built whole before the first byte): the body arrives whole,
// equal to the whole-string text, in either encoding, and a reader that does not read pauses
// it with the server's buffers at their bound.
TEST(StreamedMetricsDcgm, TheDcgmFamiliesAreStreamedAsTheyAreSent) {
  Fixture f;
  ServerOptions o;
  o.limits.socket_send_buffer = 8192;
  o.metrics_compat = MetricsCompat::dcgm;
  f.start(o);
  for (const std::string probe : {"a", "b", "c"}) f.publish(probe, 700);
  f.run_for(5ms);
  const ServerCounters counters;
  PrometheusOptions native;
  native.device_families = false;
  const auto latest = f.channel.latest();
  const auto dcgm =
      render_prometheus_dcgm(latest, f.channel.events().recent(), {dcgm_local_hostname()});
  const auto expected = comparable(dcgm + render_prometheus(latest, {}, &counters, native) +
                                   render_event_metrics(f.channel.events().totals(), &counters));
  ASSERT_GT(dcgm.size(), 2'000'000u);  // dozens of chunks of dcgm's families alone
  ASSERT_EQ(expected.find("gpustream_gpu_utilization_ratio"), std::string::npos);
  for (const std::string encoding : {"", "gzip"}) {
    const auto bound = stream_held_bound(!encoding.empty());
    RawClient c(f, 4096);
    c.send(metrics_request(f, "1.1", encoding));
    std::uint64_t peak = 0;
    const auto sample = [&] { peak = std::max(peak, f.server->counters().http_stream_bytes); };
    run_until_quiet(f, sample);
    ASSERT_GT(f.server->counters().http_stream_bytes, 0u) << encoding << ": paused mid-body";
    EXPECT_LE(f.server->counters().http_response_bytes, bound) << encoding;
    c.start_reading();
    ASSERT_TRUE(f.run_until([&] {
      sample();
      return c.ended;
    })) << encoding;
    EXPECT_LE(peak, bound) << encoding;
    const auto r = parse_streamed(c.received);
    ASSERT_TRUE(r.complete) << encoding;
    EXPECT_EQ(r.headers.at("transfer-encoding"), "chunked") << encoding;
    const auto body = encoding.empty() ? std::optional(r.body) : gunzip(r.body, kMaxBody);
    ASSERT_TRUE(body) << encoding;
    EXPECT_TRUE(body->starts_with("# HELP DCGM_FI_")) << encoding;
    EXPECT_EQ(comparable(*body), expected) << encoding;
    EXPECT_TRUE(f.run_until([&] { return f.server->counters().http_stream_bytes == 0; }))
        << encoding;
  }
}

}  // namespace
}  // namespace gpustream::transport::test
