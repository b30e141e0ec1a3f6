// gpustream/logging.hpp — how a host program controls the SDK's log lines. Standard library
// only: no spdlog in the embedding API (gpustream/logging_spdlog.hpp adds an spdlog sink).
//
//   gpustream::set_log_level(gpustream::LogLevel::info);
//   gpustream::set_log_callback([](gpustream::LogLevel level, std::string_view line) {
//     my_logger.log(level, line);   // the host's own logger
//   });
//
// The SDK logs through one process-wide logger. By default it writes warnings and errors to
// stderr ("2026-01-01T12:00:00.000+01:00 warning [gpustream] ...": an RFC 3339 time with the
// local offset; Config::log_format "json" makes each line a JSON object); a library stays quiet
// otherwise.
// Config::log_level, when not empty, sets the level when a Telemetry is constructed (the
// `gpustream` CLI uses "info").
//
// Thread safety: every function may be called from any thread at any time. The callback is
// called from whichever thread logs (io thread, work pool, caller), possibly from several at
// once, with no SDK lock held; it must be thread-safe and should be quick. An exception it
// throws is swallowed. It must not call set_log_callback() itself.
#pragma once

#include <functional>
#include <optional>
#include <string_view>

namespace gpustream {

enum class LogLevel { trace, debug, info, warn, error, critical, off };

/// "trace", "debug", "info", "warn", "error", "critical", "off".
std::string_view to_string(LogLevel level) noexcept;
/// Accepts the names above (and "warning", "err"); nothing for any other text.
std::optional<LogLevel> log_level_from_string(std::string_view name) noexcept;

/// Lines below `level` are dropped before they are formatted. Default: LogLevel::warn.
void set_log_level(LogLevel level) noexcept;
LogLevel log_level() noexcept;

/// Receives the message of each line (no timestamp, no level, no "[gpustream]" prefix: the host
/// formats it). An empty callback restores the default stderr output.
using LogCallback = std::function<void(LogLevel level, std::string_view message)>;
void set_log_callback(LogCallback callback);

}  // namespace gpustream
