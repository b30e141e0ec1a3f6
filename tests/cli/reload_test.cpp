// SIGHUP's reload registry (cli/reload.hpp): a config that cannot be loaded changes nothing and
// is said once while it repeats; each reloader's outcome is counted and said; restart-only keys
// that changed are named; the log reloader applies the file's level unless a flag set it.
#include "reload.hpp"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "gpustream/log.hpp"

namespace gpustream::cli {
namespace {

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class Reload : public ::testing::Test {
 protected:
  void SetUp() override {
    level_ = log_level();
    format_ = log_format();
    set_log_format(LogFormat::text);
  }
  void TearDown() override {
    set_log_level(level_);
    set_log_format(format_);
  }
  LogLevel level_ = LogLevel::warn;
  LogFormat format_ = LogFormat::text;
};

TEST(ChangedConfigKeys, NamesTopLevelAndSectionKeys) {
  Config a;
  a.probe_settings.set("serve", "listen", "127.0.0.1:9400");
  a.probe_settings.set("serve", "token_file", "/a");
  Config b = a;
  EXPECT_TRUE(changed_config_keys(a, b).empty());
  b.interval = std::chrono::milliseconds{500};
  b.log_level = "debug";
  b.probe_settings.set("serve", "listen", "0.0.0.0:9400");            // changed
  b.probe_settings.set("serve", "max_connections", std::int64_t{5});  // added
  b.probe_settings.set("nvidia", "library", "/x.so");                 // a new section
  const auto keys = changed_config_keys(a, b);
  const std::vector<std::string> want = {"interval_seconds", "log_level", "nvidia.library",
                                         "serve.listen", "serve.max_connections"};
  EXPECT_EQ(keys, want);
  // Removed keys are named too.
  EXPECT_EQ(changed_config_keys(b, a), want);
}

TEST_F(Reload, AConfigThatCannotBeLoadedChangesNothingAndIsSaidOnce) {
  int runs = 0;
  ReloadRegistry r([]() -> Config { throw ConfigError("/etc/c.json:3:5: not valid JSON"); },
                   Config{});
  r.add("probe", {}, [&](const ReloadInput&) {
    ++runs;
    return ReloadStep::changed("x");
  });
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(r.reload());  // a storm on the same broken file
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(runs, 0) << "no reloader runs when the config cannot be loaded";
  EXPECT_EQ(r.failed_count(), 50u);
  EXPECT_EQ(r.ok_count(), 0u);
  EXPECT_EQ(count_of(err, "\n"), 1u) << err;
  EXPECT_EQ(err,
            "gpustream: SIGHUP: reload failed: /etc/c.json:3:5: not valid JSON; the running "
            "settings stay\n");
  EXPECT_NE(r.metrics().find("gpustream_reloads_total{result=\"failed\"} 50\n"), std::string::npos)
      << r.metrics();
  EXPECT_NE(r.metrics().find("gpustream_reloads_total{result=\"ok\"} 0\n"), std::string::npos);
}

TEST_F(Reload, EachReloaderRunsAndItsOutcomeIsSaidAndCounted) {
  std::vector<std::string> order;
  ReloadRegistry r({}, std::nullopt);  // no config file
  r.add("a", {}, [&](const ReloadInput& in) {
    order.emplace_back("a");
    EXPECT_FALSE(in.config);
    return ReloadStep::changed("a new token");
  });
  r.add("b", {}, [&](const ReloadInput&) -> ReloadStep {
    order.emplace_back("b");
    throw std::runtime_error("cannot read /x; the old key stays");
  });
  r.add("c", {}, [&](const ReloadInput&) {
    order.emplace_back("c");
    return ReloadStep::unchanged();
  });
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(r.reload());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(err,
            "gpustream: SIGHUP: a: a new token\n"
            "gpustream: SIGHUP: b: cannot read /x; the old key stays\n");
  EXPECT_EQ(r.failed_count(), 1u);
  EXPECT_EQ(r.ok_count(), 0u);
}

TEST_F(Reload, RestartOnlyKeysThatChangedAreNamedOnceWhileTheOutcomeRepeats) {
  Config running;
  running.probe_settings.set("serve", "listen", "127.0.0.1:9400");
  Config next = running;
  next.probe_settings.set("serve", "listen", "0.0.0.0:9400");
  next.probe_settings.set("serve", "tls_cert", "/new.pem");
  ReloadRegistry r([&] { return next; }, running);
  int new_files = 1;  // the certificate is new once, then the same
  r.add("tls", {"serve.tls_cert"}, [&new_files](const ReloadInput& in) {
    EXPECT_TRUE(in.config);
    if (new_files == 0) return ReloadStep::unchanged();
    --new_files;
    return ReloadStep::changed("new certificate");
  });
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(r.reload());  // a storm: the same outcome
  std::string err = ::testing::internal::GetCapturedStderr();
  // serve.tls_cert is live (the tls reloader's key): not named as restart-only. The pending
  // restart-only key is said by the first reload and by the second (whose outcome differs: it
  // applied nothing), then not again while the outcome repeats.
  EXPECT_EQ(err,
            "gpustream: SIGHUP: tls: new certificate\n"
            "gpustream: SIGHUP: serve.listen changed: takes effect after a restart\n"
            "gpustream: SIGHUP: serve.listen changed: takes effect after a restart\n"
            "gpustream: SIGHUP: reloaded the config file: nothing changed that applies live\n");
  EXPECT_EQ(r.ok_count(), 20u);
  // Another outcome is said.
  next.probe_settings.set("serve", "listen", "127.0.0.1:9400");  // back as it runs
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(r.reload());
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err,
            "gpustream: SIGHUP: reloaded the config file: nothing changed that applies live\n");
}

TEST_F(Reload, EveryReloadThatAppliesSomethingIsSaidEvenWhenItReadsTheSame) {
  ReloadRegistry r({}, std::nullopt);
  r.add("tls", {}, [](const ReloadInput&) { return ReloadStep::changed("new certificate"); });
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(r.reload());  // three rotations in a row
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err,
            "gpustream: SIGHUP: tls: new certificate\n"
            "gpustream: SIGHUP: tls: new certificate\n"
            "gpustream: SIGHUP: tls: new certificate\n");
}

TEST_F(Reload, TheLogReloaderAppliesTheFileUnlessAFlagSetIt) {
  set_log_level(LogLevel::info);
  set_log_format(LogFormat::text);
  Config file;
  file.log_level = "debug";
  file.log_format = "json";
  ReloadInput in;
  in.config = file;
  auto step = log_reloader("", "")(in);
  EXPECT_EQ(step.result, ReloadStep::Result::changed);
  EXPECT_EQ(step.message, "log_level info -> debug, log_format text -> json");
  EXPECT_EQ(log_level(), LogLevel::debug);
  EXPECT_EQ(log_format(), LogFormat::json);
  EXPECT_EQ(log_reloader("", "")(in).result, ReloadStep::Result::unchanged);
  // The command line wins over the file, as at start.
  step = log_reloader("warn", "text")(in);
  EXPECT_EQ(step.message, "log_level debug -> warn, log_format json -> text");
  EXPECT_EQ(log_level(), LogLevel::warn);
  // No config file: nothing to apply.
  EXPECT_EQ(log_reloader("", "")(ReloadInput{}).result, ReloadStep::Result::unchanged);
  EXPECT_EQ(log_level(), LogLevel::warn);
}

}  // namespace
}  // namespace gpustream::cli
