// gpustream/scheduler.hpp — runs each probe on its own timer: detection, sampling, timeouts,
// backoff, statistics.
//
// Per probe, the Scheduler
//   1. detects (Probe::async_detect). Unavailable: state `unavailable` with the probe's reason,
//      and detection is retried with exponential backoff (backoff_initial doubling up to
//      backoff_max), so a GPU or tool that appears later is picked up;
//   2. once available, samples at once and then on a drift-free timer: each expiry is the
//      previous expiry + interval. If it falls far behind (a stalled io thread), the ticks whose
//      time has passed are skipped and counted (`missed_ticks`), never fired in a burst;
//   3. never has two samples of one probe in flight: a tick that comes while a sample runs is
//      skipped and counted as an overrun;
//   4. gives each sample (and each detection) `timeout`. When it fires: probe->cancel(), the
//      timeout is counted as a failure, and the completion that comes later is dropped. The probe
//      is not sampled again until that late completion has arrived;
//   5. backs off after a failure: the next try comes after backoff_initial * 2^(n-1), capped at
//      backoff_max, n = consecutive failures; every `failures_before_redetect` consecutive
//      failures the next try is a detection instead of a sample. A successful sample resets
//      the backoff and resumes the interval grid;
//   6. clamps an interval below probe->min_interval() to it, and logs a warning once per
//      distinct minimum when the probe is found available (not for an absent source).
//      min_interval() is read in add() and again after every successful detection, since a probe's
//      minimum can depend on what detection found (the NVIDIA probe falling back from NVML to
//      nvidia-smi); the requested interval is kept and applied again when the minimum drops.
//
// What is published: every sample that completes without an error code (a partial sample whose
// `errors` are set included), with `probe`, times and `sample_duration_ns` filled in when the
// probe left them 0/empty. A failed or timed-out sample is published too, as a snapshot with no
// devices and `errors` saying what happened (code "timeout" for a timeout), so subscribers see
// the failure rather than silence; each distinct error (device, code, message) is logged once
// (LogOnce, per probe) until a successful sample no longer reports it. Detection results are not
// published; they reach the stats callback and stats().
//
// Threading: per-probe work runs on a strand of the io executor; probe completions are posted
// to it. The one exception is an on-demand sample of a probe that samples inline
// (Probe::samples_inline: a computation that never blocks, such as the simulated probe):
// request_sample takes it on the calling thread (see below). The publish sink and the stats
// callback are called on the strand or, for such a sample, on the requesting thread; never
// under a lock; an exception they throw is logged and swallowed. So they may run on two
// threads at once and must be thread-safe; one probe's snapshots still reach the publish sink
// one at a time, in the order they were taken. The per-probe state the strand and a requesting
// thread share (what is in flight, the waiting requests) is guarded by a mutex per probe; the
// timers stay on the strand. add(), start(), stop(), request_sample() and stats() may be called
// from any thread.
//
// Stopping: stop() is idempotent. It marks every probe `stopped` at once (no sample starts and
// nothing is published after it returns, except a publish already running on the strand or on
// a thread taking an inline on-demand sample), then, on the strand, cancels the timers and
// calls probe->cancel() for an in-flight detection or sample; a completion that arrives later
// is dropped. When called from the io thread (and the strand is idle) that happens before
// stop() returns, otherwise the io_context must run a little longer for it. The destructor
// calls stop(). The io_context must outlive the Scheduler.
//
// Sampling on demand (request_sample): takes a fresh sample of one probe now, for a caller that
// needs a reading at an exact moment (a measurement window's edges). It
//   - joins the sample already in flight for that probe instead of starting a second one (the
//     joined sample may have started shortly before the request);
//   - leaves the timer grid alone: the next tick stays due at its grid time; a tick that comes
//     while an on-demand sample runs is served by that sample (not an overrun); an on-demand
//     sample that fails is counted and published but starts no backoff;
//   - while the probe is being detected (or before start()), waits for the first sample after an
//     available detection;
//   - publishes its snapshot like any other (subscribers see it) and hands the published
//     object to the handler;
//   - for a probe that samples inline, started, available and idle (nothing in flight, nothing
//     being published), takes the sample on the calling thread: it is counted, published and
//     reported there, and the handler is called there before request_sample returns — no post
//     to the strand, no wait for the io thread. `deadline` does not apply (the probe cannot
//     hang). A tick due meanwhile adopts it, a request made meanwhile joins it (answered on the
//     strand), and whatever needs a timer after it (that joined request, a backoff, a grid to
//     re-arm) is finished on the strand. Otherwise, and for every other probe:
//   - always completes, exactly once, on the strand: success (error_code empty, the snapshot;
//     a partial sample with `errors` set counts as success), the probe's error (its code, the
//     failure snapshot that was published), errc::timeout (the sample's or the detection's
//     timeout, or the request's own deadline), errc::probe_unavailable (unavailable, or backing
//     off after failures; null snapshot), errc::stopped (the scheduler stopped; null snapshot).
//     Only a request with no deadline, to a probe with no timeout (0) that hangs, or one made
//     before a start() that never comes, waits until stop(); Telemetry always gives a deadline.
//
// Time: BasicScheduler<Clock, WaitTraits> runs on basic_waitable_timer<Clock, WaitTraits>; the
// SDK uses Scheduler = BasicScheduler<steady_clock>. Tests instantiate it with a manual clock
// (include gpustream/detail/scheduler_impl.hpp for the member definitions).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/wait_traits.hpp>
#include <boost/system/error_code.hpp>

#include "gpustream/config.hpp"
#include "gpustream/model.hpp"
#include "gpustream/probe.hpp"
#include "gpustream/probe_stats.hpp"

namespace gpustream {

/// How one probe is scheduled. Defaults match Config's.
struct ScheduleOptions {
  std::chrono::milliseconds interval{1000};         // > 0 after clamping to min_interval()
  std::chrono::milliseconds timeout{5000};          // per sample/detection; 0 = no timeout
  std::chrono::milliseconds backoff_initial{1000};  // > 0
  std::chrono::milliseconds backoff_max{60000};     // raised to backoff_initial if below it
  /// Every this many consecutive failures, detection is retried; 0 = never.
  std::uint32_t failures_before_redetect = 3;

  /// The options Config gives probe `probe` (its `probe_intervals` entry, else `interval`).
  static ScheduleOptions from_config(const Config& config, std::string_view probe);
};

template <class Clock, class WaitTraits = boost::asio::wait_traits<Clock>>
class BasicScheduler {
 public:
  using clock_type = Clock;
  /// Receives every snapshot to publish (the Telemetry facade wires SnapshotChannel::publish).
  using PublishFn = std::function<void(GpuSnapshot)>;
  /// Called with that probe's stats after every sample (success, failure or timeout) and every
  /// detection (available, unavailable or timed out).
  using StatsFn = std::function<void(const ProbeStats&)>;
  /// A publish sink that returns the object it published (SnapshotChannel::publish), so that
  /// request_sample hands callers the very snapshot subscribers got (same sequence number).
  using PublishSharedFn = std::function<std::shared_ptr<const GpuSnapshot>(GpuSnapshot)>;
  /// Tag selecting the PublishSharedFn constructor.
  struct PublishShared {};
  /// Completion of request_sample; see the class comment.
  using SampleNowHandler =
      std::function<void(boost::system::error_code, std::shared_ptr<const GpuSnapshot>)>;

  BasicScheduler(boost::asio::any_io_executor io, PublishFn publish, StatsFn on_stats = {});
  BasicScheduler(boost::asio::any_io_executor io, PublishShared, PublishSharedFn publish,
                 StatsFn on_stats = {});
  ~BasicScheduler();

  BasicScheduler(const BasicScheduler&) = delete;
  BasicScheduler& operator=(const BasicScheduler&) = delete;

  /// Adds a probe. Before start(), it waits for start(); after, it starts at once; after
  /// stop(), it stays stopped. Throws std::invalid_argument for a null probe or options that
  /// cannot work (interval <= 0 after clamping, backoff_initial <= 0).
  void add(ProbePtr probe, ScheduleOptions options = {});

  /// Starts detection of every probe added so far (on the strand). Idempotent; a no-op after
  /// stop().
  void start();

  /// See the class comment. Idempotent; not restartable.
  void stop() noexcept;

  bool stopped() const noexcept;

  /// Takes a fresh sample of probe `probe` now (see the class comment); `handler` is called
  /// once, on the strand, or on this thread before returning when the probe samples inline
  /// and is idle. `deadline` > 0 bounds the wait for this request alone (errc::timeout when it
  /// passes; the sample itself goes on); 0 relies on the probe's sample timeout. Throws
  /// std::invalid_argument when no probe of that name was added. Thread-safe.
  void request_sample(std::string_view probe, SampleNowHandler handler,
                      std::chrono::milliseconds deadline = std::chrono::milliseconds{0});

  /// Names of the probes added, in order. Thread-safe.
  std::vector<std::string> probe_names() const;

  /// One entry per probe, in the order they were added. Thread-safe.
  std::vector<ProbeStats> stats() const;

 private:
  struct Shared;
  class Entry;

  std::shared_ptr<Shared> shared_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Entry>> entries_;  // guarded by mu_
  bool started_ = false;                         // guarded by mu_
};

extern template class BasicScheduler<std::chrono::steady_clock>;

using Scheduler = BasicScheduler<std::chrono::steady_clock>;

}  // namespace gpustream
