// The Level Zero augment of IntelGpuProbe against the fake loader (tests/fakes/level_zero), and
// against the real Debian libze1 loader on this GPU-less machine.
#include <gtest/gtest.h>

#include <cstdlib>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/probes/intel_probe.hpp"
#include "gpustream_fake_level_zero_paths.hpp"
#include "intel_trees.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::IntelTree;

constexpr const char* kXeBus = "0000:04:00.0";
constexpr const char* kIgpuBus = "0000:00:02.0";

/// The fake loader, opened by the test so that its scenario can be set; the probe's dlopen of
/// the same path shares this instance.
class FakeLoader {
 public:
  explicit FakeLoader(const char* path) : lib_(DynamicLibrary::load(path)) {
    configure_ = lib_.required<void(const char*)>("fake_ze_configure");
    set_tick_ = lib_.required<void(int)>("fake_ze_set_tick");
    init_calls_ = lib_.required<int()>("fake_ze_init_calls");
  }
  void configure(const std::string& text) { configure_(text.c_str()); }
  void tick(int t) { set_tick_(t); }
  int init_calls() { return init_calls_(); }

 private:
  DynamicLibrary lib_;
  void (*configure_)(const char*) = nullptr;
  void (*set_tick_)(int) = nullptr;
  int (*init_calls_)() = nullptr;
};

class IntelLevelZeroTest : public test::IntelProbeTest {
 protected:
  IntelLevelZeroTest() {
    now_ns_ = 0;
    clock_step_ns_ = 1'000'000'000;  // every reading is one second later
  }
  static const EngineSample* engine(const DeviceSample& d, const std::string& n) {
    for (const auto& e : d.engines)
      if (e.name == n) return &e;
    return nullptr;
  }
};

TEST_F(IntelLevelZeroTest, AddsComputeEngineAndMemoryWhileSysfsStaysInCharge) {
  t_.xe_discrete_two_tiles();
  t_.i915_discrete();  // 0000:03:00.0: no VRAM files in sysfs
  FakeLoader fake(fakes::kFakeLevelZero);
  fake.configure(
      "devices=2\n"
      "d0.bus=0000:04:00.0\nd0.engines=compute,render,single\n"
      "d0.active.compute=0,500000\nd0.active.render=0,250000\n"
      "d0.temp=99\nd0.freq=2222\nd0.mem_total=1000\nd0.mem_free=1\n"
      "d1.bus=0000:03:00.0\nd1.mem_total=17179869184\nd1.mem_free=4294967296\nd1.temp=40\n");
  auto probe = make_probe(fakes::kFakeLevelZero);
  const auto det = harness_.detect(*probe);
  ASSERT_TRUE(det.available);
  EXPECT_EQ(probe->level_zero_status(), "2 Level Zero device(s)");

  auto snap = sample(*probe);
  {
    const auto& d = dev(snap, kXeBus);
    EXPECT_EQ(d.attributes.at("metrics_source"), "sysfs+level-zero");
    ASSERT_NE(engine(d, "compute"), nullptr);
    EXPECT_EQ(engine(d, "compute")->utilization_percent.reason(), Absence::not_yet_seeded);
    EXPECT_EQ(engine(d, "single"), nullptr);  // per-engine groups are not reported
    // sysfs values win over Level Zero's.
    EXPECT_EQ(d.metrics[Metric::temperature_celsius], Reading::of(61.0, Source::sysfs));
    EXPECT_EQ(d.metrics[Metric::clock_graphics_mhz], Reading::of(1600, Source::sysfs));
    EXPECT_EQ(d.metrics[Metric::memory_total_bytes].source(), Source::sysfs);
    const auto& i = dev(snap, "0000:03:00.0");
    EXPECT_EQ(i.metrics[Metric::memory_total_bytes],
              Reading::of(17179869184.0, Source::level_zero));
    EXPECT_EQ(i.metrics[Metric::memory_used_bytes], Reading::of(12884901888.0, Source::level_zero));
    EXPECT_EQ(i.metrics[Metric::temperature_celsius].source(), Source::sysfs);
  }
  fake.tick(1);
  snap = sample(*probe);
  const auto& d = dev(snap, kXeBus);
  EXPECT_EQ(engine(d, "compute")->utilization_percent, Reading::of(50.0, Source::level_zero));
  EXPECT_EQ(engine(d, "render")->utilization_percent, Reading::of(25.0, Source::level_zero));
  EXPECT_EQ(fake.init_calls(), 1);  // persistent session: one init
}

TEST_F(IntelLevelZeroTest, EnergyCounterResetIsNeverASpike) {
  t_.xe_integrated();  // no hwmon: energy comes from Level Zero
  FakeLoader fake(fakes::kFakeLevelZero);
  fake.configure("devices=1\nd0.bus=0000:00:02.0\nd0.energy=1000000,3000000,500000,1500000\n");
  auto probe = make_probe(fakes::kFakeLevelZero);
  std::vector<Reading> power, energy;
  for (int tick = 0; tick < 4; ++tick) {
    fake.tick(tick);
    const auto snap = sample(*probe);
    const auto& d = dev(snap, kIgpuBus);
    power.push_back(d.metrics[Metric::power_watts]);
    energy.push_back(d.metrics[Metric::energy_joules]);
    EXPECT_EQ(d.energy_kind, EnergyKind::counter);
  }
  EXPECT_EQ(power[0].reason(), Absence::not_yet_seeded);
  EXPECT_EQ(power[1], Reading::of(2.0, Source::level_zero));
  EXPECT_EQ(power[2].reason(), Absence::not_yet_seeded);  // the reset
  EXPECT_EQ(power[3], Reading::of(1.0, Source::level_zero));
  EXPECT_DOUBLE_EQ(energy[0].value(), 1.0);
  EXPECT_DOUBLE_EQ(energy[1].value(), 3.0);
  EXPECT_DOUBLE_EQ(energy[2].value(), 3.5);  // monotonic across the reset
  EXPECT_DOUBLE_EQ(energy[3].value(), 4.5);
  EXPECT_EQ(energy[3].source(), Source::level_zero);
}

TEST_F(IntelLevelZeroTest, EngineActivityWithoutPermissionIsAbsentNoPermission) {
  t_.xe_integrated();
  FakeLoader fake(fakes::kFakeLevelZero);
  fake.configure(
      "devices=1\nd0.bus=0000:00:02.0\nd0.engines=compute,media\n"
      "d0.engine_result=0x70010000\n");
  auto probe = make_probe(fakes::kFakeLevelZero);
  for (int i = 0; i < 2; ++i) {
    const auto snap = sample(*probe);
    const auto& d = dev(snap, kIgpuBus);
    ASSERT_NE(engine(d, "compute"), nullptr);
    EXPECT_EQ(engine(d, "compute")->utilization_percent.reason(), Absence::no_permission);
    EXPECT_EQ(engine(d, "media")->utilization_percent.source(), Source::level_zero);
    EXPECT_EQ(d.metrics[Metric::clock_graphics_mhz].source(), Source::sysfs);
  }
}

TEST_F(IntelLevelZeroTest, InitFailureMeansNoLevelZeroDevicesAndSysfsOnly) {
  t_.xe_integrated();
  FakeLoader fake(fakes::kFakeLevelZero);
  fake.configure("init=0x78000001\ndevices=1\nd0.bus=0000:00:02.0\nd0.temp=50\n");
  auto probe = make_probe(fakes::kFakeLevelZero);
  harness_.detect(*probe);
  EXPECT_NE(probe->level_zero_status().find("no Level Zero devices"), std::string::npos)
      << probe->level_zero_status();
  for (int i = 0; i < 3; ++i) {
    const auto snap = sample(*probe);
    EXPECT_TRUE(snap.errors.empty());
    EXPECT_EQ(dev(snap, kIgpuBus).attributes.at("metrics_source"), "sysfs");
  }
  EXPECT_LE(fake.init_calls(), 1);  // no retry every sample
}

TEST_F(IntelLevelZeroTest, LegacyLoaderWithoutZesInitNeedsSysmanInTheEnvironment) {
  t_.xe_integrated();
  FakeLoader fake(fakes::kFakeLevelZeroLegacy);
  fake.configure("devices=1\nd0.bus=0000:00:02.0\nd0.temp=47.5\n");
  ::unsetenv("ZES_ENABLE_SYSMAN");
  {
    auto probe = make_probe(fakes::kFakeLevelZeroLegacy);
    harness_.detect(*probe);
    EXPECT_NE(probe->level_zero_status().find("ZES_ENABLE_SYSMAN=1"), std::string::npos)
        << probe->level_zero_status();
    const auto snap = sample(*probe);
    EXPECT_EQ(dev(snap, kIgpuBus).attributes.at("metrics_source"), "sysfs");
  }
  // What an embedding program does before it starts threads (done here for the test only).
  ::setenv("ZES_ENABLE_SYSMAN", "1", 1);
  fake.configure("devices=1\nd0.bus=0000:00:02.0\nd0.temp=47.5\n");
  auto probe = make_probe(fakes::kFakeLevelZeroLegacy);
  harness_.detect(*probe);
  ::unsetenv("ZES_ENABLE_SYSMAN");
  EXPECT_NE(probe->level_zero_status().find("legacy loader"), std::string::npos);
  const auto snap = sample(*probe);
  const auto& d = dev(snap, kIgpuBus);
  EXPECT_EQ(d.attributes.at("metrics_source"), "sysfs+level-zero");
  EXPECT_EQ(d.metrics[Metric::temperature_celsius], Reading::of(47.5, Source::level_zero));
}

TEST_F(IntelLevelZeroTest, MissingLoaderIsSysfsOnly) {
  t_.xe_integrated();
  auto probe = make_probe("/nonexistent/libze_loader.so.1");
  ASSERT_TRUE(harness_.detect(*probe).available);
  EXPECT_EQ(probe->level_zero_status().rfind("not loaded: ", 0), 0u);
  const auto snap = sample(*probe);
  EXPECT_EQ(dev(snap, kIgpuBus).attributes.at("metrics_source"), "sysfs");
}

// The real Debian 12 libze1 loader (1.8.12) with no Level Zero driver on this machine: zeInit
// returns ZE_RESULT_ERROR_UNINITIALIZED. This must be installed (scripts/deps.sh): no skip.
TEST_F(IntelLevelZeroTest, RealDebianLoaderWithNoDriverSaysNoLevelZeroDevices) {
  std::string error;
  auto real = DynamicLibrary::open("libze_loader.so.1", &error);
  ASSERT_TRUE(real) << "the real Level Zero loader is required: apt-get install libze1 (" << error
                    << ")";
  auto probe = make_probe("libze_loader.so.1");
  const auto none = harness_.detect(*probe);
  EXPECT_FALSE(none.available);
  EXPECT_NE(none.reason.find("no Level Zero devices"), std::string::npos) << none.reason;

  t_.xe_integrated();
  const auto det = harness_.detect(*probe);
  ASSERT_TRUE(det.available);
  for (int i = 0; i < 2; ++i) {
    const auto snap = sample(*probe);
    EXPECT_TRUE(snap.errors.empty());
    EXPECT_EQ(dev(snap, kIgpuBus).attributes.at("metrics_source"), "sysfs");
  }
}

}  // namespace
}  // namespace gpustream
