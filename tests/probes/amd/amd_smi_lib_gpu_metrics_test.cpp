// The AMD library backend's throttle reasons (amdsmi_get_gpu_metrics_info, of which only the
// layout-stable v1.0-v1.3 head is read) and its power limit, whose unit changed within 6.x,
// against the fake libamd_smi.so in both struct layouts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "amd_smi_lib_fixture.hpp"

namespace gpustream {
namespace {

using test::AmdSmiLib;
using Names = std::vector<std::string>;

// bits 0 (PPT0), 36 (TEMP_HOTSPOT), 47 (PROCHOT_GFX), 57 (FIT) and 60 (no name)
constexpr const char* kThrottled = "0x1200801000000001";
// bits 4 (SPL), 16 (TDC_GFX), 35 (TEMP_EDGE), 56 (PPM)
constexpr const char* kOthers = "0x0100000800010010";

TEST_F(AmdSmiLib, ThrottleReasonsFromGpuMetricsInBothLayouts) {
  for (const char* version : {"26.1.0", "24.6.2", "23.4.0"}) {
    scenario(std::string("version=") + version +
             "\ndevices=3\ndevice.0.indep_throttle_status=" + kThrottled +
             "\ndevice.0.throttle_status=0x30\ndevice.2.indep_throttle_status=" + kOthers + "\n");
    auto probe = make(LibrarySessionMode::persistent);
    const auto s = probe->sample_now();
    ASSERT_EQ(s.devices.size(), 3u) << version;
    const auto& hot = s.devices[0];
    EXPECT_EQ(hot.throttle_reasons, (Names{"ppt0", "temp_hotspot", "prochot_gfx", "fit", "bit60"}))
        << version;
    EXPECT_FALSE(hot.throttle_reasons_absent) << version;
    EXPECT_EQ(hot.attributes.at("indep_throttle_status"), "0x1200801000000001") << version;
    // Not throttled: no reason, and no absence either.
    EXPECT_TRUE(s.devices[1].throttle_reasons.empty()) << version;
    EXPECT_FALSE(s.devices[1].throttle_reasons_absent) << version;
    EXPECT_EQ(s.devices[2].throttle_reasons, (Names{"spl", "tdc_gfx", "temp_edge", "ppm"}))
        << version;
  }
}

TEST_F(AmdSmiLib, OlderTablesGiveOnlyThrottledAndMissingFieldsAreAbsent) {
  scenario(
      "version=24.6.2\ndevices=4\n"
      // A 1.2 table (no indep_throttle_status): the ASIC-dependent word only says "throttled".
      "device.0.metrics_revision=1.2\ndevice.0.throttle_status=0x4\n"
      "device.0.indep_throttle_status=0x1\n"
      // A 1.3+ table whose indep word is not available (all ones): the dependent word.
      "device.1.indep_throttle_status=na\ndevice.1.throttle_status=0\n"
      // Neither field available: absent, unsupported.
      "device.2.indep_throttle_status=na\ndevice.2.throttle_status=na\n"
      // An APU's 2.x table: its fields are elsewhere, so nothing is read.
      "device.3.metrics_revision=2.4\ndevice.3.indep_throttle_status=0x1\n");
  auto probe = make(LibrarySessionMode::persistent);
  const auto s = probe->sample_now();
  ASSERT_EQ(s.devices.size(), 4u);
  EXPECT_EQ(s.devices[0].throttle_reasons, Names{"throttled"});
  EXPECT_EQ(s.devices[0].attributes.count("indep_throttle_status"), 0u);
  EXPECT_TRUE(s.devices[1].throttle_reasons.empty());
  EXPECT_FALSE(s.devices[1].throttle_reasons_absent);
  for (int i : {2, 3}) {
    EXPECT_TRUE(s.devices[i].throttle_reasons.empty()) << i;
    EXPECT_EQ(s.devices[i].throttle_reasons_absent, Absence::unsupported) << i;
  }
}

TEST_F(AmdSmiLib, FailingGpuMetricsLeavesThrottleAbsentWithTheReason) {
  scenario(
      "version=26.1.0\ndevices=3\ndevice.0.fail.amdsmi_get_gpu_metrics_info=NOT_SUPPORTED\n"
      "device.1.fail.amdsmi_get_gpu_metrics_info=NO_PERM\n"
      "device.2.fail.amdsmi_get_gpu_metrics_info=UNKNOWN\n");
  auto probe = make(LibrarySessionMode::persistent);
  const auto s = probe->sample_now();
  ASSERT_EQ(s.devices.size(), 3u);
  EXPECT_EQ(s.devices[0].throttle_reasons_absent, Absence::unsupported);
  EXPECT_EQ(s.devices[1].throttle_reasons_absent, Absence::no_permission);
  EXPECT_EQ(s.devices[2].throttle_reasons_absent, Absence::tool_failed);
  EXPECT_TRUE(has_error(s, "amdsmi_error"));
  EXPECT_EQ(s.devices[2].metrics[Metric::utilization_percent].value(), 12);  // the rest stays
}

// amdsmi_power_info_t's power_limit: W up to 24.5.1 (the library divided hwmon's µW by 10^6), µW
// from 24.5.2 on, W in 26.x. Every release reports 750 W for the same 750 W cap.
TEST_F(AmdSmiLib, PowerLimitIsConvertedByReleaseInBothLayouts) {
  for (const char* version : {"23.4.0", "24.5.1", "24.5.2", "24.6.2", "24.7.1", "26.1.0"}) {
    scenario(std::string("version=") + version + "\ndevices=1\ndevice.0.power_limit=750\n");
    auto probe = make(LibrarySessionMode::persistent);
    const auto s = probe->sample_now();
    ASSERT_EQ(s.devices.size(), 1u) << version;
    const auto& limit = s.devices[0].metrics[Metric::power_limit_watts];
    ASSERT_TRUE(limit) << version;
    EXPECT_DOUBLE_EQ(limit.value(), 750.0) << version;
  }
}

TEST_F(AmdSmiLib, UnavailablePowerLimitIsAbsentInBothUnits) {
  for (const char* version : {"24.5.1", "24.6.2", "26.1.0"}) {
    scenario(std::string("version=") + version + "\ndevices=1\ndevice.0.power_limit=na\n");
    auto probe = make(LibrarySessionMode::persistent);
    const auto s = probe->sample_now();
    ASSERT_EQ(s.devices.size(), 1u) << version;
    EXPECT_EQ(s.devices[0].metrics[Metric::power_limit_watts].reason(), Absence::unsupported)
        << version;
    EXPECT_EQ(s.devices[0].metrics[Metric::power_watts].value(), 300) << version;
  }
  scenario("version=24.6.2\ndevices=1\nfail.amdsmi_get_power_info=UNKNOWN\n");
  auto probe = make(LibrarySessionMode::persistent);
  const auto s = probe->sample_now();
  EXPECT_EQ(s.devices.at(0).metrics[Metric::power_limit_watts].reason(), Absence::tool_failed);
}

}  // namespace
}  // namespace gpustream
