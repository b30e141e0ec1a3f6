// The fixture of the AMD library backend's tests (amd_smi_lib*_test.cpp): the fake libamd_smi.so
// driven by a scenario file, its event log, and a probe built over it.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include "gpustream/probes/amd_probe.hpp"
#include "gpustream_fake_amd_smi_lib_paths.hpp"
#include "probe_harness.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::test {

class AmdSmiLib : public ::testing::Test {
 protected:
  AmdSmiLib() {
    log_ = tree_.file("amdsmi.log", "");
    ::setenv(fakes::kFakeAmdSmiLogEnv, log_.c_str(), 1);
    scenario("devices=1\n");
  }
  ~AmdSmiLib() override {
    ::unsetenv(fakes::kFakeAmdSmiLogEnv);
    ::unsetenv(fakes::kFakeAmdSmiScenarioEnv);
  }

  /// Written to the file the fake reads at its next amdsmi_init.
  void scenario(const std::string& text) {
    const auto file = tree_.file("scenario.txt", text);
    ::setenv(fakes::kFakeAmdSmiScenarioEnv, file.c_str(), 1);
  }
  /// Lines of the fake's event log equal to `what`.
  int count(const std::string& what) const {
    std::ifstream in(log_);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line == what ? 1 : 0;
    return n;
  }
  int count_prefix(const std::string& prefix) const {
    std::ifstream in(log_);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line.rfind(prefix, 0) == 0 ? 1 : 0;
    return n;
  }

  std::shared_ptr<AmdSmiLibProbe> make(LibrarySessionMode mode,
                                       std::string library = fakes::kFakeAmdSmiLib) {
    return make_amd_smi_lib_probe(harness_.executors(), {.library = std::move(library),
                                                         .library_session = mode,
                                                         .procfs_root = tree_.path("proc"),
                                                         .clock = [this] { return now_ns_; }});
  }

  static const DeviceSample& device(const GpuSnapshot& s, const std::string& id) {
    const auto* d = s.find_device(id);
    if (!d) throw std::runtime_error("no device " + id);
    return *d;
  }
  static bool has_error(const GpuSnapshot& s, const std::string& code) {
    return std::any_of(s.errors.begin(), s.errors.end(),
                       [&](const SampleError& e) { return e.code == code; });
  }

  TempTree tree_;
  ProbeHarness harness_;
  std::string log_;
  std::int64_t now_ns_ = 1'000'000'000;
};

}  // namespace gpustream::test
