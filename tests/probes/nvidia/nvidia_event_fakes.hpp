// nvidia_event_fakes.hpp — fires events in the fake libnvidia-ml.so.1 (fake_nvml_events.cpp)
// and collects what a probe reports.
//
//   FakeNvmlEvents ev;                       // the fake's event controls, through dlsym
//   ev.await_waiters(1);                     // the probe's event thread is inside a wait
//   ev.fire(0, kXid, 79);                    // an Xid 79 on scenario slot 0
//   EventCollector got;  probe->start_events(got.sink());  got.wait_for(1);
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/events.hpp"
#include "gpustream/probe.hpp"
#include "gpustream_fake_nvml_paths.hpp"

namespace gpustream::test {

inline constexpr unsigned long long kFakeEventSbe = 0x1, kFakeEventDbe = 0x2, kFakeEventXid = 0x8,
                                    kFakeEventClock = 0x10, kFakeEventPowerSource = 0x80;

class FakeNvmlEvents {
 public:
  explicit FakeNvmlEvents(const char* library = fakes::kFakeNvml)
      : lib_(DynamicLibrary::load(library)) {
    fire_ = lib_.required<int(unsigned, unsigned long long, unsigned long long, unsigned)>(
        "gpustreamFakeNvmlFireEvent");
    await_ = lib_.required<int(int, int)>("gpustreamFakeNvmlAwaitWaiters");
    waiters_ = lib_.required<int()>("gpustreamFakeNvmlEventWaiters");
  }
  /// Queues `count` events; returns how many event sets had the device registered for `type`.
  int fire(unsigned device, unsigned long long type, unsigned long long data = 0,
           unsigned count = 1) const {
    return fire_(device, type, data, count);
  }
  /// True once `n` threads wait in nvmlEventSetWait_v2 (a deadline that matters only on failure).
  bool await_waiters(int n = 1) const { return await_(n, 10000) != 0; }
  int waiters() const { return waiters_(); }

 private:
  DynamicLibrary lib_;
  int (*fire_)(unsigned, unsigned long long, unsigned long long, unsigned) = nullptr;
  int (*await_)(int, int) = nullptr;
  int (*waiters_)() = nullptr;
};

/// The events a sink received, thread-safe.
class EventCollector {
 public:
  Probe::EventSink sink() {
    return [this](GpuEvent e) {
      {
        std::lock_guard lock(mu_);
        events_.push_back(std::move(e));
      }
      cv_.notify_all();
    };
  }
  /// Waits until `n` events arrived (a deadline that matters only when a test fails).
  std::vector<GpuEvent> wait_for(std::size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return events_.size() >= n; });
    return events_;
  }
  std::vector<GpuEvent> events() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<GpuEvent> events_;
};

}  // namespace gpustream::test
