// conformance.hpp — the shared contract of every probe (conformance_test.cpp checks it), and
// how a vendor's test folder adds its cases: each source of each probe is one ConformanceCase (a
// runner returning its detection and a few samples, driven by the fakes of the vendor's real
// interface), registered from the vendor's own folder with
//
//   INSTANTIATE_TEST_SUITE_P(Vendor, ProbeConformance, ::testing::ValuesIn(kCases),
//                            test::conformance_case_name);
//
// so that the checks name no vendor and a vendor built with GPUSTREAM_PROBE_<VENDOR>=OFF (its
// folder not compiled) has no cases.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gpustream/model.hpp"
#include "gpustream/planner.hpp"
#include "gpustream/probe.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::test {

/// Samples each runner takes, and the step of the driven clocks between them.
inline constexpr int kConformanceSamples = 3;
inline constexpr std::int64_t kConformanceStepNs = 1'000'000'000;

/// What a case's runner hands to the checks.
struct ProbeRun {
  Detection detection;
  std::vector<GpuSnapshot> samples;
  /// my_process_usage over the last sample, with <procfs>/self pointing at one of the fake's
  /// GPU clients (computed by the runner while its tree exists).
  MyProcessUsage mine;
};

/// One source of one probe.
struct ConformanceCase {
  const char* name;
  Vendor vendor;
  /// True when the fake's energy counter and power describe one physical device (the counter
  /// grows by power × time), so the consistency check applies.
  bool energy_models_power;
  /// True when the source lists the processes on each device (my_process then answers per
  /// device); false when it cannot (each device is absent, with a reason).
  bool lists_processes;
  std::function<ProbeRun()> run;
  /// True when the runner's "self" is a GPU client holding memory on some device.
  bool self_holds_memory = lists_processes;
  /// The case's own checks of my_process_usage (null: none).
  std::function<void(const MyProcessUsage&)> check_mine = nullptr;
};

/// The parameterized fixture every vendor's cases are instantiated on.
class ProbeConformance : public ::testing::TestWithParam<ConformanceCase> {};

/// The test name of a case: its name.
inline std::string conformance_case_name(const ::testing::TestParamInfo<ConformanceCase>& info) {
  return info.param.name;
}

/// `self` of the tree's proc root is `pid`: my_process over the last sample.
inline MyProcessUsage mine_as(TempTree& t, const std::string& proc_rel, std::int64_t pid,
                              const std::vector<GpuSnapshot>& samples) {
  t.symlink((proc_rel.empty() ? "" : proc_rel + "/") + "self", std::to_string(pid));
  const std::vector<SnapshotPtr> last{std::make_shared<const GpuSnapshot>(samples.back())};
  return my_process_usage(last, proc_rel.empty() ? t.path() : t.path(proc_rel));
}

/// The device ids a detection found, or a sample carries.
inline std::set<std::string> ids(const std::vector<DeviceInfo>& devices) {
  std::set<std::string> out;
  for (const auto& d : devices) out.insert(d.id);
  return out;
}
inline std::set<std::string> ids(const GpuSnapshot& s) {
  std::set<std::string> out;
  for (const auto& d : s.devices) out.insert(d.id);
  return out;
}

}  // namespace gpustream::test
