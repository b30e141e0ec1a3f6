// log_capture.hpp — what the gpustream logger writes while a LogCapture lives.
//
//   gpustream::test::LogCapture log;            // debug and above
//   probe->sample();
//   EXPECT_EQ(log.count("nvmlDeviceGetTemperatureV failed"), 1u);  // logged once
//
// The capture adds a sink to gpustream::logger() and lowers the logger's level to the one given;
// the destructor removes the sink and restores the level. Every message is kept (tests log
// little); count() counts the occurrences of a text in all of it.
//
// Thread safety: the sink may be written from any thread (the probes log from the work pool);
// count() and text() may be called while it is.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/common.h>

namespace gpustream::test {

class LogCapture {
 public:
  explicit LogCapture(spdlog::level::level_enum level = spdlog::level::debug);
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  /// How many times `needle` occurs in what was logged so far.
  std::size_t count(std::string_view needle) const;
  /// Everything logged so far, one message per line.
  std::string text() const;

 private:
  class Sink;
  std::shared_ptr<Sink> sink_;
  spdlog::level::level_enum level_;
};

}  // namespace gpustream::test
