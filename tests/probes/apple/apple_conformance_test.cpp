// The apple probe's conformance case (conformance.hpp): the shared contract, checked with the
// fake macmon.
#include "conformance.hpp"

#include <chrono>
#include <utility>

#include "apple_test_util.hpp"

namespace gpustream {
namespace {

using test::kConformanceSamples;
using test::ProbeRun;

ProbeRun run_apple() {
  test::AppleRig rig;
  rig.make(rig.options());
  ProbeRun r{rig.detect(), {}};
  for (int i = 0; i < kConformanceSamples; ++i) {
    rig.advance(std::chrono::seconds{1});
    if (!rig.wait_lines(static_cast<std::uint64_t>(i + 1))) {
      ADD_FAILURE() << "macmon fake silent";
    }
    auto s = rig.sample();
    EXPECT_FALSE(s.ec) << s.ec.message();
    r.samples.push_back(std::move(s.snapshot));
  }
  test::TempTree t;
  t.file("proc/1/statm", "100 50 0 0 0 0 0\n");
  r.mine = test::mine_as(t, "proc", 1, r.samples);
  return r;
}

const test::ConformanceCase kCases[] = {
    {.name = "apple",
     .vendor = Vendor::apple,
     .energy_models_power = false,
     .lists_processes = false,
     .run = run_apple,
     .check_mine =
         [](const MyProcessUsage& mine) {
           for (const auto& u : mine.devices)
             EXPECT_NE(u.reason.find("shares the host's memory"), std::string::npos) << u.reason;
         }},
};

}  // namespace

using test::ProbeConformance;
INSTANTIATE_TEST_SUITE_P(Apple, ProbeConformance, ::testing::ValuesIn(kCases),
                         test::conformance_case_name);

}  // namespace gpustream
