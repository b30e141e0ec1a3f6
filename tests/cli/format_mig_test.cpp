// The terminal table (snapshot, watch, replay) with MIG instances and interconnect/health
// figures: an instance is named by its profile and ids under its GPU; the health line appears
// only for a device that reports some of it, with "-" for what it does not.
#include <gtest/gtest.h>

#include <algorithm>

#include "format.hpp"

namespace gpustream::cli {
namespace {

TEST(FormatMig, InstancesAndTheHealthLine) {
  GpuSnapshot s;
  s.probe = "nvidia";
  DeviceSample gpu;
  gpu.id = "GPU-a";
  gpu.name = "A100";
  gpu.partitioned = true;
  gpu.metrics.set(Metric::pcie_link_generation, 3, Source::nvml);
  gpu.metrics.set(Metric::pcie_link_generation_max, 4, Source::nvml);
  gpu.metrics.set(Metric::pcie_link_width, 16, Source::nvml);
  gpu.metrics.set(Metric::pcie_rx_bytes_per_second, 2 * 1024 * 1024, Source::nvml);
  gpu.metrics.set(Metric::ecc_uncorrected_aggregate, 2, Source::nvml);
  gpu.metrics.fill_absent(Absence::unsupported, Source::nvml);
  DeviceSample inst;
  inst.id = "MIG-b";
  inst.name = "A100 MIG 1g.5gb";
  inst.parent = "GPU-a";
  inst.mig = MigIdentity{5, 2, "1g.5gb"};
  inst.metrics.fill_absent(Absence::unsupported, Source::nvml);
  s.devices = {gpu, inst};
  const auto text = format_table({&s});
  EXPECT_NE(text.find("pcie gen3/4 x16/- rx 2.0 MiB/s tx -"), std::string::npos) << text;
  EXPECT_NE(text.find("ecc corrected -/- uncorrected -/2"), std::string::npos) << text;
  EXPECT_NE(text.find("\u2514 MIG 1g.5gb 5/2"), std::string::npos) << text;
  // The instance reports no health figure: no health line after it (3 lines in all).
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
}

}  // namespace
}  // namespace gpustream::cli
