// Starting, stopping and destroying the Scheduler; its callbacks; and the steady_clock
// Scheduler on real threads (a BlockingProbe on a WorkPool), as Telemetry uses it.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/work_pool.hpp"
#include "scheduler/scheduler_fixture.hpp"

namespace gpustream::test {
namespace {

TEST_F(SchedulerTest, NothingHappensBeforeStart) {
  auto probe = make_probe();
  scheduler().add(probe, options(100ms));
  run_for(500ms, 10ms);
  EXPECT_EQ(probe->detect_calls(), 0u);
  EXPECT_EQ(stats().state, ProbeState::detecting);
  EXPECT_EQ(stats().detections, 0u);
}

TEST_F(SchedulerTest, StopIsIdempotentAndStopsSampling) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  scheduler().add(probe, options(100ms));
  start();
  run_for(250ms, 10ms);
  ASSERT_EQ(probe->sample_calls(), 3u);

  scheduler().stop();
  EXPECT_EQ(stats().state, ProbeState::stopped);  // at once, before the io runs
  EXPECT_TRUE(scheduler().stopped());
  scheduler().stop();
  poll();
  run_for(1000ms, 10ms);
  EXPECT_EQ(probe->sample_calls(), 3u);
  EXPECT_EQ(published_.size(), 3u);
  EXPECT_EQ(probe->cancel_calls(), 0u);  // nothing was in flight
  EXPECT_EQ(stats().state, ProbeState::stopped);

  scheduler().start();  // not restartable
  run_for(500ms, 10ms);
  EXPECT_EQ(probe->sample_calls(), 3u);
}

TEST_F(SchedulerTest, StopWithASampleInFlightCancelsItAndDropsTheResult) {
  auto probe = make_probe();
  scheduler().add(probe, options(100ms, 10s));
  start();
  ASSERT_TRUE(probe->sample_pending());

  scheduler().stop();
  poll();  // the cancellation runs on the strand; the aborted completion is dropped
  EXPECT_EQ(probe->cancel_calls(), 1u);
  EXPECT_FALSE(probe->sample_pending());
  EXPECT_TRUE(published_.empty());
  const auto s = stats();
  EXPECT_EQ(s.state, ProbeState::stopped);
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(s.samples, 0u);
  ASSERT_EQ(stats_seen_.size(), 1u);  // the detection's; none for the dropped sample
  EXPECT_EQ(stats_seen_[0].detections, 1u);
  EXPECT_EQ(stats_seen_[0].samples, 0u);
}

TEST_F(SchedulerTest, LateCompletionAfterStopIsDropped) {
  auto probe = make_probe();
  probe->set_cancel_completes(false);
  scheduler().add(probe, options(100ms, 10s));
  start();
  scheduler().stop();
  poll();
  EXPECT_EQ(probe->cancel_calls(), 1u);
  ASSERT_TRUE(probe->complete_sample(TestProbe::ok()));
  run_for(1000ms, 10ms);
  EXPECT_TRUE(published_.empty());
  EXPECT_EQ(probe->sample_calls(), 1u);
  EXPECT_EQ(stats().samples, 0u);
}

TEST_F(SchedulerTest, StopDuringDetectionCancelsIt) {
  auto probe = make_probe();
  probe->script_detect([](std::uint64_t) { return std::optional<Detection>{}; });
  scheduler().add(probe, options(100ms));
  start();
  ASSERT_TRUE(probe->detect_pending());
  scheduler().stop();
  poll();
  EXPECT_EQ(probe->cancel_calls(), 1u);
  run_for(1000ms, 10ms);
  EXPECT_EQ(probe->detect_calls(), 1u);
  EXPECT_EQ(probe->sample_calls(), 0u);
}

TEST_F(SchedulerTest, DestroyingTheSchedulerStopsIt) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  scheduler().add(probe, options(100ms));
  start();
  scheduler_.reset();  // timers still pending in io_ hold the per-probe state, safely
  run_for(500ms, 10ms);
  EXPECT_EQ(probe->sample_calls(), 1u);
  EXPECT_EQ(published_.size(), 1u);
}

TEST_F(SchedulerTest, AddAfterStartStartsAtOnceAndAfterStopStaysStopped) {
  auto first = make_probe("first");
  scheduler().add(first, options(100ms));
  start();
  auto second = make_probe("second");
  scheduler().add(second, options(100ms));
  poll();
  EXPECT_EQ(second->detect_calls(), 1u);
  EXPECT_EQ(second->sample_calls(), 1u);

  scheduler().stop();
  auto third = make_probe("third");
  scheduler().add(third, options(100ms));
  run_for(200ms, 10ms);
  EXPECT_EQ(third->detect_calls(), 0u);
  EXPECT_EQ(stats(2).state, ProbeState::stopped);
}

TEST_F(SchedulerTest, StatsCallbackAfterEveryDetectionAndSample) {
  auto probe = make_probe();
  probe->script_detect([](std::uint64_t call) {
    return std::optional<Detection>(call == 0 ? TestProbe::unavailable("not yet")
                                              : TestProbe::available(2));
  });
  probe->script_sample(
      [](std::uint64_t call) { return call == 1 ? TestProbe::failed("x") : TestProbe::ok(); });
  scheduler().add(probe, options(100ms, 10s, 50ms));
  start();
  run_for(150ms, 10ms);  // unavailable at 0, available at 50, ok at 50, failure at 150
  ASSERT_EQ(stats_seen_.size(), probe->detect_calls() + probe->sample_calls());
  ASSERT_EQ(stats_seen_.size(), 4u);
  EXPECT_EQ(stats_seen_[0].state, ProbeState::unavailable);
  EXPECT_EQ(stats_seen_[0].reason, "not yet");
  EXPECT_EQ(stats_seen_[1].state, ProbeState::available);
  EXPECT_EQ(stats_seen_[1].detections, 2u);
  EXPECT_EQ(stats_seen_[1].devices, 2u);
  EXPECT_EQ(stats_seen_[1].samples, 0u);
  EXPECT_EQ(stats_seen_[2].samples, 1u);
  EXPECT_EQ(stats_seen_[2].state, ProbeState::available);
  EXPECT_EQ(stats_seen_[3].failures, 1u);
  EXPECT_EQ(stats_seen_[3].state, ProbeState::backoff);  // the decision is already made
  EXPECT_EQ(stats_seen_[3].backoff, 50ms);
}

TEST_F(SchedulerTest, ThrowingSinkDoesNotStopSampling) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  scheduler().add(probe, options(100ms));
  on_stats_ = [](const ProbeStats&) { throw std::runtime_error("subscriber bug"); };
  start();
  run_for(300ms, 10ms);
  EXPECT_EQ(probe->sample_calls(), 4u);
  EXPECT_EQ(stats().samples, 4u);
}

TEST_F(SchedulerTest, StopFromInsideTheStatsCallbackIsSafe) {
  auto probe = make_probe();
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });
  scheduler().add(probe, options(100ms));
  on_stats_ = [this](const ProbeStats& st) {
    if (st.samples == 1) scheduler().stop();
  };
  start();
  run_for(500ms, 10ms);
  EXPECT_EQ(probe->sample_calls(), 1u);
  EXPECT_EQ(stats().state, ProbeState::stopped);
}

// ---- the steady_clock Scheduler on real threads ----

/// Waits (generously) for `pred`, which is evaluated under `mu`.
template <class Pred>
bool wait_until(std::mutex& mu, std::condition_variable& cv, Pred pred) {
  std::unique_lock lock(mu);
  return cv.wait_for(lock, 10s, pred);
}

TEST(SchedulerRealClock, RunsOnAMultiThreadedIoContextWithConcurrentStats) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  auto probe = std::make_shared<TestProbe>("rt", io.get_executor());
  probe->script_sample([](std::uint64_t) { return TestProbe::ok(); });

  std::mutex mu;
  std::condition_variable cv;
  std::size_t published = 0;
  Scheduler scheduler(io.get_executor(), [&](GpuSnapshot) {
    std::lock_guard lock(mu);
    ++published;
    cv.notify_all();
  });
  scheduler.add(probe, ScheduleOptions{5ms, 1s, 5ms, 50ms, 3});
  std::thread t1([&] { io.run(); });
  std::thread t2([&] { io.run(); });
  scheduler.start();

  std::uint64_t reads = 0;
  for (int i = 0; i < 50; ++i) reads += scheduler.stats().at(0).samples;  // races the strand
  EXPECT_TRUE(wait_until(mu, cv, [&] { return published >= 5; }));
  scheduler.stop();
  guard.reset();
  io.stop();
  t1.join();
  t2.join();
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);
  EXPECT_GE(scheduler.stats().at(0).samples, 5u);
  EXPECT_EQ(scheduler.stats().at(0).state, ProbeState::stopped);
  (void)reads;
}

class CountingBlockingProbe : public BlockingProbe {
 public:
  using BlockingProbe::BlockingProbe;
  std::string_view name() const noexcept override { return "blocking"; }
  std::atomic<int> samples{0};

 protected:
  Detection detect() override { return TestProbe::available(1); }
  GpuSnapshot sample() override {
    ++samples;
    return TestProbe::ok(1).snapshot;
  }
};

TEST(SchedulerRealClock, DrivesABlockingProbeOnTheWorkPool) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  WorkPool pool(2);
  auto probe =
      std::make_shared<CountingBlockingProbe>(ProbeExecutors{io.get_executor(), pool.executor()});

  std::mutex mu;
  std::condition_variable cv;
  std::vector<GpuSnapshot> got;
  Scheduler scheduler(io.get_executor(), [&](GpuSnapshot s) {
    std::lock_guard lock(mu);
    got.push_back(std::move(s));
    cv.notify_all();
  });
  scheduler.add(probe, ScheduleOptions{5ms, 1s, 5ms, 50ms, 3});
  std::thread io_thread([&] { io.run(); });
  scheduler.start();
  EXPECT_TRUE(wait_until(mu, cv, [&] { return got.size() >= 3; }));
  scheduler.stop();
  guard.reset();
  io.stop();
  io_thread.join();
  const auto r = pool.stop(5s);
  EXPECT_EQ(r.abandoned, 0u);

  std::lock_guard lock(mu);
  ASSERT_GE(got.size(), 3u);
  EXPECT_EQ(got[0].probe, "blocking");
  EXPECT_EQ(got[0].devices.size(), 1u);
  EXPECT_GE(probe->samples.load(), 3);
}

}  // namespace
}  // namespace gpustream::test
