// NvidiaProbe over the fake libnvidia-ml.so.1: interconnect and health metrics (PCIe throughput
// and link, NVLink throughput, ECC counters, retired pages, remapped rows), each absent with its
// reason where the device or the library does not have it.
#include <gtest/gtest.h>

#include "gpustream/probes/nvidia_probe.hpp"
#include "nvidia_fakes.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::DrivenClock;
using test::FakeNvml;
using test::ProbeHarness;
using test::TempTree;

constexpr const char* kGpu = "GPU-aaaaaaaa-1111-2222-3333-444444444444";

const std::string kHealthy = std::string("devices=1\ndevice.0.uuid=") + kGpu + "\n" +
                             "device.0.pcie_rx_kb=300000\n"
                             "device.0.pcie_tx_kb=1500\n"
                             "device.0.pcie_gen=3\n"
                             "device.0.pcie_gen_max=4\n"
                             "device.0.pcie_width=8\n"
                             "device.0.pcie_width_max=16\n"
                             "device.0.ecc_corrected_volatile=3\n"
                             "device.0.ecc_uncorrected_volatile=1\n"
                             "device.0.ecc_corrected_aggregate=120\n"
                             "device.0.ecc_uncorrected_aggregate=2\n"
                             "device.0.retired_single=4\n"
                             "device.0.retired_double=1\n"
                             "device.0.retired_pending=1\n"
                             "device.0.remapped_corrected=6\n"
                             "device.0.remapped_uncorrected=2\n"
                             "device.0.remapped_pending=0\n"
                             "device.0.remapped_failure=1\n";

Reading health_nvml(double v) { return Reading::of(v, Source::nvml); }
Reading health_absent(Absence why) { return Reading::missing(why, Source::nvml); }

class NvmlHealthTest : public ::testing::Test {
 protected:
  std::shared_ptr<NvidiaProbe> probe(const char* library = nullptr) {
    NvidiaProbeOptions o;
    o.nvml_library = library ? library : nvml_.path();
    o.use = NvidiaProbeOptions::Use::nvml_only;
    o.library_session = LibrarySessionMode::persistent;
    o.paths.procfs_root = proc_.path();
    o.clock = clock_.function();
    return make_nvidia_probe(harness_.executors(), o);
  }
  GpuSnapshot sample(NvidiaProbe& p) {
    auto r = harness_.sample(p);
    if (r.ec) throw std::runtime_error(r.ec.message());
    return std::move(r.snapshot);
  }

  FakeNvml nvml_;
  TempTree proc_;
  DrivenClock clock_;
  ProbeHarness harness_;
};

TEST_F(NvmlHealthTest, MapsPcieEccRetiredPagesAndRemappedRows) {
  nvml_.scenario(kHealthy);
  auto p = probe();
  ASSERT_TRUE(harness_.detect(*p).available);
  const auto s = sample(*p);
  EXPECT_TRUE(s.errors.empty());
  const auto& m = s.devices.at(0).metrics;
  EXPECT_EQ(m[Metric::pcie_rx_bytes_per_second],
            health_nvml(300000.0 * 1024));  // KB/s, KB = 1024 B
  EXPECT_EQ(m[Metric::pcie_tx_bytes_per_second], health_nvml(1500.0 * 1024));
  EXPECT_EQ(m[Metric::pcie_link_generation], health_nvml(3));
  EXPECT_EQ(m[Metric::pcie_link_generation_max], health_nvml(4));
  EXPECT_EQ(m[Metric::pcie_link_width], health_nvml(8));
  EXPECT_EQ(m[Metric::pcie_link_width_max], health_nvml(16));
  EXPECT_EQ(m[Metric::ecc_corrected_volatile], health_nvml(3));
  EXPECT_EQ(m[Metric::ecc_uncorrected_volatile], health_nvml(1));
  EXPECT_EQ(m[Metric::ecc_corrected_aggregate], health_nvml(120));
  EXPECT_EQ(m[Metric::ecc_uncorrected_aggregate], health_nvml(2));
  EXPECT_EQ(m[Metric::retired_pages_single_bit], health_nvml(4));
  EXPECT_EQ(m[Metric::retired_pages_double_bit], health_nvml(1));
  EXPECT_EQ(m[Metric::retired_pages_pending], health_nvml(1));
  EXPECT_EQ(m[Metric::remapped_rows_corrected], health_nvml(6));
  EXPECT_EQ(m[Metric::remapped_rows_uncorrected], health_nvml(2));
  EXPECT_EQ(m[Metric::remapped_rows_pending], health_nvml(0));
  EXPECT_EQ(m[Metric::remapped_rows_failed], health_nvml(1));
  // No NVLink on this device: unsupported, never 0.
  EXPECT_EQ(m[Metric::nvlink_rx_bytes_per_second], health_absent(Absence::unsupported));
  EXPECT_EQ(m[Metric::nvlink_tx_bytes_per_second], health_absent(Absence::unsupported));
}

TEST_F(NvmlHealthTest, UnsupportedCountersAreAbsentWithTheirReason) {
  nvml_.scenario(kHealthy +
                 "device.0.fail.nvmlDeviceGetTotalEccErrors=NOT_SUPPORTED\n"  // ECC off
                 "device.0.fail.nvmlDeviceGetRetiredPages=NOT_SUPPORTED\n"    // Ampere
                 "device.0.fail.nvmlDeviceGetRemappedRows=NO_PERMISSION\n"
                 "device.0.fail.nvmlDeviceGetPcieThroughput=UNKNOWN\n");
  auto p = probe();
  ASSERT_TRUE(harness_.detect(*p).available);
  const auto s = sample(*p);
  const auto& m = s.devices.at(0).metrics;
  for (auto metric : {Metric::ecc_corrected_volatile, Metric::ecc_uncorrected_volatile,
                      Metric::ecc_corrected_aggregate, Metric::ecc_uncorrected_aggregate,
                      Metric::retired_pages_single_bit, Metric::retired_pages_double_bit})
    EXPECT_EQ(m[metric], health_absent(Absence::unsupported)) << to_string(metric);
  for (auto metric : {Metric::remapped_rows_corrected, Metric::remapped_rows_uncorrected,
                      Metric::remapped_rows_pending, Metric::remapped_rows_failed})
    EXPECT_EQ(m[metric], health_absent(Absence::no_permission)) << to_string(metric);
  EXPECT_EQ(m[Metric::pcie_rx_bytes_per_second], health_absent(Absence::tool_failed));
  EXPECT_EQ(m[Metric::pcie_tx_bytes_per_second], health_absent(Absence::tool_failed));
  // The link figures still come: one failing function does not take the others down.
  EXPECT_EQ(m[Metric::pcie_link_generation], health_nvml(3));
  EXPECT_EQ(m[Metric::retired_pages_pending], health_nvml(1));
  // Only the unexpected failure is an error of the snapshot (once per counter read).
  ASSERT_EQ(s.errors.size(), 2u);
  for (const auto& e : s.errors) {
    EXPECT_EQ(e.code, "nvml_error");
    EXPECT_NE(e.message.find("nvmlDeviceGetPcieThroughput"), std::string::npos) << e.message;
  }
}

// A failed clock-reasons read is absent with its reason: an empty list would say "not
// throttled".
TEST_F(NvmlHealthTest, UnreadableThrottleReasonsAreAbsentNotEmpty) {
  nvml_.scenario(kHealthy + "device.0.fail.nvmlDeviceGetCurrentClocksEventReasons=NO_PERMISSION\n");
  auto p = probe();
  ASSERT_TRUE(harness_.detect(*p).available);
  const auto s = sample(*p);
  const auto& d = s.devices.at(0);
  EXPECT_TRUE(d.throttle_reasons.empty());
  EXPECT_EQ(d.throttle_reasons_absent, Absence::no_permission);
  EXPECT_TRUE(s.errors.empty());  // an expected refusal, not an error of the snapshot
}

TEST_F(NvmlHealthTest, AnOldLibraryWithoutTheFunctionsLeavesThemAbsentUnsupported) {
  FakeNvml legacy(fakes::kFakeNvmlLegacy);
  legacy.scenario(kHealthy);
  auto p = probe(fakes::kFakeNvmlLegacy);
  ASSERT_TRUE(harness_.detect(*p).available);
  const auto s = sample(*p);
  EXPECT_TRUE(s.errors.empty());
  const auto& m = s.devices.at(0).metrics;
  for (auto metric :
       {Metric::pcie_rx_bytes_per_second, Metric::pcie_link_generation, Metric::pcie_link_width_max,
        Metric::nvlink_rx_bytes_per_second, Metric::ecc_corrected_volatile,
        Metric::retired_pages_pending, Metric::remapped_rows_failed})
    EXPECT_EQ(m[metric], health_absent(Absence::unsupported)) << to_string(metric);
}

TEST_F(NvmlHealthTest, NvlinkThroughputIsTheCounterDifferenceOverTimeOfTheActiveLinks) {
  // 4 links, links 0 and 2 active; each active link's counters in KiB.
  const std::string links = kHealthy +
                            "device.0.nvlinks=4\n"
                            "device.0.nvlink_active=0x5\n";
  nvml_.scenario(links + "device.0.nvlink_rx_kib=1000\ndevice.0.nvlink_tx_kib=500\n");
  auto p = probe();
  ASSERT_TRUE(harness_.detect(*p).available);
  const auto first = sample(*p);
  const auto& d0 = first.devices.at(0);
  // The first sample only seeds the counters.
  EXPECT_EQ(d0.metrics[Metric::nvlink_rx_bytes_per_second], health_absent(Absence::not_yet_seeded));
  EXPECT_EQ(d0.attributes.at("nvlink_active_links"), "2");

  // Two seconds later each active link moved 4096 KiB in and 1024 KiB out.
  clock_.advance(std::chrono::seconds{2});
  nvml_.reload(links + "device.0.nvlink_rx_kib=5096\ndevice.0.nvlink_tx_kib=1524\n");
  const auto second = sample(*p);
  const auto& m = second.devices.at(0).metrics;
  EXPECT_EQ(m[Metric::nvlink_rx_bytes_per_second], health_nvml(2 * 4096.0 * 1024 / 2));
  EXPECT_EQ(m[Metric::nvlink_tx_bytes_per_second], health_nvml(2 * 1024.0 * 1024 / 2));

  // A counter that went back (driver reload) seeds again rather than reporting a negative rate.
  clock_.advance(std::chrono::seconds{1});
  nvml_.reload(links + "device.0.nvlink_rx_kib=10\ndevice.0.nvlink_tx_kib=10\n");
  EXPECT_EQ(sample(*p).devices.at(0).metrics[Metric::nvlink_tx_bytes_per_second],
            health_absent(Absence::not_yet_seeded));
}

TEST_F(NvmlHealthTest, NvlinkWithNoActiveLinkIsAbsent) {
  nvml_.scenario(kHealthy + "device.0.nvlinks=4\ndevice.0.nvlink_active=0\n");
  auto p = probe();
  ASSERT_TRUE(harness_.detect(*p).available);
  const auto s = sample(*p);
  EXPECT_EQ(s.devices.at(0).metrics[Metric::nvlink_rx_bytes_per_second],
            health_absent(Absence::unsupported));
  EXPECT_EQ(s.devices.at(0).attributes.at("nvlink_active_links"), "0");
  EXPECT_EQ(nvml_.count("field.138") + nvml_.count("field.139"), 0);  // NVLink data counters
}

}  // namespace
}  // namespace gpustream
