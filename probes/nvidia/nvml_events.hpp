// nvml_events.hpp — NVML's event functions (written by hand from the public nvml.h: "Event
// Handling Methods" and "Event Types"; see ../shared/fixtures/nvidia/NVML_ABI_NOTES.md) and the
// NvmlEventWatcher: a thread of the probe's own that waits for Xid, ECC, clock-event and
// power-source events and reports them as GpuEvents.
//
// The functions are optional: a library without them (an old driver, the legacy fake) has no
// events; the watcher says why once (info) and ends. Events need NVML initialized all along,
// so they exist only in the persistent library-session mode (lazy mode shuts NVML down after
// every sample: said once, no events).
//
// Thread safety: EventApi is immutable after load(). NvmlEventWatcher's public members may be
// called from any thread but the watcher's own. Cancellation: stop() (and the destructor) ends
// the thread within one wait timeout (the wait is a loop of nvmlEventSetWait_v2 calls of
// `wait_timeout` each, checking a stop flag between them).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/events.hpp"
#include "gpustream/library_session.hpp"
#include "gpustream/log_once.hpp"
#include "gpustream/probe.hpp"
#include "nvidia/nvml_api.hpp"

namespace gpustream::nvml {

struct EventSetSt;
using EventSet = EventSetSt*;  // nvmlEventSet_t (opaque)

inline constexpr Return kErrorTimeout = 10;

// nvmlEventType* bits (unsigned long long masks).
inline constexpr unsigned long long kEventSingleBitEccError = 0x1ULL;
inline constexpr unsigned long long kEventDoubleBitEccError = 0x2ULL;
inline constexpr unsigned long long kEventPState = 0x4ULL;
inline constexpr unsigned long long kEventXidCriticalError = 0x8ULL;
inline constexpr unsigned long long kEventClock = 0x10ULL;
inline constexpr unsigned long long kEventPowerSourceChange = 0x80ULL;
inline constexpr unsigned long long kEventMigConfigChange = 0x100ULL;

/// The types the watcher registers for (those a device supports of them).
inline constexpr unsigned long long kWatchedEvents =
    kEventSingleBitEccError | kEventDoubleBitEccError | kEventXidCriticalError | kEventClock |
    kEventPowerSourceChange;

struct EventData {  // nvmlEventData_t, 32 bytes (since R450: + gpuInstanceId, computeInstanceId)
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;  // the Xid number for nvmlEventTypeXidCriticalError, else 0
  unsigned gpu_instance_id;
  unsigned compute_instance_id;
};
static_assert(sizeof(EventData) == 32);

using EventSetCreateFn = Return(EventSet*);
using EventSetFreeFn = Return(EventSet);
using RegisterEventsFn = Return(Device, unsigned long long, EventSet);
using SupportedEventsFn = Return(Device, unsigned long long*);
using EventSetWaitFn = Return(EventSet, EventData*, unsigned);

/// The event functions. `missing` names the first absent one (then no events at all);
/// supported_events is optional (without it every watched type is tried).
struct EventApi {
  EventSetCreateFn* create = nullptr;
  EventSetFreeFn* free = nullptr;
  RegisterEventsFn* register_events = nullptr;
  SupportedEventsFn* supported = nullptr;
  EventSetWaitFn* wait = nullptr;
  std::string wait_name;  // "nvmlEventSetWait_v2" or "nvmlEventSetWait"
  std::string missing;

  static EventApi load(const DynamicLibrary& lib);
};

/// The event kind of one NVML event type bit.
EventKind event_kind_of(unsigned long long event_type) noexcept;

}  // namespace gpustream::nvml

namespace gpustream::nvidia_detail {

class NvmlBackend;

struct EventWatcherOptions {
  std::chrono::milliseconds wait_timeout{250};  // one nvmlEventSetWait_v2 call at most
  std::string probe = "nvidia";
};

class NvmlEventWatcher {
 public:
  /// Starts the thread. `backend` provides the session, the devices and the function table.
  NvmlEventWatcher(std::shared_ptr<NvmlBackend> backend, Probe::EventSink sink,
                   EventWatcherOptions options);
  ~NvmlEventWatcher();
  NvmlEventWatcher(const NvmlEventWatcher&) = delete;
  NvmlEventWatcher& operator=(const NvmlEventWatcher&) = delete;

  /// Ends the thread (within about one wait timeout) and frees the event set. Idempotent.
  void stop() noexcept;

  /// Called by the backend (its lock held) before it re-initializes NVML: returns once the
  /// watcher has freed its event set and released its session.
  void release_for_reinit();

 private:
  struct Registered {
    std::string uuid;
    nvml::Device handle = nullptr;
  };
  void run();
  bool begin();  // takes a session, creates the set, registers the devices
  void end();    // frees the set, drops the session
  void deliver(const nvml::EventData& data);
  bool stopping();
  void pause(std::chrono::milliseconds d);

  std::shared_ptr<NvmlBackend> backend_;
  Probe::EventSink sink_;
  EventWatcherOptions options_;
  nvml::EventApi api_;
  LogOnce log_once_;

  // Used on the watcher thread only.
  nvml::EventSet set_ = nullptr;
  std::vector<Registered> registered_;
  std::uint64_t generation_ = 0;
  LibrarySession::Guard session_;  // keeps NVML initialized while the set exists

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;               // guarded by mu_
  bool holding_ = false;            // guarded by mu_: a session (and a set) is held
  bool release_requested_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace gpustream::nvidia_detail
