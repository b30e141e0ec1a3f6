// `gpustream doctor` for the apple probe (probes/apple/apple_doctor.cpp) with the fake macmon.
#include <gtest/gtest.h>

#include "doctor_machine.hpp"
#include "gpustream/probes/apple_probe.hpp"
#include "gpustream_fake_macmon_paths.hpp"

namespace gpustream {
namespace {

using namespace doctor_test;  // NOLINT(google-build-using-namespace)

TEST(Doctor, MacmonVersionAndNotMacos) {
  Machine m;
  m.options.probes = {"apple"};
  auto r = m.run();
  if (!kIsMacOS) {
    const auto* f = find(r, "apple", "macmon", Status::info);
    ASSERT_NE(f, nullptr) << dump(r);
    EXPECT_NE(f->detail.find("not macOS"), std::string::npos);
  }
  m.options.probe_settings.set("apple", "macmon", fakes::kFakeMacmon);
  r = m.run();
  const auto* f = find(r, "apple", "macmon", Status::ok);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("macmon 0.8.1"), std::string::npos);
  m.options.probe_settings.set("apple", "macmon", m.tree().path("no/macmon"));
  r = m.run();
  const auto* missing = find(r, "apple", "macmon", Status::blocker);
  ASSERT_NE(missing, nullptr) << dump(r);
  EXPECT_NE(missing->fix.find("brew install macmon"), std::string::npos);
}

}  // namespace
}  // namespace gpustream
