// gpustream/measurement.hpp — per-device statistics and energy over a window of time.
//
//   MeasurementWindow window(channel);
//   window.begin();
//   run_the_workload();
//   WindowSummary s = window.end();   // min/max/mean/last per metric, energy, per device
//
// Exact edges: bound to a sampler (Telemetry::request_samples, or any callable that samples
// now), begin() and end() each take a fresh sample of every windowed probe, so each device's
// window runs from its begin edge sample to its end edge sample and covers exactly the code
// between the two calls:
//
//   MeasurementWindow window(telemetry.channel(), telemetry.edge_sampler());
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/channel.hpp"
#include "gpustream/model.hpp"

namespace gpustream {

/// How one edge of a device's window was obtained.
enum class EdgeKind : std::uint8_t {
  none,          // a channel-only window: not adjusted (energy spans first to last sample)
  sampled,       // a fresh sample taken by begin()/end() (or the one in flight it joined)
  interpolated,  // estimated: the edge sample failed; the value at the edge instant is
                 // interpolated between the samples on either side of it
  held,          // estimated: the edge sample failed and only one side had a sample: its power
                 // (or the counter's last rate) is held constant up to the edge
  unknown,       // the edge sample failed and nothing allows an estimate
};

std::string_view to_string(EdgeKind k) noexcept;

/// How a device's window energy was obtained (docs/embedding.md, "Coverage").
enum class EnergyMethod : std::uint8_t {
  counter,     // the difference of the device's energy counter
  integrated,  // power integrated over time from readings inside the window (power_readings)
  edges,       // power integrated from the readings at (or around) the two edges only: nothing
               // was read between them
};

std::string_view to_string(EnergyMethod m) noexcept;

/// One probe's answer to a request for a fresh sample (what an EdgeSampler returns).
struct EdgeSample {
  std::string probe;
  SnapshotPtr snapshot;         // the fresh snapshot as published (null when none came)
  std::string error;            // empty on success; else "timeout", "stopped", ... (a code)
  std::string message;          // the error in words
  std::int64_t latency_ns = 0;  // from the request to its answer

  bool ok() const noexcept { return snapshot != nullptr && error.empty(); }
};

/// Takes a fresh sample of every probe `filter` selects, now, and returns one EdgeSample per
/// probe. Must return in bounded time (a failed or late sample is an EdgeSample with `error`).
using EdgeSampler = std::function<std::vector<EdgeSample>(const SubscriptionFilter& filter)>;

/// Statistics of one metric over the present readings in a window (absent readings do not
/// count: no zeros). `source` is the source of the last reading.
struct MetricSummary {
  double min = 0;
  double max = 0;
  double mean = 0;
  double last = 0;
  std::size_t count = 0;
  Source source = Source::none;
};

/// One device as one probe saw it during the window.
struct DeviceWindowSummary {
  std::string device_id;
  std::string probe;
  std::size_t samples = 0;  // snapshots of this probe that contained the device
  std::map<Metric, MetricSummary> metrics;
  /// Energy used over the window, joules. When the device reports an energy counter (two or
  /// more readings in the window) fine enough for the window (see energy_method): the sum of
  /// the counter's increases, kind `counter` (or the probe's own kind when it labels its
  /// cumulative value `integrated`). Otherwise, with power readings: the trapezoid integral of
  /// power over monotonic_ns — of every driver power sample and instant power_watts reading
  /// when the device has driver samples, else of the power_watts readings —, kind
  /// `integrated`. Otherwise absent. A channel-only window covers the span from the first to
  /// the last sample.
  std::optional<double> energy_joules;
  std::optional<EnergyKind> energy_kind;
  /// How often the energy counter went down (driver reload, wrap-around). Such an interval adds
  /// the counter's new value — the energy since the reset, a lower bound — never a negative.
  std::size_t energy_counter_resets = 0;

  // -- edges (windows bound to a sampler; `none` otherwise) --
  /// How the energy's begin and end were obtained (of the method energy_kind names).
  EdgeKind begin_edge = EdgeKind::none;
  EdgeKind end_edge = EdgeKind::none;
  /// The device's window, steady clock ns: its edge samples' monotonic_ns when `sampled`, else
  /// the begin()/end() call times. 0 for a channel-only window.
  std::int64_t begin_edge_ns = 0;
  std::int64_t end_edge_ns = 0;
  /// Joules of energy_joules that are estimated (the interpolated or held edge intervals).
  double estimated_joules = 0;

  // -- coverage: how energy_joules was obtained and how well the window is covered --
  // (docs/embedding.md, "Coverage"). Unset when it cannot be known; never 0 for unknown.
  /// Set when energy_joules is. `integrated` uses every power reading in the window: the
  /// periodic power_watts (when power_kind is instant or unset) and every driver power sample
  /// (DeviceSample::power_samples); the counter is preferred unless it did not move between the
  /// edges or its measured update period is longer than the window.
  std::optional<EnergyMethod> energy_method;
  /// Readings integrated inside [begin edge, end edge] (method integrated/edges; else 0), and
  /// of those the driver's own power samples.
  std::size_t power_readings = 0;
  std::size_t driver_power_samples = 0;
  /// The largest interval between consecutive readings the integral used, ns (the readings
  /// just outside an edge that an interpolation used count; a held edge counts from the edge).
  std::optional<std::int64_t> largest_gap_ns;
  /// The update period of the source energy_method names, measured from the stream, ns: the
  /// counter's (median interval between readings at which it changed), or the power's (median
  /// interval between driver power samples; without them, between changes of power_watts).
  std::optional<std::int64_t> update_period_ns;
  /// Share (0..1) of [begin edge, end edge] covered by fresh readings: for `integrated`/`edges`,
  /// the share within half an update period of a reading; for `counter`, 1 - period/length
  /// (the counter's edge readings may lag by up to one period). Unset with the period.
  std::optional<double> fresh_coverage;
  /// The window is shorter than update_period_ns (true also when the counter did not move
  /// between the edges). Unset when the period is unknown and the counter moved.
  std::optional<bool> shorter_than_update_period;
  /// Why update_period_ns (and so fresh_coverage) is unset; empty when set.
  std::string coverage_reason;
  /// How often the energy counter's value changed between consecutive readings in the window.
  std::size_t counter_changes = 0;
  /// Driver power samples not integrated because they were bad: not finite or negative watts,
  /// later than their snapshot, not after the previous snapshot, repeated or going back in time.
  std::size_t ignored_power_samples = 0;
  /// The reason of the first ignored sample ("bad_watts", "after_snapshot", "before_interval",
  /// "repeated", "backwards"); empty when none was ignored.
  std::string ignored_power_samples_reason;

  const MetricSummary* find(Metric m) const;
};

struct WindowSummary {
  std::int64_t begin_ns = 0;  // steady clock (same clock as GpuSnapshot::monotonic_ns)
  std::int64_t end_ns = 0;
  std::size_t snapshots = 0;                 // snapshots that went into the summary
  std::uint64_t missed_snapshots = 0;        // lost (channel history too short to recover them)
  std::vector<DeviceWindowSummary> devices;  // in order of first appearance

  // -- added with exact edges --
  std::string name;  // the window's name (named windows), else empty
  /// Every device's both edges are `sampled`: the energy covers exactly [begin, end].
  bool exact_edges = false;
  /// One line per edge sample that failed: "<probe>: begin: <error>: <message>".
  std::vector<std::string> edge_errors;
  /// What the window itself cost.
  struct Overhead {
    std::size_t edge_samples = 0;            // fresh samples begin() and end() asked for
    std::size_t failed_edge_samples = 0;     // of those, how many failed or timed out
    std::int64_t begin_latency_ns = 0;       // time begin() spent taking its edge samples
    std::int64_t end_latency_ns = 0;         // time end() spent taking its edge samples
    std::int64_t max_sample_latency_ns = 0;  // the slowest edge sample, request to answer
    std::int64_t caller_cpu_ns = 0;  // CPU time of the calling thread(s) in begin() and end()
  } overhead;

  const DeviceWindowSummary* find(std::string_view device_id) const;
};

/// Turns the snapshot stream between begin() and end() into a WindowSummary.
///
/// Bound to a channel, it subscribes (lossless) at construction; the window holds the
/// snapshots published after begin() and up to end() — end() takes the ones not yet delivered
/// from the channel's history, so nothing published before end() returns is left out. The
/// filter selects probes and devices (devices not listed are not summarized) and, when
/// non-empty, which metrics are summarized. add() feeds snapshots directly (it applies the
/// filter too); it is ignored outside begin()/end().
///
/// Bound to a sampler too, begin() and end() first take a fresh edge sample of each probe (no
/// lock is held while the sampler runs). A probe's snapshots taken before its begin edge or
/// after its end edge are left out. Energy comes from the energy counter's readings at the two
/// edge samples (plus the increases between); where only power exists, the trapezoids span
/// exactly [begin edge, end edge]. When an edge sample fails or times out, that edge is the
/// begin()/end() call time and its energy is estimated (EdgeKind::interpolated from the samples
/// on either side, else `held`), counted in estimated_joules and named in edge_errors.
/// begin() and end() then return later by the edge samples' latency (WindowSummary::overhead).
///
/// Thread safety: all members may be called from any thread. The channel must outlive the
/// window. begin() restarts the window; end() stops it. Destroying it unsubscribes. Do not call
/// begin()/end() of a bound window on the thread that runs the sampling (the io thread): the
/// sampler would wait for itself (Telemetry's sampler answers at once there, edges estimated).
class MeasurementWindow {
 public:
  /// A window fed only through add().
  explicit MeasurementWindow(SubscriptionFilter filter = {});
  explicit MeasurementWindow(SnapshotChannel& channel, SubscriptionFilter filter = {});
  /// With exact edges: `sampler` is called by begin() and end() (a null sampler: channel-only).
  MeasurementWindow(SnapshotChannel& channel, EdgeSampler sampler, SubscriptionFilter filter = {});
  /// Tag of a window with no subscription of its own: its owner hands it the channel's stream
  /// through feed() and feed_gap() (Telemetry's publish sink feeds its named windows: opening a
  /// window subscribes nothing, and a publish wakes no other thread for them).
  struct ExternalFeed {};
  MeasurementWindow(SnapshotChannel& channel, EdgeSampler sampler, SubscriptionFilter filter,
                    ExternalFeed);
  ~MeasurementWindow();
  MeasurementWindow(const MeasurementWindow&) = delete;
  MeasurementWindow& operator=(const MeasurementWindow&) = delete;

  void begin();
  WindowSummary end();
  /// begin()/end() at edge samples already taken (by the caller's sampler, e.g. shared by
  /// several windows whose edges coincide). Their snapshots must have been published to the
  /// channel. Only for a bound window (std::logic_error otherwise).
  void begin(const std::vector<EdgeSample>& edges);
  WindowSummary end(const std::vector<EdgeSample>& edges);
  void add(const GpuSnapshot& s);
  /// An ExternalFeed window's stream: every snapshot the channel published, in order (the window
  /// applies its filter and ignores what it already took), from any one thread at a time; and
  /// feed_gap() when that stream lost snapshots (they are taken from the channel's history).
  void feed(const SnapshotPtr& s);
  void feed_gap();
  bool running() const;
  bool bound() const noexcept { return static_cast<bool>(sampler_); }
  /// The clock of begin()/end() call times, ns; it must be the clock of the snapshots'
  /// monotonic_ns (default: steady_now_ns). For probes on an injected clock (tests). Call
  /// before begin().
  void set_clock(std::function<std::int64_t()> now_ns);

 private:
  struct Accumulators;
  void on_snapshot(const SnapshotPtr& s);
  void on_gap(const Gap& gap);
  void catch_up_locked();
  void take_locked(const GpuSnapshot& s);
  /// The halves of begin()/end() around the edge sampling (which runs with no lock held).
  void open(std::uint64_t from_sequence);
  void opened(const std::vector<EdgeSample>& edges, WindowSummary::Overhead o,
              std::int64_t latency_ns, std::vector<std::string> errors, std::int64_t cpu0);
  std::int64_t closing();
  WindowSummary closed(const std::vector<EdgeSample>& edges, std::int64_t end_call_ns,
                       const WindowSummary::Overhead& o, std::int64_t latency_ns,
                       std::vector<std::string> errors, std::int64_t cpu0);

  SnapshotChannel* channel_ = nullptr;
  EdgeSampler sampler_;
  SubscriptionFilter filter_;
  mutable std::mutex mu_;
  bool running_ = false;
  bool edge_pending_ = false;  // begin()/end() is taking edge samples: the stream waits
  std::function<std::int64_t()> now_{&steady_now_ns};
  std::int64_t begin_ns_ = 0;
  std::uint64_t last_sequence_ = 0;  // newest channel sequence taken into the window
  std::uint64_t missed_ = 0;
  WindowSummary::Overhead overhead_;      // of begin()
  std::vector<std::string> edge_errors_;  // of begin()
  std::unique_ptr<Accumulators> acc_;
  Subscription subscription_;  // last: destroyed (unsubscribed) first
};

}  // namespace gpustream
