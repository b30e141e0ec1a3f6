// Scheduler::request_sample for a probe that samples inline (Probe::samples_inline, the
// simulated probe's way): the sample is taken, published and answered on the requesting thread,
// with no hop to the io thread, and it still joins or is joined, is adopted by a tick, keeps one
// sample in flight, and is answered "stopped" by a stop. Time is the manual clock; the io
// context runs on the test's thread (poll()), the requests on threads of their own where it
// matters. Sequencing uses promises (a script that waits), never sleeps.
#include <atomic>
#include <future>
#include <thread>

#include "gpustream/errors.hpp"
#include "scheduler/scheduler_fixture.hpp"

namespace gpustream::test {
namespace {

/// What one request_sample handler received, and on which thread (thread-safe).
struct HereAnswer {
  std::atomic<int> calls{0};
  boost::system::error_code ec;
  std::shared_ptr<const GpuSnapshot> snapshot;
  std::thread::id thread;

  ManualScheduler::SampleNowHandler handler() {
    return [this](boost::system::error_code e, std::shared_ptr<const GpuSnapshot> s) {
      ec = e;
      snapshot = std::move(s);
      thread = std::this_thread::get_id();
      ++calls;  // last: a reader that sees calls > 0 sees the rest
    };
  }
};

/// A sample script whose call number `hold` waits, once it has started, until release():
/// lets a test act while an inline sample is in progress on another thread.
struct HeldSample {
  std::uint64_t hold = 0;
  std::promise<void> started;
  std::promise<void> release_;
  std::shared_future<void> released{release_.get_future().share()};

  TestProbe::SampleScript script() {
    return [this](std::uint64_t call) -> std::optional<TestProbe::SampleResult> {
      if (call == hold) {
        started.set_value();
        released.wait();
      }
      return TestProbe::ok(2);
    };
  }
  void wait_started() { started.get_future().wait(); }
  void release() { release_.set_value(); }
};

class SchedulerSampleHereTest : public SchedulerTest {
 protected:
  /// An inline probe, scheduled every 100 ms, detected and sampled once (t = 0).
  std::shared_ptr<TestProbe> inline_probe(TestProbe::SampleScript script) {
    auto probe = make_probe("sim");
    probe->set_samples_inline(true);
    probe->script_sample(std::move(script));
    scheduler().add(probe, options(100ms));
    start();
    poll();  // the first (periodic) sample's completion
    EXPECT_EQ(stats().samples, 1u);
    return probe;
  }
};

TEST_F(SchedulerSampleHereTest, AnIdleInlineProbeIsSampledAndAnsweredOnTheCallersThread) {
  auto probe = inline_probe([](std::uint64_t) { return TestProbe::ok(2); });
  run_for(30ms);
  HereAnswer a;
  std::thread caller([&] { scheduler().request_sample("sim", a.handler()); });
  const auto caller_id = caller.get_id();
  caller.join();
  // Answered before request_sample returned, with nothing run on the io context meanwhile.
  ASSERT_EQ(a.calls.load(), 1);
  EXPECT_EQ(a.thread, caller_id);
  EXPECT_EQ(probe->last_inline_thread(), caller_id);
  EXPECT_EQ(probe->inline_calls(), 1u);
  EXPECT_FALSE(a.ec);
  ASSERT_TRUE(a.snapshot);
  EXPECT_EQ(a.snapshot->devices.size(), 2u);
  EXPECT_EQ(a.snapshot->probe, "sim");
  ASSERT_EQ(published_.size(), 2u);  // published like any other sample
  EXPECT_EQ(published_.back().devices.size(), 2u);
  EXPECT_EQ(stats().samples, 2u);
  EXPECT_EQ(probe->sample_times().back(), 30'000'000);
  // The grid is where it was: the ticks at 100 and 200 ms sample (on the io context).
  run_for(180ms);
  EXPECT_EQ(probe->sample_times(), ms_list({0, 30, 100, 200}));
  EXPECT_EQ(probe->inline_calls(), 1u);
  EXPECT_EQ(stats().overruns, 0u);
}

TEST_F(SchedulerSampleHereTest, ATickWhileTheCallersSampleRunsAdoptsIt) {
  HeldSample held;
  held.hold = 1;  // the caller's sample (the first periodic one is call 0)
  auto probe = inline_probe(held.script());
  run_for(90ms);
  HereAnswer a;
  std::thread caller([&] { scheduler().request_sample("sim", a.handler()); });
  held.wait_started();
  // The io thread's timer fires for the tick at 100 ms while the caller samples the same probe:
  // the tick is served by the caller's sample (no second sample, no overrun).
  run_for(20ms);
  EXPECT_EQ(probe->sample_calls(), 2u);
  EXPECT_EQ(stats().overruns, 0u);
  EXPECT_EQ(a.calls.load(), 0);
  held.release();
  caller.join();
  ASSERT_EQ(a.calls.load(), 1);
  EXPECT_FALSE(a.ec);
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);
  EXPECT_EQ(stats().samples, 2u);
  poll();
  run_for(190ms);  // t = 300: the grid goes on at 200, 300
  EXPECT_EQ(probe->sample_times(), ms_list({0, 90, 200, 300}));
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);
}

TEST_F(SchedulerSampleHereTest, ARequestWhileTheTimersSampleIsInFlightJoinsIt) {
  // The periodic sample at 100 ms stays pending (the script leaves it to the test).
  auto probe = inline_probe([](std::uint64_t call) -> std::optional<TestProbe::SampleResult> {
    if (call == 1) return std::nullopt;
    return TestProbe::ok(2);
  });
  run_for(100ms);
  ASSERT_TRUE(probe->sample_pending());
  HereAnswer a;
  std::thread caller([&] { scheduler().request_sample("sim", a.handler()); });
  caller.join();
  poll();
  EXPECT_EQ(a.calls.load(), 0);  // waiting for the sample in flight, not sampling beside it
  EXPECT_EQ(probe->inline_calls(), 0u);
  ASSERT_TRUE(probe->complete_sample(TestProbe::ok(3)));
  poll();
  ASSERT_EQ(a.calls.load(), 1);
  EXPECT_FALSE(a.ec);
  ASSERT_TRUE(a.snapshot);
  EXPECT_EQ(a.snapshot->devices.size(), 3u);  // the joined sample
  EXPECT_EQ(probe->sample_calls(), 2u);
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);
}

TEST_F(SchedulerSampleHereTest, TwoCallersAtOnceShareOneSample) {
  HeldSample held;
  held.hold = 1;
  auto probe = inline_probe(held.script());
  run_for(40ms);
  HereAnswer first, second;
  std::thread caller1([&] { scheduler().request_sample("sim", first.handler()); });
  held.wait_started();
  // The second caller finds the probe claimed: its request goes to the io thread and joins.
  std::thread caller2([&] { scheduler().request_sample("sim", second.handler()); });
  caller2.join();
  poll();
  EXPECT_EQ(second.calls.load(), 0);
  held.release();
  caller1.join();
  ASSERT_EQ(first.calls.load(), 1);
  poll();  // the joined request is answered on the io thread
  ASSERT_EQ(second.calls.load(), 1);
  EXPECT_EQ(second.thread, std::this_thread::get_id());
  EXPECT_FALSE(first.ec);
  EXPECT_FALSE(second.ec);
  ASSERT_TRUE(first.snapshot);
  EXPECT_EQ(first.snapshot, second.snapshot);  // the same object
  EXPECT_EQ(probe->sample_calls(), 2u);        // one sample for both
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);
  EXPECT_EQ(published_.size(), 2u);
}

TEST_F(SchedulerSampleHereTest, ARequestMadeOnceTheCallersSampleIsOutGetsAFreshOne) {
  auto probe = inline_probe([](std::uint64_t) { return TestProbe::ok(2); });
  run_for(40ms);
  // Hold the caller in the stats callback of its sample: published, the claim not yet released.
  std::promise<void> reported, release;
  auto released = release.get_future().share();
  on_stats_ = [&](const ProbeStats& s) {
    if (s.samples != 2) return;
    reported.set_value();
    released.wait();
  };
  HereAnswer edge, late;
  std::thread caller([&] { scheduler().request_sample("sim", edge.handler()); });
  reported.get_future().wait();
  ASSERT_EQ(published_.size(), 2u);
  scheduler().request_sample("sim", late.handler());  // the probe is claimed: to the io thread
  poll();
  EXPECT_EQ(late.calls.load(), 0);  // not answered with a sample taken before it was made
  release.set_value();
  caller.join();
  ASSERT_EQ(edge.calls.load(), 1);
  poll();  // the claim ends on the io thread, which samples again for the late request
  poll();
  ASSERT_EQ(late.calls.load(), 1);
  EXPECT_FALSE(late.ec);
  ASSERT_TRUE(late.snapshot);
  EXPECT_NE(late.snapshot, edge.snapshot);
  EXPECT_EQ(probe->sample_calls(), 3u);  // the first, the caller's, the late request's
  EXPECT_EQ(published_.size(), 3u);
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);
}

TEST_F(SchedulerSampleHereTest, StopDuringTheCallersSampleAnswersStoppedAndPublishesNothing) {
  HeldSample held;
  held.hold = 1;
  auto probe = inline_probe(held.script());
  run_for(40ms);
  HereAnswer edge, joined;
  std::thread caller([&] { scheduler().request_sample("sim", edge.handler()); });
  held.wait_started();
  scheduler().request_sample("sim", joined.handler());  // joins the caller's sample
  poll();
  const auto published_before = published_.size();
  scheduler().stop();
  poll();
  ASSERT_EQ(joined.calls.load(), 1);
  EXPECT_EQ(joined.ec, make_error_code(errc::stopped));
  EXPECT_EQ(probe->cancel_calls(), 1u);  // told, as for any sample in flight
  held.release();
  caller.join();
  ASSERT_EQ(edge.calls.load(), 1);
  EXPECT_EQ(edge.ec, make_error_code(errc::stopped));
  EXPECT_FALSE(edge.snapshot);
  poll();
  EXPECT_EQ(published_.size(), published_before);  // nothing published after the stop
}

TEST_F(SchedulerSampleHereTest, AFailedInlineSampleIsPublishedAndStartsNoBackoff) {
  auto probe = inline_probe([](std::uint64_t call) {
    return call == 1 ? TestProbe::failed("GPU fell off the bus") : TestProbe::ok();
  });
  run_for(50ms);
  HereAnswer a;
  scheduler().request_sample("sim", a.handler());
  ASSERT_EQ(a.calls.load(), 1);
  EXPECT_EQ(a.ec, make_error_code(errc::sample_failed));
  ASSERT_TRUE(a.snapshot);  // the failure snapshot, as published
  ASSERT_FALSE(a.snapshot->errors.empty());
  EXPECT_EQ(a.snapshot->errors.front().message, "GPU fell off the bus");
  EXPECT_EQ(stats().failures, 1u);
  run_for(150ms);  // no backoff: the grid goes on at 100, 200
  EXPECT_EQ(probe->sample_times(), ms_list({0, 50, 100, 200}));
  EXPECT_EQ(stats().consecutive_failures, 0u);
  EXPECT_EQ(stats().state, ProbeState::available);
}

TEST_F(SchedulerSampleHereTest, ATickThatAdoptedAFailedInlineSampleBacksOff) {
  HeldSample held;
  auto probe = make_probe("sim");
  probe->set_samples_inline(true);
  // Call 0 (the first periodic sample) succeeds; call 1 (the caller's) waits, then fails.
  probe->script_sample([&held](std::uint64_t call) -> std::optional<TestProbe::SampleResult> {
    if (call == 0) return TestProbe::ok();
    if (call == 1) {
      held.started.set_value();
      held.released.wait();
    }
    return TestProbe::failed("broken");
  });
  scheduler().add(probe, options(100ms, 10s, 500ms));
  start();
  run_for(90ms);
  HereAnswer a;
  std::thread caller([&] { scheduler().request_sample("sim", a.handler()); });
  held.wait_started();
  run_for(20ms);  // the tick at 100 ms adopts it: from here on a periodic sample
  held.release();
  caller.join();
  ASSERT_EQ(a.calls.load(), 1);
  EXPECT_EQ(a.ec, make_error_code(errc::sample_failed));
  poll();  // the io thread applies a periodic sample's failure: backoff
  EXPECT_EQ(stats().state, ProbeState::backoff);
  EXPECT_EQ(stats().consecutive_failures, 1u);
  HereAnswer b;
  scheduler().request_sample("sim", b.handler());
  poll();
  ASSERT_EQ(b.calls.load(), 1);
  EXPECT_EQ(b.ec, make_error_code(errc::probe_unavailable));
  EXPECT_EQ(probe->sample_calls(), 2u);
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);
}

TEST_F(SchedulerSampleHereTest, ManyCallersAndTheTimerKeepOneSampleInFlightAndTheirOrder) {
  std::atomic<std::int64_t> taken{0};
  auto probe = inline_probe([&taken](std::uint64_t) {
    auto r = TestProbe::ok();
    r.snapshot.monotonic_ns = ++taken;  // the order the samples were taken in
    return r;
  });
  constexpr int kThreads = 3, kEach = 40;
  std::atomic<int> answered{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i)
        scheduler().request_sample("sim", [&](boost::system::error_code ec, auto snap) {
          if (ec || !snap) ++errors;
          ++answered;
        });
    });
  // Meanwhile the io context runs here: ticks every 10 ms of manual time, joined requests.
  while (answered.load() < kThreads * kEach) run_for(10ms);
  for (auto& t : threads) t.join();
  poll();
  EXPECT_EQ(answered.load(), kThreads * kEach);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);
  // Published in the order taken, each once.
  ASSERT_GE(published_.size(), 2u);
  for (std::size_t i = 1; i < published_.size(); ++i)
    EXPECT_LT(published_[i - 1].monotonic_ns, published_[i].monotonic_ns);
  EXPECT_EQ(published_.size(), probe->sample_calls());
}

}  // namespace
}  // namespace gpustream::test
