// `gpustream doctor` for the intel probe (probes/intel/intel_doctor.cpp) with the fake Level Zero
// loaders.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>

#include "doctor_machine.hpp"
#include "gpustream/dynamic_library.hpp"
#include "gpustream/probes/doctor.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream_fake_level_zero_paths.hpp"

namespace gpustream {
namespace {

using namespace doctor_test;  // NOLINT(google-build-using-namespace)

/// A fake Level Zero loader opened by the test to set its scenario; the doctor's dlopen of the
/// same path shares this instance.
class FakeZe {
 public:
  FakeZe(const char* path, const std::string& scenario) : lib_(DynamicLibrary::load(path)) {
    lib_.required<void(const char*)>("fake_ze_configure")(scenario.c_str());
  }

 private:
  DynamicLibrary lib_;
};

constexpr const char* kZeScenario = "devices=1\nd0.bus=0000:03:00.0\nd0.engines=compute\n";

TEST(Doctor, LevelZeroLoaderVersionAndDevices) {
  FakeZe ze(fakes::kFakeLevelZero, kZeScenario);
  Machine m;
  m.options.probes = {"intel"};
  m.gpu("0000:03:00.0", "i915", 0);
  m.options.probe_settings.set("intel", "level_zero_library", fakes::kFakeLevelZero);
  auto r = m.run();
  const auto* f = find(r, "intel", "level_zero", Status::ok);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("zesInit"), std::string::npos) << f->detail;
  EXPECT_NE(f->detail.find("API 1.17"), std::string::npos) << f->detail;
  EXPECT_NE(f->detail.find("1 Level Zero device(s)"), std::string::npos) << f->detail;

  m.options.probe_settings.set("intel", "level_zero_library",
                               m.tree().path("no/libze_loader.so.1"));
  r = m.run();
  const auto* missing = find(r, "intel", "level_zero", Status::info);
  ASSERT_NE(missing, nullptr) << dump(r);
  EXPECT_NE(missing->detail.find("cannot load"), std::string::npos);
  EXPECT_NE(missing->fix.find("libze1"), std::string::npos);
  EXPECT_TRUE(r.fully_readable()) << dump(r);
}

// The row asks a program to set ZES_ENABLE_SYSMAN=1 before threads start (the `gpustream`
// command does, through set_probe_environment), and doctor reports it as the program started.
TEST(Doctor, IntelRowDeclaresZesEnableSysman) {
  const auto* row = find_probe_row("intel");
  ASSERT_NE(row, nullptr);
  ASSERT_EQ(row->environment.size(), 1u);
  EXPECT_EQ(row->environment.front().name, "ZES_ENABLE_SYSMAN");
  EXPECT_EQ(row->environment.front().value, "1");
  const char* before = std::getenv("ZES_ENABLE_SYSMAN");
  const std::optional<std::string> saved =
      before ? std::optional<std::string>(before) : std::nullopt;
  ::setenv("ZES_ENABLE_SYSMAN", "0", 1);
  const auto env = doctor::environment_snapshot();
  ASSERT_TRUE(env.contains("ZES_ENABLE_SYSMAN"));
  EXPECT_EQ(env.at("ZES_ENABLE_SYSMAN"), "0");
  if (saved)
    ::setenv("ZES_ENABLE_SYSMAN", saved->c_str(), 1);
  else
    ::unsetenv("ZES_ENABLE_SYSMAN");
}

TEST(Doctor, LegacyLevelZeroLoaderNeedsZesEnableSysman) {
  ::unsetenv("ZES_ENABLE_SYSMAN");
  FakeZe legacy(fakes::kFakeLevelZeroLegacy, kZeScenario);
  FakeZe current(fakes::kFakeLevelZero, kZeScenario);
  Machine m;
  m.options.probes = {"intel"};
  m.gpu("0000:03:00.0", "i915", 0);
  m.options.probe_settings.set("intel", "level_zero_library", fakes::kFakeLevelZeroLegacy);
  auto r = m.run();
  const auto* f = find(r, "intel", "zes_enable_sysman", Status::warn);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_EQ(f->fix, "export ZES_ENABLE_SYSMAN=1");

  m.env["ZES_ENABLE_SYSMAN"] = "1";
  r = m.run();
  EXPECT_EQ(find(r, "intel", "zes_enable_sysman", Status::warn), nullptr) << dump(r);
  EXPECT_NE(find(r, "intel", "zes_enable_sysman", Status::ok), nullptr);

  Machine no_gpu;  // without an Intel GPU it is only information
  no_gpu.options.probes = {"intel"};
  no_gpu.options.probe_settings.set("intel", "level_zero_library", fakes::kFakeLevelZeroLegacy);
  r = no_gpu.run();
  EXPECT_NE(find(r, "intel", "zes_enable_sysman", Status::info), nullptr) << dump(r);

  m.env.clear();
  m.options.probe_settings.set("intel", "level_zero_library",
                               fakes::kFakeLevelZero);  // has zesInit: no such need
  r = m.run();
  EXPECT_EQ(find(r, "intel", "zes_enable_sysman"), nullptr) << dump(r);
}

}  // namespace
}  // namespace gpustream
