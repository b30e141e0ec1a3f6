// MeasurementWindow over the NVIDIA probe's driver power samples, end to end: the fake
// libnvidia-ml.so.1's power sample ring (nvmlDeviceGetSamples) read by the real probe
// (make_nvidia_probe), its snapshots published into a SnapshotChannel, and a window with exact
// edges over that channel. A board without an energy counter whose power varies within a
// ~300 ms window gets its energy within 1 % of the true integral, from every driver sample
// (nvidia_samples_test.cpp and measurement_samples_test.cpp prove the two halves apart). Built
// with the nvidia probe only.
//
// Time: the probe stamps its snapshots with the steady clock and converts the ring's time
// stamps with its own measured offset between the host clocks, with no clock to inject, so a
// 300 ms window spans 300 ms of real time: the test sleeps until the window's instants are
// past. Nothing asserts how long anything took: the power curve is laid out from the instants
// the probe actually sampled at (flat wherever a snapshot may land), and the expectation is the
// analytic integral over the edges the window reports.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numbers>
#include <optional>
#include <string>
#include <thread>
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

/// CLOCK_REALTIME minus the steady clock, ns: the narrowest of a few bracketed readings.
std::int64_t wall_minus_steady_ns() {
  std::optional<std::int64_t> best, best_width;
  for (int i = 0; i < 5; ++i) {
    const auto before = steady_now_ns();
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    const auto after = steady_now_ns();
    const auto wall = static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    if (!best_width || after - before < *best_width)
      best_width = after - before, best = wall - (before + (after - before) / 2);
  }
  return *best;
}

void sleep_until_steady(std::int64_t ns) {
  std::this_thread::sleep_until(
      std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns)));
}

/// The board's true power, W, at `t` ns after the begin edge: 100 W; a raised-cosine burst to
/// 350 W from 20 to 120 ms; 100 W again until `rise` (set once the mid-window snapshot is
/// taken, after it), then a half-cosine climb to 300 W over 100 ms, and 300 W after.
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
  /// (2.4 s; about what a driver keeps), on CLOCK_REALTIME (µs). Those still in the future
  /// when the probe samples stay in the ring for a later snapshot (the probe leaves every entry
  /// later than its snapshot), so each snapshot takes what a driver would have had by then.
  static constexpr std::int64_t kFirstReading = 10 * kMs, kDriverPeriod = 20 * kMs;
  static constexpr int kRingEntries = 120;

  /// An Ada board with the R535 power fields (power_watts is the instantaneous power, so the
  /// window integrates it with the driver's samples) and no energy counter. (Not a Hopper: its
  /// GPM pair needs the fake's own time to move between samples, which is not this test's.)
  static std::string board(double instant_w, const std::string& ring = {}) {
    const auto mw = std::to_string(std::lround(instant_w * 1000));
    return "devices=1\n"
           "device.0.name=NVIDIA L40S\n"
           "device.0.architecture=8\n"
           "device.0.fail.nvmlDeviceGetTotalEnergyConsumption=NOT_SUPPORTED\n"
           "device.0.power_mw=" +
           mw + "\ndevice.0.power_instant_mw=" + mw + "\n" + ring;
  }
  /// Reading k of the ring: its time stamp, ns after the begin edge (`origin_ns` on
  /// CLOCK_REALTIME, a whole µs), and milliwatts.
  static std::int64_t reading_at(int k) { return kFirstReading + k * kDriverPeriod; }
  static long reading_mw(const Curve& c, int k) {
    return std::lround(c.watts(reading_at(k)) * 1000);
  }
  std::string ring(const Curve& c) const {
    std::string out = "device.0.power_samples=";
    for (int k = 0; k < kRingEntries; ++k)
      out += (k ? "," : "") + std::to_string((origin_ns_ + reading_at(k)) / 1000) + ":" +
             std::to_string(reading_mw(c, k));
    return out + "\n";
  }

  void start() {
    nvml_.scenario(board(Curve::kBase));
    NvidiaProbeOptions o;
    o.nvml_library = fakes::kFakeNvml;
    o.use = NvidiaProbeOptions::Use::nvml_only;
    o.library_session = LibrarySessionMode::persistent;
    o.paths.procfs_root = proc_.path();
    probe_ = make_nvidia_probe(harness_.executors(), o);
    ASSERT_TRUE(harness_.detect(*probe_).available);
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

  FakeNvml nvml_;
  TempTree proc_;
  ProbeHarness harness_;
  std::shared_ptr<NvidiaProbe> probe_;
  boost::asio::io_context io_;
  SnapshotChannel channel_{io_.get_executor()};
  std::vector<SnapshotPtr> published_;
  std::int64_t origin_ns_ = 0;  // the begin edge on CLOCK_REALTIME, ns (a whole µs)
};

TEST_F(NvmlRingWindowTest, ThreeHundredMillisecondsWithoutACounterWithinOnePercent) {
  start();
  MeasurementWindow window(channel_, [&](const SubscriptionFilter&) {
    EdgeSample e;
    e.probe = "nvidia";
    e.snapshot = sample_and_publish();
    return std::vector<EdgeSample>{e};
  });

  // The begin edge: the ring is empty, the power 100 W (flat until 20 ms after it).
  window.begin();
  ASSERT_EQ(published_.size(), 1u);
  const auto begin = published_[0];
  const std::int64_t offset = wall_minus_steady_ns();
  origin_ns_ = (begin->monotonic_ns + offset) / 1000 * 1000;
  const auto since_begin = [&](std::int64_t steady_ns) { return steady_ns + offset - origin_ns_; };
  const auto& b = begin->devices.at(0);
  EXPECT_EQ(b.power_kind, PowerKind::instant);
  EXPECT_FALSE(b.metrics[Metric::energy_joules].has_value());
  EXPECT_EQ(b.metrics[Metric::power_watts].value_or(-1), Curve::kBase);
  EXPECT_TRUE(b.power_samples.empty());

  // A periodic snapshot mid-window, after the burst (100 W again): it takes the ring's
  // readings up to it.
  Curve curve;
  sleep_until_steady(begin->monotonic_ns + 130 * kMs);
  nvml_.reload(board(Curve::kBase, ring(curve)));
  const auto mid = sample_and_publish();
  io_.poll();
  const std::int64_t mid_at = since_begin(mid->monotonic_ns);
  ASSERT_GE(mid_at, Curve::kBurstFrom + Curve::kBurstLength);

  // The climb to 300 W starts after it; the end edge comes once it is over, and ≥ 300 ms in.
  curve.rise = std::max(mid_at + 10 * kMs, 150 * kMs);
  nvml_.reload(board(Curve::kBase + Curve::kClimb, ring(curve)));
  sleep_until_steady(begin->monotonic_ns +
                     std::max(300 * kMs, *curve.rise + Curve::kClimbLength + 10 * kMs));
  const WindowSummary s = window.end();
  ASSERT_EQ(published_.size(), 3u);
  const auto end = published_[2];
  const std::int64_t end_at = since_begin(end->monotonic_ns);
  ASSERT_GE(end_at, *curve.rise + Curve::kClimbLength);

  // The probe: every ring reading from the begin edge to the end edge, once, in order, on the
  // steady clock (the driver's spacing exact within a snapshot), split between the two.
  std::vector<PowerSample> taken;
  for (const auto& snap : {mid, end}) {
    const auto& ps = snap->devices.at(0).power_samples;
    ASSERT_FALSE(ps.empty());
    for (std::size_t i = 1; i < ps.size(); ++i)
      EXPECT_EQ(ps[i].monotonic_ns - ps[i - 1].monotonic_ns, kDriverPeriod);
    EXPECT_LE(ps.back().monotonic_ns, snap->monotonic_ns);
    taken.insert(taken.end(), ps.begin(), ps.end());
  }
  for (std::size_t k = 0; k < taken.size(); ++k) {
    const int i = static_cast<int>(k);
    EXPECT_EQ(taken[k].watts, static_cast<double>(reading_mw(curve, i)) / 1000) << k;
    // 2 ms: far below a driver period, far above the error of the two clock offsets.
    EXPECT_NEAR(static_cast<double>(since_begin(taken[k].monotonic_ns)),
                static_cast<double>(reading_at(i)), 2.0 * kMs)
        << k;
  }
  EXPECT_GT(taken.back().monotonic_ns, end->monotonic_ns - kDriverPeriod - 2 * kMs);

  // The window.
  EXPECT_TRUE(s.exact_edges);
  EXPECT_TRUE(s.edge_errors.empty());
  EXPECT_EQ(s.overhead.edge_samples, 2u);
  ASSERT_EQ(s.devices.size(), 1u);
  const auto& d = s.devices[0];
  EXPECT_EQ(d.begin_edge, EdgeKind::sampled);
  EXPECT_EQ(d.end_edge, EdgeKind::sampled);
  EXPECT_EQ(d.begin_edge_ns, begin->monotonic_ns);
  EXPECT_EQ(d.end_edge_ns, end->monotonic_ns);
  EXPECT_EQ(d.energy_kind, EnergyKind::integrated);
  EXPECT_EQ(d.energy_method, EnergyMethod::integrated);
  EXPECT_EQ(d.counter_changes, 0u);
  EXPECT_EQ(d.estimated_joules, 0);
  EXPECT_EQ(d.ignored_power_samples, 0u);
  // Integrated from N driver samples and the three power_watts readings (edges, mid).
  EXPECT_EQ(d.driver_power_samples, taken.size());
  EXPECT_EQ(d.power_readings, taken.size() + 3);
  // The largest gap: that of the readings the probe delivered, about the driver's period.
  std::vector<std::int64_t> at{begin->monotonic_ns, mid->monotonic_ns, end->monotonic_ns};
  for (const auto& p : taken) at.push_back(p.monotonic_ns);
  std::sort(at.begin(), at.end());
  std::int64_t gap = 0;
  for (std::size_t i = 1; i < at.size(); ++i) gap = std::max(gap, at[i] - at[i - 1]);
  EXPECT_EQ(d.largest_gap_ns, gap);
  EXPECT_NEAR(static_cast<double>(d.largest_gap_ns.value_or(0)), 20.0 * kMs, 2.0 * kMs);
  EXPECT_EQ(d.update_period_ns, kDriverPeriod);  // the median spacing of the driver's samples
  EXPECT_EQ(d.shorter_than_update_period, false);
  EXPECT_GT(d.fresh_coverage.value_or(0), 0.99);

  const double truth = curve.joules(0, end_at) - curve.joules(0, since_begin(begin->monotonic_ns));
  ASSERT_TRUE(d.energy_joules);
  const double error = std::abs(*d.energy_joules - truth) / truth;
  RecordProperty("window_ms", std::to_string((end->monotonic_ns - begin->monotonic_ns) / kMs));
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", error);
  RecordProperty("relative_error", text);
  EXPECT_LT(error, 0.01) << *d.energy_joules << " J, true " << truth << " J";
  // The three power_watts readings alone miss the burst and the climb: the ring is what counts.
  const double mid_s = static_cast<double>(mid->monotonic_ns - begin->monotonic_ns) * 1e-9;
  const double end_s = static_cast<double>(end->monotonic_ns - mid->monotonic_ns) * 1e-9;
  const double three = Curve::kBase * mid_s + (Curve::kBase + Curve::kClimb / 2) * end_s;
  EXPECT_GT(std::abs(three - truth) / truth, 0.1);
}

}  // namespace
}  // namespace gpustream::test
