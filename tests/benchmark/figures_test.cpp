// gpustream::benchmark::figures_of: what a window's summary becomes before it is counters. Sums
// and maxima over devices, one chosen device, and every figure that cannot be known left unset
// with a reason (never 0). The summaries are built by hand, so each value is known exactly.
#include <gtest/gtest.h>

#include <string>

#include "gpustream/benchmark.hpp"

namespace gpustream::benchmark {
namespace {

constexpr std::int64_t kS = 1'000'000'000;

DeviceWindowSummary device(const std::string& id, double joules, double max_watts, double util,
                           double mem, double coverage) {
  DeviceWindowSummary d;
  d.device_id = id;
  d.probe = "simulated";
  d.begin_edge = d.end_edge = EdgeKind::sampled;
  d.begin_edge_ns = 10 * kS;
  d.end_edge_ns = 12 * kS;  // a 2 s window
  d.energy_joules = joules;
  d.energy_method = EnergyMethod::counter;
  d.metrics[Metric::power_watts] = {50, max_watts, 60, 55, 3, Source::simulated};
  d.metrics[Metric::utilization_percent] = {0, util, 10, 5, 3, Source::simulated};
  d.metrics[Metric::memory_used_bytes] = {1e9, mem, 1.5e9, 1e9, 3, Source::simulated};
  d.fresh_coverage = coverage;
  return d;
}

WindowSummary two_devices() {
  WindowSummary s;
  s.devices.push_back(device("gpu-a", 200, 130, 40, 3e9, 0.9));
  s.devices.push_back(device("gpu-b", 100, 70, 95, 1e9, 0.6));
  s.exact_edges = true;
  return s;
}

TEST(Figures, EveryDeviceIsTheTotal) {
  const auto f = figures_of(two_devices());
  EXPECT_EQ(f.devices, (std::vector<std::string>{"gpu-a", "gpu-b"}));
  EXPECT_DOUBLE_EQ(f.energy_joules.value_or(-1), 300);
  EXPECT_DOUBLE_EQ(f.power_mean_watts.value_or(-1), 150);        // 200 J / 2 s + 100 J / 2 s
  EXPECT_DOUBLE_EQ(f.power_max_watts.value_or(-1), 200);         // the sum of each device's largest
  EXPECT_DOUBLE_EQ(f.utilization_max_percent.value_or(-1), 95);  // the largest of any device
  EXPECT_DOUBLE_EQ(f.memory_peak_bytes.value_or(-1), 4e9);
  EXPECT_DOUBLE_EQ(f.fresh_coverage.value_or(-1), 0.6);  // the worst covered device
  EXPECT_DOUBLE_EQ(f.window_seconds.value_or(-1), 2);
  EXPECT_EQ(f.exact_edges, true);
  EXPECT_EQ(f.methods, (std::vector<std::string>{"gpu-a energy=counter", "gpu-b energy=counter"}));
  EXPECT_TRUE(f.absent.empty());
}

TEST(Figures, OneChosenDevice) {
  const auto f = figures_of(two_devices(), "gpu-b");
  EXPECT_EQ(f.devices, std::vector<std::string>{"gpu-b"});
  EXPECT_DOUBLE_EQ(f.energy_joules.value_or(-1), 100);
  EXPECT_DOUBLE_EQ(f.power_mean_watts.value_or(-1), 50);
  EXPECT_DOUBLE_EQ(f.power_max_watts.value_or(-1), 70);
  EXPECT_DOUBLE_EQ(f.utilization_max_percent.value_or(-1), 95);
  EXPECT_DOUBLE_EQ(f.memory_peak_bytes.value_or(-1), 1e9);
}

TEST(Figures, WhatIsNotKnownIsUnsetWithAReason) {
  auto s = two_devices();
  s.devices[1].energy_joules.reset();
  s.devices[1].energy_method.reset();
  s.devices[1].metrics.erase(Metric::utilization_percent);
  s.devices[0].fresh_coverage.reset();
  s.devices[0].coverage_reason = "the counter did not change often enough";
  s.devices[0].end_edge = EdgeKind::interpolated;
  const auto f = figures_of(s);
  EXPECT_FALSE(f.energy_joules);  // one device without energy: no total
  EXPECT_FALSE(f.power_mean_watts);
  EXPECT_FALSE(f.utilization_max_percent);
  EXPECT_FALSE(f.fresh_coverage);
  EXPECT_DOUBLE_EQ(f.power_max_watts.value_or(-1), 200);  // still known
  EXPECT_EQ(f.exact_edges, false);
  EXPECT_EQ(f.absent, (std::vector<std::string>{
                          // in device order
                          "coverage: gpu-a: the counter did not change often enough",
                          "energy_J, power_mean_W: gpu-b: no energy counter or power reading in "
                          "the window",
                          "util_max_pct: gpu-b: no utilization reading"}));
}

TEST(Figures, NoDeviceMeansNoFigureAtAll) {
  const auto none = figures_of(WindowSummary{});
  EXPECT_FALSE(none.exact_edges);
  EXPECT_FALSE(none.energy_joules);
  EXPECT_FALSE(none.window_seconds);
  EXPECT_EQ(none.absent, std::vector<std::string>{"every figure: the window saw no device"});
  const auto other = figures_of(two_devices(), "gpu-z");
  EXPECT_TRUE(other.devices.empty());
  EXPECT_EQ(other.absent,
            std::vector<std::string>{"every figure: the window did not see device 'gpu-z'"});
}

}  // namespace
}  // namespace gpustream::benchmark
