// Private to the SDK (measurement.cpp; tests/measurement/window_power_test.cpp): one device's power
// readings over a window, integrated with the trapezoid rule and cut exactly at the window's edges,
// with the coverage figures of DeviceWindowSummary (readings, largest gap, measured update period,
// fresh coverage).
//
// Bounds: a PowerTrace holds O(1) state plus at most 2 x kPeriodIntervals interval lengths
// (driver sample intervals and change intervals; the update period is the median of the first
// kPeriodIntervals) and, until that period is known, at most kPendingInstants reading instants
// for the coverage: (128 + 1024) int64 = 9 KiB per trace, whatever the length of the window (a
// window keeps two traces and a counter's ChangePeriod per device: about 19 KiB). CPU: O(1) per
// reading, plus a copy and nth_element of at most kPeriodIntervals values when the period is
// taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpustream::detail {

inline constexpr std::size_t kPeriodIntervals = 64;
inline constexpr std::size_t kPendingInstants = 1024;

/// The median of the first kPeriodIntervals intervals added (ns); later ones are not kept.
class IntervalMedian {
 public:
  void add(std::int64_t interval_ns);
  std::size_t count() const noexcept { return intervals_.size(); }
  bool full() const noexcept { return intervals_.size() >= kPeriodIntervals; }
  /// Unset with fewer than `min_count` intervals.
  std::optional<std::int64_t> median(std::size_t min_count) const;

 private:
  std::vector<std::int64_t> intervals_;
};

/// The update period of a value read at instants (a counter, or periodic power readings): the
/// median interval between readings at which the value changed. Known only when the value was
/// read more often than it changes (at least one reading repeated the previous value) and at
/// least two such intervals were seen; `reason()` says why otherwise.
class ChangePeriod {
 public:
  void add(std::int64_t ns, double value);
  std::optional<std::int64_t> period() const;
  std::string reason() const;
  std::size_t changes() const noexcept { return changes_; }
  std::size_t readings() const noexcept { return readings_; }

 private:
  std::optional<double> last_value_;
  std::optional<std::int64_t> last_change_ns_;
  std::size_t readings_ = 0;
  std::size_t changes_ = 0;
  std::size_t repeats_ = 0;
  IntervalMedian intervals_;
};

/// How the value at one edge of the integral was obtained.
enum class TraceEdge : std::uint8_t {
  none,          // no reading reached the edge: the integral starts/ends at the nearest reading
  exact,         // a reading at the edge instant
  interpolated,  // between the readings either side of the edge
  held,          // only one side had readings: the nearest one held up to the edge
};

/// One device's power readings in time order, integrated over [begin, end].
class PowerTrace {
 public:
  struct Result {
    double joules = 0;
    double begin_joules = 0;  // of joules: from the begin edge to the first reading after it
    double end_joules = 0;    // of joules: from the last reading before the end edge to it
    TraceEdge begin = TraceEdge::none;
    TraceEdge end = TraceEdge::none;
    std::size_t readings = 0;         // readings inside [begin, end]
    std::size_t driver_samples = 0;   // of those, the driver's own samples
    std::size_t inner_readings = 0;   // readings strictly inside (begin, end)
    std::int64_t largest_gap_ns = 0;  // between consecutive readings used (and held edges)
    std::optional<std::int64_t> period_ns;
    std::string period_reason;       // why period_ns is unset
    std::optional<double> coverage;  // share of [begin, end] within period/2 of a reading
    std::string coverage_reason;     // why coverage is unset while period_ns is set
  };

  /// The begin edge; call before any reading at or after it.
  void set_begin(std::int64_t begin_ns, bool hold) {
    begin_ns_ = begin_ns;
    hold_ = hold;
  }
  bool begun() const noexcept { return begin_ns_.has_value(); }
  /// A reading; ignored (false) unless later than the previous one.
  bool add(std::int64_t ns, double watts, bool driver_sample);
  bool any_driver_sample() const noexcept { return driver_seen_ > 0; }
  bool started() const noexcept { return started_; }
  /// Reading instants held for the coverage until the period is known (<= kPendingInstants).
  std::size_t held_instants() const noexcept { return pending_.size(); }
  /// The integral up to `end_ns` (>= every reading added); `after`: the first reading past
  /// the end edge, if known. Unset when no reading reached [begin, end].
  std::optional<Result> finish(std::int64_t end_ns,
                               std::optional<std::pair<std::int64_t, double>> after) const;

 private:
  struct Reading {
    std::int64_t ns = 0;
    double watts = 0;
  };
  std::optional<std::int64_t> period() const;
  std::string period_reason() const;
  void freeze_period();
  void fold(std::int64_t ns);

  std::optional<std::int64_t> begin_ns_;
  bool hold_ = false;
  std::optional<Reading> prev_;
  bool started_ = false;
  double joules_ = 0;
  double begin_joules_ = 0;
  TraceEdge begin_ = TraceEdge::none;
  std::size_t readings_ = 0, driver_ = 0, driver_seen_ = 0, at_begin_ = 0;
  std::int64_t largest_gap_ns_ = 0;
  // The update period: the driver's sample intervals, else the readings' change intervals.
  IntervalMedian driver_intervals_;
  std::optional<std::int64_t> last_driver_ns_;
  ChangePeriod changes_;
  // Coverage: folded once the period is frozen; until then the instants wait (bounded).
  std::optional<std::int64_t> frozen_period_;
  bool coverage_lost_ = false;  // the instants outgrew kPendingInstants with no period
  std::vector<std::int64_t> pending_;
  std::optional<std::int64_t> last_folded_;
  double covered_ns_ = 0;
};

}  // namespace gpustream::detail
