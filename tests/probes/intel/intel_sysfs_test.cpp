// IntelGpuProbe on generated sysfs trees: discovery, i915 vs xe layouts, hwmon by name, energy
// and power, integrated parts without hwmon.
#include <gtest/gtest.h>
#include <filesystem>

#include "gpustream/probes/intel_probe.hpp"
#include "intel_trees.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::IntelTree;

using IntelSysfsTest = test::IntelProbeTest;

TEST_F(IntelSysfsTest, CardAndRenderNodeAreOneDeviceByPciBusIdAndForeignCardsAreIgnored) {
  t_.i915_integrated();
  t_.xe_discrete_two_tiles();
  t_.pci_device("0000:0a:00.0", "amdgpu", 5, 133, 0x1002, 0x73bf);   // not Intel
  t_.pci_device("0000:0b:00.0", "vfio-pci", 6, -1, 0x8086, 0x56a0);  // Intel, foreign driver
  t_.pci_device("0000:0c:00.0", "xe", -1, 140, 0x8086, 0xe20b);      // render node only

  const auto cards = intel::discover_cards(t_.sys());
  ASSERT_EQ(cards.size(), 3u);
  EXPECT_EQ(cards[0].pci_bus_id, "0000:00:02.0");
  EXPECT_EQ(cards[0].card, "card0");
  EXPECT_EQ(cards[0].render, "renderD128");
  EXPECT_FALSE(cards[0].discrete);
  EXPECT_EQ(cards[1].pci_bus_id, "0000:04:00.0");
  EXPECT_EQ(cards[1].driver, "xe");
  EXPECT_TRUE(cards[1].discrete);
  EXPECT_EQ(cards[2].card, "");
  EXPECT_EQ(cards[2].render, "renderD140");

  auto probe = make_probe();
  const auto d = harness_.detect(*probe);
  ASSERT_TRUE(d.available) << d.reason;
  ASSERT_EQ(d.devices.size(), 3u);
  EXPECT_EQ(d.devices[1].id, "0000:04:00.0");
  EXPECT_EQ(d.devices[1].vendor, Vendor::intel);
}

TEST_F(IntelSysfsTest, NoIntelCardIsUnavailableWithAReason) {
  t_.pci_device("0000:0a:00.0", "amdgpu", 0, 128, 0x1002, 0x73bf);
  auto probe = make_probe();
  const auto d = harness_.detect(*probe);
  EXPECT_FALSE(d.available);
  EXPECT_NE(d.reason.find("no Intel GPU (i915/xe)"), std::string::npos) << d.reason;
  const auto snap = sample(*probe);
  EXPECT_TRUE(snap.devices.empty());
}

TEST_F(IntelSysfsTest, I915IntegratedHasClockAndNoHwmonMetrics) {
  t_.i915_integrated();
  auto probe = make_probe();
  const auto snap = sample(*probe);
  const auto& d = dev(snap, "0000:00:02.0");
  EXPECT_EQ(d.attributes.at("driver"), "i915");
  EXPECT_EQ(d.attributes.at("form_factor"), "integrated");
  EXPECT_EQ(d.attributes.at("metrics_source"), "sysfs");
  EXPECT_EQ(d.metrics[Metric::clock_graphics_mhz], Reading::of(1300, Source::sysfs));
  for (auto m : {Metric::energy_joules, Metric::power_watts, Metric::power_limit_watts,
                 Metric::temperature_celsius, Metric::fan_rpm, Metric::memory_total_bytes,
                 Metric::memory_used_bytes}) {
    EXPECT_FALSE(d.metrics[m].has_value()) << to_string(m);
    EXPECT_EQ(d.metrics[m].reason(), Absence::unsupported) << to_string(m);
  }
  EXPECT_FALSE(d.energy_kind.has_value());
  EXPECT_EQ(d.power_state, PowerState::active);
}

TEST_F(IntelSysfsTest, I915DiscreteReadsTheHwmonNamedI915AndDerivesPowerFromEnergy) {
  const auto hw = t_.i915_discrete(1'000'000);
  auto probe = make_probe();
  auto snap = sample(*probe);
  {
    const auto& d = dev(snap, "0000:03:00.0");
    EXPECT_EQ(d.attributes.at("form_factor"), "discrete");
    EXPECT_EQ(d.metrics[Metric::energy_joules], Reading::of(1.0, Source::sysfs));  // not i915_gt0
    EXPECT_EQ(d.energy_kind, EnergyKind::counter);
    EXPECT_EQ(d.metrics[Metric::power_watts].reason(), Absence::not_yet_seeded);
    EXPECT_EQ(d.metrics[Metric::power_limit_watts], Reading::of(225.0, Source::sysfs));
    EXPECT_EQ(d.metrics[Metric::temperature_celsius], Reading::of(54.0, Source::sysfs));
    EXPECT_EQ(d.metrics[Metric::fan_rpm], Reading::of(1200, Source::sysfs));
    EXPECT_EQ(d.metrics[Metric::clock_graphics_mhz], Reading::of(2000, Source::sysfs));  // gt0
    EXPECT_EQ(d.attributes.at("gt1_act_freq_mhz"), "1000");
    EXPECT_EQ(d.metrics[Metric::memory_total_bytes].reason(), Absence::unsupported);
  }
  // 50 J over 0.5 s = 100 W.
  t_.tree().file(hw + "/energy1_input", "51000000\n");
  now_ns_ += 500'000'000;
  snap = sample(*probe);
  const auto& d = dev(snap, "0000:03:00.0");
  ASSERT_TRUE(d.metrics[Metric::power_watts].has_value());
  EXPECT_DOUBLE_EQ(d.metrics[Metric::power_watts].value(), 100.0);
  EXPECT_DOUBLE_EQ(d.metrics[Metric::energy_joules].value(), 51.0);
}

TEST_F(IntelSysfsTest, EnergyCounterDropSeedsAgainInsteadOfANegativePower) {
  const auto hw = t_.i915_discrete(9'000'000);
  auto probe = make_probe();
  sample(*probe);
  t_.tree().file(hw + "/energy1_input", "1000\n");
  now_ns_ += 1'000'000'000;
  auto snap = sample(*probe);
  EXPECT_EQ(dev(snap, "0000:03:00.0").metrics[Metric::power_watts].reason(),
            Absence::not_yet_seeded);
  t_.tree().file(hw + "/energy1_input", "2001000\n");
  now_ns_ += 1'000'000'000;
  snap = sample(*probe);
  EXPECT_DOUBLE_EQ(dev(snap, "0000:03:00.0").metrics[Metric::power_watts].value(), 2.0);
}

TEST_F(IntelSysfsTest, XeDiscreteTwoTilesUsesPackageEnergySumsVramAndPicksThePkgSensor) {
  const auto hw = t_.xe_discrete_two_tiles(5'000'000);
  auto probe = make_probe();
  auto snap = sample(*probe);
  {
    const auto& d = dev(snap, "0000:04:00.0");
    EXPECT_EQ(d.metrics[Metric::energy_joules], Reading::of(5.0, Source::sysfs));
    EXPECT_EQ(d.attributes.at("energy_counter"), "energy2_input");
    EXPECT_EQ(d.metrics[Metric::memory_total_bytes], Reading::of(17179869184.0, Source::sysfs));
    EXPECT_EQ(d.metrics[Metric::memory_used_bytes], Reading::of(3221225472.0, Source::sysfs));
    EXPECT_EQ(d.metrics[Metric::temperature_celsius], Reading::of(61.0, Source::sysfs));
    EXPECT_EQ(d.attributes.at("temperature_vram_celsius"), "70.0");
    EXPECT_EQ(d.metrics[Metric::power_limit_watts], Reading::of(300.0, Source::sysfs));
    EXPECT_EQ(d.metrics[Metric::clock_graphics_mhz], Reading::of(1600, Source::sysfs));
    EXPECT_EQ(d.attributes.at("tile1_gt1_act_freq_mhz"), "1500");
    EXPECT_EQ(d.metrics[Metric::fan_rpm].reason(), Absence::unsupported);
  }
  t_.tree().file(hw + "/energy2_input", "35000000\n");
  now_ns_ += 2'000'000'000;
  snap = sample(*probe);
  EXPECT_DOUBLE_EQ(dev(snap, "0000:04:00.0").metrics[Metric::power_watts].value(), 15.0);
}

TEST_F(IntelSysfsTest, XeVramWithATileMissingItsUsedFileIsAbsentNotAPartialSum) {
  t_.xe_discrete_two_tiles();
  std::filesystem::remove(
      t_.tree().path("sys/devices/pci0000:00/0000:04:00.0/tile1/vram0/used_bytes"));
  auto probe = make_probe();
  const auto snap = sample(*probe);
  const auto& d = dev(snap, "0000:04:00.0");
  EXPECT_EQ(d.metrics[Metric::memory_total_bytes], Reading::of(17179869184.0, Source::sysfs));
  EXPECT_FALSE(d.metrics[Metric::memory_used_bytes].has_value());
  EXPECT_EQ(d.metrics[Metric::memory_used_bytes].reason(), Absence::unsupported);
}

TEST_F(IntelSysfsTest, XeIntegratedWithoutHwmonReportsClockOnly) {
  t_.xe_integrated();
  auto probe = make_probe();
  const auto snap = sample(*probe);
  const auto& d = dev(snap, "0000:00:02.0");
  EXPECT_EQ(d.attributes.at("driver"), "xe");
  EXPECT_EQ(d.metrics[Metric::clock_graphics_mhz], Reading::of(1950, Source::sysfs));
  EXPECT_EQ(d.metrics[Metric::energy_joules].reason(), Absence::unsupported);
  EXPECT_EQ(d.metrics[Metric::temperature_celsius].reason(), Absence::unsupported);
  EXPECT_EQ(d.metrics[Metric::memory_total_bytes].reason(), Absence::unsupported);
}

TEST_F(IntelSysfsTest, RegistryBuildsTheProbeFromConfig) {
  Config c;
  c.paths.sysfs_root = t_.sys();
  c.probe_settings["intel"] = ProbeSettings::Section{{"level_zero_library", ""}};
  auto p = make_intel_probe_from_config(c, harness_.executors());
  EXPECT_EQ(p->name(), "intel");
  c.probe_settings["intel"] = ProbeSettings::Section{{"level_zero_library", 3}};
  EXPECT_THROW(make_intel_probe_from_config(c, harness_.executors()), std::invalid_argument);
}

}  // namespace
}  // namespace gpustream
