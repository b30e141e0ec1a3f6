// gpustream/measurement.hpp — per-device statistics and energy over a window of time.
//
//   MeasurementWindow window(channel);
//   window.begin();
//   run_the_workload();
//   WindowSummary s = window.end();   // min/max/mean/last per metric, energy, per device
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/channel.hpp"
#include "gpustream/model.hpp"

namespace gpustream {

/// Statistics of one metric over the present readings in a window (absent readings do not
/// count: no zeros). `source` is the source of the last reading.
struct MetricSummary {
  double min = 0;
  double max = 0;
  double mean = 0;
  double last = 0;
  std::size_t count = 0;
  Source source = Source::none;
};

/// One device as one probe saw it during the window.
struct DeviceWindowSummary {
  std::string device_id;
  std::string probe;
  std::size_t samples = 0;  // snapshots of this probe that contained the device
  std::map<Metric, MetricSummary> metrics;
  /// Energy used over the window, joules. When the device reports an energy counter (two or
  /// more readings in the window): the sum of the counter's increases, kind `counter` (or the
  /// probe's own kind when it labels its cumulative value `integrated`). Otherwise, with two or
  /// more power_watts readings: the trapezoid integral of power over monotonic_ns, kind
  /// `integrated`. Otherwise absent. Covers the span from the first to the last sample.
  std::optional<double> energy_joules;
  std::optional<EnergyKind> energy_kind;
  /// How often the energy counter went down (driver reload, wrap-around). Such an interval adds
  /// the counter's new value — the energy since the reset, a lower bound — never a negative.
  std::size_t energy_counter_resets = 0;

  const MetricSummary* find(Metric m) const;
};

struct WindowSummary {
  std::int64_t begin_ns = 0;  // steady clock (same clock as GpuSnapshot::monotonic_ns)
  std::int64_t end_ns = 0;
  std::size_t snapshots = 0;            // snapshots that went into the summary
  std::uint64_t missed_snapshots = 0;   // lost (channel history too short to recover them)
  std::vector<DeviceWindowSummary> devices;  // in order of first appearance

  const DeviceWindowSummary* find(std::string_view device_id) const;
};

/// Turns the snapshot stream between begin() and end() into a WindowSummary.
///
/// Bound to a channel, it subscribes (lossless) at construction; the window holds the
/// snapshots published after begin() and up to end() — end() takes the ones not yet delivered
/// from the channel's history, so nothing published before end() returns is left out. The
/// filter selects probes and devices (devices not listed are not summarized) and, when
/// non-empty, which metrics are summarized. add() feeds snapshots directly (it applies the
/// filter too); it is ignored outside begin()/end().
///
/// Thread safety: all members may be called from any thread. The channel must outlive the
/// window. begin() restarts the window; end() stops it. Destroying it unsubscribes.
class MeasurementWindow {
 public:
  /// A window fed only through add().
  explicit MeasurementWindow(SubscriptionFilter filter = {});
  explicit MeasurementWindow(SnapshotChannel& channel, SubscriptionFilter filter = {});
  ~MeasurementWindow();
  MeasurementWindow(const MeasurementWindow&) = delete;
  MeasurementWindow& operator=(const MeasurementWindow&) = delete;

  void begin();
  WindowSummary end();
  void add(const GpuSnapshot& s);
  bool running() const;

 private:
  struct Accumulators;
  void on_snapshot(const SnapshotPtr& s);
  void on_gap(const Gap& gap);
  void catch_up_locked();

  SnapshotChannel* channel_ = nullptr;
  SubscriptionFilter filter_;
  mutable std::mutex mu_;
  bool running_ = false;
  std::int64_t begin_ns_ = 0;
  std::uint64_t last_sequence_ = 0;  // newest channel sequence taken into the window
  std::uint64_t missed_ = 0;
  std::unique_ptr<Accumulators> acc_;
  Subscription subscription_;  // last: destroyed (unsubscribed) first
};

}  // namespace gpustream
