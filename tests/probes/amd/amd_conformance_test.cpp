// The amd probe's conformance cases (conformance.hpp): the shared contract, checked for each of
// its sources (amdgpu sysfs, amd-smi, rocm-smi, the AMD SMI library at two versions) with the
// fakes of each; and one GPU seen by two of its sources has one id.
#include "conformance.hpp"

#include <stdlib.h>

#include <set>
#include <string>
#include <vector>

#include "amd_fake_cli.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "gpustream_fake_amd_paths.hpp"
#include "gpustream_fake_amd_smi_lib_paths.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::ids;
using test::kConformanceSamples;
using test::kConformanceStepNs;
using test::ProbeRun;

// sys/class/drm/cardN/device/... as amdgpu exposes it, with a busy counter per process.
void amd_card(test::TempTree& t, int index, const std::string& bus) {
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

void amd_client(test::TempTree& t, int pid, const std::string& bus, std::uint64_t gfx_ns) {
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
  test::TempTree t;
  amd_card(t, 0, "0000:03:00.0");
  amd_card(t, 1, "0000:04:00.0");
  t.file("proc/300/statm", "5000 1234 300 10 0 900 0\n");
  test::ProbeHarness h;
  auto p = make_amd_sysfs_probe(
      h.executors(),
      {.paths = {.sysfs_root = t.path("sys"), .procfs_root = t.path("proc")}, .amdgpu_ids = ""});
  ProbeRun r{h.detect(*p), {}};
  for (int i = 0; i < kConformanceSamples; ++i) {
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
  r.mine = test::mine_as(t, "proc", 300, r.samples);
  return r;
}

ProbeRun run_amd_cli(AmdTool tool) {
  test::TempTree t;
  const bool amd = tool == AmdTool::amd_smi;
  test::FakeAmdCli cli(t, amd ? fakes::kFakeAmdSmi : fakes::kFakeRocmSmi,
                       amd ? "amd-smi" : "rocm-smi");
  for (const char* f : {"static.json", "metric.json", "process.json", "rocm-smi.json"})
    cli.copy_recorded(f);
  test::ProbeHarness h;
  std::int64_t now = kConformanceStepNs;
  t.file("proc/10000/statm", "5000 1234 300 10 0 900 0\n");
  auto p = make_amd_cli_probe(h.executors(), {.tool = tool,
                                              .path = cli.path(),
                                              .procfs_root = t.path("proc"),
                                              .clock = [&] { return now; }});
  ProbeRun r{h.detect(*p), {}};
  for (int i = 0; i < kConformanceSamples; ++i, now += kConformanceStepNs)
    r.samples.push_back(h.sample(*p).snapshot);
  for (const auto& d : r.samples.back().devices)
    for (const auto& pr : d.processes)
      if (pr.pid == 10000) {
        EXPECT_TRUE(pr.host_rss_bytes && !pr.name.empty());
      }
  r.mine = test::mine_as(t, "proc", 10000, r.samples);
  return r;
}

ProbeRun run_amd_smi_lib(const char* version) {
  test::TempTree t;
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
    test::ProbeHarness h;
    std::int64_t now = kConformanceStepNs;
    auto p = make_amd_smi_lib_probe(h.executors(), {.library = fakes::kFakeAmdSmiLib,
                                                    .library_session = LibrarySessionMode::lazy,
                                                    .procfs_root = t.path("proc"),
                                                    .clock = [&] { return now; }});
    r.detection = h.detect(*p);
    for (int i = 0; i < kConformanceSamples; ++i, now += kConformanceStepNs)
      r.samples.push_back(h.sample(*p).snapshot);
  }
  ::unsetenv(fakes::kFakeAmdSmiLogEnv);
  ::unsetenv(fakes::kFakeAmdSmiScenarioEnv);
  r.mine = test::mine_as(t, "proc", 10000, r.samples);
  return r;
}

const test::ConformanceCase kCases[] = {
    {"amd_sysfs", Vendor::amd, false, true, run_amd_sysfs},
    {"amd_smi", Vendor::amd, false, true, [] { return run_amd_cli(AmdTool::amd_smi); }},
    {"rocm_smi", Vendor::amd, false, false, [] { return run_amd_cli(AmdTool::rocm_smi); }},
    {"amd_smi_lib_v6", Vendor::amd, false, true, [] { return run_amd_smi_lib("24.6.2"); }},
    {"amd_smi_lib_v26", Vendor::amd, false, true, [] { return run_amd_smi_lib("26.1.0"); }},
};

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

}  // namespace

using test::ProbeConformance;
INSTANTIATE_TEST_SUITE_P(Amd, ProbeConformance, ::testing::ValuesIn(kCases),
                         test::conformance_case_name);

}  // namespace gpustream
