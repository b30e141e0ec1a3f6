// The SDK's logger: one spdlog logger whose only sink dispatches to where the host program
// wants the lines (its callback, its spdlog sink, or stderr by default).
#include "gpustream/log.hpp"

#include "gpustream/detail/log_in_process.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <ctime>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "gpustream/logging.hpp"
#include "gpustream/logging_spdlog.hpp"
#include "gpustream/terminal_text.hpp"

namespace gpustream {
namespace {

constexpr LogLevel kDefaultLevel = LogLevel::warn;

spdlog::level::level_enum to_spdlog(LogLevel l) noexcept {
  return static_cast<spdlog::level::level_enum>(static_cast<int>(l));
}
LogLevel from_spdlog(spdlog::level::level_enum l) noexcept {
  return static_cast<LogLevel>(static_cast<int>(l));
}
static_assert(static_cast<int>(spdlog::level::trace) == static_cast<int>(LogLevel::trace));
static_assert(static_cast<int>(spdlog::level::off) == static_cast<int>(LogLevel::off));

// The text line's pattern: an RFC 3339 time with the local offset
// ("2026-11-27T04:10:00.123+01:00"), the level, the logger's name, the message.
constexpr const char* kTextPattern = "%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ [gpustream] %v";

// Appends `s` as the inside of a JSON string. `s` is terminal_safe already (valid UTF-8, no
// control character): only the quote and the backslash are left to escape.
void append_json_chars(std::string& out, std::string_view s) {
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
}

// One JSON object per line (docs/operations.md, "Logs"): {"time", "level", "logger", "message"}.
// The message is made terminal_safe first (a control byte or a byte that is not UTF-8 becomes a
// visible escape, as on a text line), so the line is valid JSON and harmless on a terminal
// whatever a tool or a peer put in it.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string line = log_json_line(
        from_spdlog(msg.level), std::string_view(msg.logger_name.data(), msg.logger_name.size()),
        std::string_view(msg.payload.data(), msg.payload.size()), msg.time);
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
std::atomic<LogFormat> g_format{LogFormat::text};

// Where lines go. Immutable once published; swapped as a whole under Dispatch::mu_.
struct Target {
  LogCallback callback;
  std::shared_ptr<spdlog::sinks::sink> sink;
};

class DispatchSink final : public spdlog::sinks::sink {
 public:
  /// `to_stderr`: the fallback is the SDK's own stderr sink (not a host's logger).
  DispatchSink(std::shared_ptr<spdlog::sinks::sink> fallback, bool to_stderr)
      : fallback_(std::move(fallback)),
        to_stderr_(to_stderr),
        target_(std::make_shared<Target>()) {}

  void log(const spdlog::details::log_msg& msg) override {
    const auto t = target();  // no lock held while the host's code runs
    if (t->callback) {
      try {
        t->callback(from_spdlog(msg.level),
                    std::string_view(msg.payload.data(), msg.payload.size()));
      } catch (...) {
        // A log callback must not take down the thread that logged.
      }
    } else if (t->sink) {
      if (t->sink->should_log(msg.level)) t->sink->log(msg);
    } else {
      log_to_fallback(msg);
    }
  }
  void flush() override {
    const auto t = target();
    if (t->sink)
      t->sink->flush();
    else if (!t->callback)
      fallback_->flush();
  }
  void set_pattern(const std::string& pattern) override { fallback_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override {
    fallback_->set_formatter(std::move(f));
  }

  // The SDK's stderr sink writes to a terminal: a message that quotes a tool, a driver or a
  // peer is made terminal_safe (ESC, CR, LF, C1 ... as escapes), one record on one line. A host's
  // callback, sink or registered logger gets the message as it is.
  void log_to_fallback(const spdlog::details::log_msg& msg) {
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    if (!to_stderr_ || is_terminal_safe(payload) || g_format.load() == LogFormat::json)
      return fallback_->log(msg);  // the JSON formatter makes the message safe itself
    const std::string safe = terminal_safe(payload);
    spdlog::details::log_msg copy = msg;
    copy.payload = spdlog::string_view_t(safe.data(), safe.size());
    fallback_->log(copy);
  }

  /// The SDK's own stderr output only (a host's logger keeps its own format).
  void set_format(LogFormat f) {
    if (!to_stderr_) return;
    if (f == LogFormat::json)
      fallback_->set_formatter(std::make_unique<JsonFormatter>());
    else
      fallback_->set_formatter(std::make_unique<spdlog::pattern_formatter>(kTextPattern));
  }

  void set_target(Target t) {
    auto next = std::make_shared<const Target>(std::move(t));
    std::lock_guard lock(mu_);
    target_ = std::move(next);
  }

 private:
  std::shared_ptr<const Target> target() const {
    std::lock_guard lock(mu_);
    return target_;
  }

  const std::shared_ptr<spdlog::sinks::sink> fallback_;
  const bool to_stderr_;
  mutable std::mutex mu_;
  std::shared_ptr<const Target> target_;
};

// Forwards to the sinks of a logger the host registered as "gpustream" before first use.
class ForwardSink final : public spdlog::sinks::sink {
 public:
  explicit ForwardSink(std::shared_ptr<spdlog::logger> to) : to_(std::move(to)) {}
  void log(const spdlog::details::log_msg& msg) override {
    for (const auto& s : to_->sinks())
      if (s->should_log(msg.level)) s->log(msg);
  }
  void flush() override { to_->flush(); }
  void set_pattern(const std::string&) override {}
  void set_formatter(std::unique_ptr<spdlog::formatter>) override {}

 private:
  std::shared_ptr<spdlog::logger> to_;
};

struct Instance {
  std::shared_ptr<DispatchSink> dispatch;
  std::shared_ptr<spdlog::logger> logger;
};

Instance& instance() {
  static Instance inst = [] {
    std::shared_ptr<spdlog::sinks::sink> fallback;
    bool to_stderr = false;
    if (auto existing = spdlog::get("gpustream")) {
      fallback = std::make_shared<ForwardSink>(std::move(existing));
    } else {
      to_stderr = true;
      fallback = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
      fallback->set_pattern(kTextPattern);
    }
    Instance i;
    i.dispatch = std::make_shared<DispatchSink>(std::move(fallback), to_stderr);
    // Not registered with spdlog: the host's spdlog::set_level() and friends do not change the
    // SDK's level; set_log_level() does.
    i.logger = std::make_shared<spdlog::logger>("gpustream", i.dispatch);
    i.logger->set_level(to_spdlog(kDefaultLevel));
    return i;
  }();
  return inst;
}

constexpr std::array<std::string_view, 7> kNames{"trace", "debug",    "info", "warn",
                                                 "error", "critical", "off"};

}  // namespace

std::shared_ptr<spdlog::logger> logger() { return instance().logger; }

namespace {
LogOnce& process_log_once() {
  static LogOnce once;
  return once;
}
}  // namespace

bool first_in_process(const std::string& key) { return process_log_once().first(key); }
void forget_logged_in_process() { process_log_once().clear_all(); }

std::string_view to_string(LogLevel level) noexcept {
  const auto i = static_cast<std::size_t>(level);
  return i < kNames.size() ? kNames[i] : std::string_view{"unknown"};
}

std::optional<LogLevel> log_level_from_string(std::string_view name) noexcept {
  for (std::size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<LogLevel>(i);
  if (name == "warning") return LogLevel::warn;
  if (name == "err") return LogLevel::error;
  return std::nullopt;
}

void set_log_level(LogLevel level) noexcept { logger()->set_level(to_spdlog(level)); }
LogLevel log_level() noexcept { return from_spdlog(logger()->level()); }

bool set_log_level(const std::string& level) {
  const auto l = log_level_from_string(level);
  if (!l) return false;
  set_log_level(*l);
  return true;
}

void set_log_callback(LogCallback callback) {
  instance().dispatch->set_target(Target{std::move(callback), nullptr});
}

void set_log_sink(std::shared_ptr<spdlog::sinks::sink> sink) {
  instance().dispatch->set_target(Target{{}, std::move(sink)});
}

std::string rfc3339_local_time(std::chrono::system_clock::time_point t) {
  const auto since = t.time_since_epoch();
  auto secs = std::chrono::floor<std::chrono::seconds>(since);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(since - secs).count();
  const std::time_t tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buf[40];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  const long offset_min = tm.tm_gmtoff / 60;
  const long abs_min = offset_min < 0 ? -offset_min : offset_min;
  n += static_cast<std::size_t>(std::snprintf(buf + n, sizeof buf - n, ".%03d%c%02ld:%02ld",
                                              static_cast<int>(ms), offset_min < 0 ? '-' : '+',
                                              abs_min / 60, abs_min % 60));
  return std::string(buf, std::min(n, sizeof buf - 1));
}

std::string log_json_line(LogLevel level, std::string_view logger_name, std::string_view message,
                          std::chrono::system_clock::time_point time) {
  std::string out;
  out.reserve(message.size() + 96);
  out += "{\"time\":\"";
  out += rfc3339_local_time(time);
  out += "\",\"level\":\"";
  const auto lv = spdlog::level::to_string_view(to_spdlog(level));
  out.append(lv.data(), lv.size());  // "warning", as on a text line
  out += "\",\"logger\":\"";
  append_json_chars(
      out, is_terminal_safe(logger_name) ? std::string(logger_name) : terminal_safe(logger_name));
  out += "\",\"message\":\"";
  if (is_terminal_safe(message))
    append_json_chars(out, message);
  else
    append_json_chars(out, terminal_safe(message));
  out += "\"}\n";
  return out;
}

std::optional<LogFormat> log_format_from_string(std::string_view name) noexcept {
  if (name == "text") return LogFormat::text;
  if (name == "json") return LogFormat::json;
  return std::nullopt;
}

void set_log_format(LogFormat format) {
  g_format.store(format);
  instance().dispatch->set_format(format);
}

LogFormat log_format() noexcept { return g_format.load(); }

}  // namespace gpustream
