// Reading: a value with its source, or an absence with its reason. Reading an absent value is
// checked in every build (not only with _GLIBCXX_ASSERTIONS): it throws, never yields 0.
#include <limits>

#include <gtest/gtest.h>

#include "gpustream/model.hpp"

namespace gpustream {
namespace {

TEST(Reading, ValueOfAnAbsentMetricThrowsWithTheReason) {
  const auto r = Reading::missing(Absence::no_permission, Source::nvml);
  try {
    (void)r.value();
    FAIL() << "value() of an absent reading returned";
  } catch (const BadReadingAccess& e) {
    EXPECT_EQ(e.reason(), Absence::no_permission);
    EXPECT_EQ(e.source(), Source::nvml);
    EXPECT_STREQ(e.what(), "gpustream: metric absent (no_permission, source nvml)");
  }
}

TEST(Reading, ADefaultReadingIsNotCollectedAndThrows) {
  const Reading r;
  EXPECT_FALSE(r);
  EXPECT_THROW((void)r.value(), BadReadingAccess);
  MetricSet m;
  EXPECT_THROW((void)m[Metric::power_watts].value(), std::logic_error);
}

TEST(Reading, ValueOrGivesTheFallbackOnlyWhenAbsent) {
  EXPECT_EQ(Reading::missing(Absence::unsupported).value_or(-1.0), -1.0);
  EXPECT_EQ(Reading::of(0.0, Source::sysfs).value_or(-1.0), 0.0) << "a real 0 stays 0";
  EXPECT_EQ(Reading::of(42.5, Source::sysfs).value_or(-1.0), 42.5);
}

TEST(Reading, PresentValueAndSource) {
  const auto r = Reading::of(3.0, Source::amd_smi);
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value(), 3.0);
  EXPECT_EQ(r.get(), 3.0);
  EXPECT_EQ(r.source(), Source::amd_smi);
}

TEST(Reading, EqualityComparesPresenceTheValueWhenPresentSourceAndReason) {
  EXPECT_EQ(Reading::of(1.5, Source::nvml), Reading::of(1.5, Source::nvml));
  EXPECT_NE(Reading::of(1.5, Source::nvml), Reading::of(2.5, Source::nvml));
  EXPECT_NE(Reading::of(1.5, Source::nvml), Reading::of(1.5, Source::sysfs));
  EXPECT_EQ(Reading::missing(Absence::unsupported, Source::nvml),
            Reading::missing(Absence::unsupported, Source::nvml));
  EXPECT_NE(Reading::missing(Absence::unsupported), Reading::missing(Absence::no_permission));
  EXPECT_NE(Reading::missing(Absence::unsupported, Source::nvml),
            Reading::missing(Absence::unsupported, Source::sysfs));
  // A present 0 is not an absence, whatever the absent one's (unused) value.
  EXPECT_NE(Reading::of(0.0, Source::none), Reading::missing(Absence::not_collected));
  EXPECT_EQ(Reading(), Reading::missing(Absence::not_collected));
  // An overwritten reading compares by what it is now.
  Reading r = Reading::of(7.0, Source::nvml);
  r = Reading::missing(Absence::lost, Source::nvml);
  EXPECT_EQ(r, Reading::missing(Absence::lost, Source::nvml));
  EXPECT_FALSE(r.get());
  // NaN != NaN, as std::optional<double>'s comparison had it.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(Reading::of(nan, Source::nvml), Reading::of(nan, Source::nvml));
}

TEST(Reading, IsSixteenBytesAndAMetricSetIsItsTable) {
  EXPECT_EQ(sizeof(Reading), 16U);
  EXPECT_EQ(sizeof(MetricSet), kMetricCount * 16U);
}

}  // namespace
}  // namespace gpustream
