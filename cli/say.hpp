// The CLI's own stderr lines ("gpustream: stopping"): as they always were in the text log format,
// one JSON object per line with --log-format json (the SDK's log_json_line), so that a service's
// stderr is all JSON. Thread-safe (one write per line).
#pragma once

#include <string_view>

#include "gpustream/logging.hpp"

namespace gpustream::cli {

/// Writes `message` to stderr: "gpustream: <message>\n" (text), or a JSON line with logger
/// "gpustream" and `level` (json). The message is written as it is in text: a caller quoting
/// something from outside makes it terminal_safe first, as before; the JSON line escapes it.
void say(std::string_view message, LogLevel level = LogLevel::info);

/// Makes every line written to std::cerr follow the log format: as it is in text (written at
/// each flush, as std::cerr does), and in json each complete line becomes one JSON object
/// (level info, or warning for "gpustream: warning: ..."; the "gpustream: " prefix dropped), so
/// that the commands' own `std::cerr << "gpustream: ..."` lines are JSON too. Each thread
/// gathers its own line (lines of two threads never mix); a line longer than 64 KiB is cut
/// into 64 KiB objects. Called once by main(), before any thread exists.
void route_cerr_through_log_format();

}  // namespace gpustream::cli
