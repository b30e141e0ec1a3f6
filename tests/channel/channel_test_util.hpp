// Helpers for the channel tests: small snapshots and a thread-safe collector of deliveries.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpustream/channel.hpp"

namespace gpustream::test {

inline GpuSnapshot make_snapshot(std::string probe, std::vector<std::string> device_ids = {"gpu0"},
                                 std::vector<Metric> present = {Metric::utilization_percent}) {
  GpuSnapshot s;
  s.probe = std::move(probe);
  for (auto& id : device_ids) {
    DeviceSample d;
    d.id = std::move(id);
    for (Metric m : present) d.metrics.set(m, 42.0, Source::simulated);
    s.devices.push_back(std::move(d));
  }
  return s;
}

/// What a callback subscriber received, in order. Thread-safe; wait_for_* wait on a condition
/// with a generous deadline that only matters when a test fails.
class Collector {
 public:
  struct Item {
    std::uint64_t sequence = 0;  // 0 for a gap
    std::string probe;
    const GpuSnapshot* object = nullptr;
    std::optional<Gap> gap;
  };

  std::function<void(const SnapshotPtr&)> on_snapshot() {
    return [this](const SnapshotPtr& s) {
      std::lock_guard lock(mu_);
      items_.push_back(Item{s->sequence, s->probe, s.get(), std::nullopt});
      ++snapshots_;
      cv_.notify_all();
    };
  }
  std::function<void(const Gap&)> on_gap() {
    return [this](const Gap& g) {
      std::lock_guard lock(mu_);
      items_.push_back(Item{0, {}, nullptr, g});
      cv_.notify_all();
    };
  }

  std::vector<Item> items() const {
    std::lock_guard lock(mu_);
    return items_;
  }
  std::size_t snapshots() const {
    std::lock_guard lock(mu_);
    return snapshots_;
  }
  std::vector<std::uint64_t> sequences() const {
    std::lock_guard lock(mu_);
    std::vector<std::uint64_t> out;
    for (const auto& i : items_)
      if (!i.gap) out.push_back(i.sequence);
    return out;
  }
  std::vector<Gap> gaps() const {
    std::lock_guard lock(mu_);
    std::vector<Gap> out;
    for (const auto& i : items_)
      if (i.gap) out.push_back(*i.gap);
    return out;
  }
  /// True when `n` snapshots arrived before the deadline.
  bool wait_for_snapshots(std::size_t n, std::chrono::seconds deadline = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, deadline, [&] { return snapshots_ >= n; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Item> items_;
  std::size_t snapshots_ = 0;
};

inline std::vector<std::uint64_t> iota_seq(std::uint64_t first, std::uint64_t last) {
  std::vector<std::uint64_t> v;
  for (auto i = first; i <= last; ++i) v.push_back(i);
  return v;
}

}  // namespace gpustream::test
