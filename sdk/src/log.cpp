#include "gpustream/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace gpustream {

std::shared_ptr<spdlog::logger> logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    if (auto existing = spdlog::get("gpustream")) return existing;
    auto l = spdlog::stderr_color_mt("gpustream");
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [gpustream] %v");
    l->set_level(spdlog::level::info);
    return l;
  }();
  return instance;
}

bool set_log_level(const std::string& level) {
  const auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") return false;
  logger()->set_level(lvl);
  return true;
}

}  // namespace gpustream
