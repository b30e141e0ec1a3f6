// NVIDIA power as the driver means it, over the fake libnvidia-ml.so.1: the instantaneous and
// averaged fields of nvmlDeviceGetFieldValues where the driver has them, otherwise
// nvmlDeviceGetPowerUsage labelled by the architecture (nvmlDeviceGetArchitecture), for a
// Hopper, an Ada, a Volta and a GA100 board.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gpustream/probes/nvidia_probe.hpp"
#include "nvidia/nvml_backend.hpp"
#include "nvidia_fakes.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::FakeNvml;
using test::ProbeHarness;
using test::TempTree;

Reading nvml(double v) { return Reading::of(v, Source::nvml); }
Reading absent(Absence why) { return Reading::missing(why, Source::nvml); }

// nvmlDeviceArchitecture_t values and PCI device ids (device << 16 | 0x10DE) of real boards.
constexpr const char* kHopper =
    "device.0.name=NVIDIA H100 80GB HBM3\ndevice.0.architecture=9\n"
    "device.0.pci_device_id=0x233010DE\n";
constexpr const char* kAda =
    "device.0.name=NVIDIA L40S\ndevice.0.architecture=8\ndevice.0.pci_device_id=0x26B910DE\n";
constexpr const char* kVolta =
    "device.0.name=Tesla V100-SXM2-32GB\ndevice.0.architecture=5\n"
    "device.0.pci_device_id=0x1DB510DE\n";
constexpr const char* kA100 =
    "device.0.name=NVIDIA A100-SXM4-80GB\ndevice.0.architecture=7\n"
    "device.0.pci_device_id=0x20B210DE\n";
constexpr const char* kA10 =
    "device.0.name=NVIDIA A10\ndevice.0.architecture=7\ndevice.0.pci_device_id=0x223610DE\n";

class NvmlPowerTest : public ::testing::Test {
 protected:
  std::shared_ptr<NvidiaProbe> probe() {
    NvidiaProbeOptions o;
    o.nvml_library = nvml_.path();
    o.use = NvidiaProbeOptions::Use::nvml_only;
    o.library_session = LibrarySessionMode::persistent;
    o.paths.procfs_root = proc_.path();
    return make_nvidia_probe(harness_.executors(), o);
  }
  DeviceSample sample_one(const std::string& scenario) {
    nvml_.scenario("devices=1\ndevice.0.power_mw=250000\n" + scenario);
    p_ = probe();
    EXPECT_TRUE(harness_.detect(*p_).available);
    return sample_again();
  }
  DeviceSample sample_again() {
    auto r = harness_.sample(*p_);
    EXPECT_FALSE(r.ec) << r.ec.message();
    EXPECT_EQ(r.snapshot.devices.size(), 1u);
    return r.snapshot.devices.empty() ? DeviceSample{} : r.snapshot.devices[0];
  }

  FakeNvml nvml_;
  TempTree proc_;
  ProbeHarness harness_;
  std::shared_ptr<NvidiaProbe> p_;
};

TEST_F(NvmlPowerTest, HopperWithPowerFieldsReportsInstantAndAverage) {
  const auto d = sample_one(std::string(kHopper) +
                            "device.0.power_instant_mw=612345\ndevice.0.power_average_mw=498000\n");
  EXPECT_EQ(d.metrics[Metric::power_watts], nvml(612.345));
  EXPECT_EQ(d.power_kind, PowerKind::instant);
  EXPECT_EQ(d.metrics[Metric::power_average_watts], nvml(498.0));
  // Both figures from one field-values call; nvmlDeviceGetPowerUsage (the 1 s average on
  // Hopper) is not read at all.
  EXPECT_EQ(nvml_.count("field.186"), 1);
  EXPECT_EQ(nvml_.count("field.185"), 1);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetPowerUsage"), 0);
}

TEST_F(NvmlPowerTest, AdaWithoutPowerFieldsLabelsPowerUsageAsTheAverage) {
  // A driver before R535: both fields NOT_SUPPORTED.
  const auto d = sample_one(kAda);
  EXPECT_EQ(d.metrics[Metric::power_watts], nvml(250.0));
  EXPECT_EQ(d.power_kind, PowerKind::average);
  EXPECT_EQ(d.metrics[Metric::power_average_watts], nvml(250.0));
  // The fields are not asked again in the session: one call, then nvmlDeviceGetPowerUsage only.
  const auto again = sample_again();
  EXPECT_EQ(again.power_kind, PowerKind::average);
  EXPECT_EQ(nvml_.count("field.186"), 1);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetPowerUsage"), 2);
}

TEST_F(NvmlPowerTest, AdaWithPowerFieldsPrefersTheInstantaneousField) {
  const auto d = sample_one(std::string(kAda) +
                            "device.0.power_instant_mw=301000\ndevice.0.power_average_mw=280500\n");
  EXPECT_EQ(d.metrics[Metric::power_watts], nvml(301.0));
  EXPECT_EQ(d.power_kind, PowerKind::instant);
  EXPECT_EQ(d.metrics[Metric::power_average_watts], nvml(280.5));
}

TEST_F(NvmlPowerTest, VoltaWithoutPowerFieldsLabelsPowerUsageAsInstant) {
  const auto d = sample_one(kVolta);
  EXPECT_EQ(d.metrics[Metric::power_watts], nvml(250.0));
  EXPECT_EQ(d.power_kind, PowerKind::instant);
  EXPECT_EQ(d.metrics[Metric::power_average_watts], absent(Absence::unsupported));
}

TEST_F(NvmlPowerTest, VoltaWithOnlyTheInstantFieldHasNoAverage) {
  // R535+ on Volta: NVML_FI_DEV_POWER_INSTANT answers, NVML_FI_DEV_POWER_AVERAGE does not.
  const auto d = sample_one(std::string(kVolta) + "device.0.power_instant_mw=180250\n");
  EXPECT_EQ(d.metrics[Metric::power_watts], nvml(180.25));
  EXPECT_EQ(d.power_kind, PowerKind::instant);
  EXPECT_EQ(d.metrics[Metric::power_average_watts], absent(Absence::unsupported));
  EXPECT_EQ(nvml_.count("nvmlDeviceGetPowerUsage"), 0);
}

TEST_F(NvmlPowerTest, Ga100PowerUsageIsInstantOtherAmpereIsAverage) {
  EXPECT_EQ(sample_one(kA100).power_kind, PowerKind::instant);
  EXPECT_EQ(sample_one(kA10).power_kind, PowerKind::average);
}

TEST_F(NvmlPowerTest, UnknownArchitectureLeavesPowerKindUnset) {
  const auto d = sample_one("device.0.name=NVIDIA Mystery\n");  // nvmlDeviceGetArchitecture fails
  EXPECT_EQ(d.metrics[Metric::power_watts], nvml(250.0));
  EXPECT_FALSE(d.power_kind);
  EXPECT_EQ(d.metrics[Metric::power_average_watts], absent(Absence::unsupported));
}

TEST_F(NvmlPowerTest, AFailingFieldsCallIsAbsentWithItsReason) {
  const auto d =
      sample_one(std::string(kHopper) +
                 "device.0.power_instant_mw=612345\ndevice.0.fail.nvmlDeviceGetFieldValues=4\n");
  EXPECT_EQ(d.metrics[Metric::power_watts], absent(Absence::no_permission));
  EXPECT_EQ(d.metrics[Metric::power_average_watts], absent(Absence::no_permission));
  EXPECT_FALSE(d.power_kind);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetPowerUsage"), 0);  // no made-up fallback figure
}

TEST(NvmlPowerUsageKind, FollowsTheArchitecture) {
  using nvidia_detail::nvml_power_usage_kind;
  EXPECT_EQ(nvml_power_usage_kind(4, 0), PowerKind::instant);           // Pascal
  EXPECT_EQ(nvml_power_usage_kind(6, 0), PowerKind::instant);           // Turing
  EXPECT_EQ(nvml_power_usage_kind(7, 0x20F110DE), PowerKind::instant);  // A100 PCIe (GA100)
  EXPECT_EQ(nvml_power_usage_kind(7, 0x20B710DE), PowerKind::instant);  // A30 (GA100)
  EXPECT_EQ(nvml_power_usage_kind(7, 0x220410DE), PowerKind::average);  // RTX 3090 (GA102)
  EXPECT_FALSE(nvml_power_usage_kind(7, 0));                            // Ampere, which chip?
  EXPECT_EQ(nvml_power_usage_kind(10, 0), PowerKind::average);          // Blackwell
  EXPECT_FALSE(nvml_power_usage_kind(std::nullopt, 0x233010DE));
}

}  // namespace
}  // namespace gpustream
