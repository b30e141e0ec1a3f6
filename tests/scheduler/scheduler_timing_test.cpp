// When the Scheduler samples: the drift-free grid, overruns, missed ticks, the min-interval
// clamp, and probes not delaying each other. Time is the manual clock (scheduler_fixture.hpp).
#include <stdexcept>

#include "scheduler/scheduler_fixture.hpp"

namespace gpustream::test {
namespace {

TEST_F(SchedulerTest, SamplesAtOnceAfterDetectionThenOnADriftFreeGrid) {
  auto probe = make_probe();
  scheduler().add(probe, options(100ms));
  start();
  ASSERT_EQ(probe->detect_calls(), 1u);
  ASSERT_EQ(probe->sample_calls(), 1u);  // at t = 0, right after detection

  // Each sample takes 30 ms; the grid must not slide by that (expiry = previous + interval).
  run_for(1000ms, 10ms, [&] {
    const auto times = probe->sample_times();
    if (probe->sample_pending() && manual_now_ns() - times.back() >= 30'000'000)
      probe->complete_sample(TestProbe::ok());
  });

  EXPECT_EQ(probe->sample_times(), ms_list({0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}));
  const auto s = stats();
  EXPECT_EQ(s.samples, 10u);  // the one started at 1000 ms is still running
  EXPECT_EQ(s.overruns, 0u);
  EXPECT_EQ(s.missed_ticks, 0u);
  EXPECT_EQ(s.state, ProbeState::available);
  EXPECT_EQ(s.interval, 100ms);
  EXPECT_EQ(published_.size(), 10u);
  EXPECT_EQ(published_.front().probe, "test");
}

TEST_F(SchedulerTest, LateTicksDoNotShiftTheGrid) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  scheduler().add(probe, options(100ms));
  start();
  // The io thread only gets to run every 7 ms, so each tick fires up to 6 ms late; the next
  // one is still due at the next multiple of 100 ms (expiry + interval, not now + interval).
  run_for(1000ms, 7ms);
  EXPECT_EQ(probe->sample_times(), ms_list({0, 105, 203, 301, 406, 504, 602, 700, 805, 903, 1000}));
  EXPECT_EQ(stats().missed_ticks, 0u);
}

TEST_F(SchedulerTest, PublishedSnapshotGetsIdentityAndDurationFilledIn) {
  auto probe = make_probe("gpu");
  scheduler().add(probe, options(100ms));
  start();
  run_for(25ms);
  ASSERT_TRUE(probe->complete_sample(TestProbe::ok(2)));
  poll();
  ASSERT_EQ(published_.size(), 1u);
  const auto& snap = published_.front();
  EXPECT_EQ(snap.probe, "gpu");
  EXPECT_EQ(snap.devices.size(), 2u);
  EXPECT_NE(snap.time_unix_ns, 0);
  EXPECT_NE(snap.monotonic_ns, 0);
  EXPECT_EQ(snap.sample_duration_ns, 25'000'000);  // measured on the scheduler's clock
  EXPECT_EQ(snap.sequence, 0u);                    // numbered by the channel, not here
  EXPECT_EQ(stats().devices, 2u);
}

TEST_F(SchedulerTest, TickWhileSampleRunsIsAnOverrunAndSkipped) {
  auto probe = make_probe();
  scheduler().add(probe, options(100ms));
  start();
  run_for(250ms, 10ms);  // ticks at 100 and 200 find the first sample still running
  EXPECT_EQ(probe->sample_calls(), 1u);
  EXPECT_EQ(stats().overruns, 2u);

  ASSERT_TRUE(probe->complete_sample(TestProbe::ok()));
  run_for(50ms, 10ms);  // the next tick (300) starts a sample again
  EXPECT_EQ(probe->sample_times(), ms_list({0, 300}));
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);
  EXPECT_EQ(stats().overruns, 2u);
  EXPECT_EQ(stats().samples, 1u);
}

TEST_F(SchedulerTest, FarBehindSkipsMissedTicksInsteadOfBursting) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  scheduler().add(probe, options(100ms));
  start();
  ASSERT_EQ(probe->sample_calls(), 1u);

  // The io thread stalls for 1050 ms: the tick due at 100 fires once, late; ticks at 200..1000
  // are skipped and counted; the grid continues at 1100.
  jump_to(1050ms);
  EXPECT_EQ(probe->sample_times(), ms_list({0, 1050}));
  EXPECT_EQ(stats().missed_ticks, 9u);

  run_for(50ms);
  EXPECT_EQ(probe->sample_times(), ms_list({0, 1050, 1100}));
  EXPECT_EQ(stats().missed_ticks, 9u);
  EXPECT_EQ(stats().overruns, 0u);
}

TEST_F(SchedulerTest, IntervalBelowMinimumIsClampedAndWarnedOnce) {
  LogCapture logs;
  auto probe = make_probe("slow");
  probe->set_min_interval(500ms);
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  scheduler().add(probe, options(100ms));
  start();
  run_for(1000ms, 10ms);

  EXPECT_EQ(probe->sample_times(), ms_list({0, 500, 1000}));
  const auto s = stats();
  EXPECT_EQ(s.requested_interval, 100ms);
  EXPECT_EQ(s.interval, 500ms);
  EXPECT_EQ(logs.count("below the source's minimum"), 1u);
}

TEST_F(SchedulerTest, MinimumChosenAtDetectionIsAppliedAndDroppedOnRedetection) {
  // Like the NVIDIA probe: the minimum depends on what detection found. The first detection
  // finds only the slow source (500 ms minimum); after 3 failures the re-detection finds the
  // fast one again (no minimum) and the requested 100 ms grid comes back.
  LogCapture logs;
  auto probe = make_probe("switching");
  TestProbe* raw = probe.get();
  probe->script_detect([raw](std::uint64_t call) {
    raw->set_min_interval(call == 0 ? 500ms : 0ms);
    return std::optional<Detection>(TestProbe::available(1));
  });
  bool failing = false;
  probe->script_sample(
      [&failing](std::uint64_t) { return failing ? TestProbe::failed("gone") : TestProbe::ok(); });
  scheduler().add(probe, options(100ms, 10s, 100ms, 100ms, 3));
  EXPECT_EQ(stats().interval, 100ms);  // nothing known before detection
  start();
  run_for(1000ms, 10ms);
  EXPECT_EQ(probe->sample_times(), ms_list({0, 500, 1000}));
  EXPECT_EQ(stats().interval, 500ms);
  EXPECT_EQ(stats().requested_interval, 100ms);
  EXPECT_EQ(logs.count("below the source's minimum of 500 ms"), 1u);

  // Failures at 1500, 1600, 1700; the 4th try (1800) is a detection that lifts the minimum and
  // samples at once, then every 100 ms.
  failing = true;
  run_for(750ms, 10ms);
  failing = false;
  run_for(250ms, 10ms);
  EXPECT_EQ(probe->detect_calls(), 2u);
  EXPECT_EQ(probe->sample_times(), ms_list({0, 500, 1000, 1500, 1600, 1700, 1800, 1900, 2000}));
  EXPECT_EQ(stats().interval, 100ms);
  EXPECT_EQ(logs.count("allows the requested interval of 100 ms again"), 1u);
  EXPECT_EQ(logs.count("below the source's minimum"), 1u);
}

TEST_F(SchedulerTest, IntervalAboveMinimumIsKept) {
  LogCapture logs;
  auto probe = make_probe();
  probe->set_min_interval(50ms);
  scheduler().add(probe, options(200ms));
  EXPECT_EQ(stats().interval, 200ms);
  EXPECT_EQ(logs.count("below the source's minimum"), 0u);
}

TEST_F(SchedulerTest, ClampOfAnUnavailableSourceIsNotWarnedAbout) {
  LogCapture logs;
  auto probe = make_probe("absent");
  probe->set_min_interval(2000ms);
  probe->script_detect(
      [](std::uint64_t) { return std::optional<Detection>(TestProbe::unavailable("no tool")); });
  scheduler().add(probe, options(1000ms));
  EXPECT_EQ(stats().interval, 2000ms);  // applied at once, said only if it ever matters
  start();
  run_for(3000ms, 100ms);
  EXPECT_EQ(logs.count("below the source's minimum"), 0u);
}

TEST_F(SchedulerTest, RejectsOptionsThatCannotWork) {
  auto probe = make_probe();
  EXPECT_THROW(scheduler().add(nullptr, options(100ms)), std::invalid_argument);
  EXPECT_THROW(scheduler().add(probe, options(0ms)), std::invalid_argument);
  EXPECT_THROW(scheduler().add(probe, options(100ms, 1s, 0ms)), std::invalid_argument);
  EXPECT_TRUE(scheduler().stats().empty());
}

TEST_F(SchedulerTest, HungProbeDoesNotDelayAnother) {
  auto hung = make_probe("hung");
  auto fast = make_probe("fast");
  fast->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  scheduler().add(hung, options(100ms, 0ms));  // no timeout: stays in flight for good
  scheduler().add(fast, options(100ms));
  start();
  run_for(500ms, 10ms);

  EXPECT_EQ(fast->sample_times(), ms_list({0, 100, 200, 300, 400, 500}));
  EXPECT_EQ(hung->sample_calls(), 1u);
  const auto all = scheduler().stats();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].probe, "hung");
  EXPECT_EQ(all[0].overruns, 5u);
  EXPECT_EQ(all[1].probe, "fast");
  EXPECT_EQ(all[1].samples, 6u);
}

TEST_F(SchedulerTest, ScheduleOptionsFromConfig) {
  Config cfg;
  cfg.interval = 250ms;
  cfg.probe_intervals["nvidia"] = 100ms;
  cfg.sample_timeout = 3s;
  cfg.backoff_initial = 2s;
  cfg.backoff_max = 30s;
  const auto nv = ScheduleOptions::from_config(cfg, "nvidia");
  EXPECT_EQ(nv.interval, 100ms);
  EXPECT_EQ(nv.timeout, 3s);
  EXPECT_EQ(nv.backoff_initial, 2s);
  EXPECT_EQ(nv.backoff_max, 30s);
  EXPECT_EQ(ScheduleOptions::from_config(cfg, "amd").interval, 250ms);
}

}  // namespace
}  // namespace gpustream::test
