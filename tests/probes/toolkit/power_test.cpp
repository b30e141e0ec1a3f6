// power::settle — the one rule for power_watts (gpustream/probes/power.hpp).
#include <gtest/gtest.h>

#include "gpustream/probes/power.hpp"

namespace gpustream {
namespace {

TEST(PowerSettle, AverageOnlyBecomesPowerWattsAndSaysSo) {
  DeviceSample d;
  d.metrics.set_absent(Metric::power_watts, Absence::unsupported, Source::sysfs);
  d.metrics.set(Metric::power_average_watts, 87.0, Source::rocm_smi);
  power::settle(d);
  EXPECT_EQ(d.metrics[Metric::power_watts], Reading::of(87.0, Source::rocm_smi));
  EXPECT_EQ(d.metrics[Metric::power_average_watts], Reading::of(87.0, Source::rocm_smi));
  EXPECT_EQ(d.power_kind, PowerKind::average);
}

TEST(PowerSettle, InstantaneousValueIsKept) {
  DeviceSample d;
  d.metrics.set(Metric::power_watts, 91.5, Source::sysfs);
  d.metrics.set(Metric::power_average_watts, 87.0, Source::sysfs);
  d.power_kind = PowerKind::instant;
  power::settle(d);
  EXPECT_EQ(d.metrics[Metric::power_watts].value(), 91.5);
  EXPECT_EQ(d.power_kind, PowerKind::instant);
}

TEST(PowerSettle, NoFigureKeepsTheAbsenceReason) {
  DeviceSample d;
  d.metrics.set_absent(Metric::power_watts, Absence::no_permission, Source::sysfs);
  d.metrics.set_absent(Metric::power_average_watts, Absence::unsupported, Source::sysfs);
  power::settle(d);
  EXPECT_EQ(d.metrics[Metric::power_watts],
            Reading::missing(Absence::no_permission, Source::sysfs));
  EXPECT_FALSE(d.power_kind);
}

}  // namespace
}  // namespace gpustream
