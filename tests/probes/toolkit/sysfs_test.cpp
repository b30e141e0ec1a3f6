// sysfs:: helpers (probes/toolkit/sysfs.cpp) shared by the AMD and Intel probes, on generated
// sysfs trees.
#include <gtest/gtest.h>

#include "gpustream/probes/sysfs.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

using test::TempTree;

TEST(Sysfs, NumberedEntriesByNumberNotByName) {
  TempTree t;
  for (const char* n : {"card10", "card2", "card0", "cardX", "card", "renderD128", "card1-DP-1"})
    t.dir("drm/" + std::string(n));
  const auto cards = sysfs::numbered_entries(t.path("drm"), "card");
  ASSERT_EQ(cards.size(), 3u);
  EXPECT_EQ(cards[0].name, "card0");
  EXPECT_EQ(cards[1].name, "card2");
  EXPECT_EQ(cards[2].name, "card10");
  EXPECT_EQ(cards[2].number, 10u);
  EXPECT_TRUE(sysfs::numbered_entries(t.path("missing"), "card").empty());
}

TEST(Sysfs, PciBusIdFromUeventElseTheLinkInCanonicalForm) {
  TempTree t;
  t.file("a/uevent", "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:0A:00.0\n");
  EXPECT_EQ(sysfs::pci_bus_id_of(t.path("a")), "0000:0a:00.0");
  EXPECT_EQ(sysfs::driver_of(t.path("a")), "amdgpu");
  // No uevent: the device folder is a link named after the function, like /sys/class/drm/*.
  t.dir("devices/0000:03:00.0");
  t.dir("devices/i915drv");
  t.symlink("b", t.path("devices/0000:03:00.0"));
  t.symlink("devices/0000:03:00.0/driver", t.path("devices/i915drv"));
  EXPECT_EQ(sysfs::pci_bus_id_of(t.path("b")), "0000:03:00.0");
  EXPECT_EQ(sysfs::driver_of(t.path("b")), "i915drv");
  EXPECT_EQ(sysfs::pci_bus_id_of(t.path("nothing")), "");
  EXPECT_EQ(sysfs::driver_of(t.path("nothing")), "");
}

TEST(Sysfs, ReadMetricIsAValueOrAnAbsenceWithTheFilesReason) {
  TempTree t;
  MetricSet m;
  sysfs::read_metric(m, Metric::power_watts, t.file("p", "87000000\n"), 1e-6);
  EXPECT_EQ(m[Metric::power_watts], Reading::of(87.0, Source::sysfs));
  sysfs::read_metric(m, Metric::fan_rpm, t.path("none"), 1.0);
  EXPECT_EQ(m[Metric::fan_rpm], Reading::missing(Absence::unsupported, Source::sysfs));
  sysfs::read_metric(m, Metric::fan_rpm, t.file("bad", "n/a\n"), 1.0);
  EXPECT_EQ(m[Metric::fan_rpm].reason(), Absence::unsupported);
  const readers::ReadError denied{"x", std::make_error_code(std::errc::permission_denied), {}};
  const readers::ReadError eperm{"x", std::make_error_code(std::errc::operation_not_permitted), {}};
  EXPECT_EQ(sysfs::absence_of(denied), Absence::no_permission);
  EXPECT_EQ(sysfs::absence_of(eperm), Absence::no_permission);
}

TEST(Sysfs, TemperaturesPreferredLabelElseLowestAndAllAsAttributes) {
  TempTree t;
  t.file("hw/temp2_input", "61000\n");
  t.file("hw/temp2_label", "PKG\n");
  t.file("hw/temp3_input", "70500\n");
  t.file("hw/temp3_label", "vram\n");
  t.file("hw/temp16_input", "30000\n");  // the last examined
  t.file("hw/temp17_input", "99000\n");  // beyond kMaxTemperatureSensors
  t.file("hw/temp4_input", "garbage\n");
  const auto sensors = sysfs::read_temperatures(t.path("hw"));
  ASSERT_EQ(sensors.size(), 3u);
  EXPECT_EQ(sensors[0].label, "pkg");
  EXPECT_EQ(sensors[2].label, "temp16");
  DeviceSample d;
  sysfs::set_temperature(d, sensors, {"edge", "pkg"});
  EXPECT_EQ(d.metrics[Metric::temperature_celsius].value(), 61.0);
  EXPECT_EQ(d.attributes.at("temperature_vram_celsius"), "70.5");
  DeviceSample lowest;
  sysfs::set_temperature(lowest, sensors, {"edge"});
  EXPECT_EQ(lowest.metrics[Metric::temperature_celsius].value(), 61.0);  // temp2, the lowest
  DeviceSample none;
  sysfs::set_temperature(none, {}, {"edge"});
  EXPECT_EQ(none.metrics[Metric::temperature_celsius].reason(), Absence::unsupported);
  EXPECT_TRUE(none.attributes.empty());
}

}  // namespace
}  // namespace gpustream
