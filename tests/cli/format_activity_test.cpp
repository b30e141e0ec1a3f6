// The terminal table (snapshot, watch, replay) with the activity metrics (NVML GPM, AMD
// gpu_metrics): one indented line with the ones the device has, none for a device without any.
#include <gtest/gtest.h>

#include <algorithm>

#include "format.hpp"

namespace gpustream::cli {
namespace {

TEST(FormatActivity, ALineWithTheMetricsTheDeviceHas) {
  GpuSnapshot s;
  s.probe = "nvidia";
  DeviceSample h100;
  h100.id = "GPU-a";
  h100.name = "H100";
  h100.metrics.set(Metric::graphics_activity_percent, 71.5, Source::nvml);
  h100.metrics.set(Metric::sm_activity_percent, 64, Source::nvml);
  h100.metrics.set(Metric::tensor_activity_percent, 41.2, Source::nvml);
  h100.metrics.set(Metric::fp16_activity_percent, 0, Source::nvml);
  h100.metrics.fill_absent(Absence::unsupported, Source::nvml);
  DeviceSample l40s;  // GPM unsupported: no activity line
  l40s.id = "GPU-b";
  l40s.name = "L40S";
  l40s.metrics.fill_absent(Absence::unsupported, Source::nvml);
  s.devices = {h100, l40s};
  const auto text = format_table({&s});
  EXPECT_NE(text.find("           activity graphics 72% sm 64% tensor 41% fp16 0%\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("occupancy"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
}

}  // namespace
}  // namespace gpustream::cli
