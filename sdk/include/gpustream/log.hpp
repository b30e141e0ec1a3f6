// gpustream/log.hpp — the SDK's logger (for the SDK's own code and probes) and the "log once"
// helper. Host programs use gpustream/logging.hpp (level, callback) or
// gpustream/logging_spdlog.hpp (an spdlog sink) instead.
//
// All SDK logging goes through one spdlog logger named "gpustream", created on first use and
// not registered with spdlog (the host's spdlog::set_level does not change it). Its level is
// warn until set_log_level or a Telemetry with Config::log_level says otherwise. A host program
// that registered its own spdlog logger named "gpustream" before first use gets the lines in
// that logger's sinks by default.
// LogOnce remembers which keys it has already logged, so a failure that repeats every tick is
// logged once (and again only after it cleared and came back). Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <spdlog/spdlog.h>

namespace gpustream {

std::shared_ptr<spdlog::logger> logger();

/// Sets the level of the gpustream logger from a name (see log_level_from_string).
/// Returns false for an unknown name.
bool set_log_level(const std::string& level);

class LogOnce {
 public:
  /// True the first time `key` is seen (since the last clear(key)).
  bool first(const std::string& key) {
    std::lock_guard lock(mu_);
    return seen_.insert(key).second;
  }
  void clear(const std::string& key) {
    std::lock_guard lock(mu_);
    seen_.erase(key);
  }
  void clear_all() {
    std::lock_guard lock(mu_);
    seen_.clear();
  }
  /// Forgets every key not in `keep` (the problems that are over).
  void retain(const std::set<std::string>& keep) {
    std::lock_guard lock(mu_);
    std::erase_if(seen_, [&](const std::string& k) { return !keep.contains(k); });
  }

 private:
  std::mutex mu_;
  std::set<std::string> seen_;
};

}  // namespace gpustream
