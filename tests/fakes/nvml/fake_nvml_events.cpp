// The fake NVML's events: nvmlEventSetCreate, nvmlDeviceGetSupportedEventTypes,
// nvmlDeviceRegisterEvents, nvmlEventSetWait_v2 (and nvmlEventSetWait), nvmlEventSetFree, with
// NVML's signatures, event type bits and nvmlEventData_t layout. Only the full variant exports
// them (the legacy one has no events, as an old driver).
//
// Events are fired on demand by the test: gpustreamFakeNvmlFireEvent(device, type, data, count)
// queues `count` events of `type` on every event set where device `device` (a scenario slot) is
// registered for that type, and wakes the waiters. nvmlEventSetWait_v2 answers the oldest
// pending event at once, else waits up to its timeout (without holding the fake's lock) and
// answers NVML_ERROR_TIMEOUT. A device supports the scenario's device.<i>.supported_events;
// registering a type it does not support answers NVML_ERROR_NOT_SUPPORTED, as does
// device.<i>.fail.nvmlDeviceRegisterEvents=NOT_SUPPORTED.
//
// Out of process (a test that runs the fake inside `gpustream serve`): the scenario key
// event_trigger=PATH names a file. Every nvmlEventSetWait_v2 looks for it when it starts and
// every kTriggerPollMs while it waits; the first to find it removes it (only one caller's
// remove succeeds, so it fires once) and fires what it describes, as gpustreamFakeNvmlFireEvent:
//   device=0        scenario slot (default 0)
//   type=xid        xid, ecc_single, ecc_double, pstate, clock, power_source or a bit mask
//   data=79         eventData (the Xid number, the clock reasons, ...; default 0)
//   count=1         how many (default 1)
// A file that does not parse is removed and counted as "event_trigger_bad". The writer should
// write it under another name and rename it to PATH (a rename is atomic).
//
// Test controls: gpustreamFakeNvmlFireEvent, gpustreamFakeNvmlAwaitWaiters(n, timeout_ms) (true
// once n threads are inside a wait), gpustreamFakeNvmlEventWaiters(). Counters (through
// gpustreamFakeNvmlCount): each function's calls, "event_sets_open",
// "event_wait_timeout_ms" (the timeout of the last wait).
#include <algorithm>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "fake_nvml_state.hpp"

#define EXPORT extern "C" __attribute__((visibility("default")))
#define FULL (FAKE_NVML_VARIANT != 1)

struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned gpuInstanceId;
  unsigned computeInstanceId;
};
static_assert(sizeof(nvmlEventData_t) == 32);

struct nvmlEventSet_st {
  struct Registration {
    unsigned slot;
    unsigned long long types;
  };
  std::vector<Registration> registered;  // guarded by Events::mu
  std::deque<nvmlEventData_t> pending;   // guarded by Events::mu
};
using nvmlEventSet_t = nvmlEventSet_st*;

namespace {

constexpr nvmlReturn_t kTimeout = 10;  // kNotSupported and the others: fake_nvml_state.hpp
constexpr auto kTriggerPollMs = std::chrono::milliseconds(20);

/// The event sets and the waiters, under a lock of their own: a wait does not block the other
/// NVML functions.
struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<nvmlEventSet_t> sets;
  int waiters = 0;
};

Events& events() {
  static auto* e = new Events;  // never destroyed: calls may come during process exit
  return *e;
}

bool known(Events& ev, nvmlEventSet_t set) {
  return std::find(ev.sets.begin(), ev.sets.end(), set) != ev.sets.end();
}

}  // namespace

using namespace fake_nvml;

namespace {

/// Queues `count` events on every set where device slot `device` is registered for `type`;
/// returns the number of sets that got them.
int fire(unsigned device, unsigned long long type, unsigned long long data, unsigned count) {
  nvmlDevice_t handle = nullptr;
  {
    auto& st = state();
    std::lock_guard lock(st.mu);
    handle = handle_of(st, device);
  }
  auto& ev = events();
  int sets = 0;
  {
    std::lock_guard lock(ev.mu);
    for (auto* set : ev.sets) {
      const bool wanted =
          std::any_of(set->registered.begin(), set->registered.end(),
                      [&](const auto& r) { return r.slot == device && (r.types & type) != 0; });
      if (!wanted) continue;
      ++sets;
      for (unsigned i = 0; i < count; ++i)
        set->pending.push_back({handle, type, data, 0xFFFFFFFFu, 0xFFFFFFFFu});
    }
  }
  ev.cv.notify_all();
  return sets;
}

/// The event_trigger file: if it exists and this caller removes it, fires what it describes.
/// Called without any of the fake's locks held.
void poll_trigger(const std::string& path) {
  std::ifstream in(path);
  if (!in) return;
  std::stringstream text;
  text << in.rdbuf();
  in.close();
  if (std::remove(path.c_str()) != 0) return;  // another waiter took it
  static const std::map<std::string, unsigned long long> kTypes = {
      {"ecc_single", 0x1}, {"ecc_double", 0x2}, {"pstate", 0x4},
      {"xid", 0x8},        {"clock", 0x10},     {"power_source", 0x80}};
  unsigned device = 0, count = 1;
  unsigned long long type = 0, data = 0;
  bool ok = true;
  try {
    for (std::string line; std::getline(text, line);) {
      const auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      const auto key = line.substr(0, eq), v = line.substr(eq + 1);
      if (key == "device") {
        device = static_cast<unsigned>(std::stoul(v));
      } else if (key == "type") {
        const auto it = kTypes.find(v);
        type = it != kTypes.end() ? it->second : std::stoull(v, nullptr, 0);
      } else if (key == "data") {
        data = std::stoull(v, nullptr, 0);
      } else if (key == "count") {
        count = static_cast<unsigned>(std::stoul(v));
      } else {
        ok = false;
      }
    }
  } catch (const std::exception&) {
    ok = false;
  }
  if (!ok || type == 0) {
    auto& st = state();
    std::lock_guard lock(st.mu);
    ++st.counts["event_trigger_bad"];
    return;
  }
  fire(device, type, data, count);
}

}  // namespace

#if FULL

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  Call c("nvmlEventSetCreate");
  if (auto rc = c.begin(); rc != kOk) return rc;
  if (!set) return kInvalid;
  *set = new nvmlEventSet_st;
  ++c.st.counts["event_sets_open"];
  auto& ev = events();
  std::lock_guard lock(ev.mu);
  ev.sets.push_back(*set);
  return kOk;
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  Call c("nvmlEventSetFree");
  if (auto rc = c.begin(); rc != kOk) return rc;
  auto& ev = events();
  {
    std::lock_guard lock(ev.mu);
    if (!known(ev, set)) return kInvalid;
    std::erase(ev.sets, set);
  }
  --c.st.counts["event_sets_open"];
  delete set;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t h, unsigned long long* types) {
  Call c("nvmlDeviceGetSupportedEventTypes");
  fake_nvml::Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != kOk) return rc;
  if (!types) return kInvalid;
  *types = d->supported_events;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t h, unsigned long long types,
                                             nvmlEventSet_t set) {
  Call c("nvmlDeviceRegisterEvents");
  fake_nvml::Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != kOk) return rc;
  if ((types & ~d->supported_events) != 0) return kNotSupported;
  auto& ev = events();
  std::lock_guard lock(ev.mu);
  if (!known(ev, set)) return kInvalid;
  set->registered.push_back({c.slot, types});
  return kOk;
}

namespace {

nvmlReturn_t wait(const char* fn, nvmlEventSet_t set, nvmlEventData_t* data, unsigned timeoutms) {
  Call c(fn);
  if (auto rc = c.begin(); rc != kOk) return rc;
  if (!data) return kInvalid;
  c.st.counts["event_wait_timeout_ms"] = static_cast<int>(timeoutms);
  const std::string trigger = c.st.scenario.event_trigger;
  c.lock.unlock();  // waiting must not block the other functions
  if (!trigger.empty()) poll_trigger(trigger);
  auto& ev = events();
  std::unique_lock lock(ev.mu);
  if (!known(ev, set)) return kInvalid;
  ++ev.waiters;
  ev.cv.notify_all();  // for gpustreamFakeNvmlAwaitWaiters
  const auto ready = [&] { return !known(ev, set) || !set->pending.empty(); };
  if (trigger.empty()) {
    ev.cv.wait_for(lock, std::chrono::milliseconds(timeoutms), ready);
  } else {
    // Looks for the trigger file every kTriggerPollMs until the timeout.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutms);
    while (!ready()) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) break;
      ev.cv.wait_for(lock, std::min<std::chrono::steady_clock::duration>(left, kTriggerPollMs),
                     ready);
      if (ready()) break;
      lock.unlock();
      poll_trigger(trigger);
      lock.lock();
    }
  }
  --ev.waiters;
  if (!known(ev, set)) return kInvalid;
  if (set->pending.empty()) return kTimeout;
  *data = set->pending.front();
  set->pending.pop_front();
  return kOk;
}

}  // namespace

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                        unsigned timeoutms) {
  return wait("nvmlEventSetWait_v2", set, data, timeoutms);
}

EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data,
                                     unsigned timeoutms) {
  return wait("nvmlEventSetWait", set, data, timeoutms);
}

#endif  // FULL

// ---- test controls -------------------------------------------------------------------------

/// Queues `count` events on every set where device slot `device` is registered for `type`;
/// returns the number of sets that got them.
EXPORT int gpustreamFakeNvmlFireEvent(unsigned device, unsigned long long type,
                                      unsigned long long data, unsigned count) {
  return fire(device, type, data, count);
}

/// True once at least `n` threads are inside nvmlEventSetWait_v2 (waits up to timeout_ms).
EXPORT int gpustreamFakeNvmlAwaitWaiters(int n, int timeout_ms) {
  auto& ev = events();
  std::unique_lock lock(ev.mu);
  return ev.cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                        [&] { return ev.waiters >= n; })
             ? 1
             : 0;
}

EXPORT int gpustreamFakeNvmlEventWaiters(void) {
  auto& ev = events();
  std::lock_guard lock(ev.mu);
  return ev.waiters;
}
