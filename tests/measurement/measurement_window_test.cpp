// MeasurementWindow: statistics, energy from a counter and from power, absences, resets.
#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "gpustream/measurement.hpp"

namespace gpustream {
namespace {

constexpr std::int64_t kSecond = 1'000'000'000;

/// One device "gpu0" of probe `probe` at time `t_s` seconds with the given readings.
GpuSnapshot sample(double t_s, std::vector<std::pair<Metric, double>> values,
                   std::string probe = "p", std::string device = "gpu0") {
  GpuSnapshot s;
  s.probe = std::move(probe);
  s.monotonic_ns = static_cast<std::int64_t>(t_s * kSecond);
  DeviceSample d;
  d.id = std::move(device);
  d.metrics.fill_absent(Absence::unsupported);
  for (auto [m, v] : values) d.metrics.set(m, v, Source::nvml);
  if (d.metrics[Metric::energy_joules]) d.energy_kind = EnergyKind::counter;
  s.devices.push_back(std::move(d));
  return s;
}

TEST(MeasurementWindow, MinMaxMeanLast) {
  MeasurementWindow w;
  w.begin();
  EXPECT_TRUE(w.running());
  for (double u : {10.0, 30.0, 20.0, 40.0}) w.add(sample(0, {{Metric::utilization_percent, u}}));
  auto s = w.end();
  EXPECT_FALSE(w.running());
  EXPECT_LE(s.begin_ns, s.end_ns);
  EXPECT_EQ(s.snapshots, 4u);
  ASSERT_EQ(s.devices.size(), 1u);
  const auto& d = s.devices[0];
  EXPECT_EQ(d.device_id, "gpu0");
  EXPECT_EQ(d.probe, "p");
  EXPECT_EQ(d.samples, 4u);
  const MetricSummary* u = d.find(Metric::utilization_percent);
  ASSERT_NE(u, nullptr);
  EXPECT_DOUBLE_EQ(u->min, 10);
  EXPECT_DOUBLE_EQ(u->max, 40);
  EXPECT_DOUBLE_EQ(u->mean, 25);
  EXPECT_DOUBLE_EQ(u->last, 40);
  EXPECT_EQ(u->count, 4u);
  EXPECT_EQ(u->source, Source::nvml);
}

TEST(MeasurementWindow, AbsentMetricsNeverContribute) {
  MeasurementWindow w;
  w.begin();
  w.add(sample(0, {{Metric::temperature_celsius, 60}}));
  w.add(sample(1, {}));  // temperature absent: no zero
  w.add(sample(2, {{Metric::temperature_celsius, 70}}));
  auto s = w.end();
  const auto& d = s.devices.at(0);
  EXPECT_EQ(d.samples, 3u);
  const MetricSummary* t = d.find(Metric::temperature_celsius);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->count, 2u);
  EXPECT_DOUBLE_EQ(t->min, 60);
  EXPECT_DOUBLE_EQ(t->mean, 65);
  EXPECT_EQ(d.find(Metric::fan_rpm), nullptr);  // never present: not in the summary
  EXPECT_FALSE(d.energy_joules);                // no counter, no power
  EXPECT_FALSE(d.energy_kind);
}

TEST(MeasurementWindow, EnergyFromTheCounterDelta) {
  MeasurementWindow w;
  w.begin();
  w.add(sample(0, {{Metric::energy_joules, 1000}, {Metric::power_watts, 999}}));
  w.add(sample(1, {{Metric::energy_joules, 1150}, {Metric::power_watts, 999}}));
  w.add(sample(2, {{Metric::energy_joules, 1400}}));
  auto d = w.end().devices.at(0);
  ASSERT_TRUE(d.energy_joules);
  EXPECT_DOUBLE_EQ(*d.energy_joules, 400);  // the counter wins over power
  EXPECT_EQ(d.energy_kind, EnergyKind::counter);
  EXPECT_EQ(d.energy_counter_resets, 0u);
}

TEST(MeasurementWindow, EnergyIntegratedFromPowerWhenNoCounter) {
  MeasurementWindow w;
  w.begin();
  w.add(sample(0.0, {{Metric::power_watts, 100}}));
  w.add(sample(1.0, {{Metric::power_watts, 200}}));  // 150 J
  w.add(sample(1.5, {}));                            // no power: bridged
  w.add(sample(3.0, {{Metric::power_watts, 100}}));  // 2 s * 150 W = 300 J
  auto d = w.end().devices.at(0);
  ASSERT_TRUE(d.energy_joules);
  EXPECT_DOUBLE_EQ(*d.energy_joules, 450);
  EXPECT_EQ(d.energy_kind, EnergyKind::integrated);
}

TEST(MeasurementWindow, OnePowerReadingIsNoEnergy) {
  MeasurementWindow w;
  w.begin();
  w.add(sample(0.0, {{Metric::power_watts, 100}}));
  w.add(sample(0.0, {{Metric::power_watts, 100}}));  // same instant: no interval
  EXPECT_FALSE(w.end().devices.at(0).energy_joules);
}

TEST(MeasurementWindow, CounterResetNeverGivesNegativeEnergy) {
  MeasurementWindow w;
  w.begin();
  w.add(sample(0, {{Metric::energy_joules, 5000}}));
  w.add(sample(1, {{Metric::energy_joules, 5100}}));  // +100
  w.add(sample(2, {{Metric::energy_joules, 30}}));    // reset: +30 (used since the reset)
  w.add(sample(3, {{Metric::energy_joules, 80}}));    // +50
  auto d = w.end().devices.at(0);
  ASSERT_TRUE(d.energy_joules);
  EXPECT_DOUBLE_EQ(*d.energy_joules, 180);
  EXPECT_EQ(d.energy_counter_resets, 1u);
  EXPECT_EQ(d.energy_kind, EnergyKind::counter);
}

TEST(MeasurementWindow, DevicesAndProbesAreKeptApart) {
  MeasurementWindow w;
  w.begin();
  w.add(sample(0, {{Metric::utilization_percent, 10}}, "nvidia", "gpu0"));
  w.add(sample(0, {{Metric::utilization_percent, 90}}, "nvidia", "gpu1"));
  w.add(sample(0, {{Metric::utilization_percent, 50}}, "amd", "gpu0"));
  auto s = w.end();
  ASSERT_EQ(s.devices.size(), 3u);
  EXPECT_EQ(s.find("gpu1")->find(Metric::utilization_percent)->max, 90);
  EXPECT_EQ(s.devices[2].probe, "amd");
  EXPECT_EQ(s.find("nope"), nullptr);
}

TEST(MeasurementWindow, FilterSelectsDevicesAndMetrics) {
  SubscriptionFilter f;
  f.devices = {"gpu1"};
  f.metrics = {Metric::power_watts};
  MeasurementWindow w(f);
  w.begin();
  w.add(sample(0, {{Metric::power_watts, 10}, {Metric::temperature_celsius, 50}}, "p", "gpu1"));
  w.add(sample(0, {{Metric::power_watts, 10}}, "p", "gpu0"));  // wrong device
  auto s = w.end();
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_NE(s.devices[0].find(Metric::power_watts), nullptr);
  EXPECT_EQ(s.devices[0].find(Metric::temperature_celsius), nullptr);
}

TEST(MeasurementWindow, AddOutsideTheWindowIsIgnoredAndBeginRestarts) {
  MeasurementWindow w;
  w.add(sample(0, {{Metric::utilization_percent, 99}}));
  w.begin();
  w.add(sample(0, {{Metric::utilization_percent, 1}}));
  w.begin();  // restart: forget what came before
  w.add(sample(0, {{Metric::utilization_percent, 2}}));
  auto s = w.end();
  EXPECT_EQ(s.devices.at(0).find(Metric::utilization_percent)->count, 1u);
  EXPECT_EQ(s.devices.at(0).find(Metric::utilization_percent)->last, 2);
  w.add(sample(0, {{Metric::utilization_percent, 3}}));
  EXPECT_TRUE(w.end().devices.empty());  // not running
}

TEST(MeasurementWindow, FromAChannelTakesWhatWasPublishedBetweenBeginAndEnd) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor());
  MeasurementWindow w(ch);
  ch.publish(sample(0, {{Metric::power_watts, 1000}}));  // before begin: not in the window
  io.run();
  w.begin();
  ch.publish(sample(1, {{Metric::power_watts, 100}}));
  io.restart();
  io.run();  // delivered through the subscription
  ch.publish(sample(2, {{Metric::power_watts, 300}}));
  // Not yet delivered: end() takes it from the history.
  auto s = w.end();
  EXPECT_EQ(s.snapshots, 2u);
  const auto& d = s.devices.at(0);
  EXPECT_EQ(d.find(Metric::power_watts)->count, 2u);
  EXPECT_DOUBLE_EQ(d.find(Metric::power_watts)->max, 300);
  EXPECT_DOUBLE_EQ(*d.energy_joules, 200);
  io.restart();
  io.run();  // the late delivery is not counted twice (and the window is closed anyway)
  EXPECT_EQ(s.missed_snapshots, 0u);
}

TEST(MeasurementWindow, RecoversOverflowFromTheHistory) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 4096);
  SubscriptionFilter f;
  f.probes = {"p"};
  MeasurementWindow w(ch, f);
  w.begin();
  for (int i = 0; i < 3000; ++i) {  // more than the window's subscription bound
    ch.publish(sample(i, {{Metric::utilization_percent, static_cast<double>(i)}}));
    ch.publish(sample(i, {{Metric::utilization_percent, 1e9}}, "other"));
  }
  io.run();
  auto s = w.end();
  EXPECT_EQ(s.snapshots, 3000u);
  EXPECT_EQ(s.missed_snapshots, 0u);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].find(Metric::utilization_percent)->count, 3000u);
  EXPECT_DOUBLE_EQ(s.devices[0].find(Metric::utilization_percent)->max, 2999);
}

TEST(MeasurementWindow, ReportsWhatTheHistoryNoLongerHas) {
  boost::asio::io_context io;
  SnapshotChannel ch(io.get_executor(), 8);
  MeasurementWindow w(ch);
  w.begin();
  for (int i = 0; i < 20; ++i) ch.publish(sample(i, {{Metric::utilization_percent, 1}}));
  auto s = w.end();  // nothing delivered yet; the history holds only the last 8
  EXPECT_EQ(s.snapshots, 8u);
  EXPECT_EQ(s.missed_snapshots, 12u);
}

}  // namespace
}  // namespace gpustream
