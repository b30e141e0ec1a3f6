#include "gpustream/probe_stats.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include <boost/json/object.hpp>

#include "gpustream/json.hpp"

namespace gpustream {
namespace {

constexpr std::array<std::pair<ProbeState, std::string_view>, 5> kStateNames{{
    {ProbeState::detecting, "detecting"},
    {ProbeState::available, "available"},
    {ProbeState::unavailable, "unavailable"},
    {ProbeState::backoff, "backoff"},
    {ProbeState::stopped, "stopped"},
}};

boost::json::value optional_ns(const std::optional<std::int64_t>& v) {
  if (!v) return nullptr;
  return *v;
}

std::optional<std::int64_t> nearest_rank(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty() || !(p > 0.0)) return std::nullopt;
  const auto n = sorted.size();
  auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(n) / 100.0));
  rank = std::clamp<std::size_t>(rank, 1, n);
  return sorted[rank - 1];
}

}  // namespace

std::string_view to_string(ProbeState s) noexcept {
  for (const auto& [state, name] : kStateNames)
    if (state == s) return name;
  return "unknown";
}

std::optional<ProbeState> probe_state_from_string(std::string_view s) noexcept {
  for (const auto& [state, name] : kStateNames)
    if (name == s) return state;
  return std::nullopt;
}

boost::json::value to_json(const ProbeStats& s) {
  boost::json::object o;
  o["probe"] = s.probe;
  o["state"] = to_string(s.state);
  o["reason"] = s.reason;
  o["samples"] = s.samples;
  o["failures"] = s.failures;
  o["timeouts"] = s.timeouts;
  o["overruns"] = s.overruns;
  o["missed_ticks"] = s.missed_ticks;
  o["consecutive_failures"] = s.consecutive_failures;
  o["detections"] = s.detections;
  o["requested_interval_ms"] = s.requested_interval.count();
  o["interval_ms"] = s.interval.count();
  o["backoff_ms"] = s.backoff.count();
  o["latency_p50_ns"] = optional_ns(s.latency_p50_ns);
  o["latency_p90_ns"] = optional_ns(s.latency_p90_ns);
  o["latency_p99_ns"] = optional_ns(s.latency_p99_ns);
  o["latency_max_ns"] = optional_ns(s.latency_max_ns);
  o["latency_window"] = s.latency_window;
  o["last_error"] = s.last_error;
  o["devices"] = s.devices;
  return o;
}

LatencyWindow::LatencyWindow(std::size_t capacity) : ring_(std::max<std::size_t>(capacity, 1)) {
  sorted_.reserve(ring_.size());
}

void LatencyWindow::add(std::int64_t latency_ns) {
  // The sorted copy follows the ring: the value the ring overwrites leaves it, the new one is
  // inserted in order (two moves of at most `capacity` values, instead of a sort per read).
  if (size_ == ring_.size())
    sorted_.erase(std::lower_bound(sorted_.begin(), sorted_.end(), ring_[next_]));
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), latency_ns), latency_ns);
  ring_[next_] = latency_ns;
  next_ = (next_ + 1) % ring_.size();
  size_ = std::min(size_ + 1, ring_.size());
}

std::optional<std::int64_t> LatencyWindow::percentile(double p) const {
  return nearest_rank(sorted_, p);
}

std::optional<std::int64_t> LatencyWindow::max() const {
  if (empty()) return std::nullopt;
  return sorted_.back();
}

void LatencyWindow::fill(ProbeStats& stats) const {
  stats.latency_window = sorted_.size();
  stats.latency_p50_ns = nearest_rank(sorted_, 50);
  stats.latency_p90_ns = nearest_rank(sorted_, 90);
  stats.latency_p99_ns = nearest_rank(sorted_, 99);
  stats.latency_max_ns =
      sorted_.empty() ? std::nullopt : std::optional<std::int64_t>(sorted_.back());
}

}  // namespace gpustream
