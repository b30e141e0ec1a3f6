// Hostile values in amd-smi / rocm-smi JSON (issue 11, defect 7): a value that is not a finite
// number in range makes that one field absent (or that one process entry skipped); it is never
// cast to an integer, and it never costs the rest of the sample.
#include <gtest/gtest.h>

#include <string>

#include "gpustream/probes/amd_probe.hpp"

namespace gpustream {
namespace {

using namespace amd_cli;

TEST(AmdSmiParseHostile, NonIntegerGpuIndexFallsBackToThePosition) {
  // Each of these used to throw from boost::json's to_number<int>, past the probe's handler.
  const std::string metric = R"([
      {"gpu": 1.5, "usage": {"gfx_activity": 10}},
      {"gpu": 1e300, "usage": {"gfx_activity": 11}},
      {"gpu": -1, "usage": {"gfx_activity": 12}},
      {"gpu": 18446744073709551615, "usage": {"gfx_activity": 13}},
      {"gpu": 7, "usage": {"gfx_activity": 14}}])";
  std::map<int, MetricSet> m;
  ASSERT_NO_THROW(m = parse_amd_smi_metric(metric));
  ASSERT_EQ(m.size(), 5u);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(m.at(i)[Metric::utilization_percent].value(), 10.0 + i) << "position " << i;
  EXPECT_EQ(m.at(7)[Metric::utilization_percent].value(), 14.0);

  std::vector<StaticInfo> s;
  ASSERT_NO_THROW(s = parse_amd_smi_static(R"([{"gpu": 2.25, "bus": {"bdf": "0000:03:00.0"}}])"));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].index, 0);
  EXPECT_EQ(s[0].bus_id, "0000:03:00.0");

  std::map<int, std::vector<ProcessUsage>> p;
  ASSERT_NO_THROW(p = parse_amd_smi_process(
                      R"([{"gpu": 0.5, "process_list": [{"process_info": {"pid": 9}}]}])"));
  ASSERT_EQ(p.at(0).size(), 1u);
  EXPECT_EQ(p.at(0)[0].process.pid, 9);
}

TEST(AmdSmiParseHostile, BusyTimeThatIsNotAFiniteCountIsLeftOut) {
  const auto p = parse_amd_smi_process(R"([{"gpu": 0, "process_list": [{"process_info": {
      "pid": 42, "name": "x",
      "usage": {"gfx": {"value": "inf", "unit": "ns"},
                "enc": {"value": "nan", "unit": "ns"},
                "dec": {"value": -5, "unit": "ns"},
                "compute": {"value": 1e300, "unit": "s"},
                "jpeg": {"value": "-inf", "unit": "ms"},
                "dma": {"value": 7, "unit": "us"}}}}]}])");
  ASSERT_EQ(p.at(0).size(), 1u);
  const auto& busy = p.at(0)[0].engine_busy_ns;
  EXPECT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy.at("dma"), 7000u);
}

TEST(AmdSmiParseHostile, PidThatIsNotAWholePositiveNumberSkipsOnlyThatProcess) {
  const auto p = parse_amd_smi_process(R"([{"gpu": 0, "process_list": [
      {"process_info": {"pid": "inf", "name": "a"}},
      {"process_info": {"pid": "nan", "name": "b"}},
      {"process_info": {"pid": -3, "name": "c"}},
      {"process_info": {"pid": 1e300, "name": "d"}},
      {"process_info": {"pid": 0, "name": "e"}},
      {"process_info": {"pid": 42, "name": "good"}}]}])");
  ASSERT_EQ(p.at(0).size(), 1u);
  EXPECT_EQ(p.at(0)[0].process.pid, 42);
  EXPECT_EQ(p.at(0)[0].process.name, "good");
}

TEST(AmdSmiParseHostile, VramThatIsNotAFiniteCountIsAbsent) {
  const auto p = parse_amd_smi_process(R"([{"gpu": 0, "process_list": [
      {"process_info": {"pid": 1, "memory_usage": {"vram_mem": {"value": "inf", "unit": "B"}}}},
      {"process_info": {"pid": 2, "memory_usage": {"vram_mem": {"value": -1, "unit": "MB"}}}},
      {"process_info": {"pid": 3, "memory_usage": {"vram_mem": {"value": 1e300, "unit": "MB"}}}},
      {"process_info": {"pid": 4, "memory_usage": {"vram_mem": {"value": 2, "unit": "MB"}}}}]}])");
  ASSERT_EQ(p.at(0).size(), 4u);
  for (int i = 0; i < 3; ++i)
    EXPECT_FALSE(p.at(0)[i].process.gpu_memory_bytes) << "pid " << p.at(0)[i].process.pid;
  EXPECT_EQ(p.at(0)[3].process.gpu_memory_bytes, 2u * 1048576u);
}

// memory_usage.gtt_mem (SCHEMA_NOTES.md: 6.0/6.1 bare numbers, amd-smi 26 {"value","unit"} in
// "B"): a known 0 stays 0; the 6.2.0 form with only mem_usage, "N/A" and non-finite values leave
// it unknown.
TEST(AmdSmiParse, ProcessGttMemory) {
  const auto p = parse_amd_smi_process(R"([{"gpu": 0, "process_list": [
      {"process_info": {"pid": 1, "memory_usage": {"gtt_mem": 22528, "vram_mem": 4096}}},
      {"process_info": {"pid": 2, "memory_usage": {"gtt_mem": {"value": 23068672, "unit": "B"},
                                                    "vram_mem": {"value": 0, "unit": "B"}}}},
      {"process_info": {"pid": 3, "memory_usage": {"gtt_mem": {"value": 3, "unit": "MB"}}}},
      {"process_info": {"pid": 4, "memory_usage": {"gtt_mem": {"value": 0, "unit": "B"}}}},
      {"process_info": {"pid": 5, "mem_usage": {"value": 0, "unit": "B"}}},
      {"process_info": {"pid": 6, "memory_usage": {"gtt_mem": "N/A"}}},
      {"process_info": {"pid": 7, "memory_usage": {"gtt_mem": {"value": "inf", "unit": "B"}}}}]}])");
  ASSERT_EQ(p.at(0).size(), 7u);
  const auto gtt = [&](std::size_t i) { return p.at(0)[i].process.gtt_memory_bytes; };
  EXPECT_EQ(gtt(0), 22528u);
  EXPECT_EQ(gtt(1), 23068672u);
  EXPECT_EQ(p.at(0)[1].process.gpu_memory_bytes, 0u);
  EXPECT_EQ(gtt(2), 3u * 1048576u);
  EXPECT_EQ(gtt(3), 0u);
  for (std::size_t i = 4; i < 7; ++i) EXPECT_FALSE(gtt(i)) << "pid " << p.at(0)[i].process.pid;
}

TEST(AmdSmiParseHostile, NonFiniteMetricIsAbsentAndTheOthersStay) {
  auto m = parse_amd_smi_metric(R"([{"gpu": 0,
      "usage": {"gfx_activity": "inf", "umc_activity": "nan"},
      "mem_usage": {"total_vram": {"value": 1e305, "unit": "MB"}, "used_vram": 3},
      "temperature": {"edge": {"value": "-inf", "unit": "C"}},
      "power": {"socket_power": 55}}])");
  for (auto metric : {Metric::utilization_percent, Metric::memory_utilization_percent,
                      Metric::memory_total_bytes, Metric::temperature_celsius}) {
    EXPECT_FALSE(m[0][metric]) << to_string(metric);
    EXPECT_EQ(m[0][metric].reason(), Absence::unsupported) << to_string(metric);
  }
  EXPECT_EQ(m[0][Metric::power_watts].value(), 55.0);
  EXPECT_EQ(m[0][Metric::memory_used_bytes].value(), 3.0 * 1048576.0);

  const auto s = parse_amd_smi_static(R"([{"gpu": 0, "vram": {"size": "inf"}}])");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_FALSE(s[0].vram_total_bytes);
}

TEST(RocmSmiParseHostile, NonFiniteValuesAndOutOfRangeCardsAreLeftOut) {
  const auto d = parse_rocm_smi(R"js({
      "card0": {"GPU use (%)": "inf", "Temperature (Sensor edge) (C)": "nan",
                "sclk clock speed:": "(1700Mhz)"},
      "card99999999999": {"GPU use (%)": "5"},
      "card-1": {"GPU use (%)": "6"}})js");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].index, 0);
  EXPECT_FALSE(d[0].metrics[Metric::utilization_percent]);
  EXPECT_FALSE(d[0].metrics[Metric::temperature_celsius]);
  EXPECT_EQ(d[0].metrics[Metric::clock_graphics_mhz].value(), 1700.0);
}

}  // namespace
}  // namespace gpustream
