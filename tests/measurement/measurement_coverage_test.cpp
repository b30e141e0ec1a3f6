// A window's coverage per device: how its energy was obtained (EnergyMethod), the source's
// update period measured from the stream, the share of the window covered by fresh readings,
// and whether the window is shorter than the period; unset (with a reason) when unknowable,
// never 0. Snapshots are built here and fed through add(): time is their monotonic_ns.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "gpustream/measurement.hpp"

namespace gpustream {
namespace {

constexpr std::int64_t kMs = 1'000'000;

/// Device "gpu0" at `ms` with optional instant power, energy counter and driver samples.
GpuSnapshot snap(std::int64_t ms, std::optional<double> watts, std::optional<double> joules = {},
                 std::vector<PowerSample> samples = {}) {
  GpuSnapshot s;
  s.probe = "p";
  s.monotonic_ns = ms * kMs;
  DeviceSample d;
  d.id = "gpu0";
  d.metrics.fill_absent(Absence::unsupported);
  if (watts) {
    d.metrics.set(Metric::power_watts, *watts, Source::nvml);
    d.power_kind = PowerKind::instant;
  }
  if (joules) {
    d.metrics.set(Metric::energy_joules, *joules, Source::nvml);
    d.energy_kind = EnergyKind::counter;
  }
  d.power_samples = std::move(samples);
  s.devices.push_back(std::move(d));
  return s;
}

DeviceWindowSummary run(const std::vector<GpuSnapshot>& snaps) {
  MeasurementWindow w;
  w.begin();
  for (const auto& s : snaps) w.add(s);
  auto out = w.end();
  EXPECT_EQ(out.devices.size(), 1u);
  return out.devices.empty() ? DeviceWindowSummary{} : out.devices[0];
}

TEST(WindowCoverage, TheDriverSamplesGiveThePeriodAndTheirGapsTheCoverage) {
  // 100 W throughout. Samples every 20 ms from 110 to 190 ms, then the ring lost 200-300 ms.
  std::vector<PowerSample> ring;
  for (std::int64_t t = 110; t <= 190; t += 20) ring.push_back({t * kMs, 100});
  const auto d = run({snap(100, 100), snap(200, 100, {}, ring), snap(300, 100)});
  ASSERT_TRUE(d.energy_joules);
  EXPECT_NEAR(*d.energy_joules, 20, 1e-9);  // 100 W * 0.2 s
  EXPECT_EQ(d.energy_method, EnergyMethod::integrated);
  EXPECT_EQ(d.power_readings, 8u);  // 100, 110 ... 190, 200, 300
  EXPECT_EQ(d.driver_power_samples, 5u);
  EXPECT_EQ(d.largest_gap_ns, 100 * kMs);
  EXPECT_EQ(d.update_period_ns, 20 * kMs);  // the median interval between driver samples
  // Within 10 ms (half a period) of a reading: [100, 200] and [200, 210], [290, 300].
  ASSERT_TRUE(d.fresh_coverage);
  EXPECT_DOUBLE_EQ(*d.fresh_coverage, 0.6);
  EXPECT_EQ(d.shorter_than_update_period, false);
  EXPECT_TRUE(d.coverage_reason.empty());
}

TEST(WindowCoverage, UnknownWithAReasonWhenPowerChangesAtEveryReading) {
  // The periodic readings alone, each different: the source may update faster than it is read;
  // its period is not measurable, so neither is the coverage.
  const auto d = run({snap(0, 100), snap(100, 120), snap(200, 90), snap(300, 130)});
  ASSERT_TRUE(d.energy_joules);
  EXPECT_EQ(d.energy_method, EnergyMethod::integrated);
  EXPECT_EQ(d.power_readings, 4u);
  EXPECT_EQ(d.driver_power_samples, 0u);
  EXPECT_EQ(d.largest_gap_ns, 100 * kMs);
  EXPECT_FALSE(d.update_period_ns);
  EXPECT_FALSE(d.fresh_coverage);
  EXPECT_FALSE(d.shorter_than_update_period);
  EXPECT_NE(d.coverage_reason.find("changed at every reading"), std::string::npos)
      << d.coverage_reason;
}

TEST(WindowCoverage, APowerSourceReadMoreOftenThanItUpdatesShowsItsPeriod) {
  // Read every 50 ms, the value steps every 200 ms: changes at 200, 400 ... 1000 ms.
  std::vector<GpuSnapshot> snaps;
  for (std::int64_t t = 0; t <= 1000; t += 50)
    snaps.push_back(snap(t, 100.0 + 10.0 * static_cast<double>(t / 200)));
  const auto d = run(snaps);
  EXPECT_EQ(d.update_period_ns, 200 * kMs);
  ASSERT_TRUE(d.fresh_coverage);
  EXPECT_DOUBLE_EQ(*d.fresh_coverage, 1.0);
  EXPECT_EQ(d.shorter_than_update_period, false);
  // Only its first 150 ms: no change seen yet, so the period is unknown (not 0).
  const auto early = run({snaps[0], snaps[1], snaps[2], snaps[3]});
  EXPECT_FALSE(early.update_period_ns);
  EXPECT_FALSE(early.fresh_coverage);
  EXPECT_NE(early.coverage_reason.find("fewer than three changes"), std::string::npos)
      << early.coverage_reason;
}

TEST(WindowCoverage, ACounterReadMoreOftenThanItUpdatesShowsItsPeriod) {
  // Read every 50 ms over 1 s, the counter adds 10 J every 100 ms (100 W).
  std::vector<GpuSnapshot> snaps;
  for (std::int64_t t = 0; t <= 1000; t += 50)
    snaps.push_back(snap(t, 100, 10.0 * static_cast<double>(t / 100)));
  const auto d = run(snaps);
  ASSERT_TRUE(d.energy_joules);
  EXPECT_DOUBLE_EQ(*d.energy_joules, 100);
  EXPECT_EQ(d.energy_method, EnergyMethod::counter);
  EXPECT_EQ(d.counter_changes, 10u);
  EXPECT_EQ(d.update_period_ns, 100 * kMs);
  ASSERT_TRUE(d.fresh_coverage);
  EXPECT_DOUBLE_EQ(*d.fresh_coverage, 0.9);  // 1 - 100 ms / 1 s
  EXPECT_EQ(d.shorter_than_update_period, false);
  EXPECT_EQ(d.power_readings, 0u);  // nothing integrated
  EXPECT_FALSE(d.largest_gap_ns);
}

TEST(WindowCoverage, ACounterThatMovedOnceGivesWayToSamplesThatCoverTheWindow) {
  // 20 ms, 100 W; the counter (100 ms updates) happens to update inside: it says 10 J.
  std::vector<PowerSample> ring{
      {184 * kMs, 100}, {188 * kMs, 100}, {192 * kMs, 100}, {196 * kMs, 100}};
  const auto d = run({snap(180, 100, 10), snap(200, 100, 20, ring)});
  ASSERT_TRUE(d.energy_joules);
  EXPECT_NEAR(*d.energy_joules, 2, 1e-9);
  EXPECT_EQ(d.energy_method, EnergyMethod::integrated);
  EXPECT_EQ(d.counter_changes, 1u);
  EXPECT_EQ(d.update_period_ns, 4 * kMs);
  EXPECT_EQ(d.fresh_coverage, 1.0);
  // Without samples the counter is all there is: used, and what it cannot say is unset.
  const auto c = run({snap(180, std::nullopt, 10), snap(200, std::nullopt, 20)});
  ASSERT_TRUE(c.energy_joules);
  EXPECT_DOUBLE_EQ(*c.energy_joules, 10);
  EXPECT_EQ(c.energy_method, EnergyMethod::counter);
  EXPECT_FALSE(c.update_period_ns);
  EXPECT_FALSE(c.fresh_coverage);
  EXPECT_FALSE(c.shorter_than_update_period);
  EXPECT_EQ(c.coverage_reason.rfind("energy counter: ", 0), 0u) << c.coverage_reason;
}

TEST(WindowCoverage, ACounterThatDidNotMoveSaysTheWindowIsShorterThanItsPeriod) {
  const auto d = run({snap(180, std::nullopt, 10), snap(190, std::nullopt, 10)});
  ASSERT_TRUE(d.energy_joules);
  EXPECT_EQ(d.energy_method, EnergyMethod::counter);  // nothing else to integrate
  EXPECT_EQ(d.counter_changes, 0u);
  EXPECT_EQ(d.shorter_than_update_period, true);
  // With power readings, those are integrated instead (edges only: nothing in between).
  const auto p = run({snap(180, 100, 10), snap(190, 100, 10)});
  ASSERT_TRUE(p.energy_joules);
  EXPECT_NEAR(*p.energy_joules, 1, 1e-9);
  EXPECT_EQ(p.energy_method, EnergyMethod::edges);
  EXPECT_EQ(p.shorter_than_update_period, true);
}

TEST(WindowCoverage, NoEnergyNoCoverage) {
  const auto d = run({snap(0, std::nullopt), snap(100, std::nullopt)});
  EXPECT_FALSE(d.energy_joules);
  EXPECT_FALSE(d.energy_method);
  EXPECT_FALSE(d.largest_gap_ns);
  EXPECT_FALSE(d.update_period_ns);
  EXPECT_FALSE(d.fresh_coverage);
  EXPECT_FALSE(d.shorter_than_update_period);
  EXPECT_EQ(to_string(EnergyMethod::counter), "counter");
  EXPECT_EQ(to_string(EnergyMethod::integrated), "integrated");
  EXPECT_EQ(to_string(EnergyMethod::edges), "edges");
}

}  // namespace
}  // namespace gpustream
