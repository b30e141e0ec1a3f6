// AppleSiliconProbe against the fake macmon: one persistent child, the latest line, staleness
// on a driven clock, and supervision (crash, garbage, partial and long lines, silence, stop).
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <boost/asio/error.hpp>

#include "apple_test_util.hpp"
#include "gpustream/errors.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/apple_probe.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

using namespace std::chrono_literals;
using test::AppleRig;
using test::AppleSample;

const DeviceSample& gpu(const AppleSample& s) { return s.snapshot.devices.at(0); }
const Reading& util(const AppleSample& s) { return gpu(s).metrics[Metric::utilization_percent]; }

std::size_t count_errors(const GpuSnapshot& s, const std::string& code,
                         const std::string& part = {}) {
  return static_cast<std::size_t>(std::count_if(
      s.errors.begin(), s.errors.end(),
      [&](const auto& e) { return e.code == code && e.message.find(part) != std::string::npos; }));
}

TEST(AppleChild, EverySchemaEndToEnd) {
  const std::pair<const char*, const char*> cases[] = {
      {"v0.4", "v0.4-v0.6"}, {"v0.6", "v0.4-v0.6"}, {"v0.7", "v0.7"},
      {"v0.8.0", "v0.8.0"},  {"v0.8.1", "v0.8.1+"},
  };
  for (const auto& [schema, label] : cases) {
    AppleRig rig;
    rig.make(rig.options(std::string("--fake-schema ") + schema));
    ASSERT_TRUE(rig.wait_lines(1)) << schema;
    const auto s = rig.sample();
    EXPECT_FALSE(s.ec) << schema << ": " << s.ec.message();
    EXPECT_EQ(s.snapshot.probe, "apple");
    EXPECT_EQ(gpu(s).attributes.at("macmon_schema"), label);
    EXPECT_TRUE(util(s).has_value()) << schema;
    EXPECT_TRUE(gpu(s).metrics[Metric::memory_total_bytes].has_value()) << schema;
    EXPECT_TRUE(s.snapshot.host && s.snapshot.host->memory_total_bytes) << schema;
  }
}

TEST(AppleChild, OneChildFeedsEverySampleWithTheLatestLine) {
  AppleRig rig;
  rig.make(rig.options());
  ASSERT_TRUE(rig.wait_lines(1));
  const auto first_pid = rig.probe().status().pid;
  ASSERT_TRUE(first_pid);
  for (int i = 0; i < 20; ++i) {
    const auto s = rig.sample();
    EXPECT_FALSE(s.ec) << s.ec.message();
    ASSERT_TRUE(util(s).has_value());
  }
  ASSERT_TRUE(rig.run_until([&] { return rig.probe().status().lines_accepted >= 6; }));
  const auto st = rig.probe().status();
  EXPECT_EQ(st.starts, 1u);  // never one macmon per sample
  EXPECT_EQ(st.pid, first_pid);
  EXPECT_TRUE(st.running);
  EXPECT_EQ(st.lines_rejected, 0u);

  // The snapshot is macmon's moment: its timestamp, and the clock reading when the line came.
  const auto s = rig.sample();
  const std::int64_t stamps[] = {1773134100'123456789, 1773134101'100000000, 1773134102'123000000};
  EXPECT_NE(std::find(std::begin(stamps), std::end(stamps), s.snapshot.time_unix_ns),
            std::end(stamps));
  EXPECT_EQ(s.snapshot.monotonic_ns, 1'000'000'000'000);  // the rig's clock has not moved
  EXPECT_GT(s.snapshot.sample_duration_ns, 0);
  EXPECT_EQ(s.snapshot.sequence, 0u);
}

TEST(AppleChild, NotYetSeededBeforeTheFirstLineThenTheFirstSampleWaitsForIt) {
  AppleRig rig;
  rig.make(rig.options("--fake-first-delay 60000"));
  const auto s = rig.sample();
  EXPECT_FALSE(s.ec);  // macmon runs; it just has not printed yet
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto& r = gpu(s).metrics[static_cast<Metric>(i)];
    EXPECT_FALSE(r.has_value());
    EXPECT_EQ(r.reason(), Absence::not_yet_seeded);
  }
  EXPECT_FALSE(s.snapshot.host);

  AppleRig waiting;
  auto o = waiting.options();
  o.first_line_wait = 10s;  // far more than the fake's 20 ms
  waiting.make(o);
  const auto w = waiting.sample();
  EXPECT_TRUE(util(w).has_value()) << to_string(util(w).reason());
}

TEST(AppleChild, CancelEndsTheWaitForTheFirstLine) {
  AppleRig rig;
  auto o = rig.options("--fake-first-delay 60000");
  o.first_line_wait = 60s;
  rig.make(o);
  std::optional<AppleSample> out;
  rig.probe().async_sample([&](boost::system::error_code ec, GpuSnapshot snap) {
    out = AppleSample{ec, std::move(snap)};
  });
  ASSERT_TRUE(rig.run_until([&] { return rig.probe().status().running; }));
  EXPECT_FALSE(out);
  rig.probe().cancel();
  ASSERT_TRUE(rig.run_until([&] { return out.has_value(); }));
  EXPECT_EQ(out->ec, boost::asio::error::operation_aborted);
}

TEST(AppleChild, StaleAfterThreeSilentIntervalsUntilLinesComeAgain) {
  AppleRig rig;
  auto o = rig.options("--fake-pause-after 1");
  o.silence_restart = 0ms;
  rig.make(o);
  ASSERT_TRUE(rig.wait_lines(1));
  EXPECT_TRUE(util(rig.sample()).has_value());
  rig.advance(60ms);  // exactly 3 intervals: still fresh
  EXPECT_TRUE(util(rig.sample()).has_value());
  rig.advance(1ns);
  const auto stale = rig.sample();
  EXPECT_FALSE(stale.ec);  // macmon is running, only silent
  EXPECT_EQ(util(stale).reason(), Absence::stale);
  EXPECT_EQ(gpu(stale).metrics[Metric::power_watts].reason(), Absence::stale);
  EXPECT_EQ(gpu(stale).name, "Apple Silicon GPU");
  EXPECT_FALSE(stale.snapshot.host);
  EXPECT_EQ(count_errors(stale.snapshot, "stale", "printed nothing for 60 ms"), 1u);
  EXPECT_EQ(stale.snapshot.monotonic_ns, 1'000'000'000'000 + 60'000'001);

  const auto pid = rig.probe().status().pid;
  ASSERT_TRUE(pid);
  ASSERT_EQ(::kill(*pid, SIGUSR1), 0);  // the fake goes on printing
  ASSERT_TRUE(rig.run_until([&] { return rig.probe().status().lines_accepted >= 2; }));
  const auto fresh = rig.sample();
  EXPECT_TRUE(util(fresh).has_value());
  EXPECT_EQ(count_errors(fresh.snapshot, "stale"), 0u);
  EXPECT_EQ(rig.probe().status().starts, 1u);
}

TEST(AppleChild, ACrashedChildIsRestartedAndReported) {
  AppleRig rig;
  rig.make(rig.options("--fake-crash-after 2"));
  ASSERT_TRUE(rig.wait_lines(1));
  ASSERT_TRUE(rig.run_until([&] {
    const auto st = rig.probe().status();
    return st.starts >= 3 && st.lines_accepted >= 5;
  }));
  const auto s = rig.sample();
  EXPECT_GE(count_errors(s.snapshot, "tool_failed", "SIGSEGV"), 1u);
  EXPECT_TRUE(rig.probe().status().last_problem.find("restarting in") != std::string::npos);
}

TEST(AppleChild, AChildThatNeverStartsIsAToolFailure) {
  AppleRig rig;
  auto o = rig.options();
  o.macmon = "/nonexistent-gpustream-dir/macmon";
  rig.make(o);
  const auto s = rig.sample();
  EXPECT_EQ(s.ec, make_error_code(errc::tool_failed));
  EXPECT_EQ(util(s).reason(), Absence::not_yet_seeded);
  EXPECT_GE(count_errors(s.snapshot, "tool_failed", "cannot start"), 1u);
}

TEST(AppleChild, GarbageAndCutOffLinesAreSkippedAndReportedOnce) {
  AppleRig rig;
  auto o = rig.options("--fake-garbage-at 2 --fake-partial-at 4");
  o.restart_initial = 60s;  // one run: its problems are counted exactly
  rig.make(o);
  ASSERT_TRUE(rig.wait_lines(1));
  ASSERT_TRUE(rig.run_until([&] {
    const auto st = rig.probe().status();
    return st.lines_rejected >= 2 && !st.running;  // the cut-off line, then the exit
  }));
  auto s = rig.sample();
  EXPECT_EQ(count_errors(s.snapshot, "parse_error", "not a macmon sample"), 1u);
  EXPECT_EQ(count_errors(s.snapshot, "parse_error", "middle of a line"), 1u);
  EXPECT_GE(count_errors(s.snapshot, "tool_failed", "exited with code 1"), 1u);
  EXPECT_TRUE(util(s).has_value());  // the good lines around them still count
  s = rig.sample();
  EXPECT_EQ(count_errors(s.snapshot, "parse_error"), 0u);  // each problem is reported once
}

TEST(AppleChild, AStreamOfGarbageIsLoggedOnce) {
  test::TempTree tree;
  const auto path = tree.file("garbage.jsonl", "not json\n{\"pad\":1}\n[1,2]\n");
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
  logger()->sinks().push_back(sink);
  {
    AppleRig rig;
    rig.make(rig.options("--fake-lines " + path));
    rig.sample();
    ASSERT_TRUE(rig.run_until([&] { return rig.probe().status().lines_rejected >= 10; }));
    EXPECT_EQ(rig.probe().status().lines_accepted, 0u);
  }
  logger()->sinks().pop_back();
  const auto logged = sink->last_formatted();
  const auto n = std::count_if(logged.begin(), logged.end(), [](const std::string& l) {
    return l.find("not a macmon sample") != std::string::npos;
  });
  EXPECT_EQ(n, 1);
}

TEST(AppleChild, ALineLongerThanTheCapIsSkipped) {
  AppleRig rig;
  auto o = rig.options("--fake-long-at 2 10000");
  o.max_line_bytes = 4096;
  rig.make(o);
  ASSERT_TRUE(rig.wait_lines(1));
  ASSERT_TRUE(rig.run_until([&] { return rig.probe().status().lines_accepted >= 3; }));
  EXPECT_EQ(rig.probe().status().lines_rejected, 1u);
  EXPECT_EQ(rig.probe().status().starts, 1u);
  const auto s = rig.sample();
  EXPECT_EQ(count_errors(s.snapshot, "line_too_long", "4096 bytes"), 1u);
}

TEST(AppleChild, ASilentChildIsRestarted) {
  AppleRig rig;
  auto o = rig.options("--fake-stop-after 1");
  o.silence_restart = 200ms;
  rig.make(o);
  ASSERT_TRUE(rig.wait_lines(1));
  const auto first_pid = rig.probe().status().pid;
  rig.advance(150ms);
  EXPECT_EQ(util(rig.sample()).reason(), Absence::stale);
  EXPECT_EQ(rig.probe().status().starts, 1u);
  rig.advance(50ms);
  const auto s = rig.sample();
  EXPECT_EQ(count_errors(s.snapshot, "tool_failed", "restarting it"), 1u);
  ASSERT_TRUE(rig.run_until([&] {
    const auto st = rig.probe().status();
    return st.starts == 2 && st.lines_accepted >= 2;
  }));
  EXPECT_NE(rig.probe().status().pid, first_pid);
  ASSERT_TRUE(first_pid);
  EXPECT_TRUE(rig.run_until([&] { return test::process_gone(*first_pid); }));
  EXPECT_TRUE(util(rig.sample()).has_value());
}

TEST(AppleChild, StopTerminatesTheChildAndTheNextSampleStartsAnother) {
  AppleRig rig;
  rig.make(rig.options());
  ASSERT_TRUE(rig.wait_lines(1));
  const auto pid = rig.probe().status().pid;
  ASSERT_TRUE(pid);
  rig.probe().stop();
  ASSERT_TRUE(rig.run_until([&] { return test::process_gone(*pid); }));
  ASSERT_TRUE(rig.run_until([&] { return !rig.probe().status().running; }));
  const auto accepted = rig.probe().status().lines_accepted;
  rig.sample();
  ASSERT_TRUE(rig.run_until([&] { return rig.probe().status().lines_accepted > accepted; }));
  EXPECT_EQ(rig.probe().status().starts, 2u);
}

TEST(AppleChild, DestroyingTheProbeKillsTheChild) {
  AppleRig rig;
  rig.make(rig.options("--fake-stop-after 1"));
  ASSERT_TRUE(rig.wait_lines(1));
  EXPECT_TRUE(rig.destroy_probe());
}

TEST(AppleChild, DestroyedAfterItsIoContextStoppedThenTheIoContextToo) {
  // As in Telemetry: the io thread is stopped, the probes are destroyed, then the io_context.
  std::optional<int> pid;
  {
    auto io = std::make_unique<boost::asio::io_context>();
    boost::asio::thread_pool pool(1);
    AppleRig options_only;
    auto o = options_only.options("--fake-stop-after 1");
    std::atomic<std::int64_t> clock{1};
    o.monotonic_clock = [&clock] { return clock.load(); };
    auto probe = make_apple_probe({io->get_executor(), pool.get_executor()}, o);
    bool sampled = false;
    probe->async_sample([&](boost::system::error_code, GpuSnapshot) { sampled = true; });
    const auto end = std::chrono::steady_clock::now() + 10s;
    while ((!sampled || probe->status().lines_accepted == 0) &&
           std::chrono::steady_clock::now() < end)
      io->run_one_for(20ms);
    ASSERT_EQ(probe->status().lines_accepted, 1u);
    pid = probe->status().pid;
    ASSERT_TRUE(pid);
    io->stop();
    probe.reset();  // posts its shutdown to an io_context that will not run it
    io.reset();     // destroys that handler: the child is killed and reaped here
  }
  EXPECT_TRUE(test::process_gone(*pid));
}

}  // namespace
}  // namespace gpustream
