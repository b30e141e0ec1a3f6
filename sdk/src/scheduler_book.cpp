// The clock-independent half of the Scheduler (see detail/scheduler_book.hpp).
#include "gpustream/detail/scheduler_book.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include <boost/asio/error.hpp>

#include "gpustream/detail/log_in_process.hpp"
#include "gpustream/errors.hpp"

namespace gpustream::detail {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

ScheduleOptions clamp_options(const Probe& probe, const ScheduleOptions& requested) {
  ScheduleOptions o = requested;
  o.interval = std::max(o.interval, probe.min_interval());
  if (o.interval <= milliseconds::zero())
    throw std::invalid_argument("probe " + std::string(probe.name()) +
                                ": the sampling interval must be positive");
  if (o.backoff_initial <= milliseconds::zero())
    throw std::invalid_argument("probe " + std::string(probe.name()) +
                                ": backoff_initial must be positive");
  if (o.backoff_max < o.backoff_initial) o.backoff_max = o.backoff_initial;
  if (o.timeout < milliseconds::zero()) o.timeout = milliseconds::zero();
  return o;
}

}  // namespace

TickPlan plan_next_tick(nanoseconds due, nanoseconds now, nanoseconds interval) noexcept {
  TickPlan plan{due + interval, 0};
  if (plan.next > now) return plan;
  const auto behind = (now - due) / interval;  // >= 1 whole intervals
  plan.skipped = static_cast<std::uint64_t>(behind);
  plan.next = due + (behind + 1) * interval;
  return plan;
}

milliseconds backoff_delay(const ScheduleOptions& options, std::uint64_t attempt) noexcept {
  milliseconds d = options.backoff_initial;
  for (std::uint64_t i = 1; i < attempt && d < options.backoff_max; ++i) d *= 2;
  return std::min(d, options.backoff_max);
}

std::string error_code_name(const boost::system::error_code& ec) {
  if (ec.category() == gpustream_category()) {
    switch (static_cast<errc>(ec.value())) {
      case errc::ok:
        return "ok";
      case errc::probe_unavailable:
        return "probe_unavailable";
      case errc::sample_failed:
        return "sample_failed";
      case errc::timeout:
        return "timeout";
      case errc::overrun:
        return "overrun";
      case errc::library_missing:
        return "library_missing";
      case errc::symbol_missing:
        return "symbol_missing";
      case errc::tool_failed:
        return "tool_failed";
      case errc::parse_error:
        return "parse_error";
      case errc::stopped:
        return "stopped";
    }
  }
  if (ec == boost::asio::error::operation_aborted) return "aborted";
  return "sample_failed";
}

ProbeBook::ProbeBook(const Probe& probe, const ScheduleOptions& requested)
    : name_(probe.name()), requested_(requested), options_(clamp_options(probe, requested)) {
  stats_.probe = name_;
  stats_.requested_interval = requested.interval;
  stats_.interval = options_.interval;
  // The clamp is said when the probe is found available: for a source that is not there it
  // does not matter, and its minimum may still change with what detection finds.
}

void ProbeBook::warn_clamp(milliseconds min) {
  if (min == warned_min_) return;
  warned_min_ = min;
  // Once per process for each probe, requested interval and minimum (not per Telemetry).
  if (!first_in_process("clamp:" + name_ + ":" + std::to_string(requested_.interval.count()) + ":" +
                        std::to_string(min.count())))
    return;
  logger()->warn("probe {}: interval {} ms is below the source's minimum of {} ms; using {} ms",
                 name_, requested_.interval.count(), min.count(), min.count());
}

ProbeStats ProbeBook::snapshot() const {
  std::lock_guard lock(mu_);
  ProbeStats s = stats_;
  latencies_.fill(s);
  return s;
}

void ProbeBook::detect_started() {
  std::lock_guard lock(mu_);
  if (stats_.state == ProbeState::stopped) return;
  stats_.state = ProbeState::detecting;
  ++stats_.detections;
}

bool ProbeBook::detected_available(const Probe& probe, const Detection& d) {
  bool was_unavailable = false;
  const auto interval = std::max(requested_.interval, probe.min_interval());
  const bool changed = interval != options_.interval;
  {
    std::lock_guard lock(mu_);
    if (stats_.state == ProbeState::stopped) return false;
    if (changed) options_.interval = stats_.interval = interval;
    was_unavailable = unavailable_streak_ > 0 || stats_.detections == 1;
    unavailable_streak_ = 0;
    logged_unavailable_reason_.clear();
    stats_.state = ProbeState::available;
    stats_.reason.clear();
    stats_.backoff = milliseconds::zero();
    stats_.devices = d.devices.size();
  }
  if (was_unavailable) logger()->info("probe {}: available, {} device(s)", name_, d.devices.size());
  if (interval != requested_.interval) warn_clamp(interval);  // once per distinct minimum
  if (changed && interval == requested_.interval)
    logger()->info("probe {}: the source allows the requested interval of {} ms again", name_,
                   interval.count());
  return changed;
}

void ProbeBook::detected_unavailable(const std::string& reason) {
  const std::string why = reason.empty() ? "not available" : reason;
  bool log = false;
  {
    std::lock_guard lock(mu_);
    if (stats_.state == ProbeState::stopped) return;
    ++unavailable_streak_;
    stats_.state = ProbeState::unavailable;
    stats_.reason = why;
    stats_.devices = 0;
    // Logged when the reason changes; a probe that keeps being absent stays quiet.
    log = why != logged_unavailable_reason_;
    logged_unavailable_reason_ = why;
  }
  if (log) logger()->info("probe {}: unavailable: {}", name_, why);
}

void ProbeBook::detect_timed_out() {
  const auto msg =
      "detection did not complete within " + std::to_string(options_.timeout.count()) + " ms";
  {
    std::lock_guard lock(mu_);
    if (stats_.state == ProbeState::stopped) return;
    ++unavailable_streak_;
    ++stats_.timeouts;
    stats_.state = ProbeState::unavailable;
    stats_.reason = msg;
    stats_.last_error = msg;
  }
  if (log_once_.first("detect-timeout")) logger()->warn("probe {}: {}", name_, msg);
}

milliseconds ProbeBook::unavailable_backoff() {
  std::lock_guard lock(mu_);
  const auto d = backoff_delay(options_, std::max<std::uint64_t>(unavailable_streak_, 1));
  stats_.backoff = d;
  return d;
}

void ProbeBook::missed(std::uint64_t ticks) {
  std::lock_guard lock(mu_);
  stats_.missed_ticks += ticks;
}

void ProbeBook::overrun() {
  std::lock_guard lock(mu_);
  ++stats_.overruns;
}

void ProbeBook::sample_ok(GpuSnapshot& snap, std::int64_t latency_ns) {
  if (snap.probe.empty()) snap.probe = name_;
  if (snap.time_unix_ns == 0) snap.time_unix_ns = wall_now_ns();
  if (snap.monotonic_ns == 0) snap.monotonic_ns = steady_now_ns();
  if (snap.sample_duration_ns == 0) snap.sample_duration_ns = latency_ns;
  std::uint64_t recovered_after = 0;
  {
    std::lock_guard lock(mu_);
    if (stats_.state == ProbeState::stopped) return;
    recovered_after = stats_.consecutive_failures;
    ++stats_.samples;
    stats_.consecutive_failures = 0;
    stats_.state = ProbeState::available;
    stats_.reason.clear();
    stats_.backoff = milliseconds::zero();
    stats_.devices = snap.devices.size();
    latencies_.add(latency_ns);
    if (!snap.errors.empty()) stats_.last_error = snap.errors.front().message;
  }
  // A successful sample ends every problem it does not report again: those are forgotten (and
  // logged again if they come back); those it still reports stay quiet.
  std::set<std::string> current;
  for (const auto& e : snap.errors) current.insert(log_key(e));
  log_once_.retain(current);
  for (const auto& e : snap.errors) log_error_once(e);
  if (recovered_after > 0)
    logger()->info("probe {}: sampling again after {} failure(s)", name_, recovered_after);
}

void ProbeBook::sample_failed(GpuSnapshot& snap, const boost::system::error_code& ec,
                              std::int64_t latency_ns) {
  GpuSnapshot out;
  out.probe = name_;
  out.time_unix_ns = snap.time_unix_ns != 0 ? snap.time_unix_ns : wall_now_ns();
  out.monotonic_ns = snap.monotonic_ns != 0 ? snap.monotonic_ns : steady_now_ns();
  out.sample_duration_ns = latency_ns;
  out.errors = std::move(snap.errors);
  if (out.errors.empty()) out.errors.push_back({error_code_name(ec), ec.message(), {}});
  snap = std::move(out);
  {
    std::lock_guard lock(mu_);
    if (stats_.state == ProbeState::stopped) return;
    ++stats_.failures;
    ++stats_.consecutive_failures;
    stats_.last_error = snap.errors.front().message;
    stats_.reason = stats_.last_error;
    latencies_.add(latency_ns);
  }
  for (const auto& e : snap.errors) log_error_once(e);
}

GpuSnapshot ProbeBook::sample_timed_out() {
  GpuSnapshot out;
  out.probe = name_;
  out.time_unix_ns = wall_now_ns();
  out.monotonic_ns = steady_now_ns();
  out.sample_duration_ns = std::chrono::duration_cast<nanoseconds>(options_.timeout).count();
  out.errors.push_back(
      {"timeout",
       "sample did not complete within " + std::to_string(options_.timeout.count()) + " ms",
       {}});
  {
    std::lock_guard lock(mu_);
    if (stats_.state == ProbeState::stopped) return out;
    ++stats_.failures;
    ++stats_.timeouts;
    ++stats_.consecutive_failures;
    stats_.state = ProbeState::backoff;
    stats_.last_error = out.errors.front().message;
    stats_.reason = stats_.last_error + "; waiting for it to finish";
  }
  log_error_once(out.errors.front());
  return out;
}

std::uint64_t ProbeBook::consecutive_failures() const {
  std::lock_guard lock(mu_);
  return stats_.consecutive_failures;
}

void ProbeBook::backing_off(milliseconds delay) {
  std::lock_guard lock(mu_);
  if (stats_.state == ProbeState::stopped) return;
  stats_.state = ProbeState::backoff;
  stats_.backoff = delay;
  if (stats_.reason.empty()) stats_.reason = stats_.last_error;
}

void ProbeBook::stop() {
  std::lock_guard lock(mu_);
  stats_.state = ProbeState::stopped;
  stats_.backoff = milliseconds::zero();
}

std::string ProbeBook::log_key(const SampleError& e) {
  return e.device + "|" + e.code + ": " + e.message;
}

void ProbeBook::log_error_once(const SampleError& e) {
  if (log_once_.first(log_key(e))) {
    if (e.device.empty())
      logger()->warn("probe {}: {} ({})", name_, e.message, e.code);
    else
      logger()->warn("probe {}: device {}: {} ({})", name_, e.device, e.message, e.code);
  }
}

}  // namespace gpustream::detail
