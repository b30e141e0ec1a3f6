// tests/support/manual_clock.hpp — a clock the test moves by hand, for Asio timers.
//
//   using Timer = boost::asio::basic_waitable_timer<ManualClock, ManualWaitTraits>;
//   ManualClock::reset();
//   ManualClock::advance(100ms);
//   io.poll();   // runs the handlers of the timers that expired
//
// ManualClock::now() only moves when the test calls advance()/set()/reset(). Its state is
// process-wide (Asio calls Clock::now() statically) and atomic; tests reset it in SetUp.
//
// ManualWaitTraits tells the reactor that every timer is due now, so its timerfd is always
// ready and each io_context::poll() re-checks the timer queue against ManualClock::now(). Drive
// such an io_context with poll()/poll_one() only: run() would spin while a timer is pending.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace gpustream::test {

struct ManualClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<ManualClock>;
  static constexpr bool is_steady = true;

  static time_point now() noexcept { return time_point(duration(now_ns().load())); }

  /// Back to the start (a non-zero epoch offset, so that 0 is never a valid "now").
  static void reset() noexcept { now_ns().store(kStart.count()); }
  static void advance(duration d) noexcept { now_ns().fetch_add(d.count()); }
  static void set(time_point t) noexcept { now_ns().store(t.time_since_epoch().count()); }
  /// Time since the last reset().
  static duration elapsed() noexcept { return duration(now_ns().load()) - kStart; }

  static constexpr duration kStart = std::chrono::hours(1);

 private:
  static std::atomic<rep>& now_ns() noexcept {
    static std::atomic<rep> value{kStart.count()};
    return value;
  }
};

struct ManualWaitTraits {
  static ManualClock::duration to_wait_duration(const ManualClock::duration&) {
    return ManualClock::duration::zero();
  }
  static ManualClock::duration to_wait_duration(const ManualClock::time_point&) {
    return ManualClock::duration::zero();
  }
};

}  // namespace gpustream::test
