// MeasurementWindow over the NVIDIA probe's driver power samples, end to end: the fake
// libnvidia-ml.so.1's power sample ring (nvmlDeviceGetSamples) read by the real probe
// (make_nvidia_probe), its snapshots published into a SnapshotChannel, and a window with exact
// edges over that channel. A board without an energy counter whose power varies within a
// ~300 ms window gets its energy within 1 % of the true integral, from every driver sample
// (nvidia_samples_test.cpp and measurement_samples_test.cpp prove the two halves apart). Built
// with the nvidia probe only.
//
// Time is driven, not slept: one DrivenClock is the probe's clock (NvidiaProbeOptions::clock,
// the snapshots' monotonic_ns), the window's clock, and, through NvidiaProbeOptions::host_clock,
// the host clocks the probe reads to put the ring's CPU time stamps on it (CLOCK_REALTIME a
// fixed offset ahead). The ring is laid out once, for the whole run: the probe leaves the
// entries later than each snapshot in it, so each snapshot takes what a driver would have had
// by then. Every instant is exact, so are the samples' instants; the expectation is the
// analytic integral over the edges the window reports. (The fake's own time,
// gpustreamFakeNvmlSetTimeNs, drives only power curves and GPM counters, neither used here.)
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/measurement.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "probes/nvidia/nvidia_fakes.hpp"
#include "probes/probe_harness.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::test {
namespace {

constexpr std::int64_t kMs = 1'000'000;  // ns

constexpr std::int64_t kWallOffsetNs = 1'764'000'000'123'456'000;  // CLOCK_REALTIME - steady

std::int64_t ns_of(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

/// The board's true power, W, at `t` ns after the begin edge: 100 W; a raised-cosine burst to
/// 350 W from 20 to 120 ms; 100 W again until `rise` (after the mid-window snapshot), then a
/// half-cosine climb to 300 W over 100 ms, and 300 W after.
struct Curve {
  static constexpr double kBase = 100, kBurst = 250, kClimb = 200;
  static constexpr std::int64_t kBurstFrom = 20 * kMs, kBurstLength = 100 * kMs;
  static constexpr std::int64_t kClimbLength = 100 * kMs;
  std::optional<std::int64_t> rise;

  double watts(std::int64_t t) const {
    double w = kBase;
    if (t > kBurstFrom && t < kBurstFrom + kBurstLength)
      w += kBurst / 2 * (1 - std::cos(2 * std::numbers::pi * x(t - kBurstFrom, kBurstLength)));
    if (rise && t > *rise)
      w += t >= *rise + kClimbLength
               ? kClimb
               : kClimb / 2 * (1 - std::cos(std::numbers::pi * x(t - *rise, kClimbLength)));
    return w;
  }
  /// ∫ watts over [a, b] (ns after the begin edge), J.
  double joules(std::int64_t a, std::int64_t b) const { return energy(b) - energy(a); }

 private:
  static double x(std::int64_t t, std::int64_t length) {
    return static_cast<double>(t) / static_cast<double>(length);
  }
  static double s(std::int64_t ns) { return static_cast<double>(ns) * 1e-9; }
  /// ∫ watts over [0, t], J.
  double energy(std::int64_t t) const {
    double e = kBase * s(t);
    const auto in_burst = std::clamp<std::int64_t>(t - kBurstFrom, 0, kBurstLength);
    e += kBurst / 2 *
         (s(in_burst) - s(kBurstLength) / (2 * std::numbers::pi) *
                            std::sin(2 * std::numbers::pi * x(in_burst, kBurstLength)));
    if (rise && t > *rise) {
      const auto in_climb = std::min(t - *rise, kClimbLength);
      e += kClimb / 2 *
           (s(in_climb) - s(kClimbLength) / std::numbers::pi *
                              std::sin(std::numbers::pi * x(in_climb, kClimbLength)));
      if (t > *rise + kClimbLength) e += kClimb * s(t - *rise - kClimbLength);
    }
    return e;
  }
};

class NvmlRingWindowTest : public ::testing::Test {
 protected:
  /// The driver's ring: a reading every 20 ms from 10 ms after the begin edge, 120 of them
  /// (2.4 s; about what a driver keeps), on CLOCK_REALTIME (µs), all in the scenario from the
  /// start: those later than a snapshot stay in the ring for a later one.
  static constexpr std::int64_t kFirstReading = 10 * kMs, kDriverPeriod = 20 * kMs;
  static constexpr int kRingEntries = 120;
  /// The mid-window snapshot (after the burst, between two readings), the climb's start (off the
  /// readings' grid: the ring's trapezoids are then not exact by symmetry) and the end edge
  /// (after the climb), ns after the begin edge.
  static constexpr std::int64_t kMid = 135 * kMs, kRise = 155 * kMs, kEnd = 300 * kMs;

  /// An Ada board with the R535 power fields (power_watts is the instantaneous power, so the
  /// window integrates it with the driver's samples) and no energy counter.
  static std::string board(double instant_w, const std::string& ring = {}) {
    const auto mw = std::to_string(std::lround(instant_w * 1000));
    return "devices=1\n"
           "device.0.name=NVIDIA L40S\n"
           "device.0.architecture=8\n"
           "device.0.fail.nvmlDeviceGetTotalEnergyConsumption=NOT_SUPPORTED\n"
           "device.0.power_mw=" +
           mw + "\ndevice.0.power_instant_mw=" + mw + "\n" + ring;
  }
  /// Reading k of the ring: its time stamp, ns after the begin edge, and milliwatts.
  static std::int64_t reading_at(int k) { return kFirstReading + k * kDriverPeriod; }
  static long reading_mw(const Curve& c, int k) {
    return std::lround(c.watts(reading_at(k)) * 1000);
  }
  /// The ring on CLOCK_REALTIME: the begin edge is kBegin on the steady clock.
  static std::string ring(const Curve& c) {
    std::string out = "device.0.power_samples=";
    for (int k = 0; k < kRingEntries; ++k)
      out += (k ? "," : "") + std::to_string((kBegin + kWallOffsetNs + reading_at(k)) / 1000) +
             ":" + std::to_string(reading_mw(c, k));
    return out + "\n";
  }

  void start(const Curve& curve) {
    nvml_.scenario(board(Curve::kBase, ring(curve)));
    NvidiaProbeOptions o;
    o.nvml_library = fakes::kFakeNvml;
    o.use = NvidiaProbeOptions::Use::nvml_only;
    o.library_session = LibrarySessionMode::persistent;
    o.paths.procfs_root = proc_.path();
    o.clock = clock_.function();
    o.host_clock = [steady = clock_.function()](NvidiaProbeOptions::HostClock c) {
      using C = NvidiaProbeOptions::HostClock;
      const auto now = ns_of(steady());
      return c == C::realtime ? now + kWallOffsetNs : c == C::boottime ? now + 7 * 1000 * kMs : now;
    };
    probe_ = make_nvidia_probe(harness_.executors(), o);
    ASSERT_TRUE(harness_.detect(*probe_).available);
    ASSERT_EQ(now(), kBegin);
  }
  std::int64_t now() { return ns_of(clock_.function()()); }
  /// Moves the driven clock to `t` ns after the begin edge.
  void advance_to(std::int64_t t) {
    ASSERT_GE(kBegin + t, now());
    clock_.advance(std::chrono::milliseconds((kBegin + t - now()) / kMs));
    ASSERT_EQ(now(), kBegin + t);
  }
  /// One snapshot of the probe, published; every one is kept in `published_`.
  SnapshotPtr sample_and_publish() {
    auto r = harness_.sample(*probe_);
    EXPECT_FALSE(r.ec) << r.ec.message();
    EXPECT_TRUE(r.snapshot.errors.empty()) << r.snapshot.errors.front().message;
    EXPECT_EQ(r.snapshot.devices.size(), 1u);
    published_.push_back(channel_.publish(std::move(r.snapshot)));
    return published_.back();
  }

  /// The begin edge on the driven steady clock: DrivenClock starts at one hour.
  static constexpr std::int64_t kBegin = 3600 * 1000 * kMs;

  test::DrivenClock clock_;
  FakeNvml nvml_;
  TempTree proc_;
  ProbeHarness harness_;
  std::shared_ptr<NvidiaProbe> probe_;
  boost::asio::io_context io_;
  SnapshotChannel channel_{io_.get_executor()};
  std::vector<SnapshotPtr> published_;
};

TEST_F(NvmlRingWindowTest, ThreeHundredMillisecondsWithoutACounterWithinOnePercent) {
  Curve curve;
  curve.rise = kRise;
  start(curve);
  MeasurementWindow window(channel_, [&](const SubscriptionFilter&) {
    EdgeSample e;
    e.probe = "nvidia";
    e.snapshot = sample_and_publish();
    return std::vector<EdgeSample>{e};
  });
  window.set_clock([this] { return now(); });

  // The begin edge: no reading of the ring is due yet, the power 100 W (flat until 20 ms).
  window.begin();
  ASSERT_EQ(published_.size(), 1u);
  const auto begin = published_[0];
  EXPECT_EQ(begin->monotonic_ns, kBegin);
  const auto& b = begin->devices.at(0);
  EXPECT_EQ(b.power_kind, PowerKind::instant);
  EXPECT_FALSE(b.metrics[Metric::energy_joules].has_value());
  EXPECT_EQ(b.metrics[Metric::power_watts].value_or(-1), Curve::kBase);
  EXPECT_TRUE(b.power_samples.empty());

  // A periodic snapshot mid-window, after the burst (100 W again): it takes the ring's
  // readings up to it.
  advance_to(kMid);
  const auto mid = sample_and_publish();
  io_.poll();
  EXPECT_EQ(mid->monotonic_ns, kBegin + kMid);

  // The climb to 300 W after it; the end edge once it is over.
  nvml_.reload(board(Curve::kBase + Curve::kClimb, ring(curve)));
  advance_to(kEnd);
  const WindowSummary s = window.end();
  ASSERT_EQ(published_.size(), 3u);
  const auto end = published_[2];
  EXPECT_EQ(end->monotonic_ns, kBegin + kEnd);

  // The probe: every ring reading from the begin edge to the end edge, once, in order, on the
  // steady clock at the instant the driver took it, split between the two: 10..130 ms with the
  // mid snapshot, 150..290 ms with the end edge (310 ms and later stay in the ring).
  const auto& mid_ps = mid->devices.at(0).power_samples;
  const auto& end_ps = end->devices.at(0).power_samples;
  EXPECT_EQ(mid_ps.size(), 7u);
  EXPECT_EQ(end_ps.size(), 8u);
  std::vector<PowerSample> taken(mid_ps.begin(), mid_ps.end());
  taken.insert(taken.end(), end_ps.begin(), end_ps.end());
  ASSERT_EQ(taken.size(), 15u);
  for (std::size_t k = 0; k < taken.size(); ++k) {
    const int i = static_cast<int>(k);
    EXPECT_EQ(taken[k].watts, static_cast<double>(reading_mw(curve, i)) / 1000) << k;
    EXPECT_EQ(taken[k].monotonic_ns, kBegin + reading_at(i)) << k;
  }

  // The window.
  EXPECT_TRUE(s.exact_edges);
  EXPECT_TRUE(s.edge_errors.empty());
  EXPECT_EQ(s.overhead.edge_samples, 2u);
  ASSERT_EQ(s.devices.size(), 1u);
  const auto& d = s.devices[0];
  EXPECT_EQ(d.begin_edge, EdgeKind::sampled);
  EXPECT_EQ(d.end_edge, EdgeKind::sampled);
  EXPECT_EQ(d.begin_edge_ns, kBegin);
  EXPECT_EQ(d.end_edge_ns, kBegin + kEnd);
  EXPECT_EQ(d.energy_kind, EnergyKind::integrated);
  EXPECT_EQ(d.energy_method, EnergyMethod::integrated);
  EXPECT_EQ(d.counter_changes, 0u);
  EXPECT_EQ(d.estimated_joules, 0);
  EXPECT_EQ(d.ignored_power_samples, 0u);
  // Integrated from N driver samples and the three power_watts readings (edges, mid).
  EXPECT_EQ(d.driver_power_samples, taken.size());
  EXPECT_EQ(d.power_readings, taken.size() + 3);
  // The largest gap: the driver's period (the edges and the mid snapshot lie closer to their
  // neighbours: 10, 5 and 10 ms).
  EXPECT_EQ(d.largest_gap_ns, kDriverPeriod);
  EXPECT_EQ(d.update_period_ns, kDriverPeriod);  // the median spacing of the driver's samples
  EXPECT_EQ(d.shorter_than_update_period, false);
  EXPECT_GT(d.fresh_coverage.value_or(0), 0.99);

  const double truth = curve.joules(0, kEnd);
  ASSERT_TRUE(d.energy_joules);
  const double error = std::abs(*d.energy_joules - truth) / truth;
  RecordProperty("window_ms", std::to_string(kEnd / kMs));
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", error);
  RecordProperty("relative_error", text);
  EXPECT_LT(error, 0.01) << *d.energy_joules << " J, true " << truth << " J";
  // The three power_watts readings alone miss the burst and the climb: the ring is what counts.
  const double three = Curve::kBase * 1e-9 * static_cast<double>(kMid) +
                       (Curve::kBase + Curve::kClimb / 2) * 1e-9 * static_cast<double>(kEnd - kMid);
  EXPECT_GT(std::abs(three - truth) / truth, 0.1);
}

}  // namespace
}  // namespace gpustream::test
