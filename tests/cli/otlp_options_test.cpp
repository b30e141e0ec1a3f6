// In-process: the OTLP push flags of `serve` and `fleet` (otlp_options.hpp): the flags and the
// config keys set the same exporter options; bad URLs, headers and compressions are usage errors
// that never repeat a header's value.
#include <gtest/gtest.h>

#include "gpustream/config.hpp"
#include "otlp_options.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::cli {
namespace {

std::string error_of(const OtlpFlags& f) {
  try {
    make_otlp_options(f, "host-a");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(OtlpFlagsCli, NoUrlNoExporter) { EXPECT_FALSE(make_otlp_options(OtlpFlags{}, "host-a")); }

TEST(OtlpFlagsCli, FlagsAndConfigKeysSetTheSameOptions) {
  OtlpFlags by_flag;
  CLI::App app;
  add_flag_rows(app, by_flag, otlp_flag_table());
  // CLI11 parses a vector in reverse order.
  app.parse(std::vector<std::string>{
      "2048", "--otlp-queue-bytes", "none", "--otlp-compression", "3", "--otlp-timeout", "2.5",
      "--otlp-interval", "X-Scope-OrgID: team-a", "--otlp-header", "Authorization: Bearer abc",
      "--otlp-header", "http://127.0.0.1:4318/v1/metrics", "--otlp"});
  OtlpFlags by_key;
  CLI::App app2;
  add_flag_rows(app2, by_key, otlp_flag_table());
  app2.parse(std::vector<std::string>{});
  Config config;
  config.probe_settings.set("serve", "otlp", "http://127.0.0.1:4318/v1/metrics");
  config.probe_settings.set("serve", "otlp_headers",
                            SettingValue::List{std::string("Authorization: Bearer abc"),
                                               std::string("X-Scope-OrgID: team-a")});
  config.probe_settings.set("serve", "otlp_interval_seconds", 2.5);
  config.probe_settings.set("serve", "otlp_timeout_seconds", 3);
  config.probe_settings.set("serve", "otlp_compression", "none");
  config.probe_settings.set("serve", "otlp_queue_bytes", 2048);
  static const auto keys = config_keys_of(otlp_flag_table());
  apply_config_section(config, app2, "serve", {&keys});
  for (const auto* f : {&by_flag, &by_key}) {
    const auto o = make_otlp_options(*f, "host-a");
    ASSERT_TRUE(o);
    EXPECT_EQ(o->url, "http://127.0.0.1:4318/v1/metrics");
    ASSERT_EQ(o->headers.size(), 2u);
    EXPECT_EQ(o->headers[0], (std::pair<std::string, std::string>{"Authorization", "Bearer abc"}));
    EXPECT_EQ(o->headers[1].first, "X-Scope-OrgID");
    EXPECT_EQ(o->interval, std::chrono::milliseconds(2500));
    EXPECT_EQ(o->timeout, std::chrono::milliseconds(3000));
    EXPECT_FALSE(o->gzip);
    EXPECT_EQ(o->queue_bytes, 2048u);
    EXPECT_EQ(o->resource.host_name, "host-a");
    EXPECT_EQ(o->resource.instance_id.rfind("host-a:", 0), 0u);
  }
}

TEST(OtlpFlagsCli, DefaultsAreGzipEveryTenSeconds) {
  const auto o = make_otlp_options({.url = "http://collector:4318/v1/metrics"}, "h");
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->gzip);
  EXPECT_EQ(o->interval, std::chrono::seconds(10));
  EXPECT_EQ(o->timeout, std::chrono::seconds(10));
  EXPECT_EQ(o->queue_bytes, std::size_t{16} << 20);
}

TEST(OtlpFlagsCli, BadInputIsAUsageErrorWithoutTheSecret) {
  EXPECT_NE(error_of({.url = "nats://c:4222"}).find("expected http://"), std::string::npos);
  EXPECT_NE(error_of({.url = "http://c:1/", .compression = "br"}).find("--otlp-compression"),
            std::string::npos);
  const auto bad_header =
      error_of({.url = "http://c:1/", .headers = {"Authorization Bearer topsecret"}});
  EXPECT_NE(bad_header.find("--otlp-header"), std::string::npos) << bad_header;
  EXPECT_EQ(bad_header.find("topsecret"), std::string::npos) << bad_header;
  const auto own = error_of({.url = "http://c:1/", .headers = {"Content-Type: text/plain"}});
  EXPECT_NE(own.find("set by the exporter"), std::string::npos) << own;
  const auto in_url = error_of({.url = "http://user:topsecret@c:1/"});
  EXPECT_EQ(in_url.find("topsecret"), std::string::npos) << in_url;
}

TEST(OtlpFlagsCli, HttpsTakesTheSystemsCasOrTheGivenFiles) {
  const auto o = make_otlp_options({.url = "https://collector/v1/metrics"}, "h");
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->tls_ca_file.empty());  // the system's trusted CAs
  const auto missing =
      error_of({.url = "https://c/v1/metrics", .ca = "/nonexistent/gpustream-ca.pem"});
  EXPECT_NE(missing.find("/nonexistent/gpustream-ca.pem"), std::string::npos) << missing;
  gpustream::test::TempTree tree;
  tree.file("not-pem.crt", "hello\n");
  const auto not_pem = error_of({.url = "https://c/v1/metrics", .ca = tree.path("not-pem.crt")});
  EXPECT_NE(not_pem.find("no PEM certificate"), std::string::npos) << not_pem;
  const auto plain = error_of({.url = "http://c/v1/metrics", .ca = tree.path("not-pem.crt")});
  EXPECT_NE(plain.find("for an https:// --otlp URL"), std::string::npos) << plain;
  const auto half = error_of({.url = "https://c/v1/metrics", .cert = tree.path("not-pem.crt")});
  EXPECT_NE(half.find("--otlp-cert needs --otlp-key"), std::string::npos) << half;
}

TEST(OtlpFlagsCli, TheStartLineNamesHeadersNotTheirValues) {
  const auto o = make_otlp_options(
      {.url = "http://c:4318/v1/metrics", .headers = {"Authorization: Bearer topsecret"}}, "h");
  ASSERT_TRUE(o);
  const auto line = otlp_start_line(*o);
  EXPECT_NE(line.find("http://c:4318/v1/metrics every 10 s (gzip)"), std::string::npos) << line;
  EXPECT_NE(line.find("Authorization"), std::string::npos) << line;
  EXPECT_EQ(line.find("topsecret"), std::string::npos) << line;
}

}  // namespace
}  // namespace gpustream::cli
