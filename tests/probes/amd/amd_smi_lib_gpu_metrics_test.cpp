// The AMD library backend's throttle reasons and activity (amdsmi_get_gpu_metrics_info, of which
// only the layout-stable v1.0-v1.3 head is read) and its power limit, whose unit changed
// within 6.x, against the fake libamd_smi.so in both struct layouts.
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

// average_gfx_activity and average_umc_activity of amdsmi_gpu_metrics_t, whose whole size differs
// by release (352 bytes in 23.4 to 4720 in 26.x: the fake writes each release's).
TEST_F(AmdSmiLib, ActivityFromGpuMetricsInEveryKnownRelease) {
  for (const char* version : {"23.4.0", "24.5.1", "24.6.2", "24.7.1", "26.1.0"}) {
    scenario(std::string("version=") + version +
             "\ndevices=2\ndevice.0.gfx=12\ndevice.0.metrics_gfx=96\ndevice.0.metrics_umc=38\n"
             "device.1.metrics_revision=1.3\ndevice.1.metrics_gfx=0\ndevice.1.metrics_umc=100\n");
    auto probe = make(LibrarySessionMode::persistent);
    const auto s = probe->sample_now();
    ASSERT_EQ(s.devices.size(), 2u) << version;
    const auto& m = s.devices[0].metrics;
    EXPECT_DOUBLE_EQ(m[Metric::graphics_activity_percent].value(), 96.0) << version;
    EXPECT_EQ(m[Metric::graphics_activity_percent].source(), Source::amd_smi) << version;
    EXPECT_DOUBLE_EQ(m[Metric::dram_activity_percent].value(), 38.0) << version;
    // amdsmi_get_gpu_activity's figure stays the utilization.
    EXPECT_DOUBLE_EQ(m[Metric::utilization_percent].value(), 12.0) << version;
    EXPECT_EQ(m[Metric::sm_activity_percent].reason(), Absence::unsupported) << version;
    EXPECT_DOUBLE_EQ(s.devices[1].metrics[Metric::graphics_activity_percent].value(), 0.0);
    EXPECT_DOUBLE_EQ(s.devices[1].metrics[Metric::dram_activity_percent].value(), 100.0);
    EXPECT_TRUE(s.errors.empty()) << version;
  }
}

TEST_F(AmdSmiLib, UnavailableOrImpossibleActivityIsAbsentNeverAValue) {
  scenario(
      "version=24.6.2\ndevices=4\n"
      "device.0.metrics_gfx=na\ndevice.0.metrics_umc=7\n"         // not available: 0xFFFF
      "device.1.metrics_gfx=250\ndevice.1.metrics_umc=na\n"       // beyond 100 %
      "device.2.metrics_revision=2.1\ndevice.2.metrics_gfx=40\n"  // an APU table
      "device.3.fail.amdsmi_get_gpu_metrics_info=NO_PERM\n");
  auto probe = make(LibrarySessionMode::persistent);
  const auto s = probe->sample_now();
  ASSERT_EQ(s.devices.size(), 4u);
  const auto gfx = [&](int i) { return s.devices[i].metrics[Metric::graphics_activity_percent]; };
  const auto dram = [&](int i) { return s.devices[i].metrics[Metric::dram_activity_percent]; };
  EXPECT_EQ(gfx(0).reason(), Absence::unsupported);
  EXPECT_DOUBLE_EQ(dram(0).value(), 7.0);
  EXPECT_EQ(gfx(1).reason(), Absence::tool_failed);
  EXPECT_EQ(dram(1).reason(), Absence::unsupported);
  EXPECT_TRUE(has_error(s, "amdsmi_error"));
  EXPECT_EQ(gfx(2).reason(), Absence::unsupported);
  EXPECT_EQ(dram(2).reason(), Absence::unsupported);
  EXPECT_EQ(gfx(3).reason(), Absence::no_permission);
  EXPECT_EQ(dram(3).reason(), Absence::no_permission);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(gfx(i) && gfx(i).value() > 100.0) << i;
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
