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

}  // namespace gpustream::cli
