// The intel probe's conformance case (conformance.hpp): the shared contract, checked on an i915
// card and a two-tile xe card in a temporary sysfs/procfs tree (Level Zero absent).
#include "conformance.hpp"

#include "gpustream/probes/intel_probe.hpp"
#include "intel_trees.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::kConformanceSamples;
using test::kConformanceStepNs;
using test::ProbeRun;

ProbeRun run_intel() {
  test::IntelTree t;
  t.i915_discrete();
  t.xe_discrete_two_tiles();
  t.plain_process(1);
  t.tree().file("proc/100/statm", "5000 1234 300 10 0 900 0\n");
  test::ProbeHarness h;
  std::int64_t now = kConformanceStepNs;
  IntelProbeOptions o;
  o.paths.sysfs_root = t.sys();
  o.paths.procfs_root = t.proc();
  o.level_zero_library = "";
  o.monotonic_clock = [&] { return now; };
  auto p = make_intel_probe(h.executors(), o);
  ProbeRun r{h.detect(*p), {}};
  for (int i = 0; i < kConformanceSamples; ++i, now += kConformanceStepNs) {
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
  r.mine = test::mine_as(t.tree(), "proc", 100, r.samples);
  return r;
}

const test::ConformanceCase kCases[] = {
    {"intel", Vendor::intel, true, true, run_intel},
};

}  // namespace

using test::ProbeConformance;
INSTANTIATE_TEST_SUITE_P(Intel, ProbeConformance, ::testing::ValuesIn(kCases),
                         test::conformance_case_name);

}  // namespace gpustream
