// gpustream/log_once.hpp — remembers which problems have already been logged, so a failure that
// repeats every tick is logged once (and again only after it cleared and came back). Standard
// library only: a probe header can hold one without pulling in the logger (gpustream/log.hpp).
//
// Thread safety: every member takes the object's own lock.
#pragma once

#include <mutex>
#include <set>
#include <string>

namespace gpustream {

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
