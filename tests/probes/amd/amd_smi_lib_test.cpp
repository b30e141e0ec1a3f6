// The AMD library backend (AmdSmiLibProbe) against the fake libamd_smi.so: both session modes,
// handles re-resolved by UUID/BDF, the host guard, the version check, each metric, and the
// "amd" row's auto selection (library -> sysfs -> CLI).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "amd_smi_lib_fixture.hpp"
#include "gpustream/dynamic_library.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/source_note.hpp"
#include "gpustream_fake_amd_smi_lib_paths.hpp"
#include "probe_harness.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

using test::ProbeHarness;
using test::TempTree;

using test::AmdSmiLib;

// Three GPUs told apart by their gfx activity (device i: 10 + 10 i %).
std::string three_gpus(const std::string& extra = {}) {
  return "version=26.1.0\ndevices=3\ndevice.0.gfx=10\ndevice.1.gfx=20\ndevice.2.gfx=30\n" + extra;
}

TEST_F(AmdSmiLib, PersistentModeInitsOnceAndShutsDownWhenTheProbeGoes) {
  scenario(three_gpus());
  auto probe = make(LibrarySessionMode::persistent);
  // The blocking calls, so that nothing but `probe` holds the probe when it is reset (an async
  // operation's handler may still be releasing its reference on the pool thread).
  ASSERT_TRUE(probe->detect_now().available);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(probe->sample_now().devices.size(), 3u);
  EXPECT_EQ(count("init"), 1);
  EXPECT_EQ(count("shutdown"), 0);
  EXPECT_EQ(probe->library_session_stats().inits, 1u);
  probe.reset();
  EXPECT_EQ(count("shutdown"), 1);
  EXPECT_EQ(count_prefix("stale_handle"), 0);
  EXPECT_EQ(count_prefix("uninitialized_call"), 0);
}

TEST_F(AmdSmiLib, LazyModeInitsAndShutsDownAroundEverySample) {
  scenario(three_gpus());
  auto probe = make(LibrarySessionMode::lazy);
  ASSERT_TRUE(harness_.detect(*probe).available);
  EXPECT_EQ(count("init"), 1);
  EXPECT_EQ(count("shutdown"), 1);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(harness_.sample(*probe).ec);
  EXPECT_EQ(count("init"), 4);
  EXPECT_EQ(count("shutdown"), 4);
  EXPECT_EQ(count_prefix("stale_handle"), 0);  // every session re-resolved its handles
  EXPECT_EQ(count_prefix("uninitialized_call"), 0);
  EXPECT_NE(probe->describe().find("lazy session"), std::string::npos) << probe->describe();
}

TEST_F(AmdSmiLib, LazyModeFindsEachGpuByUuidWhenTheListingOrderChanges) {
  scenario(three_gpus());
  auto probe = make(LibrarySessionMode::lazy);
  const auto before = harness_.sample(*probe).snapshot;
  ASSERT_EQ(before.devices.size(), 3u);
  scenario(three_gpus("order=2,0,1\n"));
  const auto after = harness_.sample(*probe).snapshot;
  ASSERT_EQ(after.devices.size(), 3u);
  for (const auto& d : before.devices)
    EXPECT_EQ(device(after, d.id).metrics[Metric::utilization_percent].value(),
              d.metrics[Metric::utilization_percent].value())
        << d.id;
  EXPECT_EQ(device(after, "amd:0000:05:00.0").metrics[Metric::utilization_percent].value(), 30);
  EXPECT_EQ(count_prefix("stale_handle"), 0);
}

TEST_F(AmdSmiLib, LazyModeFindsEachGpuByBdfWhenTheUuidIsUnavailable) {
  scenario(three_gpus("fail.amdsmi_get_gpu_device_uuid=NOT_SUPPORTED\n"));
  auto probe = make(LibrarySessionMode::lazy);
  ASSERT_EQ(harness_.sample(*probe).snapshot.devices.size(), 3u);
  scenario(three_gpus("fail.amdsmi_get_gpu_device_uuid=NOT_SUPPORTED\norder=1,2,0\n"));
  const auto s = harness_.sample(*probe).snapshot;
  EXPECT_EQ(device(s, "amd:0000:03:00.0").metrics[Metric::utilization_percent].value(), 10);
  EXPECT_EQ(device(s, "amd:0000:04:00.0").metrics[Metric::utilization_percent].value(), 20);
  EXPECT_EQ(device(s, "amd:0000:05:00.0").metrics[Metric::utilization_percent].value(), 30);
}

TEST_F(AmdSmiLib, AGpuThatVanishesBetweenSessionsIsLostAndTheOthersKeepReporting) {
  scenario(three_gpus());
  auto probe = make(LibrarySessionMode::lazy);
  ASSERT_EQ(harness_.sample(*probe).snapshot.devices.size(), 3u);
  scenario(three_gpus("order=2,0\n"));  // GPU 1 is no longer listed
  const auto s = harness_.sample(*probe);
  ASSERT_EQ(s.snapshot.devices.size(), 3u);
  const auto& lost = device(s.snapshot, "amd:0000:04:00.0");
  EXPECT_FALSE(lost.metrics[Metric::utilization_percent]);
  EXPECT_EQ(lost.metrics[Metric::utilization_percent].reason(), Absence::lost);
  EXPECT_EQ(lost.processes_absent, Absence::lost);
  EXPECT_TRUE(has_error(s.snapshot, "gpu_lost"));
  EXPECT_EQ(device(s.snapshot, "amd:0000:05:00.0").metrics[Metric::utilization_percent].value(),
            30);
  scenario(three_gpus());  // back
  const auto back = harness_.sample(*probe).snapshot;
  EXPECT_EQ(device(back, "amd:0000:04:00.0").metrics[Metric::utilization_percent].value(), 20);
  EXPECT_FALSE(has_error(back, "gpu_lost"));
}

TEST_F(AmdSmiLib, HostProgramUsingAmdsmiIsNeverShutDownUnder) {
  scenario(three_gpus());
  // The host program loads and initializes the library itself, before gpustream.
  auto host = DynamicLibrary::load(fakes::kFakeAmdSmiLib);
  auto* host_init = host.required<std::uint32_t(std::uint64_t)>("amdsmi_init");
  auto* host_shutdown = host.required<std::uint32_t()>("amdsmi_shut_down");
  ASSERT_EQ(host_init(2), 0u);
  {
    auto probe = make(LibrarySessionMode::lazy);
    ASSERT_TRUE(harness_.detect(*probe).available);
    for (int i = 0; i < 3; ++i) EXPECT_FALSE(harness_.sample(*probe).ec);
    EXPECT_NE(probe->describe().find("persistent session"), std::string::npos);
    EXPECT_NE(probe->describe().find("never shut down"), std::string::npos);
  }
  EXPECT_EQ(count("init"), 1);  // the host's
  EXPECT_EQ(count("shutdown"), 0);
  EXPECT_EQ(count("init_while_initialized"), 0);  // gpustream did not even re-init it
  EXPECT_EQ(host_shutdown(), 0u);                 // the host's session was still there to end
  EXPECT_EQ(count("shutdown"), 1);
  EXPECT_EQ(count("shutdown_uninit"), 0);
}

TEST_F(AmdSmiLib, HostThatLoadedButDidNotInitializeStillKeepsTheLibraryUp) {
  scenario(three_gpus());
  auto host = DynamicLibrary::load(fakes::kFakeAmdSmiLib);
  {
    auto probe = make(LibrarySessionMode::lazy);
    for (int i = 0; i < 2; ++i) EXPECT_FALSE(harness_.sample(*probe).ec);
  }
  EXPECT_EQ(count("init"), 1);  // gpustream's one init, kept for the host
  EXPECT_EQ(count("shutdown"), 0);
}

TEST_F(AmdSmiLib, UnknownLibraryVersionIsRefusedWithItsReason) {
  scenario("version=25.3.0\ndevices=2\n");
  auto probe = make(LibrarySessionMode::persistent);
  const auto d = harness_.detect(*probe);
  EXPECT_FALSE(d.available);
  EXPECT_NE(d.reason.find("version 25.3"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("not reading its structs"), std::string::npos) << d.reason;
  EXPECT_EQ(count("init"), count("shutdown"));  // what it initialized, it ended
  const auto s = harness_.sample(*probe);
  EXPECT_TRUE(s.ec);
  EXPECT_TRUE(s.snapshot.devices.empty());
}

TEST_F(AmdSmiLib, InitFailureIsUnavailableWithTheLibrarysReason) {
  scenario("init_fail=DRIVER_NOT_LOADED\n");
  auto probe = make(LibrarySessionMode::persistent);
  const auto d = harness_.detect(*probe);
  EXPECT_FALSE(d.available);
  EXPECT_NE(d.reason.find("amdsmi_init(AMDSMI_INIT_AMD_GPUS)"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("AMDSMI_STATUS_DRIVER_NOT_LOADED"), std::string::npos) << d.reason;
  EXPECT_TRUE(harness_.sample(*probe).ec);
}

TEST_F(AmdSmiLib, MissingLibraryIsAClearError) {
  try {
    make(LibrarySessionMode::persistent, tree_.path("nowhere/libamd_smi.so"));
    FAIL() << "no error";
  } catch (const DynamicLibraryError& e) {
    EXPECT_NE(std::string(e.what()).find("nowhere/libamd_smi.so"), std::string::npos);
  }
}

void expect_common_metrics(const DeviceSample& d) {
  const auto& m = d.metrics;
  EXPECT_EQ(d.vendor, Vendor::amd);
  EXPECT_EQ(d.pci_bus_id, "0000:03:00.0");
  EXPECT_EQ(d.name, "AMD Instinct MI300X");
  EXPECT_EQ(d.attributes.at("uuid"), "a4ff7400-0000-1000-80ea-e05c945bb3b0");
  EXPECT_EQ(m[Metric::utilization_percent].value(), 10);
  EXPECT_EQ(m[Metric::utilization_percent].source(), Source::amd_smi);
  EXPECT_EQ(m[Metric::memory_utilization_percent].value(), 5);
  ASSERT_EQ(d.engines.size(), 3u);
  EXPECT_EQ(d.engines[2].name, "mm");
  EXPECT_EQ(m[Metric::memory_used_bytes].value(), double(1ULL << 30));
  EXPECT_EQ(m[Metric::memory_total_bytes].value(), double(192ULL << 30));
  EXPECT_EQ(m[Metric::gtt_used_bytes].value(), double(256ULL << 20));
  EXPECT_EQ(m[Metric::gtt_total_bytes].value(), double(64ULL << 30));
  EXPECT_EQ(m[Metric::power_watts].value(), 300);
  EXPECT_EQ(d.power_kind, PowerKind::instant);
  EXPECT_EQ(m[Metric::power_average_watts].value(), 290);
  EXPECT_NEAR(m[Metric::energy_joules].value(), 1e6 * 15.3e-6, 1e-4);  // counter × µJ
  EXPECT_EQ(d.energy_kind, EnergyKind::counter);
  EXPECT_EQ(d.attributes.at("energy_resolution_uj").substr(0, 4), "15.3");
  EXPECT_EQ(m[Metric::temperature_celsius].value(), 40);
  EXPECT_EQ(d.attributes.at("temperature_sensor"), "edge");
  EXPECT_EQ(d.attributes.at("temperature_junction_celsius"), "50");
  EXPECT_EQ(d.attributes.at("temperature_mem_celsius"), "45");
  EXPECT_EQ(m[Metric::clock_graphics_mhz].value(), 2100);
  EXPECT_EQ(m[Metric::clock_memory_mhz].value(), 1300);
  EXPECT_NEAR(m[Metric::fan_percent].value(), 128 * 100.0 / 255, 1e-9);
  EXPECT_EQ(m[Metric::fan_rpm].value(), 1800);
  EXPECT_EQ(m[Metric::clock_sm_mhz].reason(), Absence::unsupported);  // amdsmi has none
}

constexpr const char* kOneGpu =
    "devices=1\ndevice.0.fan=128\ndevice.0.fan_rpm=1800\n"
    "device.0.processes=4242:python3:1073741824:2097152:1000000000:0;77:ffmpeg:4096:0:0:0\n";

TEST_F(AmdSmiLib, EveryMetricIsMappedWithThe26xLayouts) {
  scenario(std::string("version=26.1.0\n") + kOneGpu);
  auto probe = make(LibrarySessionMode::persistent);
  ASSERT_TRUE(harness_.detect(*probe).available);
  EXPECT_NE(probe->describe().find("26.1.0 (struct layout v26)"), std::string::npos);
  const auto s = harness_.sample(*probe).snapshot;
  ASSERT_EQ(s.devices.size(), 1u);
  const auto& d = s.devices[0];
  expect_common_metrics(d);
  EXPECT_EQ(d.metrics[Metric::power_limit_watts].value(), 750);
  ASSERT_EQ(d.processes.size(), 2u);
  EXPECT_EQ(d.processes[0].pid, 77);  // sorted by pid
  EXPECT_EQ(d.processes[1].pid, 4242);
  EXPECT_EQ(d.processes[1].name, "python3");
  EXPECT_EQ(d.processes[1].gpu_memory_bytes, 1073741824u);
  EXPECT_EQ(d.processes[1].gtt_memory_bytes, 2097152u);  // memory_usage.gtt_mem, at offset 336
  EXPECT_EQ(d.processes[0].gtt_memory_bytes, 0u);
  EXPECT_FALSE(d.processes_absent);
}

TEST_F(AmdSmiLib, EveryMetricIsMappedWithThe6xLayouts) {
  scenario(std::string("version=24.6.2\n") + kOneGpu);
  auto probe = make(LibrarySessionMode::persistent);
  ASSERT_TRUE(harness_.detect(*probe).available);
  EXPECT_NE(probe->describe().find("24.6.2 (struct layout v6)"), std::string::npos);
  const auto s = harness_.sample(*probe).snapshot;
  ASSERT_EQ(s.devices.size(), 1u);
  expect_common_metrics(s.devices[0]);
  // 24.6.2 writes power_limit in µW (750'000'000): reported in W.
  EXPECT_EQ(s.devices[0].metrics[Metric::power_limit_watts].value(), 750);
  ASSERT_EQ(s.devices[0].processes.size(), 2u);
  EXPECT_EQ(s.devices[0].processes[1].name, "python3");
  EXPECT_EQ(s.devices[0].processes[1].gpu_memory_bytes, 1073741824u);
  EXPECT_EQ(s.devices[0].processes[1].gtt_memory_bytes, 2097152u);  // at offset 112 in 6.x
  EXPECT_EQ(s.devices[0].processes[0].gtt_memory_bytes, 0u);
}

TEST_F(AmdSmiLib, ProcessEngineTimeBecomesPercentBetweenSamples) {
  scenario(std::string("version=26.1.0\n") + kOneGpu);
  auto probe = make(LibrarySessionMode::lazy);
  auto first = harness_.sample(*probe).snapshot;
  ASSERT_EQ(first.devices[0].processes.size(), 2u);
  EXPECT_FALSE(first.devices[0].processes[1].gpu_utilization_percent);  // only seeded
  now_ns_ += 1'000'000'000;  // 1 s later the process has used 0.5 s more of gfx
  scenario(
      "version=26.1.0\ndevices=1\n"
      "device.0.processes=4242:python3:1073741824:2097152:1500000000:0;77:ffmpeg:4096:0:0:0\n");
  auto second = harness_.sample(*probe).snapshot;
  ASSERT_EQ(second.devices[0].processes.size(), 2u);
  EXPECT_NEAR(second.devices[0].processes[1].gpu_utilization_percent.value_or(-1), 50.0, 1e-6);
}

TEST_F(AmdSmiLib, AverageOnlyBoardStillShowsPower) {
  for (const char* version : {"24.6.2", "26.1.0"}) {
    scenario(std::string("version=") + version + "\ndevices=1\ndevice.0.current_power=na\n");
    auto probe = make(LibrarySessionMode::lazy);
    const auto d = harness_.sample(*probe).snapshot.devices.at(0);
    EXPECT_EQ(d.metrics[Metric::power_watts].value(), 290) << version;
    EXPECT_EQ(d.power_kind, PowerKind::average) << version;
    EXPECT_EQ(d.metrics[Metric::power_average_watts].value(), 290) << version;
  }
}

TEST_F(AmdSmiLib, UnsupportedOrFailingCallsLeaveTheirMetricAbsentWithAReason) {
  scenario(
      "devices=1\nfail.amdsmi_get_gpu_activity=NOT_SUPPORTED\n"
      "fail.amdsmi_get_energy_count=NO_PERM\ndevice.0.fail.amdsmi_get_clock_info=UNKNOWN\n"
      "device.0.temp_edge=-1\ndevice.0.current_power=na\ndevice.0.average_power=na\n"
      "fail.amdsmi_get_gpu_process_list=NOT_SUPPORTED\nfail.amdsmi_get_gpu_fan_rpms=NOT_"
      "SUPPORTED\n");
  auto probe = make(LibrarySessionMode::persistent);
  const auto s = harness_.sample(*probe).snapshot;
  const auto& d = s.devices.at(0);
  const auto& m = d.metrics;
  EXPECT_EQ(m[Metric::utilization_percent].reason(), Absence::unsupported);
  EXPECT_EQ(m[Metric::memory_utilization_percent].reason(), Absence::unsupported);
  EXPECT_TRUE(d.engines.empty());
  EXPECT_EQ(m[Metric::energy_joules].reason(), Absence::no_permission);
  EXPECT_FALSE(d.energy_kind);
  EXPECT_EQ(m[Metric::clock_graphics_mhz].reason(), Absence::tool_failed);
  EXPECT_TRUE(has_error(s, "amdsmi_error"));
  EXPECT_EQ(m[Metric::power_watts].reason(), Absence::unsupported);  // neither figure: absent
  EXPECT_FALSE(d.power_kind);
  EXPECT_EQ(m[Metric::fan_rpm].reason(), Absence::unsupported);
  // No edge sensor (MI300-class): the hotspot stands in, and says so.
  EXPECT_EQ(m[Metric::temperature_celsius].value(), 50);
  EXPECT_EQ(d.attributes.at("temperature_sensor"), "junction");
  EXPECT_EQ(d.processes_absent, Absence::unsupported);
  EXPECT_TRUE(d.processes.empty());
  EXPECT_EQ(m[Metric::memory_used_bytes].value(), double(1ULL << 30));  // the rest is there
}

TEST_F(AmdSmiLib, NoGpuIsUnavailable) {
  scenario("devices=0\n");
  auto probe = make(LibrarySessionMode::persistent);
  const auto d = harness_.detect(*probe);
  EXPECT_FALSE(d.available);
  EXPECT_NE(d.reason.find("reports no GPU"), std::string::npos) << d.reason;
}

// ---- the "amd" row: auto selection ---------------------------------------------------------

class AmdAutoSource : public AmdSmiLib {
 protected:
  void add_sysfs_card() {
    const std::string dev = "sys/class/drm/card0/device/";
    tree_.file(dev + "vendor", "0x1002\n");
    tree_.file(dev + "device", "0x73bf\n");
    tree_.file(dev + "uevent", "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n");
    tree_.file(dev + "power/runtime_status", "active\n");
    tree_.file(dev + "gpu_busy_percent", "37\n");
  }
  auto detect_auto(const std::string& library) {
    Config c;
    c.probes = {"amd"};
    c.paths.sysfs_root = tree_.path("sys");
    c.paths.procfs_root = tree_.path("proc");
    tree_.dir("sys/class/drm");
    tree_.dir("proc");
    c.probe_settings["amd"] = {{"library", library},
                               {"amd_smi", tree_.path("nowhere/amd-smi")},
                               {"amdgpu_ids", std::string()}};
    auto probe = make_amd_probe_from_config(c, harness_.executors());
    return with_note(*probe);
  }
  /// The detection, with the probe's SourceNote (what `gpustream list` shows) in its note.
  struct Noted : Detection {
    std::string note;
  };
  Noted with_note(Probe& probe) {
    Noted out{harness_.detect(probe), {}};
    if (const auto* n = dynamic_cast<const SourceNote*>(&probe)) out.note = n->source_note();
    return out;
  }
};

TEST_F(AmdAutoSource, PrefersTheLibraryWhenItLoadsAndFindsGpus) {
  add_sysfs_card();
  const auto d = detect_auto(fakes::kFakeAmdSmiLib);
  EXPECT_TRUE(d.available);
  EXPECT_EQ(d.note.rfind("source: library (", 0), 0u) << d.note;
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].id, "amd:0000:03:00.0");  // the same id every AMD source gives it
}

TEST_F(AmdAutoSource, SysfsWhenTheLibraryIsMissing) {
  add_sysfs_card();
  const auto d = detect_auto(tree_.path("nowhere/libamd_smi.so"));
  EXPECT_TRUE(d.available);
  EXPECT_EQ(d.note.rfind("source: sysfs (auto; passed over library: cannot load", 0), 0u) << d.note;
}

TEST_F(AmdAutoSource, SysfsWhenTheLibraryFindsNoGpu) {
  add_sysfs_card();
  scenario("devices=0\n");
  const auto d = detect_auto(fakes::kFakeAmdSmiLib);
  EXPECT_TRUE(d.available);
  EXPECT_NE(d.note.find("source: sysfs"), std::string::npos) << d.note;
  EXPECT_NE(d.note.find("reports no GPU"), std::string::npos) << d.note;
}

TEST_F(AmdAutoSource, TheCliWhenNeitherLibraryNorSysfsIsThere) {
  const auto d = detect_auto(tree_.path("nowhere/libamd_smi.so"));
  EXPECT_FALSE(d.available);  // the CLI is not installed either
  EXPECT_EQ(d.note.rfind("source: cli (amd-smi) (auto; passed over library: cannot load", 0), 0u)
      << d.note;
  EXPECT_NE(d.note.find("sysfs: no readable amdgpu card"), std::string::npos) << d.note;
}

TEST_F(AmdAutoSource, AConfiguredSourceIsUsedAsIs) {
  add_sysfs_card();
  Config c;
  c.paths.sysfs_root = tree_.path("sys");
  c.probe_settings["amd"] = {{"source", std::string("library")},
                             {"library", std::string(fakes::kFakeAmdSmiLib)}};
  auto probe = make_amd_probe_from_config(c, harness_.executors());
  const auto d = with_note(*probe);
  EXPECT_TRUE(d.available);
  EXPECT_EQ(d.note, "source: library (configured)");
  c.probe_settings["amd"] = {{"source", std::string("gpu")}};
  EXPECT_THROW(make_amd_probe_from_config(c, harness_.executors()), std::invalid_argument);
}

}  // namespace
}  // namespace gpustream
