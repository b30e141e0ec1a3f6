// gpustream/log.hpp — the SDK's logger and the "log once" helper.
//
// All SDK logging goes through the spdlog logger named "gpustream" (created on first use,
// stderr). A host program may register its own logger of that name before first use.
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

/// Sets the level of the gpustream logger from a name (trace, debug, info, warn, error, off).
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
