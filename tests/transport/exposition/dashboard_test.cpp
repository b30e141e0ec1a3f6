// The dashboard page: built from transport/web/ (not the fallback), self-contained (no
// third-party or remote resources), served at "/". Its behaviour in a browser is tested by
// tests/browser/dashboard.test.mjs.
#include "gpustream/transport/dashboard.hpp"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

std::string read_dashboard_source(const std::string& relative) {
  std::ifstream f(std::string(GPUSTREAM_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Dashboard, IsTheEmbeddedPageWithItsScriptsAndStyleInlined) {
  const std::string page(dashboard_html());
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  for (const char* file :
       {"format.js", "chart.js", "card.js", "events.js", "app.js", "style.css"}) {
    const auto text = read_dashboard_source(std::string("transport/web/") + file);
    ASSERT_FALSE(text.empty()) << file;
    // The build embeds the current sources (a stale or missing embedding fails here).
    EXPECT_NE(page.find(text), std::string::npos) << file << " is not embedded as it is";
    EXPECT_EQ(page.find(std::string("\"") + file + "\""), std::string::npos)
        << file << " is still referenced instead of inlined";
  }
}

TEST(Dashboard, LoadsNothingFromElsewhere) {
  const std::string page(dashboard_html());
  for (const char* remote :
       {"src=\"http", "href=\"http", "src=\"//", "href=\"//", "@import", "url(http"}) {
    EXPECT_EQ(page.find(remote), std::string::npos) << remote;
  }
  EXPECT_NE(page.find("'/ws'"), std::string::npos);  // same origin
  EXPECT_NE(page.find("/api/v1/stats"), std::string::npos);
}

TEST(Dashboard, IsServedAtTheRoot) {
  Fixture f;
  f.start();
  auto r = http_request(f, "/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_EQ(r.body, std::string(dashboard_html()));
}

}  // namespace
}  // namespace gpustream::transport::test
