// A Config is checked as a whole before anything runs: a value out of range throws ConfigError
// from the Telemetry constructor, a probe the factory rejects throws it from start(); each
// message names the key and the allowed values. Nothing starts in either case.
#include <atomic>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/config.hpp"
#include "gpustream/config_json.hpp"
#include "gpustream/telemetry.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

class NullProbe final : public BlockingProbe {
 public:
  NullProbe(ProbeExecutors ex, std::string name)
      : BlockingProbe(std::move(ex)), name_(std::move(name)) {}
  std::string_view name() const noexcept override { return name_; }

 protected:
  Detection detect() override { return {}; }
  GpuSnapshot sample() override { return {}; }

 private:
  std::string name_;
};

// A factory that, like the registry, knows its names ("a", "simulated") and reports any other.
ProbeFactory known_names_factory(std::shared_ptr<std::atomic<int>> built) {
  return [built](const Config& c, const ProbeExecutors& ex, std::vector<std::string>& errors) {
    std::vector<ProbePtr> out;
    for (const auto& n : c.probes) {
      if (n != "a" && n != "simulated") {
        errors.push_back("unknown probe '" + n + "' (known: a, simulated)");
        continue;
      }
      ++*built;
      out.push_back(std::make_shared<NullProbe>(ex, n));
    }
    return out;
  };
}

std::string config_error(const Config& c) {
  try {
    validate_config(c);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return {};
}

bool has(const std::string& text, std::string_view what) {
  return text.find(what) != std::string::npos;
}

TEST(ConfigValidation, SimulateAboveTheProbesBoundIsRejectedWithTheBound) {
  Config c;
  c.simulate = kMaxSimulatedGpus + 1;
  const auto e = config_error(c);
  EXPECT_TRUE(has(e, "simulate")) << e;
  EXPECT_TRUE(has(e, "0.." + std::to_string(kMaxSimulatedGpus))) << e;
  c.simulate = kMaxSimulatedGpus;
  EXPECT_EQ(config_error(c), "");
  c.simulate = -1;
  EXPECT_TRUE(has(config_error(c), "simulate"));
}

TEST(ConfigValidation, TheTelemetryConstructorThrowsBeforeAnythingIsBuilt) {
  auto built = std::make_shared<std::atomic<int>>(0);
  Config c;
  c.probes = {"simulated"};
  c.simulate = 65;
  EXPECT_THROW(Telemetry(c, known_names_factory(built)), ConfigError);
  EXPECT_EQ(built->load(), 0);
}

TEST(ConfigValidation, EachFieldIsNamed) {
  const auto expect_named = [](Config c, std::string_view key) {
    const auto e = config_error(c);
    EXPECT_TRUE(has(e, key)) << key << ": " << e;
  };
  Config c;
  c.interval = std::chrono::milliseconds{0};
  expect_named(c, "interval_seconds");
  c = {};
  c.probe_intervals["host"] = std::chrono::milliseconds{-5};
  expect_named(c, "probe_intervals_seconds.host");
  c = {};
  c.sample_timeout = std::chrono::milliseconds{-1};
  expect_named(c, "sample_timeout_seconds");
  c = {};
  c.backoff_initial = std::chrono::milliseconds{0};
  expect_named(c, "backoff_initial_seconds");
  c = {};
  c.history = 0;
  expect_named(c, "history");
  c = {};
  c.history_max_bytes = 1000;
  expect_named(c, "history_max_bytes");
  c = {};
  c.watch_pids = {12, 0};
  expect_named(c, "watch_pids");
  c = {};
  c.log_level = "verbose";
  expect_named(c, "log_level");
  EXPECT_EQ(config_error(Config{}), "") << "the defaults are valid";
}

TEST(ConfigValidation, AMisspeltProbeThrowsFromStartNamingTheKnownOnes) {
  auto built = std::make_shared<std::atomic<int>>(0);
  Config c;
  c.probes = {"a", "simulatd"};
  Telemetry t(c, known_names_factory(built));
  try {
    t.start();
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "unknown probe 'simulatd'")) << e.what();
    EXPECT_TRUE(has(e.what(), "known: a, simulated")) << e.what();
  }
  EXPECT_TRUE(t.probe_names().empty()) << "nothing runs with fewer probes";
  EXPECT_TRUE(t.stats().empty());
  t.stop();
}

TEST(ConfigValidation, TheConfigFileUsesTheSameBound) {
  const auto doc = boost::json::parse(R"({"simulate": 65})");
  try {
    config_from_json(doc);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "0.." + std::to_string(kMaxSimulatedGpus))) << e.what();
  }
  EXPECT_EQ(config_from_json(boost::json::parse(R"({"simulate": 64})")).simulate, 64);
  EXPECT_THROW(config_from_json(boost::json::parse(R"({"log_level": "loud"})")), ConfigError);
}

// The worst config file: one that never ends. load_config reads at most kMaxConfigFileBytes + 1
// bytes of any path and refuses the rest, rather than reading until memory runs out.
TEST(ConfigValidation, AConfigFileIsReadWithinItsByteBound) {
  try {
    load_config("/dev/zero");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "'/dev/zero' is larger than 1048576 bytes")) << e.what();
  }
  constexpr std::size_t kMaxConfigFileBytes = std::size_t{1} << 20;  // docs/configuration.md
  test::TempTree t;
  // Exactly the bound (an object padded with blanks) is read; one byte more is refused.
  std::string at_bound = R"({"simulate": 3})";
  at_bound.resize(kMaxConfigFileBytes, ' ');
  t.file("at_bound.json", at_bound);
  EXPECT_EQ(load_config(t.path("at_bound.json")).simulate, 3);
  t.file("over.json", at_bound + " ");
  EXPECT_THROW(load_config(t.path("over.json")), ConfigError);
  EXPECT_THROW(load_config(t.path("missing.json")), ConfigError);
}

std::string load_error(const test::TempTree& t, const std::string& name) {
  try {
    load_config(t.path(name));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return {};
}

// A config file that is not JSON: the error names the file, the line and the column where the
// parser stopped (1-based, the column in characters), and what it found there.
TEST(ConfigValidation, AJsonErrorNamesTheFileLineAndColumn) {
  test::TempTree t;
  // A missing ',' on line 3: the parser stops at the '"' of the next key, column 3.
  t.file("comma.json", "{\n  \"simulate\": 2\n  \"seed\": 4\n}\n");
  EXPECT_EQ(load_error(t, "comma.json"),
            t.path("comma.json") + ":3:3: not valid JSON: syntax error at '\"'");
  // Columns count characters: "é" is two bytes, one column.
  t.file("utf8.json", "{\"probes\": [\"\xc3\xa9\", x]}");
  EXPECT_EQ(load_error(t, "utf8.json"),
            t.path("utf8.json") + ":1:18: not valid JSON: syntax error at 'x'");
  // A control byte is shown in hex, never written as it is.
  t.file("ctl.json", "{\"probes\": [\"a\x01\"]}");
  EXPECT_EQ(load_error(t, "ctl.json"),
            t.path("ctl.json") + ":1:15: not valid JSON: syntax error at byte 0x01");
  // A file that stops in the middle: the position is its end.
  t.file("cut.json", "{\"probes\": [\"host\",\n");
  EXPECT_EQ(
      load_error(t, "cut.json"),
      t.path("cut.json") + ":2:1: not valid JSON: unexpected end of the file (incomplete JSON)");
  t.file("empty.json", "");
  EXPECT_EQ(
      load_error(t, "empty.json"),
      t.path("empty.json") + ":1:1: not valid JSON: unexpected end of the file (incomplete JSON)");
  // Something after the object (blanks after it are fine).
  t.file("extra.json", "{\"simulate\": 1}\n\n  }\n");
  EXPECT_EQ(
      load_error(t, "extra.json"),
      t.path("extra.json") + ":3:3: not valid JSON: extra data after the top-level value: '}'");
  t.file("blanks.json", "{\"simulate\": 1}\r\n\t \n");
  EXPECT_EQ(load_config(t.path("blanks.json")).simulate, 1);
  // The worst nesting is refused with a position too, not a crash.
  t.file("deep.json", std::string(100000, '['));
  EXPECT_TRUE(has(load_error(t, "deep.json"), t.path("deep.json") + ":1:"))
      << load_error(t, "deep.json");
}

TEST(ConfigValidation, HistoryBytesReachTheChannel) {
  EXPECT_EQ(Config{}.history_max_bytes, kDefaultHistoryMaxBytes);
  const auto c = config_from_json(boost::json::parse(R"({"history_max_bytes": 1048576})"));
  EXPECT_EQ(c.history_max_bytes, 1048576u);
  EXPECT_THROW(config_from_json(boost::json::parse(R"({"history_max_bytes": 4096})")), ConfigError);
  boost::asio::io_context io;
  Telemetry t(c, known_names_factory(std::make_shared<std::atomic<int>>(0)), io.get_executor());
  EXPECT_EQ(t.channel().history_max_bytes(), 1048576u);
}

// The SDK knows no probe names: sections are whatever the caller says they are.
TEST(ConfigValidation, SectionsAreTheCallersNotTheSdks) {
  // No sections given: any object is a section, kept for its owner to check.
  auto c = config_from_json(boost::json::parse(R"({"myprobe": {"path": "/x"}, "simulate": 1})"));
  ASSERT_TRUE(c.probe_settings.contains("myprobe"));
  ASSERT_NE(c.probe_settings.get("myprobe", "path"), nullptr);
  EXPECT_EQ(*c.probe_settings.get("myprobe", "path")->if_string(), "/x");
  // ...but a scalar under an unknown key is still a typo of a top-level key.
  try {
    config_from_json(boost::json::parse(R"({"simulat": 2})"));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "'simulat': unknown key")) << e.what();
    EXPECT_TRUE(has(e.what(), "simulate,")) << e.what();
  }
  // Sections given: only those; a known section that is not an object says so.
  const ConfigSections mine{"myprobe", "serve"};
  c = config_from_json(boost::json::parse(R"({"serve": {"listen": "127.0.0.1:0"}})"), {}, mine);
  EXPECT_TRUE(c.probe_settings.contains("serve"));
  try {
    config_from_json(boost::json::parse(R"({"nvidia": {}})"), {}, mine);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "'nvidia': unknown key")) << e.what();
    EXPECT_TRUE(has(e.what(), "sections: myprobe, serve")) << e.what();
  }
  try {
    config_from_json(boost::json::parse(R"({"myprobe": 3})"), {}, mine);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "'myprobe': expected an object of settings")) << e.what();
  }
}

}  // namespace
}  // namespace gpustream
