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
// Test controls: gpustreamFakeNvmlFireEvent, gpustreamFakeNvmlAwaitWaiters(n, timeout_ms) (true
// once n threads are inside a wait), gpustreamFakeNvmlEventWaiters(). Counters (through
// gpustreamFakeNvmlCount): each function's calls, "event_sets_open",
// "event_wait_timeout_ms" (the timeout of the last wait).
#include <algorithm>
#include <deque>
#include <memory>
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
  c.lock.unlock();  // waiting must not block the other functions
  auto& ev = events();
  std::unique_lock lock(ev.mu);
  if (!known(ev, set)) return kInvalid;
  ++ev.waiters;
  ev.cv.notify_all();  // for gpustreamFakeNvmlAwaitWaiters
  ev.cv.wait_for(lock, std::chrono::milliseconds(timeoutms),
                 [&] { return !known(ev, set) || !set->pending.empty(); });
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
