// gpustream/log.hpp — the SDK's logger (for the SDK's own code and probes) and the "log once"
// helper. Host programs use gpustream/logging.hpp (level, callback) or
// gpustream/logging_spdlog.hpp (an spdlog sink) instead.
//
// All SDK logging goes through one spdlog logger named "gpustream", created on first use and
// not registered with spdlog (the host's spdlog::set_level does not change it). Its level is
// warn until set_log_level or a Telemetry with Config::log_level says otherwise. A host program
// that registered its own spdlog logger named "gpustream" before first use gets the lines in
// that logger's sinks by default. LogOnce is in gpustream/log_once.hpp (standard library only).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "gpustream/log_once.hpp"
#include "gpustream/logging.hpp"

namespace gpustream {

std::shared_ptr<spdlog::logger> logger();

/// Sets the level of the gpustream logger from a name (see log_level_from_string).
/// Returns false for an unknown name.
bool set_log_level(const std::string& level);

/// How the SDK's own stderr lines are written: `text`, one line
/// "2026-11-27T04:10:00.123+01:00 warning [gpustream] message" (an RFC 3339 time with the local
/// offset), or `json`, one object per line (log_json_line). A host's callback, sink or logger is
/// not affected. Thread-safe; the default is text.
enum class LogFormat { text, json };
/// "text" or "json"; nothing for any other name.
std::optional<LogFormat> log_format_from_string(std::string_view name) noexcept;
void set_log_format(LogFormat format);
LogFormat log_format() noexcept;

/// `t` in RFC 3339 with milliseconds and the local offset: "2026-11-27T04:10:00.123+01:00".
std::string rfc3339_local_time(std::chrono::system_clock::time_point t);

/// One JSON log line, ending in "\n":
/// {"time":"<rfc3339_local_time>","level":"warning","logger":"gpustream","message":"..."}.
/// The message (and name) are made terminal_safe, then escaped: the line is valid JSON and holds
/// no control character, whatever the message holds. The CLI writes its own lines with it too.
std::string log_json_line(LogLevel level, std::string_view logger_name, std::string_view message,
                          std::chrono::system_clock::time_point time);

}  // namespace gpustream
