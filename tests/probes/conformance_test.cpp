// The shared contract of every probe, checked the same way for each (one table row per probe,
// each against the fakes of its vendor's real interface):
//   * fixed keys: a non-empty id, the row's vendor, a name, a canonical or empty PCI bus id;
//   * units within physical ranges, every present value finite and with a source;
//   * every metric present or absent with a reason (never `not_collected`); energy_kind set with
//     an energy value, power_kind only with a power value;
//   * device ids stable across samples and equal to detection's; one GPU seen by two sources of
//     one vendor has one id;
//   * processes sorted by pid, and with a name and host RSS where /proc/<pid>/statm exists;
//   * power and energy consistent (counter increase ≈ ∫ power) where the fake models both.
// A new probe is one row in kRows (a runner returning its detection and a few samples); every
// registry row also answers the row contract (row_conformance.hpp).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gpustream/planner.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/probes/pci.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/probes/simulated_probe.hpp"
#include "gpustream_fake_amd_paths.hpp"
#include "gpustream_fake_amd_smi_lib_paths.hpp"
#include "probe_harness.hpp"
#include "row_conformance.hpp"
#include "support/temp_tree.hpp"
#if GPUSTREAM_PROBE_AMD
#include "amd/amd_fake_cli.hpp"
#include "gpustream/probes/amd_probe.hpp"
#endif
#if GPUSTREAM_PROBE_APPLE
#include "apple/apple_test_util.hpp"
#endif
#if GPUSTREAM_PROBE_INTEL
#include "gpustream/probes/intel_probe.hpp"
#include "intel/intel_trees.hpp"
#endif
#if GPUSTREAM_PROBE_NVIDIA
#include "nvidia/nvidia_fakes.hpp"
#endif

namespace gpustream {
namespace {

using test::ProbeHarness;
using test::TempTree;

constexpr int kSamples = 3;
constexpr std::int64_t kStepNs = 1'000'000'000;

/// What a row's runner hands to the checks.
struct ProbeRun {
  Detection detection;
  std::vector<GpuSnapshot> samples;
  /// my_process_usage over the last sample, with <procfs>/self pointing at one of the fake's
  /// GPU clients (computed by the runner while its tree exists).
  MyProcessUsage mine;
};

// `self` of the tree's proc root is `pid`: my_process over the last sample.
MyProcessUsage mine_as(TempTree& t, const std::string& proc_rel, std::int64_t pid,
                       const std::vector<GpuSnapshot>& samples) {
  t.symlink((proc_rel.empty() ? "" : proc_rel + "/") + "self", std::to_string(pid));
  const std::vector<SnapshotPtr> last{std::make_shared<const GpuSnapshot>(samples.back())};
  return my_process_usage(last, proc_rel.empty() ? t.path() : t.path(proc_rel));
}

struct Row {
  const char* name;
  Vendor vendor;
  /// True when the fake's energy counter and power describe one physical device (the counter
  /// grows by power × time), so the consistency check applies.
  bool energy_models_power;
  /// True when the source lists the processes on each device (my_process then answers per
  /// device); false when it cannot (each device is absent, with a reason).
  bool lists_processes;
  std::function<ProbeRun()> run;
};

// ---- the runners --------------------------------------------------------------------------

#if GPUSTREAM_PROBE_SIMULATED
ProbeRun run_simulated() {
  ProbeHarness h;
  std::int64_t now = kStepNs;
  auto p = make_simulated_probe(h.executors(),
                                {.devices = 2, .seed = 7, .monotonic_clock = [&] { return now; }});
  ProbeRun r{h.detect(*p), {}};
  for (int i = 0; i < kSamples; ++i, now += kStepNs) r.samples.push_back(h.sample(*p).snapshot);
  TempTree t;
  t.file("proc/1/statm", "100 50 0 0 0 0 0\n");
  r.mine = mine_as(t, "proc", 1, r.samples);  // not a simulated client: 0 on every device
  return r;
}

#endif

#if GPUSTREAM_PROBE_NVIDIA
ProbeRun run_nvml() {
  test::FakeNvml nvml;
  TempTree proc;
  test::proc_entry(proc, 4242, "trainer", 2048);
  test::proc_entry(proc, 77, "python3", 512);
  nvml.scenario(
      "devices=2\n"
      "device.0.uuid=GPU-aaaaaaaa-1111-2222-3333-444444444444\n"
      "device.0.name=NVIDIA A100-SXM4-80GB\n"
      "device.0.pci=00000000:3B:00.0\n"
      "device.0.memory_total=85899345920\ndevice.0.memory_used=10737418240\n"
      "device.0.util_gpu=87\ndevice.0.temperature=61\ndevice.0.power_mw=250123\n"
      "device.0.power_limit_mw=400000\ndevice.0.clock_graphics=1410\ndevice.0.fan=37\n"
      "device.0.compute=4242:1073741824,77:536870912,9999:1024\n"
      "device.1.uuid=GPU-bbbbbbbb-1111-2222-3333-444444444444\n"
      "device.1.pci=00000000:5E:00.0\n");
  ProbeHarness h;
  NvidiaProbeOptions o;
  o.nvml_library = nvml.path();
  o.use = NvidiaProbeOptions::Use::nvml_only;
  o.paths.procfs_root = proc.path();
  auto p = make_nvidia_probe(h.executors(), o);
  ProbeRun r{h.detect(*p), {}};
  for (int i = 0; i < kSamples; ++i) r.samples.push_back(h.sample(*p).snapshot);
  // Name and RSS where the process exists (checked here, while the tree does).
  for (auto& s : r.samples)
    for (auto& d : s.devices)
      for (auto& pr : d.processes)
        if (pr.pid == 4242 || pr.pid == 77) {
          EXPECT_TRUE(pr.host_rss_bytes && !pr.name.empty()) << "nvml pid " << pr.pid;
        }
  r.mine = mine_as(proc, "", 4242, r.samples);
  return r;
}

// sys/class/drm/cardN/device/... as amdgpu exposes it, with a busy counter per process.
#endif

#if GPUSTREAM_PROBE_AMD
void amd_card(TempTree& t, int index, const std::string& bus) {
  const std::string dev = "sys/class/drm/card" + std::to_string(index) + "/device/";
  t.file(dev + "vendor", "0x1002\n");
  t.file(dev + "device", "0x73bf\n");
  t.file(dev + "uevent", "DRIVER=amdgpu\nPCI_SLOT_NAME=" + bus + "\n");
  t.file(dev + "power/runtime_status", "active\n");
  t.file(dev + "gpu_busy_percent", "37\n");
  t.file(dev + "mem_info_vram_total", "17163091968\n");
  t.file(dev + "mem_info_vram_used", "1073741824\n");
  const std::string h = dev + "hwmon/hwmon" + std::to_string(index + 3) + "/";
  t.file(h + "temp1_input", "45000\n");
  t.file(h + "temp1_label", "edge\n");
  t.file(h + "power1_average", "87000000\n");
  t.file(h + "fan1_input", "1450\n");
}

void amd_client(TempTree& t, int pid, const std::string& bus, std::uint64_t gfx_ns) {
  const std::string base = "proc/" + std::to_string(pid);
  t.file(base + "/comm", "proc" + std::to_string(pid) + "\n");
  t.symlink(base + "/fd/3", "/dev/dri/renderD128");
  t.file(base + "/fdinfo/3", "drm-driver:\tamdgpu\ndrm-client-id:\t" + std::to_string(pid) +
                                 "\ndrm-pdev:\t" + bus +
                                 "\ndrm-resident-vram:\t1024 KiB\n"
                                 "drm-engine-gfx:\t" +
                                 std::to_string(gfx_ns) + " ns\n");
}

ProbeRun run_amd_sysfs() {
  TempTree t;
  amd_card(t, 0, "0000:03:00.0");
  amd_card(t, 1, "0000:04:00.0");
  t.file("proc/300/statm", "5000 1234 300 10 0 900 0\n");
  ProbeHarness h;
  auto p = make_amd_sysfs_probe(
      h.executors(),
      {.paths = {.sysfs_root = t.path("sys"), .procfs_root = t.path("proc")}, .amdgpu_ids = ""});
  ProbeRun r{h.detect(*p), {}};
  for (int i = 0; i < kSamples; ++i) {
    amd_client(t, 300, "0000:03:00.0", 1'000'000ull * (i + 1));
    amd_client(t, 200, "0000:04:00.0", 0);  // no statm: RSS unknown, and that is allowed
    amd_client(t, 100, "0000:03:00.0", 5'000'000ull * (i + 1));
    r.samples.push_back(h.sample(*p).snapshot);
  }
  // Checked here while the tree exists.
  for (const auto& d : r.samples.back().devices)
    for (const auto& pr : d.processes)
      if (pr.pid == 300) {
        EXPECT_TRUE(pr.host_rss_bytes && !pr.name.empty());
      }
  r.mine = mine_as(t, "proc", 300, r.samples);
  return r;
}

ProbeRun run_amd_cli(AmdTool tool) {
  TempTree t;
  const bool amd = tool == AmdTool::amd_smi;
  test::FakeAmdCli cli(t, amd ? fakes::kFakeAmdSmi : fakes::kFakeRocmSmi,
                       amd ? "amd-smi" : "rocm-smi");
  for (const char* f : {"static.json", "metric.json", "process.json", "rocm-smi.json"})
    cli.copy_recorded(f);
  ProbeHarness h;
  std::int64_t now = kStepNs;
  t.file("proc/10000/statm", "5000 1234 300 10 0 900 0\n");
  auto p = make_amd_cli_probe(h.executors(), {.tool = tool,
                                              .path = cli.path(),
                                              .procfs_root = t.path("proc"),
                                              .clock = [&] { return now; }});
  ProbeRun r{h.detect(*p), {}};
  for (int i = 0; i < kSamples; ++i, now += kStepNs) r.samples.push_back(h.sample(*p).snapshot);
  for (const auto& d : r.samples.back().devices)
    for (const auto& pr : d.processes)
      if (pr.pid == 10000) {
        EXPECT_TRUE(pr.host_rss_bytes && !pr.name.empty());
      }
  r.mine = mine_as(t, "proc", 10000, r.samples);
  return r;
}

ProbeRun run_amd_smi_lib(const char* version) {
  TempTree t;
  ::setenv(fakes::kFakeAmdSmiLogEnv, t.file("amdsmi.log", "").c_str(), 1);
  ::setenv(fakes::kFakeAmdSmiScenarioEnv,
           t.file("scenario.txt",
                  std::string("version=") + version +
                      "\ndevices=2\ndevice.1.current_power=na\ndevice.1.temp_edge=-1\n"
                      "device.0.processes=10000:trainer:1073741824:0:0:0;77:py:4096:0:0:0\n")
               .c_str(),
           1);
  t.file("proc/10000/statm", "5000 1234 300 10 0 900 0\n");
  t.file("proc/10000/comm", "trainer\n");
  ProbeRun r;
  {
    ProbeHarness h;
    std::int64_t now = kStepNs;
    auto p = make_amd_smi_lib_probe(h.executors(), {.library = fakes::kFakeAmdSmiLib,
                                                    .library_session = LibrarySessionMode::lazy,
                                                    .procfs_root = t.path("proc"),
                                                    .clock = [&] { return now; }});
    r.detection = h.detect(*p);
    for (int i = 0; i < kSamples; ++i, now += kStepNs) r.samples.push_back(h.sample(*p).snapshot);
  }
  ::unsetenv(fakes::kFakeAmdSmiLogEnv);
  ::unsetenv(fakes::kFakeAmdSmiScenarioEnv);
  r.mine = mine_as(t, "proc", 10000, r.samples);
  return r;
}

#endif

#if GPUSTREAM_PROBE_INTEL
ProbeRun run_intel() {
  test::IntelTree t;
  t.i915_discrete();
  t.xe_discrete_two_tiles();
  t.plain_process(1);
  t.tree().file("proc/100/statm", "5000 1234 300 10 0 900 0\n");
  ProbeHarness h;
  std::int64_t now = kStepNs;
  IntelProbeOptions o;
  o.paths.sysfs_root = t.sys();
  o.paths.procfs_root = t.proc();
  o.level_zero_library = "";
  o.monotonic_clock = [&] { return now; };
  auto p = make_intel_probe(h.executors(), o);
  ProbeRun r{h.detect(*p), {}};
  for (int i = 0; i < kSamples; ++i, now += kStepNs) {
    // 150 W on the i915 card, 300 W on the xe package: the counters grow by power × time.
    t.i915_discrete(1'000'000 + 150'000'000ull * static_cast<std::uint64_t>(i));
    t.xe_discrete_two_tiles(5'000'000 + 300'000'000ull * static_cast<std::uint64_t>(i));
    t.client(100, "blender", 4, "renderD129",
             test::i915_fdinfo("0000:03:00.0", 39, 500'000'000ull * i, 0));
    t.client(200, "ffmpeg", 5, "renderD130",
             test::xe_fdinfo("0000:04:00.0", 7, 10 * i, 0, 100 * i));
    r.samples.push_back(h.sample(*p).snapshot);
  }
  for (const auto& d : r.samples.back().devices)
    for (const auto& pr : d.processes)
      if (pr.pid == 100) {
        EXPECT_TRUE(pr.host_rss_bytes && !pr.name.empty());
      }
  r.mine = mine_as(t.tree(), "proc", 100, r.samples);
  return r;
}

#endif

#if GPUSTREAM_PROBE_APPLE
ProbeRun run_apple() {
  test::AppleRig rig;
  rig.make(rig.options());
  ProbeRun r{rig.detect(), {}};
  for (int i = 0; i < kSamples; ++i) {
    rig.advance(std::chrono::seconds{1});
    if (!rig.wait_lines(static_cast<std::uint64_t>(i + 1))) {
      ADD_FAILURE() << "macmon fake silent";
    }
    auto s = rig.sample();
    EXPECT_FALSE(s.ec) << s.ec.message();
    r.samples.push_back(std::move(s.snapshot));
  }
  TempTree t;
  t.file("proc/1/statm", "100 50 0 0 0 0 0\n");
  r.mine = mine_as(t, "proc", 1, r.samples);
  return r;
}

#endif

// One runner per source of each probe built (GPUSTREAM_PROBE_<VENDOR>).
const Row kRows[] = {
#if GPUSTREAM_PROBE_SIMULATED
    {"simulated", Vendor::simulated, true, true, run_simulated},
#endif
#if GPUSTREAM_PROBE_NVIDIA
    {"nvidia_nvml", Vendor::nvidia, false, true, run_nvml},
#endif
#if GPUSTREAM_PROBE_AMD
    {"amd_sysfs", Vendor::amd, false, true, run_amd_sysfs},
    {"amd_smi", Vendor::amd, false, true, [] { return run_amd_cli(AmdTool::amd_smi); }},
    {"rocm_smi", Vendor::amd, false, false, [] { return run_amd_cli(AmdTool::rocm_smi); }},
    {"amd_smi_lib_v6", Vendor::amd, false, true, [] { return run_amd_smi_lib("24.6.2"); }},
    {"amd_smi_lib_v26", Vendor::amd, false, true, [] { return run_amd_smi_lib("26.1.0"); }},
#endif
#if GPUSTREAM_PROBE_INTEL
    {"intel", Vendor::intel, true, true, run_intel},
#endif
#if GPUSTREAM_PROBE_APPLE
    {"apple", Vendor::apple, false, false, run_apple},
#endif
    {"none", Vendor::unknown, false, false, nullptr},  // keeps the table non-empty
};

// ---- the checks ---------------------------------------------------------------------------

struct Range {
  double lo, hi;
};

Range range_of(Metric m) {
  switch (m) {
    case Metric::utilization_percent:
    case Metric::memory_utilization_percent:
    case Metric::fan_percent:
      return {0, 100};
    case Metric::temperature_celsius:
      return {-40, 150};
    case Metric::power_watts:
    case Metric::power_average_watts:
    case Metric::power_limit_watts:
      return {0, 3000};
    case Metric::clock_graphics_mhz:
    case Metric::clock_sm_mhz:
    case Metric::clock_memory_mhz:
      return {0, 10000};
    case Metric::fan_rpm:
      return {0, 50000};
    default:
      return {0, 1e18};  // bytes, joules
  }
}

void check_reading(const Reading& r, const std::string& where, Range range) {
  if (r.has_value()) {
    EXPECT_TRUE(std::isfinite(r.value())) << where;
    EXPECT_GE(r.value(), range.lo) << where;
    EXPECT_LE(r.value(), range.hi) << where;
    EXPECT_NE(r.source(), Source::none) << where << ": a value without a source";
  } else {
    EXPECT_NE(r.reason(), Absence::not_collected) << where << ": absent without a reason";
  }
}

void check_device(const Row& row, const DeviceSample& d, const std::string& at) {
  const std::string where = std::string(row.name) + " " + at + " " + d.id;
  EXPECT_FALSE(d.id.empty()) << where;
  EXPECT_EQ(d.vendor, row.vendor) << where;
  EXPECT_FALSE(d.name.empty()) << where;
  EXPECT_GE(d.index, 0) << where;
  if (!d.pci_bus_id.empty()) {
    EXPECT_EQ(pci::normalize_bus_id(d.pci_bus_id), d.pci_bus_id) << where;
  }
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto m = static_cast<Metric>(i);
    check_reading(d.metrics[m], where + " " + std::string(to_string(m)), range_of(m));
  }
  const auto& m = d.metrics;
  if (m[Metric::memory_used_bytes] && m[Metric::memory_total_bytes]) {
    EXPECT_LE(m[Metric::memory_used_bytes].value(), m[Metric::memory_total_bytes].value()) << where;
  }
  if (m[Metric::gtt_used_bytes] && m[Metric::gtt_total_bytes]) {
    EXPECT_LE(m[Metric::gtt_used_bytes].value(), m[Metric::gtt_total_bytes].value()) << where;
  }
  if (m[Metric::energy_joules]) {
    EXPECT_TRUE(d.energy_kind) << where << ": energy without a kind";
  }
  if (d.power_kind) {
    EXPECT_TRUE(m[Metric::power_watts]) << where << ": power_kind without power";
  }
  for (const auto& e : d.engines)
    check_reading(e.utilization_percent, where + " engine " + e.name, {0, 100});
  std::int64_t last_pid = 0;
  for (const auto& p : d.processes) {
    EXPECT_GT(p.pid, last_pid) << where << ": processes not sorted by pid (or repeated)";
    last_pid = p.pid;
    if (p.gpu_utilization_percent) {
      EXPECT_GE(*p.gpu_utilization_percent, 0.0) << where;
      EXPECT_LE(*p.gpu_utilization_percent, 100.0) << where;
    }
    for (const auto& e : p.engines)
      check_reading(e.utilization_percent, where + " pid engine " + e.name, {0, 100});
  }
}

std::set<std::string> ids(const std::vector<DeviceInfo>& devices) {
  std::set<std::string> out;
  for (const auto& d : devices) out.insert(d.id);
  return out;
}

std::set<std::string> ids(const GpuSnapshot& s) {
  std::set<std::string> out;
  for (const auto& d : s.devices) out.insert(d.id);
  return out;
}

// ΔE / Δt ≈ power at the later sample, where both come from the device's counter and power.
void check_energy(const Row& row, const GpuSnapshot& a, const GpuSnapshot& b) {
  for (const auto& d2 : b.devices) {
    const auto* d1 = a.find_device(d2.id);
    if (!d1) continue;
    const auto& e1 = d1->metrics[Metric::energy_joules];
    const auto& e2 = d2.metrics[Metric::energy_joules];
    const auto& p2 = d2.metrics[Metric::power_watts];
    if (!e1 || !e2 || !p2 || d2.energy_kind != EnergyKind::counter) continue;
    const double seconds = static_cast<double>(b.monotonic_ns - a.monotonic_ns) / 1e9;
    ASSERT_GT(seconds, 0) << row.name;
    const double from_counter = (e2.value() - e1.value()) / seconds;
    const double p1 = d1->metrics[Metric::power_watts].get().value_or(p2.value());
    const double mean_power = (p1 + p2.value()) / 2;  // the counter integrates the whole interval
    EXPECT_NEAR(from_counter, mean_power,
                0.05 * std::max(mean_power, 1.0) + 0.5 * std::abs(p2.value() - p1))
        << row.name << " " << d2.id;
  }
}

// "My process" is vendor-neutral: every device of the sample is answered, with the process's
// own figure where the source lists processes, and absent with a reason where it cannot.
void check_my_process(const Row& row, const ProbeRun& r) {
  const auto& mine = r.mine;
  EXPECT_TRUE(mine.host_rss_bytes) << row.name;
  EXPECT_TRUE(mine.errors.empty()) << row.name << ": " << mine.errors.front();
  ASSERT_EQ(mine.devices.size(), r.samples.back().devices.size()) << row.name;
  bool holds_memory = false;
  for (std::size_t i = 0; i < mine.devices.size(); ++i) {
    const auto& u = mine.devices[i];
    const auto& d = r.samples.back().devices[i];
    EXPECT_EQ(u.device_id, d.id) << row.name;
    if (!row.lists_processes) {
      EXPECT_FALSE(u.gpu_memory_bytes) << row.name << " " << u.device_id;
      EXPECT_EQ(u.absent, Absence::unsupported) << row.name;
      EXPECT_FALSE(u.reason.empty()) << row.name;
      EXPECT_EQ(d.processes_absent, Absence::unsupported) << row.name;
      continue;
    }
    EXPECT_FALSE(d.processes_absent) << row.name << " " << d.id;
    if (u.gpu_memory_bytes) {
      EXPECT_FALSE(u.absent) << row.name;
      holds_memory = holds_memory || *u.gpu_memory_bytes > 0;
    } else {
      EXPECT_TRUE(u.absent && !u.reason.empty()) << row.name << " " << u.device_id;
    }
  }
  // The fakes' "self" is a GPU client holding memory, except the simulated row's (a pid that
  // is not a simulated client: 0 everywhere, an exact answer).
  if (row.lists_processes && row.vendor != Vendor::simulated) EXPECT_TRUE(holds_memory) << row.name;
  if (row.vendor == Vendor::simulated)
    for (const auto& u : mine.devices) EXPECT_EQ(u.gpu_memory_bytes, 0u) << row.name;
  if (row.vendor == Vendor::apple)
    for (const auto& u : mine.devices)
      EXPECT_NE(u.reason.find("shares the host's memory"), std::string::npos) << u.reason;
}

class ProbeConformance : public ::testing::TestWithParam<Row> {};

TEST_P(ProbeConformance, HoldsTheSharedContract) {
  const Row& row = GetParam();
  if (!row.run) GTEST_SKIP() << "no probe built";
  const ProbeRun r = row.run();
  ASSERT_TRUE(r.detection.available) << row.name << ": " << r.detection.reason;
  ASSERT_FALSE(r.detection.devices.empty()) << row.name;
  ASSERT_EQ(r.samples.size(), static_cast<std::size_t>(kSamples)) << row.name;
  const auto detected = ids(r.detection.devices);
  for (const auto& info : r.detection.devices) {
    EXPECT_EQ(info.vendor, row.vendor) << row.name;
    if (!info.pci_bus_id.empty()) {
      EXPECT_EQ(pci::normalize_bus_id(info.pci_bus_id), info.pci_bus_id);
    }
  }
  for (int i = 0; i < kSamples; ++i) {
    const auto& s = r.samples[static_cast<std::size_t>(i)];
    EXPECT_EQ(ids(s), detected) << row.name << " sample " << i << ": device ids moved";
    for (const auto& d : s.devices) check_device(row, d, "sample " + std::to_string(i));
    if (i > 0 && row.energy_models_power)
      check_energy(row, r.samples[static_cast<std::size_t>(i - 1)], s);
  }
  check_my_process(row, r);
}

INSTANTIATE_TEST_SUITE_P(EveryProbe, ProbeConformance, ::testing::ValuesIn(kRows),
                         [](const ::testing::TestParamInfo<Row>& info) {
                           return std::string(info.param.name);
                         });

// Every row of the table (a test that adds a row checks it the same way).
TEST(RowConformance, EveryRowAnswersTheRowContract) {
  TempTree t;
  t.dir("sys");
  t.dir("proc");
  t.dir("dev");
  Config config;
  config.paths = {
      .sysfs_root = t.path("sys"), .procfs_root = t.path("proc"), .devfs_root = t.path("dev")};
  for (const auto& row : probe_rows()) test::check_row_conforms(row, config);
}

#if GPUSTREAM_PROBE_AMD
// One GPU seen by two sources of one vendor has one id: the AMD sysfs path and amd-smi name the
// recorded board (0000:03:00.0) "amd:0000:03:00.0".
TEST(ProbeConformanceIds, AmdSourcesAgree) {
  const auto sysfs = run_amd_sysfs();
  const auto smi = run_amd_cli(AmdTool::amd_smi);
  const auto rocm = run_amd_cli(AmdTool::rocm_smi);
  const auto a = ids(sysfs.detection.devices);
  ASSERT_TRUE(a.contains("amd:0000:03:00.0"));
  EXPECT_TRUE(ids(smi.detection.devices).contains("amd:0000:03:00.0"));
  EXPECT_TRUE(ids(rocm.samples.front()).contains("amd:0000:03:00.0"));
}
#endif

}  // namespace
}  // namespace gpustream
