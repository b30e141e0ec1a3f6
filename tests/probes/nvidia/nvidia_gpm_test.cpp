// Activity that means work, from NVML's GPM API, over the fake libnvidia-ml.so.1: every GPM
// counter runs at a rate the test sets (device.<i>.gpm.<metric id> percent) on the fake's own
// time, so the value of any pair of samples is known. The backend is driven directly (its clock
// and the fake's time move together), one sample per step. MIG instances read their GPU
// instance's samples (nvmlGpmMigSampleGet), whose counters run at rates of their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "nvidia/nvml_backend.hpp"
#include "nvidia_fakes.hpp"
#include "support/log_capture.hpp"

namespace gpustream {
namespace {

using namespace std::chrono_literals;
using nvidia_detail::NvmlBackend;
using nvidia_detail::NvmlOptions;
using test::DrivenClock;
using test::FakeNvml;
using test::LogCapture;
using test::TempTree;

constexpr Metric kActivity[] = {Metric::graphics_activity_percent, Metric::sm_activity_percent,
                                Metric::sm_occupancy_percent,      Metric::tensor_activity_percent,
                                Metric::dram_activity_percent,     Metric::fp64_activity_percent,
                                Metric::fp32_activity_percent,     Metric::fp16_activity_percent};

// An H100 whose GPM counters run at these rates: graphics 1, SM 2, occupancy 3, any tensor 5,
// DRAM 10, FP64 11, FP32 12, FP16 13 (nvmlGpmMetricId_t); DMMA (8) is not one we read.
constexpr const char* kHopper =
    "device.0.name=NVIDIA H100 80GB HBM3\ndevice.0.architecture=9\n"
    "device.0.gpm.1=71.5\ndevice.0.gpm.2=64\ndevice.0.gpm.3=32.25\ndevice.0.gpm.5=41\n"
    "device.0.gpm.8=99\ndevice.0.gpm.10=55.5\ndevice.0.gpm.11=3\ndevice.0.gpm.12=27\n"
    "device.0.gpm.13=12.5\n";
constexpr double kHopperValues[] = {71.5, 64, 32.25, 41, 55.5, 3, 27, 12.5};

// The H100 in MIG mode: three MIG devices, the first two compute instances of GPU instance 1
// (whose counters run at the first one's rates), the third GPU instance 2.
const std::string kHopperMig = std::string(kHopper) +
                               "device.0.mig_mode=1\n"
                               "device.0.mig.0.gi=1\ndevice.0.mig.0.ci=0\n"
                               "device.0.mig.0.gpm.1=20\ndevice.0.mig.0.gpm.2=30\n"
                               "device.0.mig.0.gpm.3=10\ndevice.0.mig.0.gpm.5=5\n"
                               "device.0.mig.0.gpm.10=40\ndevice.0.mig.0.gpm.11=1\n"
                               "device.0.mig.0.gpm.12=25\ndevice.0.mig.0.gpm.13=2.5\n"
                               "device.0.mig.1.gi=1\ndevice.0.mig.1.ci=1\n"
                               "device.0.mig.2.gi=2\ndevice.0.mig.2.ci=0\n"
                               "device.0.mig.2.gpm.2=90\ndevice.0.mig.2.gpm.10=75\n";
constexpr double kGi1Values[] = {20, 30, 10, 5, 40, 1, 25, 2.5};

Reading nvml(double v) { return Reading::of(v, Source::nvml); }
Reading absent(Absence why) { return Reading::missing(why, Source::nvml); }

class NvmlGpmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_time_ = lib_.required<void(long long)>("gpustreamFakeNvmlSetTimeNs");
    set_time_(0);
  }
  void TearDown() override { set_time_(0); }

  std::unique_ptr<NvmlBackend> backend(const std::string& scenario,
                                       LibrarySessionMode mode = LibrarySessionMode::persistent,
                                       FakeNvml* fake = nullptr) {
    if (!fake) fake = &nvml_;
    fake->scenario(scenario);
    NvmlOptions o;
    o.library = fake->path();
    o.mode = mode;
    o.paths.procfs_root = proc_.path();
    o.clock = clock_.function();
    return std::make_unique<NvmlBackend>(std::move(o));
  }
  /// Moves the backend's clock and the fake's time on together.
  void advance(std::chrono::milliseconds d) {
    clock_.advance(d);
    now_ms_ += d.count();
    set_time_(now_ms_ * 1000000);
    if (set_other_time_) set_other_time_(now_ms_ * 1000000);
  }
  static GpuSnapshot sample(NvmlBackend& b) {
    auto s = b.sample();
    EXPECT_FALSE(s.failed);
    return std::move(s.snapshot);
  }
  static void expect_all(const DeviceSample& d, Reading r) {
    for (auto m : kActivity) EXPECT_EQ(d.metrics[m], r) << to_string(m);
  }
  static std::string attribute(const DeviceSample& d, const std::string& key) {
    auto it = d.attributes.find(key);
    return it == d.attributes.end() ? "" : it->second;
  }

  FakeNvml nvml_;
  DynamicLibrary lib_ = DynamicLibrary::load(fakes::kFakeNvml);
  void (*set_time_)(long long) = nullptr;
  void (*set_other_time_)(long long) = nullptr;  // another variant's, when a test loads one
  TempTree proc_;
  DrivenClock clock_;
  long long now_ms_ = 0;
};

TEST_F(NvmlGpmTest, HopperReportsAllEightFromTheSecondSampleOn) {
  auto b = backend(std::string("devices=1\n") + kHopper);
  const auto first = sample(*b);
  ASSERT_EQ(first.devices.size(), 1u);
  expect_all(first.devices[0], absent(Absence::not_yet_seeded));
  EXPECT_EQ(attribute(first.devices[0], "gpm"), "supported");

  advance(1000ms);
  const auto second = sample(*b);
  ASSERT_EQ(second.devices.size(), 1u);
  const auto& d = second.devices[0];
  for (std::size_t i = 0; i < std::size(kActivity); ++i)
    EXPECT_EQ(d.metrics[kActivity[i]], nvml(kHopperValues[i])) << to_string(kActivity[i]);
  EXPECT_EQ(attribute(d, "gpm_interval_ms"), "1000");
  // Support was asked once; two samples, one metrics computation, two buffers held.
  EXPECT_EQ(nvml_.count("nvmlGpmQueryDeviceSupport"), 1);
  EXPECT_EQ(nvml_.count("nvmlGpmSampleGet"), 2);
  EXPECT_EQ(nvml_.count("nvmlGpmMetricsGet"), 1);
  EXPECT_EQ(nvml_.count("gpm_samples_live"), 2);

  // New rates: the next pair reports them (the older sample of the pair is the last one).
  nvml_.reload(std::string("devices=1\n") + kHopper + "device.0.gpm.2=12\ndevice.0.gpm.13=0\n");
  advance(500ms);
  const auto third = sample(*b);
  EXPECT_EQ(third.devices[0].metrics[Metric::sm_activity_percent], nvml(12));
  EXPECT_EQ(third.devices[0].metrics[Metric::fp16_activity_percent], nvml(0));
  EXPECT_EQ(attribute(third.devices[0], "gpm_interval_ms"), "500");
  EXPECT_EQ(nvml_.count("nvmlGpmSampleAlloc"), 2);  // buffers are reused
  EXPECT_EQ(nvml_.count("gpm_samples_live"), 2);
}

TEST_F(NvmlGpmTest, ASampleSoonerThan100MsKeepsTheOlderSampleOfThePair) {
  auto b = backend(std::string("devices=1\n") + kHopper);
  sample(*b);
  advance(60ms);
  expect_all(sample(*b).devices[0], absent(Absence::not_yet_seeded));
  EXPECT_EQ(nvml_.count("nvmlGpmSampleGet"), 1);
  advance(60ms);
  const auto d = sample(*b).devices[0];
  EXPECT_EQ(d.metrics[Metric::sm_activity_percent], nvml(64));
  EXPECT_EQ(attribute(d, "gpm_interval_ms"), "120");
}

TEST_F(NvmlGpmTest, AdaAndVoltaAreUnsupportedWithoutAskingTheDriver) {
  auto b = backend(
      "devices=2\ndevice.0.name=NVIDIA L40S\ndevice.0.architecture=8\n"
      "device.1.name=Tesla V100-SXM2-32GB\ndevice.1.architecture=5\n"
      "device.0.gpm.2=50\ndevice.1.gpm.2=50\n");
  for (int i = 0; i < 2; ++i) {
    const auto s = sample(*b);
    ASSERT_EQ(s.devices.size(), 2u);
    expect_all(s.devices[0], absent(Absence::unsupported));
    expect_all(s.devices[1], absent(Absence::unsupported));
    EXPECT_EQ(attribute(s.devices[0], "gpm"), "unsupported: Ada GPU: GPM needs Hopper or newer");
    EXPECT_EQ(attribute(s.devices[1], "gpm"), "unsupported: Volta GPU: GPM needs Hopper or newer");
    advance(1000ms);
  }
  EXPECT_EQ(nvml_.count("nvmlGpmQueryDeviceSupport"), 0);
  EXPECT_EQ(nvml_.count("nvmlGpmSampleAlloc"), 0);
}

TEST_F(NvmlGpmTest, ADeviceWithoutGpmIsUnsupportedAndAskedOnce) {
  // No architecture from the driver: the support query decides.
  auto b = backend("devices=1\ndevice.0.gpm=0\n");
  for (int i = 0; i < 3; ++i) {
    const auto d = sample(*b).devices[0];
    expect_all(d, absent(Absence::unsupported));
    EXPECT_EQ(attribute(d, "gpm"), "unsupported: nvmlGpmQueryDeviceSupport: the device has no GPM");
    advance(1000ms);
  }
  EXPECT_EQ(nvml_.count("nvmlGpmQueryDeviceSupport"), 1);
  EXPECT_EQ(nvml_.count("nvmlGpmSampleGet"), 0);
}

TEST_F(NvmlGpmTest, ALibraryThatRejectsOurStructVersionIsUnsupported) {
  auto b = backend(std::string("devices=1\ngpm_version=2\n") + kHopper);
  for (int i = 0; i < 2; ++i) {
    const auto d = sample(*b).devices[0];
    expect_all(d, absent(Absence::unsupported));
    EXPECT_NE(attribute(d, "gpm").find("NVML_ERROR_ARGUMENT_VERSION_MISMATCH"), std::string::npos)
        << attribute(d, "gpm");
    advance(1000ms);
  }
  EXPECT_EQ(nvml_.count("nvmlGpmQueryDeviceSupport"), 1);
  EXPECT_EQ(nvml_.count("nvmlGpmSampleAlloc"), 0);
  EXPECT_EQ(nvml_.count("nvmlGpmMetricsGet"), 0);
}

TEST_F(NvmlGpmTest, AFailedSupportQueryIsAskedAgain) {
  const std::string base = std::string("devices=1\n") + kHopper;
  auto b = backend(base + "device.0.fail.nvmlGpmQueryDeviceSupport=NO_PERMISSION\n");
  const auto d = sample(*b).devices[0];
  expect_all(d, absent(Absence::no_permission));
  EXPECT_EQ(attribute(d, "gpm"), "");  // not decided
  nvml_.reload(base);
  advance(1000ms);
  const auto again = sample(*b).devices[0];
  expect_all(again, absent(Absence::not_yet_seeded));
  EXPECT_EQ(attribute(again, "gpm"), "supported");
  EXPECT_EQ(nvml_.count("nvmlGpmQueryDeviceSupport"), 2);
}

TEST_F(NvmlGpmTest, AMetricsRequestVersionTheLibraryRejectsIsUnsupported) {
  auto b = backend(std::string("devices=1\ngpm_metrics_version=2\n") + kHopper);
  sample(*b);  // seeds: nvmlGpmMetricsGet not called yet
  advance(1000ms);
  for (int i = 0; i < 2; ++i) {
    const auto d = sample(*b).devices[0];
    expect_all(d, absent(Absence::unsupported));
    EXPECT_NE(attribute(d, "gpm").find("nvmlGpmMetricsGet rejects nvmlGpmMetricsGet_t version 1"),
              std::string::npos)
        << attribute(d, "gpm");
    advance(1000ms);
  }
  EXPECT_EQ(nvml_.count("nvmlGpmMetricsGet"), 1);  // never asked again
  EXPECT_EQ(nvml_.count("gpm_samples_live"), 0);   // and its samples are freed
}

TEST_F(NvmlGpmTest, ALibraryWithoutGpmFunctionsIsUnsupported) {
  FakeNvml legacy(fakes::kFakeNvmlLegacy);
  legacy.scenario(std::string("devices=1\n") + kHopper);
  NvmlOptions o;
  o.library = legacy.path();
  o.paths.procfs_root = proc_.path();
  o.clock = clock_.function();
  NvmlBackend b(std::move(o));
  const auto d = sample(b).devices[0];
  expect_all(d, absent(Absence::unsupported));
  EXPECT_NE(attribute(d, "gpm").find("nvmlGpmQueryDeviceSupport missing from"), std::string::npos)
      << attribute(d, "gpm");
}

TEST_F(NvmlGpmTest, LazySessionsAreUnsupported) {
  auto b = backend(std::string("devices=1\n") + kHopper, LibrarySessionMode::lazy);
  const auto d = sample(*b).devices[0];
  expect_all(d, absent(Absence::unsupported));
  EXPECT_NE(attribute(d, "gpm").find("persistent"), std::string::npos) << attribute(d, "gpm");
  EXPECT_EQ(nvml_.count("nvmlGpmSampleAlloc"), 0);
}

TEST_F(NvmlGpmTest, ASampleGetFailureBetweenTwoSamplesIsThatSamplesAbsenceAndReseeds) {
  const std::string base = std::string("devices=1\n") + kHopper;
  auto b = backend(base);
  sample(*b);
  advance(1000ms);
  nvml_.reload(base + "device.0.fail.nvmlGpmSampleGet=UNKNOWN\n");
  const auto failed = sample(*b);
  expect_all(failed.devices[0], absent(Absence::tool_failed));
  const auto* e = test::find_error(failed, "nvml_error");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message.find("nvmlGpmSampleGet"), std::string::npos) << e->message;
  EXPECT_EQ(nvml_.count("gpm_samples_live"), 1);  // the previous sample was dropped

  nvml_.reload(base);
  advance(1000ms);
  expect_all(sample(*b).devices[0], absent(Absence::not_yet_seeded));  // seeded again
  advance(1000ms);
  EXPECT_EQ(sample(*b).devices[0].metrics[Metric::dram_activity_percent], nvml(55.5));
}

TEST_F(NvmlGpmTest, AMetricsGetFailureKeepsTheNewerSampleForTheNextPair) {
  const std::string base = std::string("devices=1\n") + kHopper;
  auto b = backend(base);
  sample(*b);
  advance(1000ms);
  nvml_.reload(base + "fail.nvmlGpmMetricsGet=UNKNOWN\n");
  expect_all(sample(*b).devices[0], absent(Absence::tool_failed));
  nvml_.reload(base);
  advance(1000ms);
  const auto d = sample(*b).devices[0];
  EXPECT_EQ(d.metrics[Metric::graphics_activity_percent], nvml(71.5));
  EXPECT_EQ(attribute(d, "gpm_interval_ms"), "1000");
}

TEST_F(NvmlGpmTest, AFailedOrOutOfRangeMetricIsAbsentOnItsOwn) {
  auto b = backend(std::string("devices=1\n") + kHopper +
                   "device.0.gpm_fail.10=NOT_SUPPORTED\ndevice.0.gpm_fail.13=UNKNOWN\n"
                   "device.0.gpm.3=nan\ndevice.0.gpm.5=-5\ndevice.0.gpm.11=150\n");
  sample(*b);
  advance(1000ms);
  const auto d = sample(*b).devices[0];
  EXPECT_EQ(d.metrics[Metric::dram_activity_percent], absent(Absence::unsupported));
  EXPECT_EQ(d.metrics[Metric::fp16_activity_percent], absent(Absence::tool_failed));
  EXPECT_EQ(d.metrics[Metric::sm_occupancy_percent], absent(Absence::tool_failed));     // NaN
  EXPECT_EQ(d.metrics[Metric::tensor_activity_percent], absent(Absence::tool_failed));  // < 0
  EXPECT_EQ(d.metrics[Metric::fp64_activity_percent], absent(Absence::tool_failed));    // > 100
  EXPECT_EQ(d.metrics[Metric::graphics_activity_percent], nvml(71.5));
  EXPECT_EQ(d.metrics[Metric::sm_activity_percent], nvml(64));
  EXPECT_EQ(d.metrics[Metric::fp32_activity_percent], nvml(27));
}

TEST_F(NvmlGpmTest, ALostGpuFreesItsSamples) {
  const std::string base = std::string("devices=2\n") + kHopper + "device.1.architecture=9\n";
  auto b = backend(base);
  sample(*b);
  EXPECT_EQ(nvml_.count("gpm_samples_live"), 2);  // one seeded sample and no spare, per GPU
  advance(1000ms);
  nvml_.reload(base + "device.0.fail.nvmlGpmSampleGet=GPU_IS_LOST\n");
  const auto s = sample(*b);
  expect_all(s.devices[0], absent(Absence::lost));
  EXPECT_EQ(s.devices[1].metrics[Metric::sm_activity_percent], nvml(0));  // the other goes on
  EXPECT_EQ(nvml_.count("gpm_samples_live"), 2);  // only GPU 1's pair is left
  EXPECT_EQ(nvml_.count("gpm_bad_free"), 0);
}

TEST_F(NvmlGpmTest, ShutdownFreesEverySampleBeforeNvmlShutdown) {
  auto b = backend(std::string("devices=2\n") + kHopper + "device.1.architecture=9\n");
  sample(*b);
  advance(1000ms);
  sample(*b);
  EXPECT_EQ(nvml_.count("gpm_samples_live"), 4);
  b.reset();
  EXPECT_EQ(nvml_.count("gpm_samples_live"), 0);
  EXPECT_EQ(nvml_.count("gpm_bad_free"), 0);
  EXPECT_EQ(nvml_.count("nvmlShutdown"), 1);
  EXPECT_EQ(nvml_.count("gpm_free_after_shutdown"), 0);  // every free came before it
}

TEST_F(NvmlGpmTest, MigInstancesReportTheirGpuInstancesActivity) {
  auto b = backend("devices=1\n" + kHopperMig);
  const auto first = sample(*b);
  ASSERT_EQ(first.devices.size(), 4u);  // the GPU, then its three MIG devices
  for (const auto& d : first.devices) {
    expect_all(d, absent(Absence::not_yet_seeded));
    EXPECT_EQ(attribute(d, "gpm"), "supported");
  }

  advance(1000ms);
  const auto s = sample(*b);
  ASSERT_EQ(s.devices.size(), 4u);
  EXPECT_TRUE(s.errors.empty()) << s.errors[0].message;
  for (std::size_t i = 0; i < std::size(kActivity); ++i) {
    // The GPU: its own counters, the whole GPU's.
    EXPECT_EQ(s.devices[0].metrics[kActivity[i]], nvml(kHopperValues[i]))
        << to_string(kActivity[i]);
    // Both compute instances of GPU instance 1: its counters.
    EXPECT_EQ(s.devices[1].metrics[kActivity[i]], nvml(kGi1Values[i])) << to_string(kActivity[i]);
    EXPECT_EQ(s.devices[2].metrics[kActivity[i]], nvml(kGi1Values[i])) << to_string(kActivity[i]);
  }
  ASSERT_TRUE(s.devices[3].mig);
  EXPECT_EQ(s.devices[3].mig->gpu_instance_id, 2u);
  EXPECT_EQ(s.devices[3].metrics[Metric::sm_activity_percent], nvml(90));
  EXPECT_EQ(s.devices[3].metrics[Metric::dram_activity_percent], nvml(75));
  EXPECT_EQ(s.devices[3].metrics[Metric::fp64_activity_percent], nvml(0));
  EXPECT_EQ(attribute(s.devices[3], "gpm_interval_ms"), "1000");
  // Support asked once, on the GPU; every MIG device reads its GPU instance's samples on the GPU's
  // handle (a MIG handle would answer NOT_SUPPORTED) into a pair of its own.
  EXPECT_EQ(nvml_.count("nvmlGpmQueryDeviceSupport"), 1);
  EXPECT_EQ(nvml_.count("nvmlGpmSampleGet"), 2);
  EXPECT_EQ(nvml_.count("nvmlGpmMigSampleGet"), 2 * 3);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetGpuInstanceId"), 2 * 3);
  EXPECT_EQ(nvml_.count("gpm_samples_live"), 2 * 4);
  EXPECT_EQ(nvml_.count("gpm_bad_pair"), 0);

  // Shutdown frees the instances' samples too, before NVML goes.
  b.reset();
  EXPECT_EQ(nvml_.count("gpm_samples_live"), 0);
  EXPECT_EQ(nvml_.count("gpm_free_after_shutdown"), 0);
}

TEST_F(NvmlGpmTest, AMigSampleFailureIsThatInstancesAbsenceAlone) {
  const std::string base = "devices=1\n" + kHopperMig;
  auto b = backend(base);
  sample(*b);
  advance(1000ms);
  nvml_.reload(base + "device.0.fail.nvmlGpmMigSampleGet=UNKNOWN\n");
  const auto s = sample(*b);
  ASSERT_EQ(s.devices.size(), 4u);
  EXPECT_EQ(s.devices[0].metrics[Metric::sm_activity_percent], nvml(64));  // the GPU goes on
  for (std::size_t k = 1; k < 4; ++k) expect_all(s.devices[k], absent(Absence::tool_failed));
  const auto* e = test::find_error(s, "nvml_error");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message.find("nvmlGpmMigSampleGet"), std::string::npos) << e->message;

  nvml_.reload(base);
  advance(1000ms);
  expect_all(sample(*b).devices[1], absent(Absence::not_yet_seeded));  // seeded again
  advance(1000ms);
  EXPECT_EQ(sample(*b).devices[3].metrics[Metric::sm_activity_percent], nvml(90));
}

TEST_F(NvmlGpmTest, MigInstancesOfAGpuWithoutGpmAreUnsupportedWithItsReason) {
  auto b = backend("devices=1\n" + kHopperMig + "device.0.gpm=0\n");
  const auto s = sample(*b);
  ASSERT_EQ(s.devices.size(), 4u);
  for (const auto& d : s.devices) {
    expect_all(d, absent(Absence::unsupported));
    EXPECT_EQ(attribute(d, "gpm"), "unsupported: nvmlGpmQueryDeviceSupport: the device has no GPM");
  }
  EXPECT_EQ(nvml_.count("nvmlGpmMigSampleGet"), 0);
}

TEST_F(NvmlGpmTest, ALibraryWithoutGpmMigSampleGetLeavesMigInstancesUnsupportedLoggedOnce) {
  FakeNvml no_gpm_mig(fakes::kFakeNvmlNoGpmMig);
  auto lib = DynamicLibrary::load(fakes::kFakeNvmlNoGpmMig);
  set_other_time_ = lib.required<void(long long)>("gpustreamFakeNvmlSetTimeNs");
  set_other_time_(0);
  LogCapture log;
  auto b = backend("devices=1\n" + kHopperMig, LibrarySessionMode::persistent, &no_gpm_mig);
  for (int i = 0; i < 3; ++i) {
    const auto s = sample(*b);
    ASSERT_EQ(s.devices.size(), 4u);
    EXPECT_TRUE(s.errors.empty()) << s.errors[0].message;
    // The GPU has GPM...
    EXPECT_EQ(attribute(s.devices[0], "gpm"), "supported");
    if (i > 0) EXPECT_EQ(s.devices[0].metrics[Metric::sm_activity_percent], nvml(64));
    // ... its MIG instances none, and say why.
    for (std::size_t k = 1; k < 4; ++k) {
      expect_all(s.devices[k], absent(Absence::unsupported));
      EXPECT_NE(attribute(s.devices[k], "gpm").find("nvmlGpmMigSampleGet missing from"),
                std::string::npos)
          << attribute(s.devices[k], "gpm");
    }
    advance(1000ms);
  }
  EXPECT_EQ(log.count("no nvmlGpmMigSampleGet"), 1u);
  EXPECT_EQ(no_gpm_mig.count("gpm_samples_live"), 2);  // the GPU's pair alone
  b.reset();
  set_other_time_(0);
  set_other_time_ = nullptr;
}

}  // namespace
}  // namespace gpustream
