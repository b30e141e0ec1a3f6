// Scheduler::request_sample: a fresh sample on demand that joins one in flight, leaves the
// timer grid alone, and always completes (success, the probe's error, timeout, unavailable,
// stopped). Time is the manual clock (scheduler_fixture.hpp).
#include <atomic>
#include <optional>
#include <stdexcept>
#include <thread>

#include "gpustream/errors.hpp"
#include "scheduler/scheduler_fixture.hpp"

namespace gpustream::test {
namespace {

/// What one request_sample handler received.
struct Answer {
  int calls = 0;
  boost::system::error_code ec;
  std::shared_ptr<const GpuSnapshot> snapshot;

  ManualScheduler::SampleNowHandler handler() {
    return [this](boost::system::error_code e, std::shared_ptr<const GpuSnapshot> s) {
      ++calls;
      ec = e;
      snapshot = std::move(s);
    };
  }
};

TEST_F(SchedulerTest, RequestStartsAFreshSampleAndPublishesIt) {
  auto probe = make_probe("gpu");
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(2); });
  scheduler().add(probe, options(100ms));
  start();
  run_for(30ms);
  ASSERT_EQ(probe->sample_calls(), 1u);

  Answer a;
  scheduler().request_sample("gpu", a.handler());
  poll();
  EXPECT_EQ(probe->sample_calls(), 2u);
  EXPECT_EQ(probe->sample_times().back(), 30'000'000);  // now, not at the next tick
  ASSERT_EQ(a.calls, 1);
  EXPECT_FALSE(a.ec);
  ASSERT_TRUE(a.snapshot);
  EXPECT_EQ(a.snapshot->devices.size(), 2u);
  EXPECT_EQ(a.snapshot->probe, "gpu");
  ASSERT_EQ(published_.size(), 2u);  // subscribers see it like any other
  EXPECT_EQ(published_.back().devices.size(), 2u);
  EXPECT_EQ(stats().samples, 2u);
}

TEST_F(SchedulerTest, RequestJoinsTheSampleInFlight) {
  auto probe = make_probe();
  scheduler().add(probe, options(100ms));
  start();  // the first sample (t = 0) is pending
  ASSERT_TRUE(probe->sample_pending());

  Answer a, b;
  scheduler().request_sample("test", a.handler());
  scheduler().request_sample("test", b.handler());
  run_for(10ms);
  EXPECT_EQ(probe->sample_calls(), 1u);  // joined, no second sample
  EXPECT_EQ(a.calls, 0);
  ASSERT_TRUE(probe->complete_sample(TestProbe::ok(3)));
  poll();
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);
  ASSERT_EQ(a.calls, 1);
  ASSERT_EQ(b.calls, 1);
  EXPECT_FALSE(a.ec);
  EXPECT_EQ(a.snapshot, b.snapshot);  // the same object
  EXPECT_EQ(a.snapshot->devices.size(), 3u);
  EXPECT_EQ(published_.size(), 1u);
}

TEST_F(SchedulerTest, OnDemandSamplesLeaveTheGridAlone) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  scheduler().add(probe, options(100ms));
  start();
  Answer a;
  // Requests at 30, 150 and 270 ms: the periodic samples stay at multiples of 100 ms.
  run_for(1000ms, 10ms, [&] {
    const auto t = manual_now_ns();
    if (t == 30'000'000 || t == 150'000'000 || t == 270'000'000)
      scheduler().request_sample("test", a.handler());
  });
  EXPECT_EQ(a.calls, 3);
  EXPECT_EQ(probe->sample_times(),
            ms_list({0, 30, 100, 150, 200, 270, 300, 400, 500, 600, 700, 800, 900, 1000}));
  EXPECT_EQ(stats().overruns, 0u);
  EXPECT_EQ(stats().missed_ticks, 0u);
}

TEST_F(SchedulerTest, ATickDuringAnOnDemandSampleAdoptsIt) {
  auto probe = make_probe();
  scheduler().add(probe, options(100ms));
  start();
  run_for(10ms);
  ASSERT_TRUE(probe->complete_sample(TestProbe::ok()));
  run_for(80ms);  // t = 90
  Answer a;
  scheduler().request_sample("test", a.handler());
  poll();
  ASSERT_EQ(probe->sample_calls(), 2u);
  run_for(20ms);  // the tick at 100 ms comes while it runs: no overrun, no second sample
  EXPECT_EQ(probe->sample_calls(), 2u);
  EXPECT_EQ(stats().overruns, 0u);
  ASSERT_TRUE(probe->complete_sample(TestProbe::ok()));
  poll();
  EXPECT_EQ(a.calls, 1);
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  run_for(190ms);  // t = 300: the grid is where it was
  EXPECT_EQ(probe->sample_times(), ms_list({0, 90, 200, 300}));
}

TEST_F(SchedulerTest, RequestCompletesWithTheProbesErrorAndDoesNotBackOff) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t call) {
    return call == 1 ? TestProbe::failed("GPU fell off the bus") : TestProbe::ok();
  });
  scheduler().add(probe, options(100ms));
  start();
  run_for(50ms);
  Answer a;
  scheduler().request_sample("test", a.handler());
  poll();
  ASSERT_EQ(a.calls, 1);
  EXPECT_TRUE(a.ec);
  ASSERT_TRUE(a.snapshot);  // the failure snapshot, as published
  ASSERT_FALSE(a.snapshot->errors.empty());
  EXPECT_EQ(a.snapshot->errors.front().message, "GPU fell off the bus");
  EXPECT_EQ(stats().failures, 1u);
  run_for(150ms);  // no backoff: the grid goes on at 100, 200
  EXPECT_EQ(probe->sample_times(), ms_list({0, 50, 100, 200}));
  EXPECT_EQ(stats().consecutive_failures, 0u);
}

TEST_F(SchedulerTest, RequestCompletesOnTheSampleTimeout) {
  auto probe = make_probe();
  probe->set_cancel_completes(false);
  scheduler().add(probe, options(1000ms, 200ms));
  start();
  run_for(10ms);
  ASSERT_TRUE(probe->complete_sample(TestProbe::ok()));
  run_for(40ms);  // t = 50
  Answer a;
  scheduler().request_sample("test", a.handler());
  poll();
  run_for(199ms);
  EXPECT_EQ(a.calls, 0);
  run_for(1ms);  // t = 250: the on-demand sample timed out
  ASSERT_EQ(a.calls, 1);
  EXPECT_EQ(a.ec, make_error_code(errc::timeout));
  ASSERT_TRUE(a.snapshot);
  EXPECT_EQ(a.snapshot->errors.front().code, "timeout");

  // A request while the timed-out sample has not returned is answered at once.
  Answer b;
  scheduler().request_sample("test", b.handler());
  poll();
  EXPECT_EQ(b.calls, 1);
  EXPECT_EQ(b.ec, make_error_code(errc::timeout));

  // The late result is dropped; the grid was not disarmed: the tick at 1000 ms samples.
  ASSERT_TRUE(probe->complete_sample(TestProbe::ok()));
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  run_for(800ms, 10ms);
  EXPECT_EQ(probe->sample_times(), ms_list({0, 50, 1000}));
}

TEST_F(SchedulerTest, RequestDeadlineAnswersWithoutWaitingForTheSample) {
  auto probe = make_probe();
  scheduler().add(probe, options(1000ms, 0ms));  // no sample timeout at all
  start();
  Answer a;
  scheduler().request_sample("test", a.handler(), 30ms);
  poll();
  run_for(29ms);
  EXPECT_EQ(a.calls, 0);
  run_for(1ms);
  ASSERT_EQ(a.calls, 1);
  EXPECT_EQ(a.ec, make_error_code(errc::timeout));
  EXPECT_FALSE(a.snapshot);
  ASSERT_TRUE(probe->complete_sample(TestProbe::ok()));  // the sample itself goes on
  poll();
  EXPECT_EQ(a.calls, 1);  // once
  EXPECT_EQ(published_.size(), 1u);
}

TEST_F(SchedulerTest, RequestWaitsForDetectionThenJoinsTheFirstSample) {
  auto probe = make_probe();
  probe->script_detect([](std::uint64_t) -> std::optional<Detection> { return std::nullopt; });
  scheduler().add(probe, options(100ms));
  Answer a;
  scheduler().request_sample("test", a.handler());  // before start()
  start();
  EXPECT_EQ(a.calls, 0);
  ASSERT_TRUE(probe->complete_detect(TestProbe::available(1)));
  poll();
  ASSERT_EQ(probe->sample_calls(), 1u);
  ASSERT_TRUE(probe->complete_sample(TestProbe::ok()));
  poll();
  ASSERT_EQ(a.calls, 1);
  EXPECT_FALSE(a.ec);
  EXPECT_EQ(probe->sample_calls(), 1u);
}

TEST_F(SchedulerTest, RequestWaitingForADetectionThatTimesOutIsAnswered) {
  auto probe = make_probe();
  probe->script_detect([](std::uint64_t) -> std::optional<Detection> { return std::nullopt; });
  probe->set_cancel_completes(false);
  scheduler().add(probe, options(100ms, 200ms));
  start();
  Answer a;
  scheduler().request_sample("test", a.handler());  // no deadline of its own
  poll();
  run_for(199ms);
  EXPECT_EQ(a.calls, 0);
  run_for(1ms);
  ASSERT_EQ(a.calls, 1);
  EXPECT_EQ(a.ec, make_error_code(errc::timeout));
}

TEST_F(SchedulerTest, RequestToAnUnavailableProbeCompletesAtOnce) {
  auto probe = make_probe();
  probe->script_detect([](std::uint64_t) { return TestProbe::unavailable("no driver"); });
  scheduler().add(probe, options(100ms));
  start();
  Answer a;
  scheduler().request_sample("test", a.handler());
  poll();
  ASSERT_EQ(a.calls, 1);
  EXPECT_EQ(a.ec, make_error_code(errc::probe_unavailable));
  EXPECT_EQ(probe->sample_calls(), 0u);
}

TEST_F(SchedulerTest, RequestInFlightCompletesWhenTheSchedulerStops) {
  auto probe = make_probe();
  scheduler().add(probe, options(100ms));
  start();
  Answer a;
  scheduler().request_sample("test", a.handler());
  poll();
  EXPECT_EQ(a.calls, 0);
  scheduler().stop();
  poll();
  ASSERT_EQ(a.calls, 1);
  EXPECT_EQ(a.ec, make_error_code(errc::stopped));

  Answer b;  // after stop
  scheduler().request_sample("test", b.handler());
  poll();
  ASSERT_EQ(b.calls, 1);
  EXPECT_EQ(b.ec, make_error_code(errc::stopped));
}

TEST_F(SchedulerTest, RequestForAnUnknownProbeThrows) {
  scheduler().add(make_probe("gpu"), options(100ms));
  EXPECT_THROW(scheduler().request_sample("nope", [](auto, auto) {}), std::invalid_argument);
  EXPECT_EQ(scheduler().probe_names(), std::vector<std::string>{"gpu"});
}

TEST_F(SchedulerTest, RequestDuringBackoffIsUnavailable) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) { return TestProbe::failed("broken"); });
  scheduler().add(probe, options(100ms, 10s, 500ms));
  start();
  ASSERT_EQ(stats().state, ProbeState::backoff);
  Answer a;
  scheduler().request_sample("test", a.handler());
  poll();
  ASSERT_EQ(a.calls, 1);
  EXPECT_EQ(a.ec, make_error_code(errc::probe_unavailable));
  EXPECT_EQ(probe->sample_calls(), 1u);  // not hammered
}

TEST_F(SchedulerTest, RequestsFromManyThreadsAreEachAnsweredOnce) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  scheduler().add(probe, options(100ms));
  start();
  constexpr int kThreads = 4, kEach = 50;
  std::atomic<int> answered{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i)
        scheduler().request_sample("test", [&](boost::system::error_code ec, auto snap) {
          if (ec || !snap) ++errors;
          ++answered;
        });
    });
  // The io_context runs here, on the test's thread, while the others request.
  while (answered.load() < kThreads * kEach) poll();
  for (auto& t : threads) t.join();
  poll();
  EXPECT_EQ(answered.load(), kThreads * kEach);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);
  EXPECT_LE(probe->sample_calls(), 1u + kThreads * kEach);
}

}  // namespace
}  // namespace gpustream::test
