// pci::normalize_bus_id (probes/toolkit/pci.cpp): one canonical PCI bus id for every source.
#include <gtest/gtest.h>

#include "gpustream/probes/pci.hpp"

namespace gpustream {
namespace {

using pci::normalize_bus_id;

TEST(PciBusId, EverySourcesSpellingGivesTheSameId) {
  EXPECT_EQ(normalize_bus_id("00000000:3B:00.0"), "0000:3b:00.0");  // NVML, nvidia-smi
  EXPECT_EQ(normalize_bus_id("0000:3b:00.0"), "0000:3b:00.0");      // sysfs, drm-pdev
  EXPECT_EQ(normalize_bus_id("0000:3B:00.0"), "0000:3b:00.0");      // rocm-smi
  EXPECT_EQ(normalize_bus_id("3b:00.0"), "0000:3b:00.0");           // no domain
  EXPECT_EQ(normalize_bus_id(" 00000001:01:00.7\n"), "0001:01:00.7");
  EXPECT_EQ(normalize_bus_id("00010000:01:00.0"), "10000:01:00.0");  // a domain beyond 16 bits
  EXPECT_EQ(normalize_bus_id("1:01:00.0"), "0001:01:00.0");
}

TEST(PciBusId, AnythingElseIsUnknown) {
  for (const char* bad :
       {"", "[N/A]", "N/A", "0000:01:00", "0000:01:00.8", "0000:0g:00.0", "0000-01:00.0",
        ":01:00.0", "000000000:01:00.0", "0000:01:00.0x", "card0", "0000:01:000.0"})
    EXPECT_EQ(normalize_bus_id(bad), "") << bad;
}

}  // namespace
}  // namespace gpustream
