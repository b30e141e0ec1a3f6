// MeasurementWindow with exact edges: begin() and end() sample each probe now (through the
// Scheduler's request_sample), so the energy covers exactly [begin, end]. The simulated probe
// draws a known power curve (SimulatedProbeOptions::known_power) on the manual clock, so the
// true energy of any span is known in closed form. No sleeps: the test moves the clock.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/detail/scheduler_impl.hpp"
#include "gpustream/errors.hpp"
#include "gpustream/measurement.hpp"
#include "gpustream/probes/simulated_probe.hpp"
#include "gpustream/telemetry.hpp"
#include "support/manual_clock.hpp"

namespace gpustream::test {
namespace {

using namespace std::chrono_literals;
using ManualScheduler = BasicScheduler<ManualClock, ManualWaitTraits>;

std::int64_t manual_ns() { return ManualClock::now().time_since_epoch().count(); }

/// A simulated GPU with a known power curve, scheduled every 100 ms on the manual clock,
/// publishing into a channel; `sampler()` is an EdgeSampler over the scheduler.
class EdgeWindowTest : public ::testing::Test {
 protected:
  void SetUp() override { ManualClock::reset(); }
  void TearDown() override {
    if (scheduler_) scheduler_->stop();
    io_.poll();
  }

  void build(SimulatedProbeOptions::KnownPower curve) {
    curve_ = curve;
    SimulatedProbeOptions o;
    o.devices = 2;
    o.monotonic_clock = manual_ns;
    o.wall_clock = [] { return std::int64_t{1'700'000'000'000'000'000}; };
    o.known_power = curve;
    // The work "pool" is the io_context itself: the sample runs when the test polls.
    probe_ = make_simulated_probe(ProbeExecutors{io_.get_executor(), io_.get_executor()}, o);
    scheduler_ = std::make_unique<ManualScheduler>(
        io_.get_executor(), ManualScheduler::PublishShared{},
        [this](GpuSnapshot s) { return channel_.publish(std::move(s)); });
    ScheduleOptions so;
    so.interval = 100ms;
    so.timeout = 1s;
    scheduler_->add(probe_, so);
    scheduler_->start();
    io_.poll();
  }

  /// Samples every probe now, polling the io_context until each request is answered.
  EdgeSampler sampler() {
    return [this](const SubscriptionFilter&) {
      std::vector<EdgeSample> out;
      for (const auto& name : scheduler_->probe_names()) {
        auto e = std::make_shared<EdgeSample>();
        e->probe = name;
        bool done = false;
        scheduler_->request_sample(name, [e, &done](boost::system::error_code ec, SnapshotPtr s) {
          done = true;
          e->snapshot = std::move(s);
          if (ec) e->error = ec.message();
        });
        for (int i = 0; i < 1000 && !done; ++i) io_.poll();
        if (!done) e->error = "not answered";
        out.push_back(*e);
      }
      return out;
    };
  }

  void run_for(ManualClock::duration total, ManualClock::duration step = 1ms) {
    const auto end = ManualClock::now() + total;
    while (ManualClock::now() < end) {
      ManualClock::advance(std::min(step, end - ManualClock::now()));
      io_.poll();
    }
  }

  double known_energy(std::int64_t t0, std::int64_t t1) const {
    return curve_.energy_at(t1) - curve_.energy_at(t0);
  }

  /// Runs a window of `length` starting 30 ms after a grid tick and checks every device's
  /// energy against the curve, within `tolerance` (relative).
  WindowSummary measure(ManualClock::duration length, double tolerance) {
    MeasurementWindow window(channel_, sampler());
    window.set_clock(manual_ns);
    run_for(1030ms);
    const auto t0 = manual_ns();
    window.begin();
    run_for(length);
    const auto t1 = manual_ns();
    const auto s = window.end();
    EXPECT_TRUE(s.exact_edges);
    EXPECT_EQ(s.devices.size(), 2u);
    for (const auto& d : s.devices) {
      EXPECT_EQ(d.begin_edge, EdgeKind::sampled);
      EXPECT_EQ(d.end_edge, EdgeKind::sampled);
      EXPECT_EQ(d.begin_edge_ns, t0);  // the window is exactly [begin, end]
      EXPECT_EQ(d.end_edge_ns, t1);
      EXPECT_EQ(d.estimated_joules, 0.0);
      const double truth = known_energy(t0, t1);
      EXPECT_TRUE(d.energy_joules.has_value());
      EXPECT_NEAR(d.energy_joules.value_or(0), truth, tolerance * truth)
          << "window of " << std::chrono::duration<double>(length).count() << " s";
    }
    EXPECT_EQ(s.overhead.edge_samples, 2u);  // one probe, two edges
    EXPECT_EQ(s.overhead.failed_edge_samples, 0u);
    EXPECT_TRUE(s.edge_errors.empty());
    return s;
  }

  boost::asio::io_context io_;
  SnapshotChannel channel_{io_.get_executor(), 4096};
  std::shared_ptr<SimulatedProbe> probe_;
  std::unique_ptr<ManualScheduler> scheduler_;
  SimulatedProbeOptions::KnownPower curve_;
};

TEST_F(EdgeWindowTest, CounterShortWindowWithinOnePercent) {
  build({200, 100, 1s, true});
  const auto s = measure(50ms, 0.01);
  for (const auto& d : s.devices) EXPECT_EQ(d.energy_kind, EnergyKind::counter);
  EXPECT_EQ(s.snapshots, 2u);  // the two edges; no tick fell inside
}

TEST_F(EdgeWindowTest, CounterLongWindowWithinOnePercent) {
  build({200, 100, 1s, true});
  const auto s = measure(10s, 0.01);
  EXPECT_EQ(s.snapshots, 102u);  // two edges + 100 ticks
}

TEST_F(EdgeWindowTest, PowerOnlyShortWindowIntegratesExactlyBetweenTheEdges) {
  build({200, 100, 1s, false});
  const auto s = measure(50ms, 0.01);
  for (const auto& d : s.devices) EXPECT_EQ(d.energy_kind, EnergyKind::integrated);
}

TEST_F(EdgeWindowTest, PowerOnlyLongWindowWithinOnePercent) {
  build({200, 100, 1s, false});
  measure(10s, 0.01);
}

TEST_F(EdgeWindowTest, ChannelOnlyWindowMissesTheShortWindow) {
  // The baseline the edges fix: between two ticks, a channel-only window sees nothing.
  build({200, 100, 1s, true});
  MeasurementWindow window(channel_);
  run_for(1030ms);
  window.begin();
  run_for(50ms);
  const auto s = window.end();
  EXPECT_EQ(s.snapshots, 0u);
  EXPECT_TRUE(s.devices.empty());
}

TEST_F(EdgeWindowTest, SnapshotsOutsideTheEdgesAreLeftOut) {
  build({200, 100, 1s, true});
  MeasurementWindow window(channel_, sampler());
  window.set_clock(manual_ns);
  run_for(1030ms);
  window.begin();
  run_for(280ms);  // ticks at 1100, 1200, 1300
  const auto s = window.end();
  run_for(100ms);
  EXPECT_EQ(s.snapshots, 5u);
  ASSERT_FALSE(s.devices.empty());
  EXPECT_EQ(s.devices[0].samples, 5u);
  EXPECT_EQ(s.devices[0].find(Metric::power_watts)->count, 5u);
}

/// A sampler whose call number `fail_call` (0 = begin, 1 = end) samples nothing and answers
/// "timeout", as Telemetry's does when a probe does not answer in time.
EdgeSampler failing_on(EdgeSampler real, int fail_call) {
  auto calls = std::make_shared<int>(0);
  return [real = std::move(real), fail_call, calls](const SubscriptionFilter& f) {
    if ((*calls)++ != fail_call) return real(f);
    EdgeSample e;
    e.probe = "simulated";
    e.error = "timeout";
    e.message = "no answer within 2000 ms";
    return std::vector<EdgeSample>{e};
  };
}

TEST_F(EdgeWindowTest, FailedEndSampleIsHeldAndSaidSo) {
  build({200, 100, 1s, true});
  MeasurementWindow window(channel_, failing_on(sampler(), 1));
  window.set_clock(manual_ns);
  run_for(1030ms);
  const auto t0 = manual_ns();
  window.begin();
  run_for(1040ms);  // the last tick inside is at 2000; end() at 2070
  const auto t1 = manual_ns();
  const auto s = window.end();
  EXPECT_FALSE(s.exact_edges);
  ASSERT_EQ(s.edge_errors.size(), 1u);
  EXPECT_EQ(s.edge_errors[0], "simulated: end: timeout: no answer within 2000 ms");
  EXPECT_EQ(s.overhead.failed_edge_samples, 1u);
  ASSERT_EQ(s.devices.size(), 2u);
  for (const auto& d : s.devices) {
    EXPECT_EQ(d.begin_edge, EdgeKind::sampled);
    EXPECT_EQ(d.end_edge, EdgeKind::held);  // the counter's last rate, held for 70 ms
    EXPECT_EQ(d.end_edge_ns, t1);
    EXPECT_GT(d.estimated_joules, 0.0);
    const double truth = known_energy(t0, t1);
    EXPECT_NEAR(d.energy_joules.value_or(0), truth, 0.05 * truth);
  }
}

TEST_F(EdgeWindowTest, FailedBeginSampleIsInterpolatedBetweenItsNeighbours) {
  build({200, 100, 1s, false});
  MeasurementWindow window(channel_, failing_on(sampler(), 0));
  window.set_clock(manual_ns);
  run_for(1030ms);
  const auto t0 = manual_ns();
  window.begin();  // fails: the edge lies between the ticks at 1000 and 1100
  run_for(500ms);
  const auto t1 = manual_ns();
  const auto s = window.end();
  EXPECT_FALSE(s.exact_edges);
  ASSERT_EQ(s.devices.size(), 2u);
  for (const auto& d : s.devices) {
    EXPECT_EQ(d.begin_edge, EdgeKind::interpolated);
    EXPECT_EQ(d.begin_edge_ns, t0);
    EXPECT_EQ(d.end_edge, EdgeKind::sampled);
    EXPECT_GT(d.estimated_joules, 0.0);
    const double truth = known_energy(t0, t1);
    EXPECT_NEAR(d.energy_joules.value_or(0), truth, 0.02 * truth);
  }
}

TEST_F(EdgeWindowTest, KnownCurveIsTheIntegralOfItsPower) {
  const SimulatedProbeOptions::KnownPower k{200, 100, 1s, true};
  EXPECT_DOUBLE_EQ(k.energy_at(0), 0.0);
  EXPECT_NEAR(k.energy_at(1'000'000'000), 200.0, 1e-9);  // whole periods: base * t
  EXPECT_NEAR(k.power_at(250'000'000), 300.0, 1e-9);     // a quarter period: the peak
  // d/dt E = P, numerically.
  const std::int64_t t = 123'456'789, h = 1000;
  EXPECT_NEAR((k.energy_at(t + h) - k.energy_at(t - h)) / (2e-9 * h), k.power_at(t), 1e-3);
}

}  // namespace
}  // namespace gpustream::test
