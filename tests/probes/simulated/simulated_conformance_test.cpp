// The simulated probe's conformance case (conformance.hpp): the shared contract, checked on two
// simulated GPUs driven by a manual clock.
#include "conformance.hpp"

#include "gpustream/probes/simulated_probe.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::kConformanceSamples;
using test::kConformanceStepNs;
using test::ProbeRun;

ProbeRun run_simulated() {
  test::ProbeHarness h;
  std::int64_t now = kConformanceStepNs;
  auto p = make_simulated_probe(h.executors(),
                                {.devices = 2, .seed = 7, .monotonic_clock = [&] { return now; }});
  ProbeRun r{h.detect(*p), {}};
  for (int i = 0; i < kConformanceSamples; ++i, now += kConformanceStepNs)
    r.samples.push_back(h.sample(*p).snapshot);
  test::TempTree t;
  t.file("proc/1/statm", "100 50 0 0 0 0 0\n");
  r.mine = test::mine_as(t, "proc", 1, r.samples);  // not a simulated client: 0 on every device
  return r;
}

const test::ConformanceCase kCases[] = {
    {.name = "simulated",
     .vendor = Vendor::simulated,
     .energy_models_power = true,
     .lists_processes = true,
     .run = run_simulated,
     // Its "self" is a pid that is not a simulated client: 0 everywhere, an exact answer.
     .self_holds_memory = false,
     .check_mine =
         [](const MyProcessUsage& mine) {
           for (const auto& u : mine.devices) EXPECT_EQ(u.gpu_memory_bytes, 0u) << "simulated";
         }},
};

}  // namespace

using test::ProbeConformance;
INSTANTIATE_TEST_SUITE_P(Simulated, ProbeConformance, ::testing::ValuesIn(kCases),
                         test::conformance_case_name);

}  // namespace gpustream
