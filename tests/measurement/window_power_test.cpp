// PowerTrace (the SDK's private integrator behind a window's power energy and coverage): edge
// cuts, the measured update period, and its bounds under the worst input (readings that never
// reveal a period, and a very long window).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "gpustream/detail/window_power.hpp"

namespace gpustream::detail {
namespace {

constexpr std::int64_t kMs = 1'000'000;

TEST(IntervalMedian, MedianOfTheFirstIntervalsOnly) {
  IntervalMedian m;
  EXPECT_FALSE(m.median(1));
  for (std::int64_t v : {30, 10, 20}) m.add(v);
  EXPECT_EQ(m.median(2), 20);
  m.add(40);
  EXPECT_EQ(m.median(2), 25);  // even count: between the two middle ones
  EXPECT_FALSE(m.median(5));
  m.add(0);  // not an interval
  m.add(-3);
  EXPECT_EQ(m.count(), 4u);
  for (std::size_t i = 0; i < 1000; ++i) m.add(1'000'000);
  EXPECT_EQ(m.count(), kPeriodIntervals);  // bounded: later intervals are not kept
  EXPECT_TRUE(m.full());
}

TEST(ChangePeriod, NeedsARepeatAndThreeChanges) {
  ChangePeriod c;
  EXPECT_EQ(c.reason(), "fewer than two readings");
  c.add(0, 1);
  c.add(10, 2);
  c.add(20, 3);
  c.add(30, 4);
  EXPECT_FALSE(c.period());
  EXPECT_NE(c.reason().find("changed at every reading"), std::string::npos);
  c.add(40, 4);  // a repeat: read faster than it changes
  EXPECT_EQ(c.period(), 10);
  EXPECT_EQ(c.changes(), 3u);
}

TEST(PowerTrace, CutsAtTheEdgesInterpolatingOrHolding) {
  PowerTrace t;
  t.set_begin(50 * kMs, true);
  EXPECT_TRUE(t.add(0, 0, false));                   // before the edge: used to interpolate at it
  EXPECT_TRUE(t.add(100 * kMs, 100, false));         // 50 W at the edge: (50 + 100) / 2 * 0.05 s
  EXPECT_FALSE(t.add(100 * kMs, 999, false));        // not later: ignored
  const auto r = t.finish(150 * kMs, std::nullopt);  // held: 100 W * 0.05 s
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->joules, 3.75 + 5, 1e-12);
  EXPECT_NEAR(r->begin_joules, 3.75, 1e-12);
  EXPECT_NEAR(r->end_joules, 5, 1e-12);
  EXPECT_EQ(r->begin, TraceEdge::interpolated);
  EXPECT_EQ(r->end, TraceEdge::held);
  EXPECT_EQ(r->readings, 1u);
  EXPECT_EQ(r->inner_readings, 1u);
  EXPECT_EQ(r->largest_gap_ns, 100 * kMs);
  // Interpolated towards a reading after the end instead: 100 W -> 200 W at 200 ms.
  const auto i = t.finish(150 * kMs, std::pair{200 * kMs, 200.0});
  ASSERT_TRUE(i);
  EXPECT_EQ(i->end, TraceEdge::interpolated);
  EXPECT_NEAR(i->end_joules, (100 + 150) / 2.0 * 0.05, 1e-12);
  // No reading at or after the begin edge: nothing to integrate.
  PowerTrace empty;
  empty.set_begin(50 * kMs, true);
  empty.add(10 * kMs, 100, false);
  EXPECT_FALSE(empty.finish(100 * kMs, std::nullopt));
}

TEST(PowerTrace, WorstInputNeverRevealsAPeriodAndStaysBounded) {
  // 100,000 periodic readings, each a new value, no driver samples: the period is never
  // known, and the instants held for the coverage never exceed kPendingInstants.
  PowerTrace t;
  t.set_begin(0, false);
  std::size_t most = 0;
  for (std::int64_t i = 0; i < 100'000; ++i) {
    t.add(i * kMs, static_cast<double>(i % 1000), false);
    most = std::max(most, t.held_instants());
  }
  EXPECT_LE(most, kPendingInstants);
  EXPECT_EQ(t.held_instants(), 0u);  // given up once full: the period was unknown
  const auto r = t.finish(99'999 * kMs, std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->readings, 100'000u);
  EXPECT_FALSE(r->period_ns);
  EXPECT_FALSE(r->coverage);
  EXPECT_FALSE(r->period_reason.empty());
}

TEST(PowerTrace, APeriodFoundTooLateLeavesTheCoverageUnknownWithAReason) {
  PowerTrace t;
  t.set_begin(0, false);
  std::int64_t i = 0;
  for (; i < 2000; ++i) t.add(i * kMs, static_cast<double>(i), false);       // changes every time
  for (; i < 2100; ++i) t.add(i * kMs, static_cast<double>(i / 10), false);  // then steps
  const auto r = t.finish((i - 1) * kMs, std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->period_ns);
  EXPECT_FALSE(r->coverage);
  EXPECT_NE(r->coverage_reason.find("1024"), std::string::npos) << r->coverage_reason;
}

TEST(PowerTrace, DriverSamplesFixThePeriodEarlyAndTheCoverageStreams) {
  // A long window of 20 ms driver samples: the period is fixed after kPeriodIntervals of them,
  // then nothing more is held.
  PowerTrace t;
  t.set_begin(0, true);
  for (std::int64_t i = 0; i <= 100'000; ++i) {
    t.add(i * 20 * kMs, 100, true);
    if (i > static_cast<std::int64_t>(kPeriodIntervals)) {
      ASSERT_EQ(t.held_instants(), 0u);
    }
  }
  const auto r = t.finish(100'000 * 20 * kMs, std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->period_ns, 20 * kMs);
  ASSERT_TRUE(r->coverage);
  EXPECT_DOUBLE_EQ(*r->coverage, 1.0);
  EXPECT_EQ(r->driver_samples, 100'001u);
  EXPECT_NEAR(r->joules, 100 * 2000.0, 1e-6);
}

}  // namespace
}  // namespace gpustream::detail
