// NvidiaProbe over the fake libnvidia-ml.so.1 with MIG: each MIG instance a device of its own
// (parent, GPU/compute instance ids, profile, its memory and processes), the per-instance metrics
// NVML does not have absent `unsupported`, the GPU keeping its device-wide metrics; MIG off; a
// GPU without MIG; a library without the MIG functions (an older driver); lazy sessions.
#include <gtest/gtest.h>

#include <algorithm>

#include "gpustream/planner.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "nvidia_fakes.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::FakeNvml;
using test::ProbeHarness;
using test::TempTree;

constexpr const char* kMigGpu = "GPU-aaaaaaaa-1111-2222-3333-444444444444";
constexpr const char* kMig0 = "MIG-11111111-2222-3333-4444-555555555555";
constexpr const char* kMig1 = "MIG-66666666-2222-3333-4444-555555555555";
constexpr double kGiB = 1024.0 * 1024 * 1024;

// An A100 40GB in MIG mode with two instances in slots 0 and 3 (slots 1, 2 empty), a second GPU
// without MIG support.
const std::string kMigScenario = std::string("devices=2\n") + "device.0.uuid=" + kMigGpu + "\n" +
                                 "device.0.name=NVIDIA A100-SXM4-40GB\n"
                                 "device.0.memory_total=42949672960\n"
                                 "device.0.memory_used=8589934592\n"
                                 "device.0.util_gpu=55\n"
                                 "device.0.compute=4001:1073741824,4002:2147483648\n"
                                 "device.0.mig_mode=1\n"
                                 "device.0.mig.0.uuid=" +
                                 kMig0 + "\n" +
                                 "device.0.mig.0.gi=1\n"
                                 "device.0.mig.0.ci=0\n"
                                 "device.0.mig.0.profile=3g.20gb\n"
                                 "device.0.mig.0.memory_total=21474836480\n"
                                 "device.0.mig.0.memory_used=1073741824\n"
                                 "device.0.mig.0.compute=4001:1073741824\n"
                                 "device.0.mig.3.uuid=" +
                                 kMig1 + "\n" +
                                 "device.0.mig.3.gi=5\n"
                                 "device.0.mig.3.ci=2\n"
                                 "device.0.mig.3.profile=1g.5gb\n"
                                 "device.0.mig.3.memory_total=5368709120\n"
                                 "device.0.mig.3.memory_used=2147483648\n"
                                 "device.0.mig.3.compute=4002:2147483648\n";

class NvmlMigTest : public ::testing::Test {
 protected:
  std::shared_ptr<NvidiaProbe> probe(const char* library = nullptr,
                                     LibrarySessionMode mode = LibrarySessionMode::persistent) {
    NvidiaProbeOptions o;
    o.nvml_library = library ? library : nvml_.path();
    o.use = NvidiaProbeOptions::Use::nvml_only;
    o.library_session = mode;
    o.paths.procfs_root = proc_.path();
    return make_nvidia_probe(harness_.executors(), o);
  }
  GpuSnapshot sample_once(NvidiaProbe& p) {
    const auto d = harness_.detect(p);
    if (!d.available) throw std::runtime_error(d.reason);
    auto r = harness_.sample(p);
    if (r.ec) throw std::runtime_error(r.ec.message());
    return std::move(r.snapshot);
  }
  static const DeviceSample& device(const GpuSnapshot& s, const std::string& id) {
    const auto* d = s.find_device(id);
    if (!d) throw std::runtime_error("no device " + id);
    return *d;
  }
  static std::vector<std::int64_t> pids(const DeviceSample& d) {
    std::vector<std::int64_t> out;
    for (const auto& p : d.processes) out.push_back(p.pid);
    return out;
  }

  FakeNvml nvml_;
  TempTree proc_;
  ProbeHarness harness_;
};

TEST_F(NvmlMigTest, EachInstanceIsADeviceWithItsParentIdsProfileMemoryAndProcesses) {
  nvml_.scenario(kMigScenario);
  auto p = probe();
  const auto s = sample_once(*p);
  // The two GPUs, then the instances right after their GPU, in MIG index order.
  ASSERT_EQ(s.devices.size(), 4u);
  EXPECT_EQ(s.devices[0].id, kMigGpu);
  EXPECT_EQ(s.devices[1].id, kMig0);
  EXPECT_EQ(s.devices[2].id, kMig1);

  const auto& a = device(s, kMig0);
  EXPECT_EQ(a.parent, kMigGpu);
  ASSERT_TRUE(a.mig);
  EXPECT_EQ(*a.mig, (MigIdentity{1, 0, "3g.20gb"}));
  EXPECT_EQ(a.name, "NVIDIA A100-SXM4-40GB MIG 3g.20gb");
  EXPECT_EQ(a.vendor, Vendor::nvidia);
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.attributes.at("mig_index"), "0");
  EXPECT_EQ(a.metrics[Metric::memory_total_bytes], Reading::of(20 * kGiB, Source::nvml));
  EXPECT_EQ(a.metrics[Metric::memory_used_bytes], Reading::of(1 * kGiB, Source::nvml));
  EXPECT_EQ(a.metrics[Metric::memory_free_bytes], Reading::of(19 * kGiB, Source::nvml));
  EXPECT_EQ(pids(a), (std::vector<std::int64_t>{4001}));
  ASSERT_TRUE(a.processes[0].gpu_memory_bytes);
  EXPECT_EQ(*a.processes[0].gpu_memory_bytes, 1ULL << 30);

  const auto& b = device(s, kMig1);
  EXPECT_EQ(b.parent, kMigGpu);
  EXPECT_EQ(*b.mig, (MigIdentity{5, 2, "1g.5gb"}));
  EXPECT_EQ(b.attributes.at("mig_index"), "3");
  EXPECT_EQ(b.metrics[Metric::memory_total_bytes], Reading::of(5 * kGiB, Source::nvml));
  EXPECT_EQ(pids(b), (std::vector<std::int64_t>{4002}));
  // Every one of the 7 MIG slots is asked, once by detect() and once by the sample; the empty
  // slots 1 and 2 are skipped, never reported as devices.
  EXPECT_EQ(nvml_.count("nvmlDeviceGetMigDeviceHandleByIndex"), 2 * 7);
  EXPECT_TRUE(s.errors.empty()) << s.errors[0].message;
}

TEST_F(NvmlMigTest, DetectionListsTheInstancesAfterTheirGpu) {
  nvml_.scenario(kMigScenario);
  auto p = probe();
  const auto d = harness_.detect(*p);
  ASSERT_TRUE(d.available) << d.reason;
  ASSERT_EQ(d.devices.size(), 4u);
  EXPECT_EQ(d.devices[0].id, kMigGpu);
  EXPECT_EQ(d.devices[1], (DeviceInfo{kMig0, Vendor::nvidia, 0, "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
                                      "0000:17:00.0"}));
  EXPECT_EQ(d.devices[2].id, kMig1);
  EXPECT_EQ(d.devices[3].index, 1);
}

TEST_F(NvmlMigTest, PerInstanceMetricsNvmlLacksAreAbsentNeverCopiedFromTheGpu) {
  nvml_.scenario(kMigScenario);
  auto p = probe();
  const auto s = sample_once(*p);
  const auto& inst = device(s, kMig0);
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto m = static_cast<Metric>(i);
    if (m == Metric::memory_used_bytes || m == Metric::memory_total_bytes ||
        m == Metric::memory_free_bytes)
      continue;
    EXPECT_EQ(inst.metrics[m], Reading::missing(Absence::unsupported, Source::nvml))
        << to_string(m);
  }
  EXPECT_FALSE(inst.energy_kind);
  EXPECT_TRUE(inst.throttle_reasons.empty());
  EXPECT_EQ(inst.throttle_reasons_absent, Absence::unsupported);  // never the parent's
  // Nothing device-wide was even asked of an instance handle.
  EXPECT_EQ(nvml_.count("stale_handle"), 0);
}

TEST_F(NvmlMigTest, TheGpuKeepsItsDeviceWideMetricsAndIsMarkedPartitioned) {
  nvml_.scenario(kMigScenario);
  auto p = probe();
  const auto s = sample_once(*p);
  const auto& gpu = device(s, kMigGpu);
  EXPECT_TRUE(gpu.partitioned);
  EXPECT_TRUE(gpu.parent.empty());
  EXPECT_FALSE(gpu.mig);
  EXPECT_EQ(gpu.attributes.at("mig_mode"), "enabled");
  EXPECT_EQ(gpu.metrics[Metric::utilization_percent], Reading::of(55, Source::nvml));
  EXPECT_EQ(gpu.metrics[Metric::memory_total_bytes], Reading::of(40 * kGiB, Source::nvml));
  EXPECT_EQ(pids(gpu), (std::vector<std::int64_t>{4001, 4002}));
  // The other GPU has no MIG at all: nothing said about it.
  const auto& other = s.devices[3];
  EXPECT_FALSE(other.partitioned);
  EXPECT_EQ(other.attributes.count("mig_mode"), 0u);
}

TEST_F(NvmlMigTest, MigModeOffReportsOnlyTheGpuAndAPendingChangeIsShown) {
  nvml_.scenario(kMigScenario + "device.0.mig_mode=0\ndevice.0.mig_pending=1\n");
  auto p = probe();
  const auto s = sample_once(*p);
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_FALSE(s.devices[0].partitioned);
  EXPECT_EQ(s.devices[0].attributes.at("mig_mode"), "disabled");
  EXPECT_EQ(s.devices[0].attributes.at("mig_mode_pending"), "enabled");
  EXPECT_EQ(nvml_.count("nvmlDeviceGetMigDeviceHandleByIndex"), 0);
}

TEST_F(NvmlMigTest, ALibraryWithoutMigFunctionsIsAnOlderDriverWithNoMig) {
  FakeNvml old(fakes::kFakeNvmlNoMig);
  old.scenario(kMigScenario);  // the GPU would be in MIG mode: the library cannot say so
  auto p = probe(fakes::kFakeNvmlNoMig);
  const auto s = sample_once(*p);
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_FALSE(s.devices[0].partitioned);
  EXPECT_EQ(s.devices[0].metrics[Metric::utilization_percent], Reading::of(55, Source::nvml));
  EXPECT_TRUE(s.errors.empty());
  // A second sample does not ask again either.
  ASSERT_FALSE(harness_.sample(*p).ec);
  EXPECT_EQ(old.count("nvmlDeviceGetMigMode"), 0);
}

TEST_F(NvmlMigTest, ReconfigurationShowsInTheNextSample) {
  nvml_.scenario(kMigScenario);
  auto p = probe();
  ASSERT_EQ(sample_once(*p).devices.size(), 4u);
  // Instance 3 destroyed, a new one in slot 1.
  std::string changed = kMigScenario;
  changed = changed.substr(0, changed.find("device.0.mig.3.uuid"));
  nvml_.reload(changed + "device.0.mig.1.gi=2\ndevice.0.mig.1.profile=2g.10gb\n");
  const auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  ASSERT_EQ(r.snapshot.devices.size(), 4u);
  EXPECT_EQ(r.snapshot.find_device(kMig1), nullptr);
  EXPECT_EQ(r.snapshot.devices[2].mig->profile, "2g.10gb");
  EXPECT_EQ(r.snapshot.devices[2].parent, kMigGpu);
}

TEST_F(NvmlMigTest, LazySessionsLookInstancesUpInEverySession) {
  nvml_.scenario(kMigScenario);
  auto p = probe(nullptr, LibrarySessionMode::lazy);
  ASSERT_EQ(sample_once(*p).devices.size(), 4u);
  const auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  EXPECT_EQ(r.snapshot.devices.size(), 4u);
  EXPECT_EQ(device(r.snapshot, kMig1).metrics[Metric::memory_used_bytes],
            Reading::of(2 * kGiB, Source::nvml));
  EXPECT_EQ(nvml_.count("stale_handle"), 0);  // no MIG handle outlived its session
  EXPECT_GE(nvml_.count("init"), 2);
}

TEST_F(NvmlMigTest, AFailingInstanceCallIsReportedAndTheOthersKeepReporting) {
  nvml_.scenario(kMigScenario + "device.0.fail.nvmlDeviceGetGpuInstanceId=UNKNOWN\n");
  auto p = probe();
  const auto s = sample_once(*p);
  ASSERT_EQ(s.devices.size(), 4u);
  const auto& a = s.devices[1];
  EXPECT_EQ(a.id, kMig0);  // the driver's UUID still names it
  EXPECT_EQ(a.attributes.at("mig_ids"), "unknown");
  EXPECT_EQ(a.metrics[Metric::memory_total_bytes], Reading::of(20 * kGiB, Source::nvml));
  EXPECT_TRUE(test::find_error(s, "nvml_error"));
}

TEST_F(NvmlMigTest, ThePlannerPlacesWorkOnInstancesNeverOnThePartitionedGpu) {
  nvml_.scenario(kMigScenario);
  auto p = probe();
  auto s = std::make_shared<GpuSnapshot>(sample_once(*p));
  // 4 GiB: the 3g.20gb instance (19 GiB free) and the second GPU; not the 1g.5gb one (3 GiB
  // free), and never the partitioned A100 with its 40 GiB.
  const auto all = fits({s}, 4ULL << 30);
  std::vector<std::string> ids;
  for (const auto& f : all) ids.push_back(f.device_id);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kMigGpu), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kMig0), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kMig1), 0);
  const auto it =
      std::find_if(all.begin(), all.end(), [](const DeviceFit& f) { return f.device_id == kMig0; });
  ASSERT_NE(it, all.end());
  EXPECT_EQ(it->parent, kMigGpu);
  EXPECT_EQ(it->free_bytes, 19ULL << 30);
  // 25 GiB fit no instance; the 80 GiB second GPU still takes it.
  const auto big = best_device({s}, 25ULL << 30);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->device_id, s->devices[3].id);
}

}  // namespace
}  // namespace gpustream
