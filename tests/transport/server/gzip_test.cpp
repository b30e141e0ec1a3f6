// gzip on /metrics and /api/v1/* (docs/protocol.md, "HTTP endpoints"): negotiated with
// Accept-Encoding, the compressed body inflates to exactly the identity body.
#include <sstream>

#include <gtest/gtest.h>

#include "transport/harness.hpp"
#include "wire/gzip.hpp"

namespace gpustream::transport::test {
namespace {

constexpr std::size_t kMax = 64u << 20;

/// /metrics without the server's own counters, which change with every request (this one's
/// included).
std::string without_server_counters(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line))
    if (line.find("gpustream_server_") == std::string::npos) out += line + "\n";
  return out;
}

struct GzipHttp : ::testing::Test {
  void SetUp() override {
    f.start();
    f.channel.publish(make_snapshot("sim", 4, 3, true));
    f.run_for(5ms);
  }
  Fixture f;
};

TEST_F(GzipHttp, SharedApiBodiesInflateToExactlyTheIdentityBody) {
  for (const std::string path : {"/api/v1/snapshot", "/api/v1/devices", "/api/v1/snapshot?node="}) {
    const auto plain = http_request(f, path);
    ASSERT_EQ(plain.status, 200) << path;
    EXPECT_EQ(plain.headers.count("content-encoding"), 0u) << path;
    EXPECT_EQ(plain.headers.at("vary"), "Accept-Encoding") << path;
    const auto z = http_request(f, path, {{"Accept-Encoding", "gzip, deflate"}});
    ASSERT_EQ(z.status, 200) << path;
    EXPECT_EQ(z.headers.at("content-encoding"), "gzip") << path;
    EXPECT_EQ(z.headers.at("vary"), "Accept-Encoding") << path;
    EXPECT_EQ(z.headers.at("content-length"), std::to_string(z.body.size())) << path;
    const auto body = gunzip(z.body, kMax);
    ASSERT_TRUE(body) << path << ": not a valid gzip member";
    EXPECT_EQ(*body, plain.body) << path;
    EXPECT_LT(z.body.size(), plain.body.size()) << path;
  }
}

TEST_F(GzipHttp, MetricsInflateToTheIdentityExposition) {
  const auto plain = http_request(f, "/metrics");
  const auto z = http_request(f, "/metrics", {{"Accept-Encoding", "gzip"}});
  ASSERT_EQ(plain.status, 200);
  ASSERT_EQ(z.status, 200);
  EXPECT_EQ(z.headers.at("content-encoding"), "gzip");
  EXPECT_EQ(z.headers.at("vary"), "Accept-Encoding");
  EXPECT_EQ(z.headers.at("content-type"), plain.headers.at("content-type"));
  const auto body = gunzip(z.body, kMax);
  ASSERT_TRUE(body);
  EXPECT_NE(body->find("gpustream_gpu_utilization_ratio"), std::string::npos);
  EXPECT_EQ(without_server_counters(*body), without_server_counters(plain.body));
  EXPECT_LT(z.body.size() * 3, plain.body.size());  // text of repeated labels: over 3x smaller
}

TEST_F(GzipHttp, SmallApiAnswersToo) {
  for (const std::string path : {"/api/v1/stats", "/api/v1/events", "/api/v1/fit?bytes=1"}) {
    const auto z = http_request(f, path, {{"Accept-Encoding", "gzip"}});
    ASSERT_EQ(z.status, 200) << path;
    EXPECT_EQ(z.headers.at("content-encoding"), "gzip") << path;
    const auto body = gunzip(z.body, kMax);
    ASSERT_TRUE(body) << path;
    EXPECT_EQ(body->front(), '{') << path;
  }
}

TEST_F(GzipHttp, IdentityWithoutGzipOrWithQZero) {
  for (const std::string accept : {"", "identity", "br", "gzip;q=0", "*;q=0", "gzip;q=0, *"}) {
    std::map<std::string, std::string> headers;
    if (!accept.empty()) headers["Accept-Encoding"] = accept;
    for (const std::string path : {"/metrics", "/api/v1/snapshot", "/api/v1/devices"}) {
      const auto r = http_request(f, path, headers);
      ASSERT_EQ(r.status, 200) << path << " " << accept;
      EXPECT_EQ(r.headers.count("content-encoding"), 0u) << path << " " << accept;
      EXPECT_EQ(r.headers.at("vary"), "Accept-Encoding") << path << " " << accept;
      EXPECT_TRUE(r.body.front() == '{' || r.body.front() == '#') << path << " " << accept;
    }
  }
}

TEST_F(GzipHttp, ErrorsAndOtherPathsStayIdentity) {
  const auto bad = http_request(f, "/api/v1/fit?bytes=x", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.headers.count("content-encoding"), 0u);
  const auto page = http_request(f, "/", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.headers.count("content-encoding"), 0u);
  const auto health = http_request(f, "/healthz", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(health.body, "ok\n");
}

}  // namespace
}  // namespace gpustream::transport::test
