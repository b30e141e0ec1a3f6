// gpustream/probe_stats.hpp — what running one probe costs and how it is doing.
//
// ProbeStats is a plain value: the Scheduler fills one per probe (Scheduler::stats(), and the
// stats callback after every sample), so users can see what telemetry costs them. Latency
// percentiles cover a bounded window of the most recent samples (LatencyWindow); they are
// absent (std::nullopt, JSON null) until a sample has completed, never 0. The JSON form,
// to_json(ProbeStats), is in gpustream/json.hpp.
//
// Thread safety: ProbeStats is a value, copy it freely. LatencyWindow is not synchronized; its
// owner (the Scheduler) guards it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpustream {

/// Where a probe is in its life.
enum class ProbeState : std::uint8_t {
  detecting,    // detection is in flight (first time, or re-detection after failures)
  available,    // sampling on its interval
  unavailable,  // detection said the source is not there; detection is retried with backoff
  backoff,      // recent samples failed; the next try waits for the backoff delay
  stopped,      // the scheduler was stopped
};

std::string_view to_string(ProbeState s) noexcept;
std::optional<ProbeState> probe_state_from_string(std::string_view s) noexcept;

struct ProbeStats {
  std::string probe;  // Probe::name()
  ProbeState state = ProbeState::detecting;
  /// Why the probe is unavailable or backing off (one line); empty when all is well.
  std::string reason;

  std::uint64_t samples = 0;   // samples that completed without an error code (partial included)
  std::uint64_t failures = 0;  // samples that failed, timeouts included
  std::uint64_t timeouts = 0;  // samples (or detections) abandoned after their timeout
  std::uint64_t overruns = 0;  // ticks skipped because the previous sample was still running
  std::uint64_t missed_ticks = 0;  // ticks skipped because the scheduler fell far behind
  std::uint64_t consecutive_failures = 0;
  std::uint64_t detections = 0;  // detections started

  std::chrono::milliseconds requested_interval{0};
  std::chrono::milliseconds interval{0};  // effective: requested, clamped to min_interval()
  std::chrono::milliseconds backoff{0};   // current retry delay; 0 when not backing off

  /// Sample latency (start to completion) over the recent window, in nanoseconds.
  std::optional<std::int64_t> latency_p50_ns;
  std::optional<std::int64_t> latency_p90_ns;
  std::optional<std::int64_t> latency_p99_ns;
  std::optional<std::int64_t> latency_max_ns;
  std::size_t latency_window = 0;  // how many samples the percentiles cover

  std::string last_error;   // most recent failure, in words; kept after recovery
  std::size_t devices = 0;  // devices in the last successful sample (or the last detection)
};

/// The most recent `capacity` latencies, and nearest-rank percentiles over them.
class LatencyWindow {
 public:
  static constexpr std::size_t kDefaultCapacity = 256;

  explicit LatencyWindow(std::size_t capacity = kDefaultCapacity);

  void add(std::int64_t latency_ns);
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return ring_.size(); }
  bool empty() const noexcept { return size_ == 0; }

  /// Nearest-rank percentile, p in (0, 100]: the smallest value such that at least p% of the
  /// window is <= it. std::nullopt when empty.
  std::optional<std::int64_t> percentile(double p) const;
  std::optional<std::int64_t> max() const;

  /// Fills the latency fields of `stats` (no sort: the window is kept in order as it is added).
  void fill(ProbeStats& stats) const;

 private:
  std::vector<std::int64_t> ring_;    // the values in the order they came (a ring)
  std::vector<std::int64_t> sorted_;  // the same values, ascending
  std::size_t next_ = 0;
  std::size_t size_ = 0;
};

}  // namespace gpustream
