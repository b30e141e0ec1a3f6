// gpustream/detail/scheduler_book.hpp — the clock-independent half of the Scheduler: policy
// arithmetic (next tick, backoff) and the per-probe ledger (stats, logging, what a failed
// sample publishes). Not a public API.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include <boost/system/error_code.hpp>

#include "gpustream/log.hpp"
#include "gpustream/model.hpp"
#include "gpustream/probe.hpp"
#include "gpustream/probe_stats.hpp"
#include "gpustream/scheduler.hpp"

namespace gpustream::detail {

struct TickPlan {
  std::chrono::nanoseconds next;  // since the clock's epoch
  std::uint64_t skipped = 0;      // tick times that had already passed
};

/// The tick after the one due at `due`, on the grid due + k * interval. Tick times at or before
/// `now` are skipped (counted), so a late scheduler fires once, not in a burst.
TickPlan plan_next_tick(std::chrono::nanoseconds due, std::chrono::nanoseconds now,
                        std::chrono::nanoseconds interval) noexcept;

/// backoff_initial * 2^(attempt-1), capped at backoff_max; attempt >= 1.
std::chrono::milliseconds backoff_delay(const ScheduleOptions& options,
                                        std::uint64_t attempt) noexcept;

/// Short machine-readable name of an error code ("timeout", "tool_failed", "aborted", ...).
std::string error_code_name(const boost::system::error_code& ec);

/// Per-probe ledger. Every method takes the lock for a moment; none calls user code.
/// Thread safety: all methods are thread-safe; the Scheduler calls the mutating ones from its
/// strand and snapshot() from anywhere.
class ProbeBook {
 public:
  /// Validates and clamps `requested` (throws std::invalid_argument), warns about a clamp.
  ProbeBook(const Probe& probe, const ScheduleOptions& requested);

  const ScheduleOptions& options() const noexcept { return options_; }
  const std::string& name() const noexcept { return name_; }

  ProbeStats snapshot() const;

  void detect_started();
  /// Records an available detection and applies the probe's min_interval() as it is now: a
  /// probe's minimum can change with what detection chose (NVML vs nvidia-smi). Returns true when
  /// the effective interval changed. Call on the strand (options() is read there unlocked).
  bool detected_available(const Probe& probe, const Detection& d);
  void detected_unavailable(const std::string& reason);
  void detect_timed_out();
  /// Delay before the next detection after an unavailable one; records it.
  std::chrono::milliseconds unavailable_backoff();

  void missed(std::uint64_t ticks);
  void overrun();

  /// Counts a success, fills the snapshot's identity/time fields left empty, logs new errors of
  /// a partial sample once.
  void sample_ok(GpuSnapshot& snap, std::int64_t latency_ns);
  /// Counts a failure and turns `snap` into the snapshot to publish (no devices, errors set).
  void sample_failed(GpuSnapshot& snap, const boost::system::error_code& ec,
                     std::int64_t latency_ns);
  /// Counts a timeout (a failure) and returns the snapshot to publish.
  GpuSnapshot sample_timed_out();

  std::uint64_t consecutive_failures() const;
  /// Records the retry delay chosen after a failure.
  void backing_off(std::chrono::milliseconds delay);

  void stop();

 private:
  static std::string log_key(const SampleError& e);
  void log_error_once(const SampleError& e);  // LogOnce has its own lock

  /// Logs a clamp to `min` once per distinct minimum.
  void warn_clamp(std::chrono::milliseconds min);

  const std::string name_;
  const ScheduleOptions requested_;
  ScheduleOptions options_;  // written only on the strand (detected_available)
  std::chrono::milliseconds warned_min_{-1};

  mutable std::mutex mu_;
  ProbeStats stats_;
  LatencyWindow latencies_;
  std::uint64_t unavailable_streak_ = 0;
  std::string logged_unavailable_reason_;
  LogOnce log_once_;
};

}  // namespace gpustream::detail
