// How the Scheduler copes with failures: timeouts, backoff, re-detection, probes that appear
// later, failed/partial/throwing samples.
#include <stdexcept>

#include "gpustream/errors.hpp"
#include "scheduler/scheduler_fixture.hpp"

namespace gpustream::test {
namespace {

TEST_F(SchedulerTest, TimeoutCancelsCountsAndDropsTheLateResult) {
  auto probe = make_probe();
  probe->set_cancel_completes(false);  // a probe whose cancel() does not help
  scheduler().add(probe, options(1000ms, 200ms, 500ms));
  start();
  run_for(199ms, 1ms);
  EXPECT_EQ(probe->cancel_calls(), 0u);
  run_for(1ms);

  EXPECT_EQ(probe->cancel_calls(), 1u);
  auto s = stats();
  EXPECT_EQ(s.timeouts, 1u);
  EXPECT_EQ(s.failures, 1u);
  EXPECT_EQ(s.consecutive_failures, 1u);
  EXPECT_EQ(s.state, ProbeState::backoff);
  ASSERT_EQ(published_.size(), 1u);  // the failure is published
  EXPECT_TRUE(published_[0].devices.empty());
  ASSERT_EQ(published_[0].errors.size(), 1u);
  EXPECT_EQ(published_[0].errors[0].code, "timeout");
  EXPECT_EQ(published_[0].probe, "test");

  // The late sample is still out there: nothing new starts, not even on the old grid.
  run_for(2800ms, 10ms);
  EXPECT_EQ(probe->sample_calls(), 1u);
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);

  // It completes at 3000 ms: its result is dropped, the backoff (500 ms) starts now.
  ASSERT_TRUE(probe->complete_sample(TestProbe::ok(2)));
  poll();
  EXPECT_EQ(published_.size(), 1u);
  EXPECT_EQ(stats().samples, 0u);
  run_for(500ms, 10ms);
  ASSERT_EQ(probe->sample_times(), ms_list({0, 3500}));

  ASSERT_TRUE(probe->complete_sample(TestProbe::ok(2)));
  poll();
  s = stats();
  EXPECT_EQ(s.samples, 1u);
  EXPECT_EQ(s.consecutive_failures, 0u);
  EXPECT_EQ(s.state, ProbeState::available);
  EXPECT_EQ(s.timeouts, 1u);
  EXPECT_EQ(s.last_error, "sample did not complete within 200 ms");
  ASSERT_EQ(published_.size(), 2u);
  EXPECT_EQ(published_[1].devices.size(), 2u);

  // Back on a grid anchored at the retry: 4500, 5500.
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  run_for(2000ms, 10ms);
  EXPECT_EQ(probe->sample_times(), ms_list({0, 3500, 4500, 5500}));
}

TEST_F(SchedulerTest, TimeoutWithACancelThatCompletesRetriesAfterBackoff) {
  auto probe = make_probe();  // cancel() completes the sample with operation_aborted
  scheduler().add(probe, options(1000ms, 200ms, 500ms));
  start();
  run_for(200ms);
  EXPECT_EQ(probe->cancel_calls(), 1u);
  EXPECT_FALSE(probe->sample_pending());
  EXPECT_EQ(published_.size(), 1u);  // the timeout, not the aborted completion
  EXPECT_EQ(stats().failures, 1u);   // not counted twice

  run_for(500ms, 10ms);
  EXPECT_EQ(probe->sample_times(), ms_list({0, 700}));
}

TEST_F(SchedulerTest, BackoffGrowsExponentiallyAndCaps) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) { return TestProbe::failed("no response"); });
  // No re-detection here (0), to see the sample backoff alone: 100, 200, 400, 400, ...
  scheduler().add(probe, options(50ms, 10s, 100ms, 400ms, 0));
  start();
  EXPECT_EQ(stats().backoff, 100ms);
  run_for(1500ms, 10ms);

  EXPECT_EQ(probe->sample_times(), ms_list({0, 100, 300, 700, 1100, 1500}));
  auto s = stats();
  EXPECT_EQ(s.state, ProbeState::backoff);
  EXPECT_EQ(s.backoff, 400ms);
  EXPECT_EQ(s.failures, 6u);
  EXPECT_EQ(s.consecutive_failures, 6u);
  EXPECT_EQ(s.samples, 0u);
  EXPECT_EQ(s.last_error, "no response");
  EXPECT_EQ(probe->detect_calls(), 1u);

  // Recovery resets the backoff and resumes the 50 ms grid from the successful retry (1900).
  probe->script_sample(
      [](std::uint64_t call) { return call == 8 ? TestProbe::failed("again") : TestProbe::ok(); });
  run_for(500ms, 10ms);
  s = stats();
  EXPECT_EQ(s.consecutive_failures, 1u);  // call 8 (at 2000) failed again
  EXPECT_EQ(s.backoff, 100ms);            // starting over from backoff_initial
  EXPECT_EQ(probe->sample_times(), ms_list({0, 100, 300, 700, 1100, 1500, 1900, 1950, 2000}));
}

TEST_F(SchedulerTest, RedetectsAfterConsecutiveFailures) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) { return TestProbe::failed("gpu lost"); });
  scheduler().add(probe, options(1000ms, 10s, 100ms, 1000ms, 3));
  start();
  // Failures at 0, 100 and 300 (the 3rd): the next try, at 700, is a detection; it finds the
  // device, sampling resumes at once and fails (the 4th); the backoff keeps growing.
  run_for(699ms, 1ms);
  EXPECT_EQ(probe->detect_calls(), 1u);
  run_for(1ms);
  EXPECT_EQ(probe->detect_calls(), 2u);
  EXPECT_EQ(stats().detections, 2u);
  EXPECT_EQ(probe->sample_times(), ms_list({0, 100, 300, 700}));

  // Now the re-detection says the device is gone. Tries: 5th sample at 1500 (+800), 6th at
  // 2500 (+1000, capped); after the 6th failure the next try (3500) is a detection.
  probe->script_detect([](std::uint64_t) { return TestProbe::unavailable("device fell off"); });
  run_for(1790ms, 10ms);
  EXPECT_EQ(probe->sample_times(), ms_list({0, 100, 300, 700, 1500}));
  EXPECT_EQ(stats().consecutive_failures, 5u);
  EXPECT_EQ(stats().backoff, 1000ms);

  run_for(1010ms, 10ms);
  auto s = stats();
  EXPECT_EQ(probe->sample_times(), ms_list({0, 100, 300, 700, 1500, 2500}));
  EXPECT_EQ(probe->detect_calls(), 3u);
  EXPECT_EQ(s.detections, 3u);
  EXPECT_EQ(s.state, ProbeState::unavailable);
  EXPECT_EQ(s.reason, "device fell off");
  EXPECT_EQ(s.devices, 0u);
}

TEST_F(SchedulerTest, ProbeThatAppearsLaterIsPickedUp) {
  auto probe = make_probe();
  probe->script_detect([](std::uint64_t call) {
    return call < 2 ? TestProbe::unavailable("no driver loaded") : TestProbe::available(2);
  });
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(2); });
  scheduler().add(probe, options(1000ms, 10s, 100ms, 1000ms));
  start();
  auto s = stats();
  EXPECT_EQ(s.state, ProbeState::unavailable);
  EXPECT_EQ(s.reason, "no driver loaded");
  EXPECT_EQ(s.backoff, 100ms);
  EXPECT_EQ(probe->sample_calls(), 0u);

  run_for(100ms, 10ms);  // second detection at 100: still absent, next in 200
  EXPECT_EQ(probe->detect_calls(), 2u);
  EXPECT_EQ(stats().backoff, 200ms);
  run_for(199ms, 1ms);
  EXPECT_EQ(probe->detect_calls(), 2u);
  EXPECT_TRUE(published_.empty());

  run_for(1ms);  // third detection at 300 finds it; the first sample follows at once
  s = stats();
  EXPECT_EQ(probe->detect_calls(), 3u);
  EXPECT_EQ(s.detections, 3u);
  EXPECT_EQ(s.state, ProbeState::available);
  EXPECT_TRUE(s.reason.empty());
  EXPECT_EQ(s.devices, 2u);
  EXPECT_EQ(probe->sample_times(), ms_list({300}));
  ASSERT_EQ(published_.size(), 1u);
  EXPECT_EQ(published_at_[0], 300'000'000);
}

TEST_F(SchedulerTest, DetectionTimeoutCountsAndRetries) {
  auto probe = make_probe();
  probe->script_detect([](std::uint64_t call) -> std::optional<Detection> {
    if (call == 0) return std::nullopt;  // hangs until cancelled
    return TestProbe::available();
  });
  scheduler().add(probe, options(1000ms, 200ms, 100ms));
  start();
  run_for(200ms);
  auto s = stats();
  EXPECT_EQ(probe->cancel_calls(), 1u);
  EXPECT_EQ(s.timeouts, 1u);
  EXPECT_EQ(s.state, ProbeState::unavailable);
  EXPECT_EQ(s.reason, "detection did not complete within 200 ms");
  run_for(100ms);
  EXPECT_EQ(probe->detect_calls(), 2u);
  EXPECT_EQ(stats().state, ProbeState::available);
  EXPECT_EQ(probe->sample_times(), ms_list({300}));
}

TEST_F(SchedulerTest, FailedSampleIsPublishedWithItsErrorsAndNoDevices) {
  auto probe = make_probe("nv");
  probe->script_sample([](std::uint64_t call) {
    if (call == 0) {
      auto r = TestProbe::failed("GPU is lost");
      r.snapshot.devices = TestProbe::ok(1).snapshot.devices;  // garbage from a failed sample
      return r;
    }
    return TestProbe::SampleResult{make_error_code(errc::tool_failed), {}};
  });
  scheduler().add(probe, options(1000ms, 10s, 100ms));
  start();
  run_for(100ms);
  ASSERT_EQ(published_.size(), 2u);
  EXPECT_EQ(published_[0].probe, "nv");
  EXPECT_TRUE(published_[0].devices.empty());
  ASSERT_EQ(published_[0].errors.size(), 1u);
  EXPECT_EQ(published_[0].errors[0].message, "GPU is lost");
  // No errors given: the error code says what happened.
  ASSERT_EQ(published_[1].errors.size(), 1u);
  EXPECT_EQ(published_[1].errors[0].code, "tool_failed");
  EXPECT_EQ(published_[1].errors[0].message, make_error_code(errc::tool_failed).message());
  EXPECT_EQ(stats().failures, 2u);
}

TEST_F(SchedulerTest, PartialSampleIsASuccess) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) { return TestProbe::partial(2, "fan unreadable"); });
  scheduler().add(probe, options(1000ms));
  start();
  const auto s = stats();
  EXPECT_EQ(s.samples, 1u);
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(s.state, ProbeState::available);
  EXPECT_EQ(s.last_error, "fan unreadable");
  ASSERT_EQ(published_.size(), 1u);
  EXPECT_EQ(published_[0].devices.size(), 2u);
  EXPECT_EQ(published_[0].errors.size(), 1u);
}

TEST_F(SchedulerTest, RepeatedErrorIsLoggedOnceUntilItClears) {
  LogCapture logs;
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t call) {
    return call == 3 ? TestProbe::ok() : TestProbe::failed("flaky sensor");
  });
  scheduler().add(probe, options(1000ms, 10s, 100ms, 100ms, 0));
  start();
  run_for(500ms, 10ms);  // failures at 0, 100, 200, success at 300, failure at 1300
  EXPECT_EQ(logs.count("flaky sensor"), 1u);
  run_for(1000ms, 10ms);
  EXPECT_EQ(logs.count("flaky sensor"), 2u);  // came back after a clean sample
}

TEST_F(SchedulerTest, FailureIsLoggedAgainAfterRecoveryEvenWithAPersistentPartialError) {
  // A probe that always has a partial error (e.g. over its process cap) and sometimes fails:
  // the failure ends with the next successful sample although that one is not clean.
  LogCapture logs;
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t call) {
    return call == 1 || call == 2 || call == 4 ? TestProbe::failed("tool crashed")
                                               : TestProbe::partial(1, "over the process cap");
  });
  scheduler().add(probe, options(1000ms, 10s, 100ms, 100ms, 0));
  start();
  // partial at 0, failures at 1000 and 1100, partial at 1200, failure at 2200.
  run_for(1500ms, 10ms);
  EXPECT_EQ(logs.count("tool crashed"), 1u);
  EXPECT_EQ(logs.count("over the process cap"), 1u);
  run_for(1000ms, 10ms);
  EXPECT_EQ(logs.count("tool crashed"), 2u);
  EXPECT_EQ(logs.count("over the process cap"), 1u);  // never went away: logged once
}

TEST_F(SchedulerTest, ThrowingProbeIsAFailureNotACrash) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) -> std::optional<TestProbe::SampleResult> {
    throw std::runtime_error("boom");
  });
  scheduler().add(probe, options(1000ms));
  start();
  ASSERT_EQ(published_.size(), 1u);
  EXPECT_EQ(published_[0].errors.at(0).message, "sample threw: boom");
  EXPECT_EQ(stats().failures, 1u);

  auto other = make_probe("other");
  other->script_detect([](std::uint64_t) -> std::optional<Detection> {
    throw std::runtime_error("dlopen exploded");
  });
  scheduler().add(other, options(1000ms));  // added after start: starts at once
  poll();
  const auto s = stats(1);
  EXPECT_EQ(s.state, ProbeState::unavailable);
  EXPECT_EQ(s.reason, "detection threw: dlopen exploded");
}

}  // namespace
}  // namespace gpustream::test
