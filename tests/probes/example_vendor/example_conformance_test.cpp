// The example vendor's conformance case (conformance.hpp), added from its folder alone: the
// shared contract, checked on two example GPUs in a temporary tree.
#include "conformance.hpp"

#include "example_vendor.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::kConformanceSamples;
using test::ProbeRun;

ProbeRun run_example() {
  test::TempTree t;
  t.file("sys/example/gpus", "2\n");
  t.file("proc/1/statm", "100 50 0 0 0 0 0\n");
  Config config;
  config.paths.sysfs_root = t.path("sys");
  config.paths.procfs_root = t.path("proc");
  test::ProbeHarness h;
  auto p = test::example_probe_row().factory(config, h.executors());
  ProbeRun r{h.detect(*p), {}};
  for (int i = 0; i < kConformanceSamples; ++i) r.samples.push_back(h.sample(*p).snapshot);
  r.mine = test::mine_as(t, "proc", 1, r.samples);
  return r;
}

const test::ConformanceCase kExampleCases[] = {
    {"example", Vendor::unknown, false, false, run_example},
};

}  // namespace

using test::ProbeConformance;
INSTANTIATE_TEST_SUITE_P(ExampleVendor, ProbeConformance, ::testing::ValuesIn(kExampleCases),
                         test::conformance_case_name);

}  // namespace gpustream
