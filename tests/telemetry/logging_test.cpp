// The SDK as a library citizen in the log: quiet by default (warnings only), Config::log_level
// applied by Telemetry, and the lines routable into the host's own logger (a plain callback
// with the standard library only, or an spdlog sink).
#include "gpustream/logging.hpp"
#include "gpustream/telemetry.hpp"

// The embedding headers need no spdlog (the spdlog overload lives in logging_spdlog.hpp).
#if defined(SPDLOG_VERSION) || defined(SPDLOG_H)
#error "gpustream/telemetry.hpp or gpustream/logging.hpp pulled in spdlog"
#endif

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <boost/json/parse.hpp>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/detail/log_in_process.hpp"
#include "gpustream/log.hpp"
#include "gpustream/logging_spdlog.hpp"
#include "gpustream/terminal_text.hpp"

namespace gpustream {
namespace {

// What a compromised tool could print: clear the screen, ring, overwrite the line, C1 CSI.
const std::string kHostileMessage =
    "cannot\x1b[2J\x07\rFORGED\u009b"
    "2J";

// An always-available probe with one device: its detection logs "probe NAME: available" at
// info. The probe named "broken" reports an error in each sample, which the scheduler logs once
// as a warning: "probe broken: cannot be read (tool_failed)".
class OneDeviceProbe final : public BlockingProbe {
 public:
  OneDeviceProbe(ProbeExecutors ex, std::string name)
      : BlockingProbe(std::move(ex)), name_(std::move(name)) {}
  std::string_view name() const noexcept override { return name_; }
  // "slow" cannot be sampled faster than every 200 ms: a faster interval is clamped, and warned.
  std::chrono::milliseconds min_interval() const noexcept override {
    return std::chrono::milliseconds{name_ == "slow" ? 200 : 0};
  }

 protected:
  Detection detect() override {
    Detection d;
    d.available = true;
    d.devices.push_back({"dev", Vendor::simulated, 0, "One", ""});
    return d;
  }
  GpuSnapshot sample() override {
    GpuSnapshot s;
    if (name_ == "broken") s.errors.push_back({"tool_failed", "cannot be read", ""});
    if (name_ == "hostile") s.errors.push_back({"tool_failed", kHostileMessage, ""});
    return s;
  }

 private:
  std::string name_;
};

ProbeFactory factory() {
  return [](const Config& c, const ProbeExecutors& ex, std::vector<std::string>&) {
    std::vector<ProbePtr> out;
    for (const auto& n : c.probes) out.push_back(std::make_shared<OneDeviceProbe>(ex, n));
    return out;
  };
}

// Runs a Telemetry until its first samples are in, then stops it.
void run_once(Config c) {
  c.interval = std::chrono::milliseconds{10};
  Telemetry t(std::move(c), factory());
  t.start();
  t.wait_for_first_samples(std::chrono::seconds{30});
  t.stop();
}

struct Line {
  LogLevel level;
  std::string message;
};

class Logging : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = log_level();
    set_log_level(LogLevel::warn);  // the library's default; a test may have changed it
  }
  void TearDown() override {
    set_log_callback({});
    set_log_level(saved_);
  }
  // Captures through the logger's sinks (what the SDK really emits after its level filter).
  std::vector<std::string> capture(const Config& c) {
    auto ring = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
    logger()->sinks().push_back(ring);
    run_once(c);
    logger()->sinks().pop_back();
    return ring->last_formatted();
  }
  LogLevel saved_ = LogLevel::warn;
};

bool any_contains(const std::vector<std::string>& lines, std::string_view what) {
  for (const auto& l : lines)
    if (l.find(what) != std::string::npos) return true;
  return false;
}

TEST_F(Logging, ALibraryLogsWarningsOnlyByDefault) {
  Config c;
  c.probes = {"a", "broken"};
  const auto lines = capture(c);
  EXPECT_FALSE(any_contains(lines, "probe a: available")) << "info lines are off by default";
  EXPECT_TRUE(any_contains(lines, "probe broken: cannot be read")) << "warnings are on";
}

// "Warned once" is once per process: a program that starts and stops Telemetry instances in a
// loop is told each thing once, not once per instance.
TEST_F(Logging, AWarningIsOncePerProcessNotPerTelemetry) {
  forget_logged_in_process();
  Config c;
  c.probes = {"slow"};  // asks for 10 ms (run_once), allowed 200 ms: the clamp is warned
  const auto count = [](const std::vector<std::string>& lines, std::string_view what) {
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return l.find(what) != std::string::npos; });
  };
  constexpr std::string_view kClamp = "probe slow: interval 10 ms is below the source's minimum";
  EXPECT_EQ(count(capture(c), kClamp), 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(count(capture(c), kClamp), 0) << "cycle " << i;

  // The same for a window mistake: the first Telemetry logs it, the next ones only throw.
  auto ring = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
  logger()->sinks().push_back(ring);
  for (int i = 0; i < 3; ++i) {
    Telemetry t(Config{}, factory());
    EXPECT_THROW(t.end_window("never"), std::invalid_argument);
  }
  logger()->sinks().pop_back();
  EXPECT_EQ(count(ring->last_formatted(), "no open window named 'never'"), 1);

  // Forgotten (tests only), the clamp is said again.
  forget_logged_in_process();
  EXPECT_EQ(count(capture(c), kClamp), 1);
}

TEST_F(Logging, ConfigLogLevelOffSilencesTelemetry) {
  Config c;
  c.probes = {"a", "broken"};
  c.log_level = "off";
  EXPECT_TRUE(capture(c).empty());
  EXPECT_EQ(log_level(), LogLevel::off);
}

TEST_F(Logging, ConfigLogLevelInfoIsApplied) {
  Config c;
  c.probes = {"a"};
  c.log_level = "info";
  EXPECT_TRUE(any_contains(capture(c), "probe a: available"));
}

TEST_F(Logging, AnUnknownLogLevelIsAConfigError) {
  Config c;
  c.log_level = "loud";
  try {
    Telemetry t(c, factory());
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("log_level"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("warn"), std::string::npos) << "lists the levels";
  }
}

TEST_F(Logging, TheCallbackReceivesTheLinesAndStderrDoesNot) {
  std::mutex mu;
  std::vector<Line> got;
  set_log_callback([&](LogLevel level, std::string_view message) {
    std::lock_guard lock(mu);
    got.push_back({level, std::string(message)});
  });
  Config c;
  c.probes = {"a", "broken"};
  c.log_level = "info";
  ::testing::internal::CaptureStderr();
  run_once(c);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("[gpustream]"), std::string::npos) << err;
  std::lock_guard lock(mu);
  bool saw_info = false, saw_warn = false;
  for (const auto& l : got) {
    if (l.level == LogLevel::info && l.message.find("probe a: available") != std::string::npos)
      saw_info = true;
    if (l.level == LogLevel::warn && l.message == "probe broken: cannot be read (tool_failed)")
      saw_warn = true;
  }
  EXPECT_TRUE(saw_info);
  EXPECT_TRUE(saw_warn) << "the message alone, no timestamp or prefix";
}

TEST_F(Logging, WithoutACallbackLinesGoToStderr) {
  Config c;
  c.probes = {"broken"};
  ::testing::internal::CaptureStderr();
  run_once(c);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[gpustream] probe broken: cannot be read (tool_failed)"), std::string::npos)
      << err;
}

// The default stderr output goes to a terminal: a message quoting a tool is terminal_safe there
// (one record, one line, no control byte), while a host's callback gets it as it is.
TEST_F(Logging, OnStderrAToolsControlCharactersAreEscaped) {
  Config c;
  c.probes = {"hostile"};
  ::testing::internal::CaptureStderr();
  run_once(c);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("probe hostile: cannot\\x1b[2J\\x07\\x0dFORGED\\u009b2J (tool_failed)"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;
  EXPECT_EQ(err.find('\r'), std::string::npos) << err;
  EXPECT_EQ(err.find("\xc2\x9b"), std::string::npos) << err;

  std::string seen;
  set_log_callback([&](LogLevel, std::string_view m) {
    if (m.find("hostile") != std::string_view::npos) seen = std::string(m);
  });
  run_once(c);
  EXPECT_NE(seen.find(kHostileMessage), std::string::npos) << seen;
}

TEST_F(Logging, ACallbackThatThrowsDoesNotHurtTheLibrary) {
  set_log_callback(
      [](LogLevel, std::string_view) { throw std::runtime_error("host logger broke"); });
  Config c;
  c.probes = {"a", "broken"};
  EXPECT_NO_THROW(run_once(c));
}

TEST_F(Logging, AnSpdlogSinkReceivesTheLinesWithTheirLevel) {
  auto host_sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  host_sink->set_pattern("%n|%l|%v");
  set_log_sink(host_sink);
  Config c;
  c.probes = {"broken"};
  run_once(c);
  set_log_sink(nullptr);
  EXPECT_TRUE(any_contains(host_sink->last_formatted(),
                           "gpustream|warning|probe broken: cannot be read (tool_failed)"));
}

// RFC 3339: date, 'T', time with milliseconds, and the offset as +HH:MM (never 'Z' or none).
const std::regex kRfc3339(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d)");

// Sets TZ for one test and puts it back (tzset both ways).
class ScopedTimeZone {
 public:
  explicit ScopedTimeZone(const char* tz) {
    if (const char* old = std::getenv("TZ")) old_ = old;
    ::setenv("TZ", tz, 1);
    ::tzset();
  }
  ~ScopedTimeZone() {
    if (old_)
      ::setenv("TZ", old_->c_str(), 1);
    else
      ::unsetenv("TZ");
    ::tzset();
  }
  ScopedTimeZone(const ScopedTimeZone&) = delete;
  ScopedTimeZone& operator=(const ScopedTimeZone&) = delete;

 private:
  std::optional<std::string> old_;
};

TEST(LogTime, IsRfc3339WithTheLocalOffset) {
  const auto t = std::chrono::system_clock::time_point{} + std::chrono::milliseconds{1234};
  {
    ScopedTimeZone tz("UTC0");
    EXPECT_EQ(rfc3339_local_time(t), "1970-01-01T00:00:01.234+00:00");
  }
  {
    ScopedTimeZone tz("<+0530>-5:30");
    EXPECT_EQ(rfc3339_local_time(t), "1970-01-01T05:30:01.234+05:30");
  }
  {
    ScopedTimeZone tz("<-0330>3:30");
    EXPECT_EQ(rfc3339_local_time(t), "1969-12-31T20:30:01.234-03:30");
  }
  EXPECT_TRUE(std::regex_match(rfc3339_local_time(std::chrono::system_clock::now()), kRfc3339));
}

// A JSON log line is one valid object whatever the message holds: quotes, backslashes, control
// bytes, a C1 control, bytes that are not UTF-8, a line feed (which would split the line).
TEST(LogJsonLine, IsOneValidObjectWhateverTheMessageHolds) {
  const std::string nasty =
      kHostileMessage + " \"quoted\" back\\slash tab\t nl\n cut \xe2\x82 raw \xff end";
  const auto t = std::chrono::system_clock::now();
  const std::string line = log_json_line(LogLevel::warn, "gpustream", nasty, t);
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line: " << line;
  for (const char c : line.substr(0, line.size() - 1))
    EXPECT_GE(static_cast<unsigned char>(c), 0x20) << "no control byte: " << line;
  boost::system::error_code ec;
  const auto v = boost::json::parse(line, ec);
  ASSERT_FALSE(ec) << ec.message() << ": " << line;
  const auto& o = v.as_object();
  EXPECT_EQ(o.size(), 4u) << line;
  EXPECT_EQ(o.at("level").as_string(), "warning");
  EXPECT_EQ(o.at("logger").as_string(), "gpustream");
  EXPECT_EQ(o.at("time").as_string(), rfc3339_local_time(t));
  // The message as a text line shows it: terminal_safe (a visible escape for each control).
  EXPECT_EQ(o.at("message").as_string(), terminal_safe(nasty));
  EXPECT_NE(std::string(o.at("message").as_string()).find("\"quoted\" back\\slash"),
            std::string::npos);
}

TEST(LogFormatNames, TextAndJsonOnly) {
  EXPECT_EQ(log_format_from_string("text"), LogFormat::text);
  EXPECT_EQ(log_format_from_string("json"), LogFormat::json);
  EXPECT_FALSE(log_format_from_string("JSON"));
  EXPECT_FALSE(log_format_from_string(""));
}

// The default stderr output in each format, set through Config::log_format as the CLI's
// --log-format and the config key do.
TEST_F(Logging, StderrLinesStartWithAnRfc3339Time) {
  Config c;
  c.probes = {"broken"};
  ::testing::internal::CaptureStderr();
  run_once(c);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const auto at = err.find(" warning [gpustream] probe broken: cannot be read (tool_failed)");
  ASSERT_NE(at, std::string::npos) << err;
  const auto start = err.rfind('\n', at) == std::string::npos ? 0 : err.rfind('\n', at) + 1;
  EXPECT_TRUE(std::regex_match(err.substr(start, at - start), kRfc3339)) << err;
}

TEST_F(Logging, LogFormatJsonWritesOneObjectPerLine) {
  Config c;
  c.probes = {"hostile"};
  c.log_format = "json";
  ::testing::internal::CaptureStderr();
  run_once(c);
  const std::string err = ::testing::internal::GetCapturedStderr();
  set_log_format(LogFormat::text);
  EXPECT_EQ(log_format(), LogFormat::text);
  ASSERT_FALSE(err.empty());
  std::size_t lines = 0;
  bool saw_hostile = false;
  for (std::size_t pos = 0; pos < err.size();) {
    const auto end = err.find('\n', pos);
    ASSERT_NE(end, std::string::npos) << "every line ends: " << err;
    const std::string line = err.substr(pos, end - pos);
    pos = end + 1;
    boost::system::error_code ec;
    const auto v = boost::json::parse(line, ec);
    ASSERT_FALSE(ec) << ec.message() << ": " << line;
    ++lines;
    const auto& msg = v.as_object().at("message").as_string();
    if (msg.find("probe hostile: cannot") != boost::json::string::npos) {
      saw_hostile = true;
      EXPECT_EQ(v.as_object().at("level").as_string(), "warning");
      EXPECT_EQ(std::string(msg),
                terminal_safe("probe hostile: " + kHostileMessage + " (tool_failed)"));
    }
  }
  EXPECT_GE(lines, 1u);
  EXPECT_TRUE(saw_hostile) << err;
}

TEST_F(Logging, AnUnknownLogFormatIsAConfigError) {
  Config c;
  c.log_format = "xml";
  try {
    Telemetry t(c, factory());
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("log_format"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("text or json"), std::string::npos) << e.what();
  }
}

TEST(LogLevelNames, RoundTrip) {
  for (auto l : {LogLevel::trace, LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error,
                 LogLevel::critical, LogLevel::off})
    EXPECT_EQ(log_level_from_string(to_string(l)), l);
  EXPECT_EQ(log_level_from_string("warning"), LogLevel::warn);
  EXPECT_FALSE(log_level_from_string("loud"));
}

}  // namespace
}  // namespace gpustream
