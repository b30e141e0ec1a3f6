// PowerTrace: trapezoid integration of one device's power readings over a window's edges, and
// the coverage figures (see window_power.hpp).
#include "gpustream/detail/window_power.hpp"

#include <algorithm>

namespace gpustream::detail {

namespace {

double length(std::int64_t lo, std::int64_t hi) {
  return hi > lo ? static_cast<double>(hi - lo) : 0.0;
}

double seconds(std::int64_t ns) { return static_cast<double>(ns) * 1e-9; }

/// The value at `at` on the straight line through (t0, w0) and (t1, w1), t0 < at < t1.
double at_instant(std::int64_t t0, double w0, std::int64_t t1, double w1, std::int64_t at) {
  const double f = static_cast<double>(at - t0) / static_cast<double>(t1 - t0);
  return w0 + (w1 - w0) * f;
}

/// Adds to `covered` the part of (last, ns] ∩ [begin, ∞) within `half` of a reading (last or
/// ns); the first reading covers [ns - half, ns] ∩ [begin, ∞).
void fold_instant(double& covered, std::optional<std::int64_t>& last, std::int64_t ns,
                  std::int64_t begin, std::int64_t half) {
  if (!last) {
    covered += length(std::max(ns - half, begin), ns);
  } else if (const std::int64_t lo = std::max(*last, begin); ns > lo) {
    covered += ns - *last <= 2 * half
                   ? length(lo, ns)
                   : length(lo, std::min(ns, *last + half)) + length(std::max(lo, ns - half), ns);
  }
  last = ns;
}

}  // namespace

void IntervalMedian::add(std::int64_t interval_ns) {
  if (interval_ns > 0 && !full()) intervals_.push_back(interval_ns);
}

std::optional<std::int64_t> IntervalMedian::median(std::size_t min_count) const {
  if (intervals_.size() < std::max<std::size_t>(min_count, 1)) return std::nullopt;
  std::vector<std::int64_t> v = intervals_;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  const auto lower = *std::max_element(v.begin(), mid);
  return lower + (*mid - lower) / 2;
}

void ChangePeriod::add(std::int64_t ns, double value) {
  ++readings_;
  if (last_value_) {
    if (value == *last_value_) {
      ++repeats_;
    } else {
      ++changes_;
      if (last_change_ns_) intervals_.add(ns - *last_change_ns_);
      last_change_ns_ = ns;
    }
  }
  last_value_ = value;
}

std::optional<std::int64_t> ChangePeriod::period() const {
  if (repeats_ == 0) return std::nullopt;
  return intervals_.median(2);
}

std::string ChangePeriod::reason() const {
  if (readings_ < 2) return "fewer than two readings";
  if (repeats_ == 0)
    return "the value changed at every reading: the source updates at least as often as it is "
           "read, so its period is not measurable here";
  if (intervals_.count() < 2) return "fewer than three changes of the value";
  return {};
}

bool PowerTrace::add(std::int64_t ns, double watts, bool driver_sample) {
  if (prev_ && ns <= prev_->ns) return false;
  if (driver_sample) {
    ++driver_seen_;
    if (last_driver_ns_) driver_intervals_.add(ns - *last_driver_ns_);
    last_driver_ns_ = ns;
    if (driver_intervals_.full() && !frozen_period_) freeze_period();
  } else {
    changes_.add(ns, watts);
  }
  const Reading r{ns, watts};
  const std::int64_t b = begin_ns_.value_or(ns);
  if (ns >= b) {
    ++readings_;
    if (driver_sample) ++driver_;
    if (ns == b) ++at_begin_;
    if (!started_) {
      started_ = true;
      if (ns == b) {
        begin_ = TraceEdge::exact;
      } else if (prev_) {  // prev_ is before the edge: cut the trapezoid at it
        const double w = at_instant(prev_->ns, prev_->watts, ns, watts, b);
        begin_joules_ = (w + watts) / 2.0 * seconds(ns - b);
        begin_ = TraceEdge::interpolated;
        largest_gap_ns_ = ns - prev_->ns;
      } else if (hold_) {
        begin_joules_ = watts * seconds(ns - b);
        begin_ = TraceEdge::held;
        largest_gap_ns_ = ns - b;
      }
      joules_ = begin_joules_;
    } else {
      joules_ += (prev_->watts + watts) / 2.0 * seconds(ns - prev_->ns);
      largest_gap_ns_ = std::max(largest_gap_ns_, ns - prev_->ns);
    }
  }
  prev_ = r;
  if (frozen_period_) {
    fold(ns);
  } else if (!coverage_lost_) {
    pending_.push_back(ns);
    if (pending_.size() >= kPendingInstants) freeze_period();
  }
  return true;
}

std::optional<std::int64_t> PowerTrace::period() const {
  if (frozen_period_) return frozen_period_;
  if (driver_seen_ > 0) return driver_intervals_.median(2);
  return changes_.period();
}

std::string PowerTrace::period_reason() const {
  if (driver_seen_ > 0)
    return "fewer than three driver power samples (" + std::to_string(driver_seen_) + ")";
  return "power readings: " + changes_.reason();
}

void PowerTrace::freeze_period() {
  frozen_period_ = period();
  if (!frozen_period_) {
    coverage_lost_ = true;
    pending_.clear();
    pending_.shrink_to_fit();
    return;
  }
  for (const auto ns : pending_) fold(ns);
  pending_.clear();
  pending_.shrink_to_fit();
}

void PowerTrace::fold(std::int64_t ns) {
  fold_instant(covered_ns_, last_folded_, ns, *begin_ns_, *frozen_period_ / 2);
}

std::optional<PowerTrace::Result> PowerTrace::finish(
    std::int64_t end_ns, std::optional<std::pair<std::int64_t, double>> after) const {
  if (!started_ || !prev_ || !begin_ns_) return std::nullopt;
  Result r;
  r.joules = joules_;
  r.begin_joules = begin_joules_;
  r.begin = begin_;
  r.readings = readings_;
  r.driver_samples = driver_;
  r.largest_gap_ns = largest_gap_ns_;
  const std::int64_t last = prev_->ns;
  const bool at_end = last == end_ns && end_ns > *begin_ns_;
  r.inner_readings = readings_ - at_begin_ - (at_end ? 1 : 0);
  if (last == end_ns) {
    r.end = TraceEdge::exact;
  } else if (last < end_ns && after && after->first > end_ns) {
    const double w = at_instant(last, prev_->watts, after->first, after->second, end_ns);
    r.end_joules = (prev_->watts + w) / 2.0 * seconds(end_ns - last);
    r.end = TraceEdge::interpolated;
    r.largest_gap_ns = std::max(r.largest_gap_ns, after->first - last);
  } else if (last < end_ns && hold_) {
    r.end_joules = prev_->watts * seconds(end_ns - last);
    r.end = TraceEdge::held;
    r.largest_gap_ns = std::max(r.largest_gap_ns, end_ns - last);
  }
  r.joules += r.end_joules;
  // Coverage, with the period frozen or (not yet) taken now.
  r.period_ns = period();
  if (!r.period_ns) r.period_reason = period_reason();
  const std::int64_t b = *begin_ns_;
  const std::int64_t e = std::max(end_ns, b);
  if (r.period_ns && coverage_lost_)
    r.coverage_reason = "the update period was not known within the first " +
                        std::to_string(kPendingInstants) + " readings";
  else if (r.period_ns && e <= b)
    r.coverage_reason = "the window has no length";
  if (r.period_ns && !coverage_lost_ && e > b) {
    const std::int64_t half = *r.period_ns / 2;
    double covered = covered_ns_;
    std::optional<std::int64_t> folded = last_folded_;
    if (!frozen_period_)
      for (const auto ns : pending_) fold_instant(covered, folded, ns, b, half);
    // The tail: from the last reading to the end edge, reached by it and by the one after.
    const std::int64_t lo = std::max(last, b);
    const bool next = after && after->first > e;
    if (next && after->first - last <= 2 * half)
      covered += length(lo, e);
    else
      covered += length(lo, std::min(e, last + half)) +
                 (next ? length(std::max(lo, after->first - half), e) : 0.0);
    r.coverage = std::clamp(covered / static_cast<double>(e - b), 0.0, 1.0);
  }
  return r;
}

}  // namespace gpustream::detail
