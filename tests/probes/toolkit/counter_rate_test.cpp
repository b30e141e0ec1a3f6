// rate::CounterRate / rate::CounterRates (probes/toolkit/counter_rate.cpp): the one
// "cumulative counter -> rate" rule of every probe.
#include <gtest/gtest.h>

#include <string>

#include "gpustream/probes/counter_rate.hpp"

namespace gpustream {
namespace {

using rate::CounterRate;
using rate::CounterRates;

TEST(CounterRate, FirstReadingSeedsThenDeltaOverDeltaBase) {
  CounterRate c;
  EXPECT_FALSE(c.seeded());
  const auto first = c.update(1000, 10);
  EXPECT_FALSE(first.rate);
  EXPECT_FALSE(first.reset);
  EXPECT_TRUE(c.seeded());
  EXPECT_DOUBLE_EQ(c.update(1500, 20).rate.value(), 50.0);
  EXPECT_DOUBLE_EQ(c.update(1500, 30).rate.value(), 0.0);  // idle is 0, not absent
}

// A caller that scales the base itself (NVLink: bytes over ns, as bytes per second) gets the
// two deltas of the rate.
TEST(CounterRate, ARateCarriesItsTwoDeltas) {
  CounterRate c;
  const auto first = c.update(100, 1'000);
  EXPECT_EQ(first.delta, 0u);
  const auto step = c.update(8'388'708, 2'000'001'000);
  ASSERT_TRUE(step.rate);
  EXPECT_EQ(step.delta, 8'388'608u);
  EXPECT_EQ(step.base_delta, 2'000'000'000u);
}

TEST(CounterRate, ABackwardsCounterIsAResetThatSeedsAgain) {
  CounterRate c;
  c.update(9000, 1);
  const auto reset = c.update(100, 2);
  EXPECT_FALSE(reset.rate);  // never negative, never a spike
  EXPECT_TRUE(reset.reset);
  EXPECT_DOUBLE_EQ(c.update(400, 5).rate.value(), 100.0);  // from the new baseline
}

TEST(CounterRate, AKnownWidthWrapsInsteadOfResetting) {
  CounterRate c({.wrap_bits = 32});
  c.update(0xFFFFFF00u, 0);
  const auto wrapped = c.update(0x100, 0x200);
  EXPECT_FALSE(wrapped.reset);
  EXPECT_DOUBLE_EQ(wrapped.rate.value(), 1.0);  // 0x200 counts over 0x200 of base
  CounterRate full({.wrap_bits = 64});
  full.update(~std::uint64_t{0} - 9, 0);
  EXPECT_DOUBLE_EQ(full.update(10, 20).rate.value(), 1.0);
  CounterRate narrow({.wrap_bits = 8});
  narrow.update(1000, 0);  // larger than the width: not a wrap, a reset
  EXPECT_TRUE(narrow.update(5, 1).reset);
}

TEST(CounterRate, ABaseThatDoesNotAdvanceGivesNoRateAndKeepsTheBaseline) {
  CounterRate c;
  c.update(100, 10);
  EXPECT_FALSE(c.update(200, 10).rate);
  EXPECT_DOUBLE_EQ(c.update(300, 20).rate.value(), 20.0);  // (300-100)/(20-10)
  EXPECT_FALSE(c.update(400, 5).rate);                     // the base restarted: new baseline
  EXPECT_DOUBLE_EQ(c.update(500, 6).rate.value(), 100.0);
  c.clear();
  EXPECT_FALSE(c.update(600, 7).rate);
}

TEST(CounterRates, VanishedKeysAreForgottenAfterARoundAndComeBackSeeding) {
  CounterRates<std::string> r;
  r.begin();
  r.update("a", 0, 0);
  r.update("b", 0, 0);
  EXPECT_EQ(r.tracked(), 2u);
  r.begin();
  EXPECT_DOUBLE_EQ(r.update("a", 10, 10).rate.value(), 1.0);  // b is gone this round
  EXPECT_EQ(r.tracked(), 1u);
  r.begin();
  EXPECT_TRUE(r.update("a", 20, 20).rate);
  EXPECT_FALSE(r.update("b", 500, 20).rate);  // not compared with two rounds ago
}

TEST(CounterRates, TwoReadingsOfOneKeyInARoundCompareWithTheSameEarlierOne) {
  CounterRates<int> r;
  r.begin();
  r.update(1, 100, 0);
  r.begin();
  EXPECT_DOUBLE_EQ(r.update(1, 150, 10).rate.value(), 5.0);
  EXPECT_DOUBLE_EQ(r.update(1, 160, 10).rate.value(), 6.0);  // a second fd of the same client
  r.begin();
  EXPECT_DOUBLE_EQ(r.update(1, 260, 20).rate.value(), 10.0);  // the last reading is the baseline
}

}  // namespace
}  // namespace gpustream
