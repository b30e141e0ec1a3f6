// engine::BusyRates: per-client engine busy counters → percent of the engine between samples.
#include "gpustream/probes/engine_busy.hpp"

#include <gtest/gtest.h>

#include <string>

namespace gpustream {
namespace {

constexpr std::uint64_t kSecond = 1'000'000'000;

TEST(EngineBusyRates, FirstSightSeedsThenPercentOfTheBase) {
  engine::BusyRates<int> r;
  r.begin();
  EXPECT_FALSE(r.update(7, "gfx", 1'000, 1 * kSecond));
  r.begin();
  const auto pct = r.update(7, "gfx", 1'000 + kSecond / 4, 2 * kSecond);
  ASSERT_TRUE(pct);
  EXPECT_DOUBLE_EQ(*pct, 25.0);
}

TEST(EngineBusyRates, CapacityDividesAndEnginesAndClientsAreApart) {
  engine::BusyRates<std::string> r;
  r.begin();
  r.update("a", "rcs", 0, 0, 2.0);
  r.update("a", "vcs", 0, 0);
  r.update("b", "rcs", 0, 0, 2.0);
  r.begin();
  EXPECT_DOUBLE_EQ(*r.update("a", "rcs", 100, 100, 2.0), 50.0);  // two engines, one busy
  EXPECT_DOUBLE_EQ(*r.update("a", "vcs", 10, 100), 10.0);
  EXPECT_DOUBLE_EQ(*r.update("b", "rcs", 200, 100, 2.0), 100.0);  // not clamped here
}

TEST(EngineBusyRates, BackwardsReseedsAndAbsentKeysAreForgotten) {
  engine::BusyRates<int> r;
  r.begin();
  r.update(1, "gfx", 500, 100);
  r.update(2, "gfx", 0, 100);
  r.begin();
  EXPECT_FALSE(r.update(1, "gfx", 100, 200));  // went back (a reused pid): seeds again
  r.begin();                                   // client 2 was not seen in the last sample
  EXPECT_DOUBLE_EQ(*r.update(1, "gfx", 150, 300), 50.0);
  EXPECT_FALSE(r.update(2, "gfx", 50, 300));  // forgotten: seeds
}

}  // namespace
}  // namespace gpustream
