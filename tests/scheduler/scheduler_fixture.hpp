// tests/scheduler/scheduler_fixture.hpp — a Scheduler on a manual clock, driven by the test.
//
// Time only moves when the test says so: run_for(total, step) advances ManualClock by `step`
// and polls the io_context, until `total` has passed. Every published snapshot is kept with the
// (manual) time it was published at.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <boost/asio/io_context.hpp>

#include "gpustream/detail/scheduler_impl.hpp"
#include "gpustream/log.hpp"
#include "gpustream/scheduler.hpp"
#include "support/manual_clock.hpp"
#include "support/test_probe.hpp"

namespace gpustream {

/// So that gtest prints states by name.
inline void PrintTo(ProbeState s, std::ostream* os) { *os << to_string(s); }

}  // namespace gpustream

namespace gpustream::test {

using namespace std::chrono_literals;
using ManualScheduler = BasicScheduler<ManualClock, ManualWaitTraits>;

/// Milliseconds since ManualClock::reset(), as TestProbe records them (ns).
inline std::int64_t manual_now_ns() { return ManualClock::elapsed().count(); }

inline std::vector<std::int64_t> ms_list(std::initializer_list<std::int64_t> ms) {
  std::vector<std::int64_t> out;
  for (auto m : ms) out.push_back(m * 1'000'000);
  return out;
}

/// Copies what the gpustream logger writes while it lives.
class LogCapture {
 public:
  // Captures every level (the SDK's default is warn; some lines counted here are info).
  LogCapture()
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256)), level_(logger()->level()) {
    logger()->sinks().push_back(sink_);
    logger()->set_level(spdlog::level::trace);
  }
  ~LogCapture() {
    logger()->set_level(level_);
    auto& sinks = logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::size_t count(const std::string& needle) const {
    const auto lines = sink_->last_formatted();
    return static_cast<std::size_t>(std::count_if(
        lines.begin(), lines.end(), [&](auto& l) { return l.find(needle) != std::string::npos; }));
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  spdlog::level::level_enum level_;
};

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override { ManualClock::reset(); }

  void TearDown() override {
    scheduler_.reset();
    for (auto& p : probes_) p->drop_pending();
    poll();
  }

  std::shared_ptr<TestProbe> make_probe(const std::string& name = "test") {
    auto p = std::make_shared<TestProbe>(name, io_.get_executor(), manual_now_ns);
    probes_.push_back(p);
    return p;
  }

  ManualScheduler& scheduler() {
    if (!scheduler_) {
      scheduler_ = std::make_unique<ManualScheduler>(
          io_.get_executor(),
          [this](GpuSnapshot s) {
            published_.push_back(std::move(s));
            published_at_.push_back(manual_now_ns());
          },
          [this](const ProbeStats& s) {
            stats_seen_.push_back(s);
            if (on_stats_) on_stats_(s);
          });
    }
    return *scheduler_;
  }

  static ScheduleOptions options(std::chrono::milliseconds interval,
                                 std::chrono::milliseconds timeout = 10s,
                                 std::chrono::milliseconds backoff_initial = 100ms,
                                 std::chrono::milliseconds backoff_max = 1000ms,
                                 std::uint32_t redetect_after = 3) {
    ScheduleOptions o;
    o.interval = interval;
    o.timeout = timeout;
    o.backoff_initial = backoff_initial;
    o.backoff_max = backoff_max;
    o.failures_before_redetect = redetect_after;
    return o;
  }

  void poll() {
    if (io_.stopped()) io_.restart();
    io_.poll();
  }

  /// Starts the scheduler and runs what is due at time 0 (detection, first sample).
  void start() {
    scheduler().start();
    poll();
  }

  /// Advances the manual clock by `step` and polls, until `total` has passed; `each` runs
  /// after every poll.
  void run_for(ManualClock::duration total, ManualClock::duration step = 1ms,
               const std::function<void()>& each = {}) {
    const auto end = ManualClock::now() + total;
    while (ManualClock::now() < end) {
      ManualClock::advance(std::min(step, end - ManualClock::now()));
      poll();
      if (each) {
        each();
        poll();
      }
    }
  }

  /// Advances to `t` since reset in one jump, then polls.
  void jump_to(ManualClock::duration t) {
    ManualClock::set(ManualClock::time_point(ManualClock::kStart + t));
    poll();
  }

  ProbeStats stats(std::size_t i = 0) { return scheduler().stats().at(i); }

  boost::asio::io_context io_;
  std::vector<std::shared_ptr<TestProbe>> probes_;
  std::vector<GpuSnapshot> published_;
  std::vector<std::int64_t> published_at_;
  std::vector<ProbeStats> stats_seen_;
  std::function<void(const ProbeStats&)> on_stats_;
  std::unique_ptr<ManualScheduler> scheduler_;
};

}  // namespace gpustream::test
