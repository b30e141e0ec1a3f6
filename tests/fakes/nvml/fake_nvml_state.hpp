// fake_nvml_state.hpp — the shared state of the fake NVML and the entry every function goes
// through (counting, delays, init checks, per-function and per-device failures, session-tagged
// handles). See fake_nvml.cpp.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "fake_nvml_scenario.hpp"

using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

namespace fake_nvml {

inline constexpr nvmlReturn_t kOk = 0, kUninitialized = 1, kInvalid = 2, kNotSupported = 3,
                              kNotFound = 6, kInsufficient = 7, kLost = 15;

// A MIG device handle: (session << 16) | 0x8000 | (device slot << 8) | (MIG index + 1).
inline constexpr std::uintptr_t kMigHandleBit = 0x8000;
inline bool is_mig_handle(nvmlDevice_t h) {
  return (reinterpret_cast<std::uintptr_t>(h) & kMigHandleBit) != 0;
}

struct State {
  std::mutex mu;
  std::condition_variable cv;
  fake_nvml::Scenario scenario;
  bool initialized = false;
  unsigned generation = 0;  // sessions so far
  std::map<std::string, int> counts;
  std::map<unsigned, long> device_calls;  // slot -> calls this session
  std::map<unsigned, unsigned long long> util_tick, last_seen;
  bool blocked = false;
  long long time_ns = 0;  // the fake's time for power curves (gpustreamFakeNvmlSetTimeNs)
};

State& state();

inline void burn(long ns) {
  if (ns <= 0) return;
  const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < end) {}
}

// Common entry of every NVML function: counts, delays, checks init, applies fail.<fn>.
struct Call {
  explicit Call(const char* fn) : st(state()), lock(st.mu), name(fn) {
    ++st.counts[fn];
    st.cv.wait(lock, [&] { return !st.blocked; });
    if (st.scenario.call_delay_us > 0) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(st.scenario.call_delay_us));
      lock.lock();
    }
    burn(st.scenario.call_cost_ns);
    if (st.scenario.real_clock)
      st.time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  }
  nvmlReturn_t begin() {
    if (!st.initialized) {
      ++st.counts["uninitialized_call"];
      return kUninitialized;
    }
    if (auto it = st.scenario.fail.find(name); it != st.scenario.fail.end()) return it->second;
    return kOk;
  }
  // For functions on a device: resolves the handle, counts the call, applies lost_after and
  // device.<i>.fail.<fn>.
  nvmlReturn_t device(nvmlDevice_t h, fake_nvml::Device** dev) {
    if (auto rc = begin(); rc != kOk) return rc;
    const auto v = reinterpret_cast<std::uintptr_t>(h);
    const unsigned slot = static_cast<unsigned>(v & 0xffff) - 1;
    // NVML answers NOT_SUPPORTED for what it does not know per MIG instance (utilization,
    // power, clocks, ...); the functions that work on MIG handles call mig() instead.
    if ((v & kMigHandleBit) != 0 && (v >> 16) == st.generation) return kNotSupported;
    if ((v >> 16) != st.generation || slot >= st.scenario.devices.size()) {
      ++st.counts["stale_handle"];
      return kInvalid;
    }
    return on_slot(slot, dev);
  }
  nvmlReturn_t on_slot(unsigned slot, fake_nvml::Device** dev) {
    auto& d = st.scenario.devices[slot];
    const long calls = ++st.device_calls[slot];
    if (d.lost_after && calls > *d.lost_after) return kLost;
    if (auto it = d.fail.find(name); it != d.fail.end()) return it->second;
    *dev = &d;
    this->slot = slot;
    return kOk;
  }
  // For functions that work on MIG device handles: resolves one (and applies the parent's
  // lost_after and device.<i>.fail.<fn>).
  nvmlReturn_t mig(nvmlDevice_t h, fake_nvml::Device** parent, fake_nvml::MigInstance** inst) {
    if (auto rc = begin(); rc != kOk) return rc;
    const auto v = reinterpret_cast<std::uintptr_t>(h);
    const unsigned slot = static_cast<unsigned>((v >> 8) & 0x7f);
    const unsigned k = static_cast<unsigned>(v & 0xff) - 1;
    if ((v >> 16) != st.generation || (v & kMigHandleBit) == 0 ||
        slot >= st.scenario.devices.size()) {
      ++st.counts["stale_handle"];
      return kInvalid;
    }
    if (auto rc = on_slot(slot, parent); rc != kOk) return rc;
    auto& list = (*parent)->mig;
    if (k >= list.size() || !list[k] || (*parent)->mig_mode != 1) return kInvalid;
    *inst = &*list[k];
    return kOk;
  }
  State& st;
  std::unique_lock<std::mutex> lock;
  std::string name;
  unsigned slot = 0;
};

inline nvmlDevice_t handle_of(const State& st, unsigned slot) {
  return reinterpret_cast<nvmlDevice_t>((std::uintptr_t{st.generation} << 16) | (slot + 1));
}

inline nvmlDevice_t mig_handle_of(const State& st, unsigned slot, unsigned k) {
  return reinterpret_cast<nvmlDevice_t>((std::uintptr_t{st.generation} << 16) | kMigHandleBit |
                                        (std::uintptr_t{slot} << 8) | (k + 1));
}

inline unsigned slot_of_index(const State& st, unsigned index) {
  const auto n = static_cast<unsigned>(st.scenario.devices.size());
  return st.scenario.rotate_on_init ? (index + st.generation) % n : index;
}

inline nvmlReturn_t copy_string(const std::string& s, char* buf, unsigned length) {
  if (!buf || length <= s.size()) return kInsufficient;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return kOk;
}

// MIG device handles in the functions of fake_nvml.cpp that accept them (fake_nvml_mig.cpp).
nvmlReturn_t mig_name(nvmlDevice_t h, char* name, unsigned length);
nvmlReturn_t mig_uuid(nvmlDevice_t h, char* uuid, unsigned length);
/// total, free, used as nvmlMemory_t (v1) counts them; reserved is 0 in an instance.
nvmlReturn_t mig_memory(const char* fn, nvmlDevice_t h, unsigned long long* total,
                        unsigned long long* used);

}  // namespace fake_nvml
