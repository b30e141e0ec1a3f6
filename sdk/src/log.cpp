// The SDK's logger: one spdlog logger whose only sink dispatches to where the host program
// wants the lines (its callback, its spdlog sink, or stderr by default).
#include "gpustream/log.hpp"

#include <array>

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
    if (!to_stderr_ || is_terminal_safe(payload)) return fallback_->log(msg);
    const std::string safe = terminal_safe(payload);
    spdlog::details::log_msg copy = msg;
    copy.payload = spdlog::string_view_t(safe.data(), safe.size());
    fallback_->log(copy);
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
      fallback->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [gpustream] %v");
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

}  // namespace gpustream
