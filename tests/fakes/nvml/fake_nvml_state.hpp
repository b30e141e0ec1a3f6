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

inline constexpr nvmlReturn_t kOk = 0, kUninitialized = 1, kInvalid = 2, kNotFound = 6,
                       kInsufficient = 7, kLost = 15;

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
  while (std::chrono::steady_clock::now() < end) {
  }
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
  State& st;
  std::unique_lock<std::mutex> lock;
  std::string name;
  unsigned slot = 0;
};

inline nvmlDevice_t handle_of(const State& st, unsigned slot) {
  return reinterpret_cast<nvmlDevice_t>((std::uintptr_t{st.generation} << 16) | (slot + 1));
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

}  // namespace fake_nvml
