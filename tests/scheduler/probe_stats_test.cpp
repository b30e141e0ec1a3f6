// ProbeStats: the latency window and its percentiles, the JSON form, and the percentiles the
// Scheduler reports for latencies driven on the manual clock.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/probe_stats.hpp"
#include "scheduler/scheduler_fixture.hpp"

namespace gpustream::test {
namespace {

TEST(LatencyWindow, EmptyHasNoPercentilesNotZero) {
  LatencyWindow w;
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.percentile(50), std::nullopt);
  EXPECT_EQ(w.max(), std::nullopt);
  ProbeStats s;
  w.fill(s);
  EXPECT_EQ(s.latency_p50_ns, std::nullopt);
  EXPECT_EQ(s.latency_max_ns, std::nullopt);
  EXPECT_EQ(s.latency_window, 0u);
}

TEST(LatencyWindow, NearestRankPercentiles) {
  LatencyWindow w;
  for (int v = 100; v >= 1; --v) w.add(v);  // order must not matter
  EXPECT_EQ(w.percentile(50), 50);
  EXPECT_EQ(w.percentile(90), 90);
  EXPECT_EQ(w.percentile(99), 99);
  EXPECT_EQ(w.percentile(100), 100);
  EXPECT_EQ(w.percentile(0.5), 1);
  EXPECT_EQ(w.max(), 100);

  LatencyWindow one;
  one.add(7);
  EXPECT_EQ(one.percentile(50), 7);
  EXPECT_EQ(one.percentile(99), 7);

  LatencyWindow three;
  for (int v : {30, 10, 20}) three.add(v);
  EXPECT_EQ(three.percentile(50), 20);  // rank ceil(1.5) = 2
  EXPECT_EQ(three.percentile(90), 30);
}

TEST(LatencyWindow, KeepsOnlyTheMostRecent) {
  LatencyWindow w(10);
  for (int v = 1; v <= 25; ++v) w.add(v * 1000);
  EXPECT_EQ(w.size(), 10u);
  EXPECT_EQ(w.capacity(), 10u);
  EXPECT_EQ(w.percentile(1), 16000);  // 1..15 fell out
  EXPECT_EQ(w.max(), 25000);
  ProbeStats s;
  w.fill(s);
  EXPECT_EQ(s.latency_window, 10u);
  EXPECT_EQ(s.latency_p50_ns, 20000);
  EXPECT_EQ(s.latency_max_ns, 25000);
}

// The window is kept in order as values come and go (no sort per read): with repeated and
// unordered values wrapping the ring many times, every percentile is the one of the last
// `capacity` values, sorted afresh here.
TEST(LatencyWindow, PercentilesFollowTheRingWithRepeatsAndDisorder) {
  constexpr std::size_t kCap = 7;
  LatencyWindow w(kCap);
  std::vector<std::int64_t> all;
  std::uint64_t x = 12345;
  for (int i = 0; i < 200; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto v = static_cast<std::int64_t>((x >> 33) % 5) * 10;  // 0..40: many repeats
    w.add(v);
    all.push_back(v);
    std::vector<std::int64_t> last(
        all.end() - static_cast<std::ptrdiff_t>(std::min(all.size(), kCap)), all.end());
    std::sort(last.begin(), last.end());
    ProbeStats s;
    w.fill(s);
    ASSERT_EQ(s.latency_window, last.size()) << "after " << i + 1;
    ASSERT_EQ(s.latency_max_ns, last.back()) << "after " << i + 1;
    for (const double p : {1.0, 50.0, 90.0, 100.0}) {
      const auto rank =
          static_cast<std::size_t>(std::ceil(p * static_cast<double>(last.size()) / 100));
      ASSERT_EQ(w.percentile(p), last[std::max<std::size_t>(rank, 1) - 1])
          << "p" << p << " after " << i + 1;
    }
  }
}

TEST(ProbeStatsJson, CarriesEveryFieldWithUnits) {
  ProbeStats s;
  s.probe = "nvidia";
  s.state = ProbeState::backoff;
  s.reason = "GPU is lost";
  s.samples = 10;
  s.failures = 2;
  s.timeouts = 1;
  s.overruns = 3;
  s.missed_ticks = 4;
  s.consecutive_failures = 2;
  s.detections = 1;
  s.requested_interval = std::chrono::milliseconds(100);
  s.interval = std::chrono::milliseconds(166);
  s.backoff = std::chrono::milliseconds(2000);
  s.latency_p50_ns = 1500;
  s.latency_max_ns = 9000;
  s.latency_window = 10;
  s.last_error = "GPU is lost";
  s.devices = 2;

  const auto v = to_json(s);
  const auto& o = v.as_object();
  EXPECT_EQ(o.at("probe").as_string(), "nvidia");
  EXPECT_EQ(o.at("state").as_string(), "backoff");
  EXPECT_EQ(o.at("reason").as_string(), "GPU is lost");
  EXPECT_EQ(o.at("samples").to_number<std::uint64_t>(), 10u);
  EXPECT_EQ(o.at("failures").to_number<std::uint64_t>(), 2u);
  EXPECT_EQ(o.at("timeouts").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(o.at("overruns").to_number<std::uint64_t>(), 3u);
  EXPECT_EQ(o.at("missed_ticks").to_number<std::uint64_t>(), 4u);
  EXPECT_EQ(o.at("consecutive_failures").to_number<std::uint64_t>(), 2u);
  EXPECT_EQ(o.at("detections").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(o.at("requested_interval_ms").to_number<std::int64_t>(), 100);
  EXPECT_EQ(o.at("interval_ms").to_number<std::int64_t>(), 166);
  EXPECT_EQ(o.at("backoff_ms").to_number<std::int64_t>(), 2000);
  EXPECT_EQ(o.at("latency_p50_ns").to_number<std::int64_t>(), 1500);
  EXPECT_TRUE(o.at("latency_p90_ns").is_null());  // absent, not 0
  EXPECT_TRUE(o.at("latency_p99_ns").is_null());
  EXPECT_EQ(o.at("latency_max_ns").to_number<std::int64_t>(), 9000);
  EXPECT_EQ(o.at("latency_window").to_number<std::uint64_t>(), 10u);
  EXPECT_EQ(o.at("last_error").as_string(), "GPU is lost");
  EXPECT_EQ(o.at("devices").to_number<std::uint64_t>(), 2u);
  EXPECT_EQ(o.size(), 20u);
}

TEST(ProbeStateNames, RoundTrip) {
  for (auto st : {ProbeState::detecting, ProbeState::available, ProbeState::unavailable,
                  ProbeState::backoff, ProbeState::stopped}) {
    EXPECT_EQ(probe_state_from_string(to_string(st)), st);
  }
  EXPECT_EQ(to_string(ProbeState::unavailable), "unavailable");
  EXPECT_EQ(probe_state_from_string("sleeping"), std::nullopt);
}

TEST_F(SchedulerTest, ReportsLatencyPercentilesOfRecentSamples) {
  auto probe = make_probe();
  scheduler().add(probe, options(200ms));
  start();
  EXPECT_EQ(stats().latency_p50_ns, std::nullopt);
  // Sample k (1..100) takes k ms: advance k ms, complete, then on to the next tick.
  for (int k = 1; k <= 100; ++k) {
    ASSERT_TRUE(probe->sample_pending()) << k;
    ManualClock::advance(std::chrono::milliseconds(k));
    poll();
    ASSERT_TRUE(probe->complete_sample(TestProbe::ok()));
    poll();
    ManualClock::advance(std::chrono::milliseconds(200 - k));
    poll();
  }
  const auto s = stats();
  EXPECT_EQ(s.samples, 100u);
  EXPECT_EQ(s.latency_window, 100u);
  EXPECT_EQ(s.latency_p50_ns, 50'000'000);
  EXPECT_EQ(s.latency_p90_ns, 90'000'000);
  EXPECT_EQ(s.latency_p99_ns, 99'000'000);
  EXPECT_EQ(s.latency_max_ns, 100'000'000);
  EXPECT_EQ(s.overruns, 0u);
  EXPECT_EQ(s.missed_ticks, 0u);
}

}  // namespace
}  // namespace gpustream::test
