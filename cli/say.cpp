// The CLI's own stderr lines in the process's log format (say.hpp).
#include "say.hpp"

#include <cstdio>
#include <string>

#include "gpustream/log.hpp"

namespace gpustream::cli {

void say(std::string_view message, LogLevel level) {
  std::string line;
  if (log_format() == LogFormat::json) {
    line = log_json_line(level, "gpustream", message, std::chrono::system_clock::now());
  } else {
    line.reserve(message.size() + 12);
    line += "gpustream: ";
    line += message;
    line += '\n';
  }
  // One write for the line, so that lines from two threads do not mix (stdio's lock).
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace gpustream::cli
