// NvidiaProbe over the fake libnvidia-ml.so.1: metrics and units, symbol versions, processes
// (both entry layouts), per-process utilization, error mapping, logging once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include <boost/json/value.hpp>

#include "gpustream/errors.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "nvidia_fakes.hpp"
#include "probe_harness.hpp"
#include "support/log_capture.hpp"

namespace gpustream {
namespace {

using test::FakeNvml;
using test::LogCapture;
using test::ProbeHarness;
using test::TempTree;

constexpr const char* kUuid0 = "GPU-aaaaaaaa-1111-2222-3333-444444444444";
constexpr const char* kUuid1 = "GPU-bbbbbbbb-1111-2222-3333-444444444444";

const std::string kTwoGpus = std::string("devices=2\n") + "device.0.uuid=" + kUuid0 +
                             "\n"
                             "device.0.name=NVIDIA A100-SXM4-80GB\n"
                             "device.0.pci=00000000:3B:00.0\n"
                             "device.0.memory_total=85899345920\n"
                             "device.0.memory_used=10737418240\n"
                             "device.0.memory_reserved=536870912\n"
                             "device.0.util_gpu=87\n"
                             "device.0.util_memory=42\n"
                             "device.0.temperature=61\n"
                             "device.0.power_mw=250123\n"
                             "device.0.power_limit_mw=400000\n"
                             "device.0.energy_mj=123456789\n"
                             "device.0.clock_graphics=1410\n"
                             "device.0.clock_sm=1395\n"
                             "device.0.clock_memory=1593\n"
                             "device.0.fan=37\n"
                             "device.0.clock_reasons=0x44\n"
                             "device.1.uuid=" +
                             kUuid1 + "\n";

class NvmlProbeTest : public ::testing::Test {
 protected:
  std::shared_ptr<NvidiaProbe> probe(const char* library = nullptr) {
    NvidiaProbeOptions o;
    o.nvml_library = library ? library : nvml_.path();
    o.use = NvidiaProbeOptions::Use::nvml_only;
    o.library_session = LibrarySessionMode::persistent;
    o.paths.procfs_root = proc_.path();
    return make_nvidia_probe(harness_.executors(), o);
  }

  static const DeviceSample& device(const GpuSnapshot& s, const std::string& id) {
    const auto* d = s.find_device(id);
    if (!d) throw std::runtime_error("no device " + id);
    return *d;
  }
  static const ProcessSample* process(const DeviceSample& d, std::int64_t pid) {
    for (const auto& p : d.processes)
      if (p.pid == pid) return &p;
    return nullptr;
  }
  static bool has_error(const GpuSnapshot& s, const std::string& code) {
    return std::any_of(s.errors.begin(), s.errors.end(),
                       [&](const SampleError& e) { return e.code == code; });
  }

  FakeNvml nvml_;
  TempTree proc_;
  ProbeHarness harness_;
};

TEST_F(NvmlProbeTest, DetectsDevicesWithStableIds) {
  nvml_.scenario(kTwoGpus);
  auto p = probe();
  const auto d = harness_.detect(*p);
  ASSERT_TRUE(d.available) << d.reason;
  ASSERT_EQ(d.devices.size(), 2u);
  EXPECT_EQ(d.devices[0],
            (DeviceInfo{kUuid0, Vendor::nvidia, 0, "NVIDIA A100-SXM4-80GB", "0000:3b:00.0"}));
  EXPECT_EQ(d.devices[1].id, kUuid1);
  EXPECT_EQ(p->backend(), NvidiaBackend::nvml);
  EXPECT_EQ(p->min_interval(), NvidiaProbe::kNvmlMinInterval);
}

TEST_F(NvmlProbeTest, MapsEveryMetricToBaseUnits) {
  nvml_.scenario(kTwoGpus);
  auto p = probe();
  ASSERT_TRUE(harness_.detect(*p).available);
  const auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec) << r.ec.message();
  EXPECT_TRUE(r.snapshot.errors.empty());
  EXPECT_EQ(r.snapshot.probe, "nvidia");
  const auto& d = device(r.snapshot, kUuid0);
  const auto& m = d.metrics;
  const auto nvml = [](double v) { return Reading::of(v, Source::nvml); };
  EXPECT_EQ(m[Metric::memory_used_bytes], nvml(10737418240.0));  // v2: without the reservation
  EXPECT_EQ(m[Metric::memory_total_bytes], nvml(85899345920.0));
  // NVML's own free: total − reserved − used (not total − used, which would count the reservation
  // as free).
  EXPECT_EQ(m[Metric::memory_free_bytes], nvml(85899345920.0 - 536870912.0 - 10737418240.0));
  EXPECT_EQ(m[Metric::utilization_percent], nvml(87));
  EXPECT_EQ(m[Metric::memory_utilization_percent], nvml(42));
  EXPECT_EQ(m[Metric::temperature_celsius], nvml(61));
  EXPECT_EQ(m[Metric::power_watts], nvml(250.123));       // mW -> W
  EXPECT_EQ(m[Metric::power_limit_watts], nvml(400));     // mW -> W
  EXPECT_EQ(m[Metric::energy_joules], nvml(123456.789));  // mJ -> J
  EXPECT_EQ(d.energy_kind, EnergyKind::counter);
  EXPECT_EQ(m[Metric::clock_graphics_mhz], nvml(1410));
  EXPECT_EQ(m[Metric::clock_sm_mhz], nvml(1395));
  EXPECT_EQ(m[Metric::clock_memory_mhz], nvml(1593));
  EXPECT_EQ(m[Metric::fan_percent], nvml(37));
  EXPECT_EQ(m[Metric::fan_rpm], Reading::missing(Absence::unsupported, Source::nvml));
  EXPECT_EQ(m[Metric::power_average_watts], Reading::missing(Absence::unsupported, Source::nvml));
  EXPECT_EQ(d.throttle_reasons, (std::vector<std::string>{"sw_power_cap", "hw_thermal_slowdown"}));
  EXPECT_FALSE(d.throttle_reasons_absent);
  EXPECT_EQ(d.vendor, Vendor::nvidia);
  EXPECT_EQ(d.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(d.pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(d.attributes.at("uuid"), kUuid0);
  EXPECT_EQ(d.attributes.at("driver_version"), "535.183.01-fake");
  EXPECT_GT(r.snapshot.time_unix_ns, 0);
  EXPECT_EQ(device(r.snapshot, kUuid1).index, 1);
}

TEST_F(NvmlProbeTest, LooksSymbolsUpNewestFirst) {
  nvml_.scenario("devices=1\ndevice.0.compute=77:1024\n");
  auto p = probe();
  ASSERT_TRUE(harness_.detect(*p).available);
  ASSERT_FALSE(harness_.sample(*p).ec);
  EXPECT_EQ(nvml_.count("nvmlInit_v2"), 1);
  EXPECT_EQ(nvml_.count("nvmlInit"), 0);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetCount"), 0);
  EXPECT_GE(nvml_.count("nvmlDeviceGetMemoryInfo_v2"), 1);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetMemoryInfo"), 0);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetComputeRunningProcesses_v3"), 1);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetComputeRunningProcesses_v2"), 0);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetCurrentClocksEventReasons"), 1);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetCurrentClocksThrottleReasons"), 0);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetTemperatureV"), 1);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetTemperature"), 0);
}

TEST_F(NvmlProbeTest, OldLibraryUsesV1FunctionsAndLeavesMissingOnesAbsent) {
  FakeNvml legacy(fakes::kFakeNvmlLegacy);
  legacy.scenario(kTwoGpus + "device.0.compute=321:4096,654:na\n");
  auto p = probe(fakes::kFakeNvmlLegacy);
  const auto d = harness_.detect(*p);
  ASSERT_TRUE(d.available) << d.reason;
  EXPECT_EQ(d.devices[0].pci_bus_id, "0000:3b:00.0");  // from the 16-byte legacy bus id
  const auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  EXPECT_EQ(legacy.count("nvmlInit"), 1);
  EXPECT_GE(legacy.count("nvmlDeviceGetMemoryInfo"), 1);
  const auto& dev = device(r.snapshot, kUuid0);
  const auto& m = dev.metrics;
  // v1 memory counts the driver's reservation as used.
  EXPECT_EQ(m[Metric::memory_used_bytes], Reading::of(10737418240.0 + 536870912.0, Source::nvml));
  // v1's free is total − used with that used: the same free figure as v2.
  EXPECT_EQ(m[Metric::memory_free_bytes],
            Reading::of(85899345920.0 - 536870912.0 - 10737418240.0, Source::nvml));
  EXPECT_EQ(m[Metric::temperature_celsius], Reading::of(61, Source::nvml));
  EXPECT_EQ(m[Metric::power_watts], Reading::of(250.123, Source::nvml));
  for (auto metric : {Metric::energy_joules, Metric::power_limit_watts})
    EXPECT_EQ(m[metric], Reading::missing(Absence::unsupported, Source::nvml)) << to_string(metric);
  EXPECT_FALSE(dev.energy_kind);
  EXPECT_TRUE(dev.throttle_reasons.empty());
  EXPECT_EQ(dev.throttle_reasons_absent, Absence::unsupported);  // no clock-reasons call in v1
  ASSERT_EQ(dev.processes.size(), 2u);                           // 16-byte entries
  EXPECT_EQ(process(dev, 321)->gpu_memory_bytes, 4096u);
  EXPECT_FALSE(process(dev, 654)->gpu_memory_bytes);
  EXPECT_FALSE(process(dev, 321)->gpu_utilization_percent);  // no nvmlDeviceGetProcessUtilization
}

TEST_F(NvmlProbeTest, MissingRequiredSymbolMakesNvmlUnusable) {
  FakeNvml no_uuid(fakes::kFakeNvmlNoUuid);
  auto p = probe(fakes::kFakeNvmlNoUuid);
  const auto d = harness_.detect(*p);
  EXPECT_FALSE(d.available);
  EXPECT_EQ(d.reason, std::string("NVML unusable: nvmlDeviceGetHandleByUUID missing from ") +
                          fakes::kFakeNvmlNoUuid);
  EXPECT_EQ(no_uuid.count("nvmlInit_v2"), 0);  // never initialized
  EXPECT_EQ(p->backend(), NvidiaBackend::none);
}

TEST_F(NvmlProbeTest, MissingLibraryIsUnavailableAndSamplingSaysWhy) {
  auto p = probe("/nonexistent/libnvidia-ml.so.1");
  const auto d = harness_.detect(*p);
  EXPECT_FALSE(d.available);
  EXPECT_EQ(d.reason.rfind("cannot load /nonexistent/libnvidia-ml.so.1", 0), 0u) << d.reason;
  const auto r = harness_.sample(*p);
  EXPECT_EQ(r.ec, make_error_code(errc::probe_unavailable));
  ASSERT_EQ(r.snapshot.errors.size(), 1u);
  EXPECT_EQ(r.snapshot.errors[0].message, d.reason);
}

TEST_F(NvmlProbeTest, InitFailureFailsTheSample) {
  nvml_.scenario("init_fail=DRIVER_NOT_LOADED\n");
  auto p = probe();
  const auto d = harness_.detect(*p);
  EXPECT_FALSE(d.available);
  EXPECT_EQ(d.reason, "NVML init failed: nvmlInit_v2: Driver Not Loaded") << d.reason;
}

class ProcessLayout : public NvmlProbeTest, public ::testing::WithParamInterface<int> {};

TEST_P(ProcessLayout, ProcessesParseMergeAndCarryProcfsDetails) {
  const int stride = GetParam();
  nvml_.scenario("devices=1\nprocess_stride=" + std::to_string(stride) +
                 "\n"
                 "device.0.compute=1234:1073741824,5678:na,42:8192\n"
                 "device.0.graphics=1234:2048,9999:4096\n");
  test::proc_entry(proc_, 1234, "trainer", 5120);
  test::proc_entry(proc_, 9999, "Xorg", 100);
  auto p = probe();
  ASSERT_TRUE(harness_.detect(*p).available);
  const auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  const auto& d = r.snapshot.devices.at(0);
  EXPECT_EQ(d.attributes.at("nvml_process_entry_bytes"), std::to_string(stride));
  ASSERT_EQ(d.processes.size(), 4u);
  const auto* trainer = process(d, 1234);
  ASSERT_TRUE(trainer);
  EXPECT_EQ(trainer->gpu_memory_bytes, 1073741824u);  // in both lists: counted once
  EXPECT_EQ(trainer->name, "trainer");
  EXPECT_EQ(trainer->host_rss_bytes, 5120u * 1024);
  EXPECT_TRUE(trainer->per_process_exact);
  EXPECT_FALSE(process(d, 5678)->gpu_memory_bytes);  // NVML_VALUE_NOT_AVAILABLE: absent
  EXPECT_EQ(process(d, 42)->gpu_memory_bytes, 8192u);
  EXPECT_FALSE(process(d, 42)->host_rss_bytes);  // no /proc entry
  EXPECT_EQ(process(d, 9999)->gpu_memory_bytes, 4096u);
  EXPECT_EQ(process(d, 9999)->name, "Xorg");
}

INSTANTIATE_TEST_SUITE_P(Stride, ProcessLayout, ::testing::Values(24, 32));

TEST_F(NvmlProbeTest, ProcessDetailsEdgeCases) {
  nvml_.scenario(
      "devices=2\ndevice.0.compute=1234:1024,77:2048,88:4096,99:1\n"
      "device.1.compute=1234:512\n");
  proc_.file("1234/comm", "with space\n");
  proc_.file("1234/statm", "  2000   750 3 4 0 5 0\n");  // any spacing
  proc_.file("77/comm", "kthreadd\n");
  proc_.file("77/statm", "0 0 0 0 0 0 0\n");  // no address space (kernel thread, zombie)
  proc_.file("88/statm", "100 3\n");          // no comm file: the name is unknown
  proc_.file("99/comm", "odd");
  proc_.file("99/statm", "garbage\n");
  auto p = probe();
  const auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto& d = r.snapshot.devices.at(0);
  EXPECT_EQ(process(d, 1234)->name, "with space");
  EXPECT_EQ(process(d, 1234)->host_rss_bytes, 750 * page);
  EXPECT_EQ(process(r.snapshot.devices.at(1), 1234)->host_rss_bytes, 750 * page);  // both GPUs
  EXPECT_EQ(process(d, 77)->name, "kthreadd");
  EXPECT_FALSE(process(d, 77)->host_rss_bytes);  // absent, not 0
  EXPECT_EQ(process(d, 88)->name, "");
  EXPECT_EQ(process(d, 88)->host_rss_bytes, 3 * page);
  EXPECT_EQ(process(d, 99)->name, "odd");
  EXPECT_FALSE(process(d, 99)->host_rss_bytes);
}

TEST_F(NvmlProbeTest, AutomaticModeWithNvmlKeepsTheNvmlInterval) {
  nvml_.scenario(kTwoGpus);
  NvidiaProbeOptions o;
  o.nvml_library = nvml_.path();
  o.nvidia_smi = "/nonexistent/nvidia-smi";
  o.paths.procfs_root = proc_.path();
  auto p = make_nvidia_probe(harness_.executors(), o);
  EXPECT_EQ(p->min_interval(), NvidiaProbe::kNvmlMinInterval);  // before detection
  ASSERT_TRUE(harness_.detect(*p).available);
  EXPECT_EQ(p->backend(), NvidiaBackend::nvml);
  EXPECT_EQ(p->min_interval(), NvidiaProbe::kNvmlMinInterval);
}

TEST_F(NvmlProbeTest, ProcessUtilizationCarriesTheLastSeenTimestamp) {
  nvml_.scenario(
      "devices=1\ndevice.0.compute=1234:1024,55:2048\n"
      "device.0.process_util=1234:63:20\n");
  auto p = probe();
  ASSERT_TRUE(harness_.detect(*p).available);
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  EXPECT_EQ(nvml_.last_seen(0), 0u);  // first call: everything NVML has
  EXPECT_EQ(process(r.snapshot.devices[0], 1234)->gpu_utilization_percent, 63.0);
  EXPECT_FALSE(process(r.snapshot.devices[0], 55)->gpu_utilization_percent);  // no sample: absent
  r = harness_.sample(*p);
  EXPECT_EQ(nvml_.last_seen(0), 1100000u);  // the newest time stamp of the first answer
  EXPECT_EQ(process(r.snapshot.devices[0], 1234)->gpu_utilization_percent, 63.0);
  r = harness_.sample(*p);
  EXPECT_EQ(nvml_.last_seen(0), 1200000u);
}

TEST_F(NvmlProbeTest, MapsNotSupportedNoPermissionAndOtherErrors) {
  nvml_.scenario(kTwoGpus +
                 "fail.nvmlDeviceGetFanSpeed=NOT_SUPPORTED\n"
                 "device.0.fail.nvmlDeviceGetPowerUsage=NO_PERMISSION\n"
                 "device.1.fail.nvmlDeviceGetTemperatureV=UNKNOWN\n"
                 "device.1.fail.nvmlDeviceGetComputeRunningProcesses_v3=NO_PERMISSION\n"
                 "device.1.fail.nvmlDeviceGetGraphicsRunningProcesses_v3=NO_PERMISSION\n");
  auto p = probe();
  ASSERT_TRUE(harness_.detect(*p).available);
  const auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  const auto& d0 = device(r.snapshot, kUuid0);
  const auto& d1 = device(r.snapshot, kUuid1);
  EXPECT_EQ(d0.metrics[Metric::fan_percent], Reading::missing(Absence::unsupported, Source::nvml));
  EXPECT_EQ(d0.metrics[Metric::power_watts],
            Reading::missing(Absence::no_permission, Source::nvml));
  EXPECT_TRUE(d1.metrics[Metric::power_watts].has_value());
  EXPECT_EQ(d1.metrics[Metric::temperature_celsius],
            Reading::missing(Absence::tool_failed, Source::nvml));
  ASSERT_TRUE(d1.processes_absent);
  EXPECT_EQ(*d1.processes_absent, Absence::no_permission);
  EXPECT_EQ(d1.attributes.count("processes"), 0u);
  // Only the unexpected failure is an error of the sample.
  ASSERT_EQ(r.snapshot.errors.size(), 1u);
  EXPECT_EQ(r.snapshot.errors[0].code, "nvml_error");
  EXPECT_EQ(r.snapshot.errors[0].device, kUuid1);
  EXPECT_NE(r.snapshot.errors[0].message.find("nvmlDeviceGetTemperatureV"), std::string::npos);
}

TEST_F(NvmlProbeTest, EachDistinctErrorIsLoggedOnce) {
  nvml_.scenario(
      "devices=1\nfail.nvmlDeviceGetTemperatureV=UNKNOWN\n"
      "fail.nvmlDeviceGetPowerUsage=NO_PERMISSION\n");
  LogCapture log;
  auto p = probe();
  ASSERT_TRUE(harness_.detect(*p).available);
  for (int i = 0; i < 4; ++i) {
    const auto r = harness_.sample(*p);
    EXPECT_TRUE(has_error(r.snapshot, "nvml_error"));  // reported in every snapshot...
  }
  EXPECT_EQ(log.count("nvmlDeviceGetTemperatureV failed"), 1u);  // ...logged once
  EXPECT_EQ(log.count("nvmlDeviceGetPowerUsage"), 1u);
}

TEST_F(NvmlProbeTest, ConfigSettingsReachTheProbe) {
  Config config;
  config.probe_settings["nvidia"] = ProbeSettings::Section{{"library", "/opt/nv/libnvidia-ml.so.1"},
                                                           {"nvidia_smi", "/opt/nv/nvidia-smi"},
                                                           {"use", "nvidia-smi"},
                                                           {"nvidia_smi_timeout_ms", 1500}};
  config.paths.procfs_root = "/host/proc";
  config.library_session = LibrarySessionMode::lazy;
  const auto o = nvidia_options_from_config(config);
  EXPECT_EQ(o.nvml_library, "/opt/nv/libnvidia-ml.so.1");
  EXPECT_EQ(o.nvidia_smi, "/opt/nv/nvidia-smi");
  EXPECT_EQ(o.use, NvidiaProbeOptions::Use::nvidia_smi_only);
  EXPECT_EQ(o.nvidia_smi_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(o.paths.procfs_root, "/host/proc");
  EXPECT_EQ(o.library_session, LibrarySessionMode::lazy);

  config.probe_settings["nvidia"] = ProbeSettings::Section{{"libary", "x"}};
  EXPECT_THROW(nvidia_options_from_config(config), std::invalid_argument);
  config.probe_settings["nvidia"] = ProbeSettings::Section{{"use", "cuda"}};
  EXPECT_THROW(nvidia_options_from_config(config), std::invalid_argument);
}

}  // namespace
}  // namespace gpustream
