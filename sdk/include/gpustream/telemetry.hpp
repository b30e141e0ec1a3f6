// gpustream/telemetry.hpp — the facade: probes + scheduler + channel, started and stopped as one.
//
//   gpustream::Config cfg;
//   cfg.simulate = 2;
//   gpustream::Telemetry t(cfg, gpustream::probe_factory());  // gpustream/probes/registry.hpp
//   auto sub = t.channel().subscribe({}, [](const gpustream::SnapshotPtr& s) { ... });
//   t.start();
//   ...
//   t.stop();
//
// No GPU: with config.simulate_when_no_gpu (and simulate == 0), once every GPU probe (each
// probe whose kind() is ProbeKind::gpu) has answered its first detection and none found a device,
// the factory is asked for {kSimulatedProbe} with simulate = 2, the probe is scheduled, and a
// warning says so. The decision uses the probes' own detections; nothing is detected twice.
//
// Threading: by default Telemetry runs its own io thread; given an executor it runs on the
// caller's io_context instead (the caller runs it). Blocking probe work always runs on the
// Telemetry's own work pool. start() and stop() are idempotent; stop() returns in bounded time
// even when a probe is hung in a vendor call (the hung worker is abandoned, see WorkPool).
// With a caller's executor, call stop() from a thread running that io_context, or while it is
// not running; and keep that io_context alive while a worker abandoned by stop() may still
// return from a hung call (it posts its late result there). With its own io thread, Telemetry
// keeps its io_context alive for such a worker itself.
//
// Calls from user code the library runs (see docs/embedding.md for the full table):
//   - subscriber callbacks (SnapshotChannel::subscribe; they run on the io thread unless the
//     subscription names another executor), the probe factory (in start(), and on the io
//     thread for the no-GPU fallback), and probes' own sample() code (on the work pool) may
//     call every member, stop() and the destructor included:
//       * stop() on the own io thread stops sampling at once (nothing more is published after
//         it returns, except deliveries already queued) and returns; the io thread is joined
//         and the work pool stopped by the destructor or by a later stop() from another thread.
//       * destroying the Telemetry on its own io thread (e.g. a callback resets the owning
//         unique_ptr) requests the stop and returns; the io thread finishes the stop and frees
//         the rest when that callback returns. Subscriptions and queues stay valid objects.
//       * wait_for_first_samples() on the io thread does not wait (it would block the thread
//         that produces the samples): it returns what is there.
//   - queue consumers (SnapshotChannel::subscribe_queue) pop on the caller's own threads: any
//     call is allowed there.
//   - a probe factory called by start() runs on the thread that called start(); if it calls
//     stop(), start() builds nothing more and returns.
//
// Sampling now and exact windows (docs/embedding.md, "Measurement windows"):
//   auto fresh = t.sample_now();            // a fresh snapshot of every running probe
//   t.begin_window("epoch");
//   t.begin_window("step");
//   train_step();
//   gpustream::WindowSummary step = t.end_window("step");   // energy over exactly the step
// The blocking calls (sample_now, request_samples, begin_window, end_window) wait at most their
// timeout; a probe that samples inline (the simulated one) is sampled on the calling thread
// itself, the others on the io thread or the work pool. The named windows subscribe nothing:
// the publish sink feeds them on the publishing thread. On the Telemetry's own io thread (a
// callback) they do not wait: every probe is
// answered "would_block" and window edges are estimated. With a caller's io_context, do not
// make them on a thread running it: nothing would run the samples, and they would wait their
// whole timeout and answer "timeout".
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/config.hpp"
#include "gpustream/measurement.hpp"
#include "gpustream/planner.hpp"
#include "gpustream/probe.hpp"
#include "gpustream/probe_stats.hpp"

namespace gpustream {

/// Builds the probes a Config asks for. A name it does not know or a probe setting it rejects is
/// reported through `errors` (one line each, naming the allowed values), not thrown; start()
/// turns such errors into a ConfigError, since they are mistakes in the Config.
using ProbeFactory = std::function<std::vector<ProbePtr>(const Config&, const ProbeExecutors&,
                                                         std::vector<std::string>& errors)>;

class Telemetry {
 public:
  /// Runs on its own io thread. Throws ConfigError when validate_config(config) does (nothing
  /// is built then), and applies config.log_level (gpustream/logging.hpp).
  Telemetry(Config config, ProbeFactory factory);
  /// Runs on the caller's io_context (the caller runs it).
  Telemetry(Config config, ProbeFactory factory, boost::asio::any_io_executor io);
  ~Telemetry();

  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  /// Builds the probes and starts sampling. Idempotent; a Telemetry runs once (start() after
  /// stop() does nothing). Throws ConfigError, with nothing started, when the factory rejects
  /// the Config (an unknown probe name, a bad probe setting).
  void start();
  /// Stops sampling, cancels in-flight samples, joins the threads it owns. Idempotent;
  /// returns within about `deadline` even with a hung probe. Called on the Telemetry's own io
  /// thread (from a callback), it stops sampling and returns without joining (see above).
  void stop(std::chrono::milliseconds deadline = std::chrono::milliseconds{2000});

  /// Adds what another source knows to every snapshot before it is published (after
  /// derive_metrics), e.g. the kubelet's pods (gpustream serve --kubelet-socket). Called once
  /// per snapshot, on the io thread or, for an edge sample of a probe that samples inline (the
  /// simulated one), on the thread that asked for it: it must be quick, never block, and be
  /// thread-safe. Set before start(); ignored after.
  void set_annotator(std::function<void(GpuSnapshot&)> annotate);

  SnapshotChannel& channel() noexcept;
  /// The probes' events (Xid, ECC, ...): channel().events(). Probes report to it from start()
  /// until stop(); see gpustream/events.hpp and docs/embedding.md ("Events").
  EventChannel& events() noexcept;
  const Config& config() const noexcept;
  /// Per-probe statistics (thread-safe).
  std::vector<ProbeStats> stats() const;
  /// Problems met while building the probes the no-GPU fallback added (a probe the initial
  /// Config names is either built or makes start() throw).
  std::vector<std::string> setup_errors() const;
  /// Names of the probes that were built.
  std::vector<std::string> probe_names() const;

  /// Blocks until every built probe has published at least one snapshot or is unavailable (and
  /// the no-GPU fallback, if any, has been decided), or until `timeout`. Wakes on each publish
  /// and detection, no polling. Returns the latest snapshot of each probe that has one (in probe
  /// order; a simulated probe added by the fallback comes last).
  std::vector<SnapshotPtr> wait_for_first_samples(std::chrono::milliseconds timeout);

  /// fits() / best_device() (gpustream/planner.hpp) over the latest snapshot of every probe,
  /// under the default FitOptions with Config::fatal_event_window: the health rule is on (a
  /// device with a fatal event in events() within the last hour, by default, is not offered).
  std::vector<DeviceFit> fits(std::uint64_t bytes) const;
  std::optional<DeviceFit> best_device(std::uint64_t bytes) const;
  /// The same under `options` (exclusions, the health rule's window) over this Telemetry's own
  /// fatal events (events().fatal()), with what was left out and why (FitPlan::excluded).
  FitPlan fits(std::uint64_t bytes, const FitOptions& options) const;
  std::optional<DeviceFit> best_device(std::uint64_t bytes, const FitOptions& options) const;

  /// This process's RSS (read now) and its GPU memory on every device, from the latest snapshot
  /// of each probe (MyDeviceUsage::sampled_monotonic_ns says when). Every probe that lists
  /// processes contributes; a device whose probe cannot (Apple's unified memory, rocm-smi, a
  /// refused NVML call) is listed with `absent` and the reason. Thread-safe; no sampling.
  MyProcessUsage my_process() const;

  // -- sampling now --

  /// How long the blocking calls below wait for fresh samples by default.
  static constexpr std::chrono::milliseconds kSampleNowTimeout{2000};

  /// Asks every running probe `filter` selects (filter.probes, empty = all; with
  /// filter.devices, only probes whose latest snapshot lists one of them, or that have none
  /// yet) for a fresh sample now (Scheduler::request_sample: joins a sample in flight, leaves
  /// the timer grid alone; the snapshots are published to channel() as usual). A probe that
  /// samples inline (Probe::samples_inline: the simulated one) and is idle is sampled on this
  /// thread, with no hop to the io thread. `done` is called once, with one EdgeSample per probe,
  /// when all have answered: on the io thread, or on this thread before returning when every
  /// probe was sampled here; each request is bounded by `timeout` (a late one answers
  /// "timeout"). Before start() or with no probe it is called at once with none. Thread-safe.
  void request_sample(SubscriptionFilter filter, std::chrono::milliseconds timeout,
                      std::function<void(std::vector<EdgeSample>)> done);
  /// The blocking form: returns within about `timeout`.
  std::vector<EdgeSample> request_samples(const SubscriptionFilter& filter = {},
                                          std::chrono::milliseconds timeout = kSampleNowTimeout);
  /// The fresh snapshots of every running probe (those that answered in time, in probe order).
  std::vector<SnapshotPtr> sample_now(std::chrono::milliseconds timeout = kSampleNowTimeout);
  /// request_samples as an EdgeSampler, for a MeasurementWindow of one's own. The Telemetry
  /// must outlive the sampler.
  EdgeSampler edge_sampler(std::chrono::milliseconds timeout = kSampleNowTimeout);

  // -- named windows (as Zeus's begin_window/end_window) --

  /// Opens window `name` over the probes and devices `filter` selects: takes a fresh edge
  /// sample (MeasurementWindow with exact edges). Windows may overlap and nest. Throws
  /// std::invalid_argument for an empty name or one already open.
  void begin_window(const std::string& name, SubscriptionFilter filter = {});
  /// Closes window `name` at a fresh edge sample and returns its summary (name set). Throws
  /// std::invalid_argument for a name that is not open.
  WindowSummary end_window(const std::string& name);
  /// Closes several windows at one shared edge sample (one request per probe, not one per
  /// window); summaries in the order given. Throws std::invalid_argument, closing none, when a
  /// name is not open or listed twice.
  std::vector<WindowSummary> end_windows(const std::vector<std::string>& names);
  /// Closes `name` and opens it again at the same edge sample: consecutive windows (steps of a
  /// loop) that tile time exactly, with one sample per boundary.
  WindowSummary next_window(const std::string& name);
  /// Names of the open windows, sorted.
  std::vector<std::string> open_windows() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpustream
