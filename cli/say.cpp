// The CLI's own stderr lines in the process's log format (say.hpp).
#include "say.hpp"

#include <cstdio>
#include <iostream>
#include <streambuf>
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

namespace {

constexpr std::size_t kMaxPendingLineBytes = std::size_t{64} << 10;

void write_stderr(std::string_view s) { std::fwrite(s.data(), 1, s.size(), stderr); }

// std::cerr's buffer once main() installed it (route_cerr_through_log_format).
class LogFormatStreambuf final : public std::streambuf {
 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    const char c = traits_type::to_char_type(ch);
    put(&c, 1);
    return ch;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    put(s, static_cast<std::size_t>(n));
    return n;
  }
  int sync() override {
    // Text: written at each flush, as before (std::cerr flushes after each <<). JSON: a
    // line is kept until its end.
    auto& line = pending();
    if (!line.empty() && log_format() == LogFormat::text) {
      write_stderr(line);
      line.clear();
    }
    std::fflush(stderr);
    return 0;
  }

 private:
  static std::string& pending() {
    thread_local std::string line;
    return line;
  }
  void put(const char* s, std::size_t n) {
    auto& line = pending();
    for (std::size_t i = 0; i < n; ++i) {
      line += s[i];
      if (s[i] == '\n' || line.size() >= kMaxPendingLineBytes) {
        emit(line);
        line.clear();
      }
    }
  }
  static void emit(std::string_view line) {
    if (log_format() == LogFormat::text) return write_stderr(line);
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    constexpr std::string_view kPrefix = "gpustream: ";
    constexpr std::string_view kWarning = "warning: ";
    if (line.substr(0, kPrefix.size()) == kPrefix) line.remove_prefix(kPrefix.size());
    const LogLevel level =
        line.substr(0, kWarning.size()) == kWarning ? LogLevel::warn : LogLevel::info;
    write_stderr(log_json_line(level, "gpustream", line, std::chrono::system_clock::now()));
  }
};

}  // namespace

void route_cerr_through_log_format() {
  // Never destroyed: std::cerr is flushed after static objects are gone, at exit.
  // NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables,cppcoreguidelines-owning-memory)
  static auto* const buffer = new LogFormatStreambuf;
  std::cerr.rdbuf(buffer);
}

}  // namespace gpustream::cli
