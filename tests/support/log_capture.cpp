#include "support/log_capture.hpp"

#include <algorithm>
#include <mutex>

#include <spdlog/sinks/base_sink.h>

#include "gpustream/log.hpp"

namespace gpustream::test {

class LogCapture::Sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string text() const {
    std::lock_guard lock(text_mu_);
    return text_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    std::lock_guard lock(text_mu_);
    text_.append(line.data(), line.size());
  }
  void flush_() override {}

 private:
  mutable std::mutex text_mu_;
  std::string text_;
};

LogCapture::LogCapture(spdlog::level::level_enum level)
    : sink_(std::make_shared<Sink>()), level_(logger()->level()) {
  logger()->sinks().push_back(sink_);
  logger()->set_level(level);
}

LogCapture::~LogCapture() {
  logger()->set_level(level_);
  auto& sinks = logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
}

std::string LogCapture::text() const { return sink_->text(); }

std::size_t LogCapture::count(std::string_view needle) const {
  const auto all = text();
  std::size_t n = 0;
  if (needle.empty()) return 0;
  for (auto at = all.find(needle); at != std::string::npos;
       at = all.find(needle, at + needle.size()))
    ++n;
  return n;
}

}  // namespace gpustream::test
