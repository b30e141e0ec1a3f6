// From a macmon line to the model: one GPU, unified memory, host power; untrusted zeros.
#include <gtest/gtest.h>

#include <string>

#include "apple_test_util.hpp"
#include "gpustream/probes/apple_probe.hpp"

namespace gpustream {
namespace {

using test::recorded_lines;

GpuSnapshot map_line(const std::string& line, std::optional<MacmonSocInfo> soc = std::nullopt) {
  GpuSnapshot snap;
  fill_apple_snapshot(snap, parse_macmon_line(line), soc);
  return snap;
}

void expect_value(const Reading& r, double v, const char* what) {
  ASSERT_TRUE(r.has_value()) << what << " is absent (" << to_string(r.reason()) << ")";
  EXPECT_DOUBLE_EQ(r.value(), v) << what;
  EXPECT_EQ(r.source(), Source::macmon) << what;
}

void expect_absent(const Reading& r, Absence why, const char* what) {
  EXPECT_FALSE(r.has_value()) << what << " = " << r.get().value_or(-1);
  EXPECT_EQ(r.reason(), why) << what;
  EXPECT_EQ(r.source(), Source::macmon) << what;
}

TEST(MacmonMap, AFreshLineIsOneGpuWithUnifiedMemoryAndHostPower) {
  const auto snap = map_line(recorded_lines("v0.8.1")[0]);
  ASSERT_EQ(snap.devices.size(), 1u);
  const auto& d = snap.devices[0];
  EXPECT_EQ(d.id, kAppleGpuId);
  EXPECT_EQ(d.vendor, Vendor::apple);
  EXPECT_EQ(d.index, 0);
  EXPECT_EQ(d.name, "Apple Silicon GPU");
  EXPECT_TRUE(d.pci_bus_id.empty());
  EXPECT_EQ(d.attributes.at("memory"), "unified");
  EXPECT_EQ(d.attributes.at("macmon_schema"), "v0.8.1+");
  EXPECT_EQ(d.attributes.at("utilization_basis"), "active_residency");

  const auto& m = d.metrics;
  expect_value(m[Metric::utilization_percent], 62.5, "utilization");  // gpu_active_ratio 0.625
  expect_value(m[Metric::clock_graphics_mhz], 1100, "clock");
  expect_value(m[Metric::power_watts], 2.0, "power");
  expect_value(m[Metric::temperature_celsius], 50.25, "temperature");
  expect_value(m[Metric::memory_total_bytes], 25769803776.0, "memory total");
  expect_value(m[Metric::memory_used_bytes], 17179869184.0, "memory used");
  for (auto metric :
       {Metric::memory_utilization_percent, Metric::power_average_watts, Metric::power_limit_watts,
        Metric::energy_joules, Metric::clock_sm_mhz, Metric::clock_memory_mhz, Metric::fan_percent,
        Metric::fan_rpm, Metric::gtt_used_bytes, Metric::gtt_total_bytes})
    expect_absent(m[metric], Absence::unsupported, std::string(to_string(metric)).c_str());

  ASSERT_EQ(d.engines.size(), 2u);
  EXPECT_EQ(d.engines[0].name, "gpu");
  expect_value(d.engines[0].utilization_percent, 62.5, "gpu engine");
  EXPECT_EQ(d.engines[1].name, "ane");
  expect_absent(d.engines[1].utilization_percent, Absence::unsupported, "ane engine");

  ASSERT_TRUE(snap.host);
  const auto& h = *snap.host;
  EXPECT_EQ(h.memory_total_bytes, 25769803776u);
  EXPECT_EQ(h.memory_used_bytes, 17179869184u);
  EXPECT_FALSE(h.memory_available_bytes);  // macmon does not say; never derived here
  EXPECT_EQ(h.swap_total_bytes, 0u);
  EXPECT_EQ(h.swap_used_bytes, 0u);
  const std::map<std::string, double> expected = {
      {"system_power_watts", 14.5},
      {"package_power_watts", 4.75},
      {"cpu_power_watts", 2.5},
      {"ane_power_watts", 0.25},
      {"dram_power_watts", 0.5},
      {"gpu_sram_power_watts", 0.015625},
      {"cpu_temperature_celsius", 55.5},
      {"cpu_utilization_percent", 31.25},
      {"fan_fan0_rpm", 1500},
  };
  EXPECT_EQ(h.metrics, expected);
}

TEST(MacmonMap, PairsGiveTheFrequencyScaledRatio) {
  const auto snap = map_line(recorded_lines("v0.4")[1]);
  const auto& d = snap.devices.at(0);
  expect_value(d.metrics[Metric::utilization_percent], 87.5, "utilization");
  EXPECT_EQ(d.attributes.at("utilization_basis"), "frequency_scaled");
  EXPECT_EQ(d.attributes.at("macmon_schema"), "v0.4-v0.6");
  expect_value(d.metrics[Metric::clock_graphics_mhz], 1398, "clock");
  expect_value(d.metrics[Metric::temperature_celsius], 48.125, "temperature");
  // v0.4 has no combined CPU figure: left out, not computed here.
  EXPECT_FALSE(snap.host->metrics.contains("cpu_utilization_percent"));
  EXPECT_EQ(snap.host->metrics.at("system_power_watts"), 31.5);

  const auto v07 = map_line(recorded_lines("v0.7")[1]);
  EXPECT_EQ(v07.host->metrics.at("cpu_utilization_percent"), 37.5);  // cpu_usage_pct 0.375
  expect_value(v07.devices[0].metrics[Metric::utilization_percent], 93.75, "v0.7 utilization");
}

TEST(MacmonMap, ZeroTemperatureAndZeroSystemPowerAreNotTrusted) {
  // An M1 whose GPU has no temperature sensor macmon knows, and no system power figure.
  const auto snap = map_line(recorded_lines("v0.6")[1]);
  const auto& d = snap.devices.at(0);
  expect_absent(d.metrics[Metric::temperature_celsius], Absence::unsupported, "gpu temperature");
  expect_value(d.metrics[Metric::power_watts], 5.5, "power");
  EXPECT_FALSE(snap.host->metrics.contains("system_power_watts"));
  EXPECT_EQ(snap.host->metrics.at("package_power_watts"), 6.25);
  EXPECT_EQ(snap.host->metrics.at("ane_power_watts"), 0.0);  // a real 0 W
  EXPECT_EQ(snap.host->metrics.at("cpu_temperature_celsius"), 41.75);

  const auto cold = map_line(R"({"temp":{"cpu_temp_avg":0.0,"gpu_temp_avg":200.5},"cpu_power":1})");
  expect_absent(cold.devices[0].metrics[Metric::temperature_celsius], Absence::unsupported,
                "200.5 °C");
  EXPECT_FALSE(cold.host->metrics.contains("cpu_temperature_celsius"));
}

TEST(MacmonMap, AnIdleGpuHasNoClockButARealZeroLoadAndPower) {
  const auto snap = map_line(recorded_lines("v0.8.1")[2]);
  const auto& m = snap.devices.at(0).metrics;
  expect_absent(m[Metric::clock_graphics_mhz], Absence::suspended, "clock of an idle GPU");
  expect_value(m[Metric::utilization_percent], 0.0, "utilization");
  expect_value(m[Metric::power_watts], 0.0, "power");
  expect_absent(m[Metric::temperature_celsius], Absence::unsupported, "temperature 0.0");
  EXPECT_EQ(snap.host->metrics.at("fan_fan0_rpm"), 0.0);

  const auto v04 = map_line(recorded_lines("v0.4")[2]);  // "gpu_usage":[0,0.0]
  expect_absent(v04.devices[0].metrics[Metric::clock_graphics_mhz], Absence::suspended, "v0.4");
}

TEST(MacmonMap, ValuesOutOfRangeAreIgnored) {
  const auto snap = map_line(
      R"({"gpu_freq_mhz":-3,"gpu_scaled_ratio":1.5,"gpu_power":-0.5,"cpu_scaled_ratio":1.0000001,)"
      R"("memory":{"ram_total":0,"ram_usage":5,"swap_total":8,"swap_usage":2},"sys_power":-1})");
  const auto& m = snap.devices.at(0).metrics;
  expect_absent(m[Metric::utilization_percent], Absence::unsupported, "ratio 1.5");
  EXPECT_FALSE(snap.devices[0].attributes.contains("utilization_basis"));
  expect_absent(m[Metric::clock_graphics_mhz], Absence::unsupported, "-3 MHz");
  expect_absent(m[Metric::power_watts], Absence::unsupported, "-0.5 W");
  expect_absent(m[Metric::memory_total_bytes], Absence::unsupported, "0 bytes of RAM");
  expect_absent(m[Metric::memory_used_bytes], Absence::unsupported, "used of 0 bytes");
  EXPECT_EQ(snap.host->metrics.at("cpu_utilization_percent"), 100.0);  // f32 rounding, clamped
  EXPECT_FALSE(snap.host->metrics.contains("system_power_watts"));
  EXPECT_FALSE(snap.host->memory_total_bytes);
  EXPECT_EQ(snap.host->swap_used_bytes, 2u);

  const auto over = map_line(R"({"memory":{"ram_total":8,"ram_usage":9}})");
  expect_value(over.devices[0].metrics[Metric::memory_total_bytes], 8, "total");
  expect_absent(over.devices[0].metrics[Metric::memory_used_bytes], Absence::unsupported,
                "used > total");
}

TEST(MacmonMap, SocInfoNamesTheGpu) {
  MacmonSocInfo soc;
  soc.chip_name = "Apple M3 Pro";
  soc.mac_model = "Mac15,7";
  soc.gpu_cores = 18;
  soc.ecpu_cores = 6;
  soc.pcpu_cores = 6;
  soc.memory_gb = 36;
  const auto snap = map_line(recorded_lines("v0.7")[0], soc);
  const auto& d = snap.devices.at(0);
  EXPECT_EQ(d.name, "Apple M3 Pro GPU");
  EXPECT_EQ(d.attributes.at("chip_name"), "Apple M3 Pro");
  EXPECT_EQ(d.attributes.at("mac_model"), "Mac15,7");
  EXPECT_EQ(d.attributes.at("gpu_cores"), "18");
  EXPECT_EQ(d.attributes.at("memory_gb"), "36");
  EXPECT_EQ(apple_device_info(soc).name, "Apple M3 Pro GPU");
  EXPECT_EQ(apple_device_info(std::nullopt).name, "Apple Silicon GPU");
  EXPECT_EQ(apple_device_info(std::nullopt).vendor, Vendor::apple);

  // A line that carries its own soc (pipe --soc-info) wins over the detected one.
  const std::string own = R"({"soc":{"chip_name":"Apple M4 Max","gpu_cores":40},"gpu_power":1})";
  EXPECT_EQ(map_line(own, soc).devices[0].name, "Apple M4 Max GPU");
  EXPECT_EQ(map_line(own, soc).devices[0].attributes.at("gpu_cores"), "40");
}

}  // namespace
}  // namespace gpustream
