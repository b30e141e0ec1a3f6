// The fake NVML's state and its test controls (not NVML functions).
#include "fake_nvml_state.hpp"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace fake_nvml {

State& state() {
  static State* s = new State;  // never destroyed: calls may come during process exit
  return *s;
}

}  // namespace fake_nvml

using fake_nvml::state;

EXPORT int gpustreamFakeNvmlCount(const char* what) {
  auto& st = state();
  std::lock_guard lock(st.mu);
  if (std::strcmp(what, "initialized") == 0) return st.initialized ? 1 : 0;
  auto it = st.counts.find(what);
  return it == st.counts.end() ? 0 : it->second;
}

EXPORT void gpustreamFakeNvmlReset(void) {
  auto& st = state();
  std::lock_guard lock(st.mu);
  st.counts.clear();
  st.last_seen.clear();
  st.util_tick.clear();
}

EXPORT unsigned long long gpustreamFakeNvmlLastSeen(unsigned device) {
  auto& st = state();
  std::lock_guard lock(st.mu);
  return st.last_seen.count(device) ? st.last_seen[device] : ~0ULL;
}

EXPORT void gpustreamFakeNvmlBlock(int on) {
  auto& st = state();
  {
    std::lock_guard lock(st.mu);
    st.blocked = on != 0;
  }
  st.cv.notify_all();
}

EXPORT int gpustreamFakeNvmlReload(void) {
  auto& st = state();
  std::string error;
  auto scenario = fake_nvml::load_scenario(&error);
  std::lock_guard lock(st.mu);
  if (!error.empty()) return 1;
  st.scenario = std::move(scenario);
  return 0;
}

EXPORT void gpustreamFakeNvmlSetTimeNs(long long ns) {
  auto& st = state();
  std::lock_guard lock(st.mu);
  st.time_ns = ns;
}
