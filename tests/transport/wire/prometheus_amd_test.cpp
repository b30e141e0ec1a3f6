// /metrics from a vendor's probe: an AMD board whose hwmon has only the driver's average power
// still has a power series. Built with the amd probe only.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/transport/prometheus.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::transport::test {
namespace {

// An AMD board whose hwmon has only power1_average (most consumer boards) has a
// gpustream_gpu_power_watts series: the probe reports the driver's average as power_watts.
TEST(TransportPrometheus, AmdAverageOnlyBoardHasAPowerSeries) {
  gpustream::test::TempTree t;
  const std::string dev = "sys/class/drm/card0/device/";
  t.file(dev + "vendor", "0x1002\n");
  t.file(dev + "device", "0x744c\n");
  t.file(dev + "uevent", "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n");
  t.file(dev + "hwmon/hwmon2/power1_average", "87250000\n");
  auto probe = make_amd_sysfs_probe(
      {},
      {.paths = {.sysfs_root = t.path("sys"), .procfs_root = t.path("proc")}, .processes = false});
  ASSERT_TRUE(probe->detect_now().available);
  auto s = probe->sample_now();
  s.probe = "amd";
  const auto text = render_prometheus({std::make_shared<const GpuSnapshot>(s)}, {}, nullptr);
  const auto at = text.find(R"(gpustream_gpu_power_watts{device="amd:0000:03:00.0",vendor="amd",)");
  ASSERT_NE(at, std::string::npos) << text;
  const auto line = text.substr(at, text.find('\n', at) - at);
  EXPECT_TRUE(line.ends_with("} 87.25")) << line;
}

}  // namespace
}  // namespace gpustream::transport::test
