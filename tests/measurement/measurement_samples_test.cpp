// MeasurementWindow integrates every driver power sample (DeviceSample::power_samples): a board
// without an energy counter whose power varies within a 300 ms window gets its energy within
// 1 % of the true integral, while the periodic grid or the edges alone are visibly off. Bad
// samples are ignored and counted. Snapshots are built here (the NVML ring is another unit's);
// time is the snapshots' own monotonic_ns and an injected clock: nothing sleeps.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/measurement.hpp"

namespace gpustream {
namespace {

constexpr std::int64_t kSamplesMs = 1'000'000;

/// The board's true power, W, at `t_ns`: 150 ± 100 W with a 200 ms period. The periodic grid
/// (every 100 ms) sees it at the same two phases, so it cannot follow it; 20 ms samples can.
constexpr double kOmega = 2 * std::numbers::pi / 0.2;  // rad/s
constexpr double kPhase = 5.4;
double power_at(std::int64_t t_ns) {
  return 150 + 100 * std::sin(kOmega * static_cast<double>(t_ns) * 1e-9 + kPhase);
}
/// Its exact integral over [a, b], J.
double true_joules(std::int64_t a_ns, std::int64_t b_ns) {
  const double a = static_cast<double>(a_ns) * 1e-9, b = static_cast<double>(b_ns) * 1e-9;
  return 150 * (b - a) -
         100 / kOmega * (std::cos(kOmega * b + kPhase) - std::cos(kOmega * a + kPhase));
}

/// A board without an energy counter, as a probe would publish it: each snapshot carries its
/// own power reading and (with `ring`) the driver's samples taken every 20 ms (at 7, 27, 47 ...
/// ms) since the previous snapshot.
struct Board {
  bool ring = true;
  std::optional<PowerKind> kind = PowerKind::instant;
  std::optional<std::int64_t> last_ns;

  GpuSnapshot at(std::int64_t ns) {
    GpuSnapshot s;
    s.probe = "nvidia";
    s.monotonic_ns = ns;
    DeviceSample d;
    d.id = "GPU-0";
    d.metrics.fill_absent(Absence::unsupported);
    d.metrics.set(Metric::power_watts, kind == PowerKind::average ? 999.0 : power_at(ns),
                  Source::nvml);
    d.power_kind = kind;
    if (ring) {
      for (std::int64_t t = 7 * kSamplesMs; t <= ns; t += 20 * kSamplesMs)
        if (!last_ns || t > *last_ns) d.power_samples.push_back({t, power_at(t)});
    }
    last_ns = ns;
    s.devices.push_back(std::move(d));
    return s;
  }
};

/// A window bound to a channel whose edge sampler publishes a fresh snapshot of `board` at the
/// injected clock's time, with periodic snapshots every 100 ms; the window runs from
/// `begin_ns` to `end_ns`.
WindowSummary bound_summary(Board board, std::int64_t begin_ns, std::int64_t end_ns,
                            bool periodic = true) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  std::int64_t now = 0;
  EdgeSampler sampler = [&](const SubscriptionFilter&) {
    EdgeSample e;
    e.probe = "nvidia";
    e.snapshot = ch.publish(board.at(now));
    return std::vector<EdgeSample>{e};
  };
  MeasurementWindow w(ch, sampler);
  w.set_clock([&] { return now; });
  std::int64_t t = 0;
  for (; t < begin_ns; t += 100 * kSamplesMs) ch.publish(board.at(t));
  io.run();
  now = begin_ns;
  w.begin();
  for (; periodic && t < end_ns; t += 100 * kSamplesMs) ch.publish(board.at(t));
  io.restart();
  io.run();
  now = end_ns;
  WindowSummary s = w.end();
  EXPECT_EQ(s.devices.size(), 1u);
  return s;
}

DeviceWindowSummary bound_window(Board board, std::int64_t begin_ns, std::int64_t end_ns,
                                 bool periodic = true) {
  const WindowSummary s = bound_summary(std::move(board), begin_ns, end_ns, periodic);
  return s.devices.empty() ? DeviceWindowSummary{} : s.devices[0];
}

double relative_error(const DeviceWindowSummary& d, double truth) {
  EXPECT_TRUE(d.energy_joules);
  return std::abs(d.energy_joules.value_or(0) - truth) / truth;
}

TEST(WindowSamples, ThreeHundredMillisecondsWithinOnePercentFromEverySample) {
  const std::int64_t b = 137 * kSamplesMs, e = 437 * kSamplesMs;
  const double truth = true_joules(b, e);
  const WindowSummary s = bound_summary(Board{}, b, e);
  EXPECT_TRUE(s.exact_edges);
  ASSERT_EQ(s.devices.size(), 1u);
  const auto& d = s.devices[0];
  EXPECT_LT(relative_error(d, truth), 0.01);
  EXPECT_EQ(d.energy_kind, EnergyKind::integrated);
  EXPECT_EQ(d.energy_method, EnergyMethod::integrated);
  // Samples at 147, 167 ... 427 ms (15) and the readings at 137 (edge), 200, 300, 400, 437 (edge).
  EXPECT_EQ(d.driver_power_samples, 15u);
  EXPECT_EQ(d.power_readings, 20u);
  EXPECT_EQ(d.largest_gap_ns, 20 * kSamplesMs);
  EXPECT_EQ(d.begin_edge, EdgeKind::sampled);
  EXPECT_EQ(d.end_edge, EdgeKind::sampled);
  EXPECT_EQ(d.estimated_joules, 0);
  EXPECT_EQ(d.ignored_power_samples, 0u);

  // The same window without the driver's samples: only the 100 ms grid, visibly worse.
  Board grid;
  grid.ring = false;
  const auto g = bound_window(grid, b, e);
  EXPECT_GT(relative_error(g, truth), 0.03);
  EXPECT_EQ(g.energy_method, EnergyMethod::integrated);
  EXPECT_EQ(g.driver_power_samples, 0u);
  EXPECT_EQ(g.power_readings, 5u);
  EXPECT_EQ(g.largest_gap_ns, 100 * kSamplesMs);
  // And the two edges alone.
  const auto edges = bound_window(grid, b, e, false);
  EXPECT_GT(relative_error(edges, truth), 0.03);
  EXPECT_EQ(edges.energy_method, EnergyMethod::edges);
  EXPECT_EQ(edges.power_readings, 2u);
  EXPECT_EQ(edges.largest_gap_ns, 300 * kSamplesMs);
}

TEST(WindowSamples, ChannelOnlyWindowThroughAdd) {
  // A window fed through add(): it spans its first to its last snapshot (100 ms to 400 ms).
  Board board;
  board.at(0);
  MeasurementWindow w;
  w.begin();
  for (std::int64_t t = 100 * kSamplesMs; t <= 400 * kSamplesMs; t += 100 * kSamplesMs)
    w.add(board.at(t));
  const auto s = w.end();
  ASSERT_EQ(s.devices.size(), 1u);
  const auto& d = s.devices[0];
  EXPECT_LT(relative_error(d, true_joules(100 * kSamplesMs, 400 * kSamplesMs)), 0.01);
  EXPECT_EQ(d.energy_method, EnergyMethod::integrated);
  EXPECT_EQ(d.driver_power_samples, 15u);  // 107 ... 387 ms
  EXPECT_EQ(d.begin_edge, EdgeKind::none);

  Board grid;
  grid.ring = false;
  MeasurementWindow w2;
  w2.begin();
  for (std::int64_t t = 100 * kSamplesMs; t <= 400 * kSamplesMs; t += 100 * kSamplesMs)
    w2.add(grid.at(t));
  EXPECT_GT(relative_error(w2.end().devices.at(0), true_joules(100 * kSamplesMs, 400 * kSamplesMs)),
            0.03);
}

TEST(WindowSamples, AnAveragedReadingIsNeverMixedWithTheSamples) {
  // power_watts is the driver's 1 s average (999 W here, far from the truth): the samples alone
  // are integrated, and the edges are cut between the samples either side of them.
  Board board;
  board.kind = PowerKind::average;
  const std::int64_t b = 137 * kSamplesMs, e = 437 * kSamplesMs;
  const WindowSummary s = bound_summary(board, b, e);
  EXPECT_FALSE(s.exact_edges);  // the end is held (below)
  ASSERT_EQ(s.devices.size(), 1u);
  const auto& d = s.devices[0];
  EXPECT_LT(relative_error(d, true_joules(b, e)), 0.01);
  EXPECT_EQ(d.driver_power_samples, 15u);
  EXPECT_EQ(d.power_readings, 15u);
  // The end edge: the last sample is at 427 ms and nothing later is in the window: held.
  EXPECT_EQ(d.end_edge, EdgeKind::held);
  EXPECT_GT(d.estimated_joules, 0);
  // Without samples the average is all there is: integrated as before, never dropped.
  board.ring = false;
  board.last_ns.reset();
  const WindowSummary as = bound_summary(board, b, e);
  EXPECT_TRUE(as.exact_edges);
  const auto& a = as.devices.at(0);
  ASSERT_TRUE(a.energy_joules);
  EXPECT_NEAR(*a.energy_joules, 999 * 0.3, 1e-9);
}

TEST(WindowSamples, AnEnergyCounterThatDidNotMoveGivesWayToTheSamples) {
  // A counter that updates every 100 ms (at 50, 150, 250 ... ms) and a 20 ms window inside one
  // update: the counter says 0 J; the samples say what was used.
  struct CounterBoard : Board {
    GpuSnapshot at(std::int64_t ns) {
      GpuSnapshot s = Board::at(ns);
      const std::int64_t updated =
          ns < 50 * kSamplesMs ? 0 : (ns - 50 * kSamplesMs) / (100 * kSamplesMs) * 100 + 50;
      s.devices[0].metrics.set(Metric::energy_joules, static_cast<double>(updated), Source::nvml);
      s.devices[0].energy_kind = EnergyKind::counter;
      return s;
    }
  };
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  CounterBoard board;
  std::int64_t now = 0;
  MeasurementWindow w(ch, [&](const SubscriptionFilter&) {
    EdgeSample e;
    e.probe = "nvidia";
    e.snapshot = ch.publish(board.at(now));
    return std::vector<EdgeSample>{e};
  });
  w.set_clock([&] { return now; });
  ch.publish(board.at(100 * kSamplesMs));
  io.run();
  now = 159 * kSamplesMs;
  w.begin();
  now =
      174 * kSamplesMs;  // 15 ms: one driver sample inside (167 ms), the counter reads 150 J twice
  const auto s = w.end();
  const auto& d = s.devices.at(0);
  EXPECT_EQ(d.counter_changes, 0u);
  EXPECT_EQ(d.energy_method, EnergyMethod::integrated);
  EXPECT_EQ(d.energy_kind, EnergyKind::integrated);
  EXPECT_LT(relative_error(d, true_joules(159 * kSamplesMs, 174 * kSamplesMs)), 0.01);
  // The power's period (the driver's 20 ms) is longer than the window too.
  EXPECT_EQ(d.update_period_ns, 20 * kSamplesMs);
  EXPECT_EQ(d.shorter_than_update_period, true);
  EXPECT_EQ(d.driver_power_samples, 1u);  // 167 ms
}

TEST(WindowSamples, AFailedEndEdgeTakesTheSamplesTheNextSnapshotBrings) {
  // The end edge sample at 437 ms fails: the edge is the end() call time. The next snapshot
  // (500 ms) brings the driver's samples from 407 to 487 ms: those up to the edge are in the
  // window, and the one after it (447 ms) interpolates the power at the edge.
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  Board board;
  std::int64_t now = 0;
  bool fail = false;
  MeasurementWindow w(ch, [&](const SubscriptionFilter&) {
    EdgeSample e;
    e.probe = "nvidia";
    if (fail) {
      e.error = "timeout";
      ch.publish(board.at(500 * kSamplesMs));  // the periodic sample that lands meanwhile
    } else {
      e.snapshot = ch.publish(board.at(now));
    }
    return std::vector<EdgeSample>{e};
  });
  w.set_clock([&] { return now; });
  ch.publish(board.at(0));
  ch.publish(board.at(100 * kSamplesMs));
  io.run();
  now = 137 * kSamplesMs;
  w.begin();
  for (std::int64_t t = 200; t <= 400; t += 100) ch.publish(board.at(t * kSamplesMs));
  now = 437 * kSamplesMs;
  fail = true;
  const WindowSummary s = w.end();
  EXPECT_FALSE(s.exact_edges);
  ASSERT_EQ(s.edge_errors.size(), 1u);
  const auto& d = s.devices.at(0);
  EXPECT_EQ(d.end_edge, EdgeKind::interpolated);
  EXPECT_EQ(d.end_edge_ns, 437 * kSamplesMs);
  EXPECT_GT(d.estimated_joules, 0);
  EXPECT_EQ(d.driver_power_samples, 15u);        // 147 ... 427 ms, the last two from the 500 ms one
  EXPECT_EQ(d.largest_gap_ns, 20 * kSamplesMs);  // 427 -> 447 across the edge
  EXPECT_LT(relative_error(d, true_joules(137 * kSamplesMs, 437 * kSamplesMs)), 0.01);
}

// -- bad input: each kind of bad sample is ignored (never integrated) and counted --

PowerSample good(std::int64_t ns) { return {ns, power_at(ns)}; }

/// A channel-only window over two snapshots at 100 and 200 ms, the second carrying `samples`:
/// the good ones at 120 and 160 ms and one bad one; the energy must equal the window without it.
void expect_ignored(std::vector<PowerSample> samples, const std::string& reason) {
  SCOPED_TRACE(reason);
  const auto run = [](std::vector<PowerSample> list) {
    Board board;
    board.ring = false;
    MeasurementWindow w;
    w.begin();
    w.add(board.at(100 * kSamplesMs));
    GpuSnapshot s = board.at(200 * kSamplesMs);
    s.devices[0].power_samples = std::move(list);
    w.add(s);
    return w.end().devices.at(0);
  };
  const auto clean = run({good(120 * kSamplesMs), good(160 * kSamplesMs)});
  const auto d = run(std::move(samples));
  EXPECT_EQ(d.ignored_power_samples, 1u);
  EXPECT_EQ(d.ignored_power_samples_reason, reason);
  EXPECT_EQ(d.driver_power_samples, 2u);
  ASSERT_TRUE(d.energy_joules && clean.energy_joules);
  EXPECT_DOUBLE_EQ(*d.energy_joules, *clean.energy_joules);
  EXPECT_EQ(clean.ignored_power_samples, 0u);
  EXPECT_TRUE(clean.ignored_power_samples_reason.empty());
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(WindowSamples, NotANumberWattsAreIgnored) {
  expect_ignored({good(120 * kSamplesMs), good(160 * kSamplesMs), {180 * kSamplesMs, kNaN}},
                 "bad_watts");
}
TEST(WindowSamples, InfiniteWattsAreIgnored) {
  expect_ignored({good(120 * kSamplesMs), {140 * kSamplesMs, kInf}, good(160 * kSamplesMs)},
                 "bad_watts");
}
TEST(WindowSamples, NegativeWattsAreIgnored) {
  expect_ignored({good(120 * kSamplesMs), good(160 * kSamplesMs), {180 * kSamplesMs, -5}},
                 "bad_watts");
}
TEST(WindowSamples, ASampleAfterItsSnapshotIsIgnored) {
  expect_ignored({good(120 * kSamplesMs), good(160 * kSamplesMs), {250 * kSamplesMs, 1e6}},
                 "after_snapshot");
}
TEST(WindowSamples, ASampleBeforeThePreviousSnapshotIsIgnored) {
  expect_ignored({{90 * kSamplesMs, 1e6}, good(120 * kSamplesMs), good(160 * kSamplesMs)},
                 "before_interval");
}
TEST(WindowSamples, ASampleAtThePreviousSnapshotIsIgnored) {
  expect_ignored({{100 * kSamplesMs, 1e6}, good(120 * kSamplesMs), good(160 * kSamplesMs)},
                 "before_interval");
}
TEST(WindowSamples, ARepeatedTimestampIsIgnored) {
  expect_ignored({good(120 * kSamplesMs), good(160 * kSamplesMs), {160 * kSamplesMs, 1e6}},
                 "repeated");
}
TEST(WindowSamples, ASampleGoingBackwardsIsIgnored) {
  expect_ignored({good(120 * kSamplesMs), good(160 * kSamplesMs), {140 * kSamplesMs, 1e6}},
                 "backwards");
}

TEST(WindowSamples, ARingThatRepeatsAcrossSnapshotsIsCountedOnce) {
  // The driver hands the same samples out again with the next snapshot: all repeated or
  // backwards, none integrated twice.
  Board board;
  MeasurementWindow w;
  w.begin();
  w.add(board.at(100 * kSamplesMs));
  GpuSnapshot s1 = board.at(200 * kSamplesMs);
  GpuSnapshot s2 = board.at(300 * kSamplesMs);
  auto again = s1.devices[0].power_samples;  // 107 ... 187 ms
  again.insert(again.end(), s2.devices[0].power_samples.begin(), s2.devices[0].power_samples.end());
  w.add(s1);
  s2.devices[0].power_samples = again;
  w.add(s2);
  const auto d = w.end().devices.at(0);
  EXPECT_EQ(d.ignored_power_samples, 5u);  // 107, 127, 147, 167, 187 again
  EXPECT_EQ(d.ignored_power_samples_reason, "backwards");
  EXPECT_EQ(d.driver_power_samples, 10u);  // 107 ... 287 once each
  EXPECT_LT(relative_error(d, true_joules(100 * kSamplesMs, 300 * kSamplesMs)), 0.01);
}

}  // namespace
}  // namespace gpustream
