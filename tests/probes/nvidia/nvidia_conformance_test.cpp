// The nvidia probe's conformance case (conformance.hpp): the shared contract, checked with the
// fake NVML library.
#include "conformance.hpp"

#include "gpustream/probes/nvidia_probe.hpp"
#include "nvidia_fakes.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::kConformanceSamples;
using test::ProbeRun;

ProbeRun run_nvml() {
  test::FakeNvml nvml;
  test::TempTree proc;
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
  test::ProbeHarness h;
  NvidiaProbeOptions o;
  o.nvml_library = nvml.path();
  o.use = NvidiaProbeOptions::Use::nvml_only;
  o.paths.procfs_root = proc.path();
  auto p = make_nvidia_probe(h.executors(), o);
  ProbeRun r{h.detect(*p), {}};
  for (int i = 0; i < kConformanceSamples; ++i) r.samples.push_back(h.sample(*p).snapshot);
  // Name and RSS where the process exists (checked here, while the tree does).
  for (auto& s : r.samples)
    for (auto& d : s.devices)
      for (auto& pr : d.processes)
        if (pr.pid == 4242 || pr.pid == 77) {
          EXPECT_TRUE(pr.host_rss_bytes && !pr.name.empty()) << "nvml pid " << pr.pid;
        }
  r.mine = test::mine_as(proc, "", 4242, r.samples);
  return r;
}

const test::ConformanceCase kCases[] = {
    {"nvidia_nvml", Vendor::nvidia, false, true, run_nvml},
};

}  // namespace

using test::ProbeConformance;
INSTANTIATE_TEST_SUITE_P(Nvidia, ProbeConformance, ::testing::ValuesIn(kCases),
                         test::conformance_case_name);

}  // namespace gpustream
