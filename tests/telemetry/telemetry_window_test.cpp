// Telemetry's sampling now and named windows: sample_now, begin_window/end_window (overlapping,
// nested), end_windows and next_window sharing one edge sample, name mistakes. The probe is the
// simulated one with a known power curve on a clock the test sets (no sleeps: each blocking call
// waits only for its own fresh sample).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpustream/probes/simulated_probe.hpp"
#include "gpustream/telemetry.hpp"
#include "support/test_probe.hpp"

namespace gpustream {
namespace {

using namespace std::chrono_literals;
constexpr std::int64_t kMs = 1'000'000;

class TelemetryWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Config c;
    c.interval = std::chrono::milliseconds{60000};  // the grid stays out of the way
    c.sample_timeout = std::chrono::milliseconds{10000};
    auto clock = clock_;
    auto curve = curve_;
    telemetry_ = std::make_unique<Telemetry>(
        c, [clock, curve](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
          SimulatedProbeOptions o;
          o.devices = 2;
          o.monotonic_clock = [clock] { return clock->load(); };
          o.known_power = curve;
          return std::vector<ProbePtr>{make_simulated_probe(ex, o)};
        });
    telemetry_->start();
    ASSERT_EQ(telemetry_->wait_for_first_samples(10s).size(), 1u);
  }
  void TearDown() override { telemetry_->stop(); }

  void set_ms(std::int64_t ms) { clock_->store(kBase + ms * kMs); }
  double truth(std::int64_t ms0, std::int64_t ms1) const {
    return curve_.energy_at(kBase + ms1 * kMs) - curve_.energy_at(kBase + ms0 * kMs);
  }
  static void expect_energy(const WindowSummary& s, double truth) {
    ASSERT_EQ(s.devices.size(), 2u) << s.name;
    EXPECT_TRUE(s.exact_edges) << s.name;
    for (const auto& d : s.devices) {
      EXPECT_EQ(d.begin_edge, EdgeKind::sampled);
      EXPECT_EQ(d.end_edge, EdgeKind::sampled);
      EXPECT_NEAR(d.energy_joules.value_or(-1), truth, 1e-6 * truth) << s.name;
    }
  }

  static constexpr std::int64_t kBase = 1'000'000'000'000;  // 1000 s: never 0
  std::shared_ptr<std::atomic<std::int64_t>> clock_ =
      std::make_shared<std::atomic<std::int64_t>>(kBase);
  SimulatedProbeOptions::KnownPower curve_{200, 100, std::chrono::seconds{1}, true};
  std::unique_ptr<Telemetry> telemetry_;
};

TEST_F(TelemetryWindowTest, SampleNowReturnsAFreshPublishedSnapshot) {
  const auto before = telemetry_->channel().last_sequence();
  set_ms(5);
  const auto fresh = telemetry_->sample_now();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_GT(fresh[0]->sequence, before);
  EXPECT_EQ(fresh[0]->monotonic_ns, kBase + 5 * kMs);              // taken now
  EXPECT_EQ(telemetry_->channel().latest("simulated"), fresh[0]);  // published like any other

  const auto detailed = telemetry_->request_samples({{"nope"}, {}, {}});
  EXPECT_TRUE(detailed.empty());  // the filter selects no probe
}

TEST_F(TelemetryWindowTest, NamedWindowsOverlapAndNest) {
  set_ms(0);
  telemetry_->begin_window("epoch");
  set_ms(10);
  telemetry_->begin_window("step");
  set_ms(60);  // a 50 ms step
  const auto step = telemetry_->end_window("step");
  set_ms(70);
  telemetry_->begin_window("other");
  set_ms(10070);  // a 10 s window
  const auto other = telemetry_->end_window("other");
  set_ms(10100);
  const auto epoch = telemetry_->end_window("epoch");

  EXPECT_EQ(step.name, "step");
  expect_energy(step, truth(10, 60));
  expect_energy(other, truth(70, 10070));
  expect_energy(epoch, truth(0, 10100));
  EXPECT_EQ(epoch.overhead.edge_samples, 2u);
  EXPECT_TRUE(telemetry_->open_windows().empty());
}

TEST_F(TelemetryWindowTest, NameMistakesAreClearErrors) {
  EXPECT_THROW(telemetry_->end_window("never"), std::invalid_argument);
  EXPECT_THROW(telemetry_->begin_window(""), std::invalid_argument);
  telemetry_->begin_window("a");
  EXPECT_THROW(telemetry_->begin_window("a"), std::invalid_argument);
  EXPECT_THROW(telemetry_->end_windows({"a", "a"}), std::invalid_argument);
  EXPECT_THROW(telemetry_->end_windows({"a", "never"}), std::invalid_argument);
  EXPECT_EQ(telemetry_->open_windows(), std::vector<std::string>{"a"});  // none was closed
  telemetry_->end_window("a");
  telemetry_->begin_window("a");  // the name is free again
  EXPECT_NO_THROW(telemetry_->end_window("a"));
  try {
    telemetry_->end_window("a");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "end_window: no open window named 'a'");
  }
}

TEST_F(TelemetryWindowTest, CoincidingEdgesShareOneSample) {
  set_ms(0);
  telemetry_->begin_window("a");
  telemetry_->begin_window("b");
  set_ms(40);
  const auto seq = telemetry_->channel().last_sequence();
  const auto both = telemetry_->end_windows({"a", "b"});
  EXPECT_EQ(telemetry_->channel().last_sequence(), seq + 1);  // one sample for both
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].name, "a");
  EXPECT_EQ(both[1].name, "b");
  expect_energy(both[0], truth(0, 40));
  expect_energy(both[1], truth(0, 40));
  EXPECT_EQ(both[0].devices[0].end_edge_ns, both[1].devices[0].end_edge_ns);
}

TEST_F(TelemetryWindowTest, NextWindowTilesStepsWithOneSamplePerBoundary) {
  set_ms(0);
  telemetry_->begin_window("step");
  double total = 0;
  for (int i = 1; i <= 5; ++i) {
    set_ms(50 * i);
    const auto seq = telemetry_->channel().last_sequence();
    const auto s = telemetry_->next_window("step");
    EXPECT_EQ(telemetry_->channel().last_sequence(), seq + 1);
    expect_energy(s, truth(50 * (i - 1), 50 * i));
    total += s.devices[0].energy_joules.value_or(0);
  }
  telemetry_->end_window("step");
  EXPECT_NEAR(total, truth(0, 250), 1e-6 * total);  // no gap, no overlap between steps
}

// The overhead says what each edge cost the caller: end_window, end_windows (one shared sample)
// and next_window (one sample for both the end and the next begin) all wait for a fresh sample,
// so the time spent is more than 0 and no more than the call itself took.
TEST_F(TelemetryWindowTest, OverheadCountsTheEndEdgesLatency) {
  const auto timed = [](auto&& call) {
    const auto t0 = steady_now_ns();
    auto result = call();
    return std::make_pair(std::move(result), steady_now_ns() - t0);
  };
  const auto expect_latency = [](std::int64_t latency, std::int64_t call_ns, const char* what) {
    EXPECT_GT(latency, 0) << what;
    EXPECT_LE(latency, call_ns) << what;
  };
  set_ms(0);
  telemetry_->begin_window("one");
  telemetry_->begin_window("a");
  telemetry_->begin_window("b");
  telemetry_->begin_window("step");
  set_ms(40);
  const auto [one, one_ns] = timed([&] { return telemetry_->end_window("one"); });
  expect_latency(one.overhead.end_latency_ns, one_ns, "end_window");
  EXPECT_GT(one.overhead.begin_latency_ns, 0);
  const auto [both, both_ns] = timed([&] { return telemetry_->end_windows({"a", "b"}); });
  ASSERT_EQ(both.size(), 2u);
  expect_latency(both[0].overhead.end_latency_ns, both_ns, "end_windows");
  EXPECT_EQ(both[0].overhead.end_latency_ns, both[1].overhead.end_latency_ns);  // one sample
  const auto [step, step_ns] = timed([&] { return telemetry_->next_window("step"); });
  expect_latency(step.overhead.end_latency_ns, step_ns, "next_window");
  set_ms(80);
  const auto next = telemetry_->end_window("step");
  // The next step began at that boundary sample: its begin cost is that sample's own latency
  // (request to answer), inside the time next_window waited for it.
  EXPECT_GT(next.overhead.begin_latency_ns, 0);
  EXPECT_LE(next.overhead.begin_latency_ns, step.overhead.end_latency_ns);
  EXPECT_GT(next.overhead.end_latency_ns, 0);
}

TEST_F(TelemetryWindowTest, AfterStopEdgesAreEstimatedAndSaySo) {
  set_ms(0);
  telemetry_->begin_window("w");
  telemetry_->stop();
  const auto s = telemetry_->end_window("w");
  EXPECT_FALSE(s.exact_edges);
  ASSERT_EQ(s.edge_errors.size(), 1u);
  EXPECT_EQ(s.edge_errors[0].rfind("simulated: end: stopped", 0), 0u) << s.edge_errors[0];
  EXPECT_EQ(s.overhead.failed_edge_samples, 1u);
  EXPECT_TRUE(telemetry_->sample_now().empty());
}

// A probe whose detection found no source (no such hardware here: the default probes on most
// machines) has no devices and is no edge: it is not asked for an edge sample, so a window lists
// no error for it and its edges are exact. Before, each such probe added an edge error per edge
// while exact_edges stayed true.
TEST(TelemetryWindowUnavailableTest, AProbeFoundUnavailableIsNoEdge) {
  Config c;
  c.interval = std::chrono::milliseconds{60000};
  c.sample_timeout = std::chrono::milliseconds{10000};
  Telemetry telemetry(c, [](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
    auto absent = std::make_shared<test::TestProbe>("absent", ex.io);
    absent->script_detect([](std::uint64_t) { return test::TestProbe::unavailable("no driver"); });
    SimulatedProbeOptions o;
    o.devices = 1;
    return std::vector<ProbePtr>{absent, make_simulated_probe(ex, o)};
  });
  telemetry.start();
  ASSERT_EQ(telemetry.wait_for_first_samples(10s).size(), 1u);
  const auto edges = telemetry.request_samples();
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].probe, "simulated");
  EXPECT_TRUE(edges[0].ok());

  telemetry.begin_window("w");
  const auto s = telemetry.end_window("w");
  EXPECT_TRUE(s.exact_edges);
  EXPECT_TRUE(s.edge_errors.empty()) << s.edge_errors.front();
  EXPECT_EQ(s.overhead.edge_samples, 2u);
  EXPECT_EQ(s.overhead.failed_edge_samples, 0u);
  ASSERT_EQ(s.devices.size(), 1u);
  telemetry.stop();
}

// Named windows subscribe nothing: the Telemetry's publish sink feeds them on the publishing
// thread. Opening, closing and tiling windows leaves the channel's subscribers as they were; and
// that feed, not the channel's history, carries what is published inside a window, so a window
// longer than the history misses none.
TEST(TelemetryWindowFeed, WindowsSubscribeNothingAndTheSinkFeedsTheirStream) {
  Config c;
  c.interval = std::chrono::milliseconds{60000};
  c.sample_timeout = std::chrono::milliseconds{10000};
  c.history = 4;  // far fewer than a window holds
  auto clock = std::make_shared<std::atomic<std::int64_t>>(1'000'000'000'000);
  Telemetry t(c, [clock](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
    SimulatedProbeOptions o;
    o.devices = 2;
    o.monotonic_clock = [clock] { return clock->load(); };
    return std::vector<ProbePtr>{make_simulated_probe(ex, o)};
  });
  t.start();
  ASSERT_EQ(t.wait_for_first_samples(10s).size(), 1u);
  const auto tick = [&] { clock->fetch_add(kMs); };
  const std::size_t before = t.channel().subscriber_count();

  tick();
  t.begin_window("epoch");
  const std::size_t with_feed = t.channel().subscriber_count();
  EXPECT_EQ(with_feed, before);
  tick();
  t.begin_window("step");
  for (int i = 0; i < 20; ++i) {  // 20 snapshots inside both windows
    tick();
    ASSERT_EQ(t.sample_now().size(), 1u);
  }
  EXPECT_EQ(t.channel().subscriber_count(), with_feed);
  tick();
  auto step = t.next_window("step");
  EXPECT_EQ(t.channel().subscriber_count(), with_feed);
  tick();
  const auto closed = t.end_windows({"step", "epoch"});
  EXPECT_EQ(t.channel().subscriber_count(), with_feed);
  tick();
  t.begin_window("again");
  EXPECT_EQ(t.channel().subscriber_count(), with_feed);
  tick();
  t.end_window("again");

  // begin edge + 20 + end edge, none missed although the history holds 4.
  EXPECT_EQ(step.snapshots, 22u);
  EXPECT_EQ(step.missed_snapshots, 0u);
  EXPECT_TRUE(step.exact_edges);
  EXPECT_EQ(closed[0].snapshots, 2u);   // the tiled step: its two edges
  EXPECT_EQ(closed[1].snapshots, 24u);  // epoch: its edges, step's begin, 20, the boundary
  EXPECT_EQ(closed[1].missed_snapshots, 0u);
  EXPECT_TRUE(closed[1].exact_edges);
  t.stop();
}

// A probe that samples inline (the simulated probe's way: Probe::samples_inline) is sampled for
// a window's edges on the caller's own thread, not on the io thread.
TEST(TelemetryWindowInline, EdgesOfAProbeThatSamplesInlineAreTakenOnTheCallersThread) {
  Config c;
  c.interval = std::chrono::milliseconds{60000};
  c.sample_timeout = std::chrono::milliseconds{10000};
  std::shared_ptr<test::TestProbe> probe;
  Telemetry t(c, [&probe](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
    probe = std::make_shared<test::TestProbe>("inline", ex.io);
    probe->set_samples_inline(true);
    probe->script_sample([](std::uint64_t) { return test::TestProbe::ok(2); });
    return std::vector<ProbePtr>{probe};
  });
  t.start();
  ASSERT_EQ(t.wait_for_first_samples(10s).size(), 1u);
  // Once answered, nothing of the first sample is left in flight: the probe is idle.
  ASSERT_EQ(t.sample_now().size(), 1u);
  const auto inline_before = probe->inline_calls();
  const auto subscribers = t.channel().subscriber_count();

  t.begin_window("w");
  const auto s = t.end_window("w");
  EXPECT_EQ(probe->inline_calls(), inline_before + 2);  // both edges
  EXPECT_EQ(probe->last_inline_thread(), std::this_thread::get_id());
  EXPECT_EQ(s.overhead.edge_samples, 2u);
  EXPECT_EQ(s.overhead.failed_edge_samples, 0u);
  EXPECT_TRUE(s.edge_errors.empty());
  EXPECT_EQ(s.snapshots, 2u);  // its two edges
  EXPECT_EQ(t.channel().subscriber_count(), subscribers);
  EXPECT_EQ(probe->max_samples_in_flight(), 1u);
  t.stop();
}

// Windows opened and closed on several threads at once, over the simulated probe (edges taken
// on the callers' threads, or joined when another caller's is in flight): every edge is a sample,
// every window exact, and no edge fails.
TEST(TelemetryWindowInline, ConcurrentWindowsOnSeveralThreadsAreAllExact) {
  Config c;
  c.interval = std::chrono::milliseconds{60000};
  c.sample_timeout = std::chrono::milliseconds{10000};
  Telemetry t(c, [](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
    SimulatedProbeOptions o;
    o.devices = 2;
    return std::vector<ProbePtr>{make_simulated_probe(ex, o)};
  });
  t.start();
  ASSERT_EQ(t.wait_for_first_samples(10s).size(), 1u);
  constexpr int kThreads = 3, kEach = 30;
  std::atomic<int> inexact{0}, failed{0}, windows{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      const std::string name = "w" + std::to_string(i);
      for (int k = 0; k < kEach; ++k) {
        t.begin_window(name);
        const auto s = t.end_window(name);
        if (!s.exact_edges) ++inexact;
        failed += static_cast<int>(s.overhead.failed_edge_samples);
        ++windows;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(windows.load(), kThreads * kEach);
  EXPECT_EQ(inexact.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_TRUE(t.open_windows().empty());
  t.stop();
}

}  // namespace
}  // namespace gpustream
