// MeasurementWindow: min/max/mean/last per metric and energy per device over a window.
#include "gpustream/measurement.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <limits>
#include <stdexcept>
#include <utility>

#include "gpustream/detail/window_power.hpp"
#include "gpustream/log.hpp"
#include "gpustream/log_once.hpp"

namespace gpustream {
namespace {

using detail::ChangePeriod;
using detail::PowerTrace;
using detail::TraceEdge;

/// Bad driver power samples are logged once per reason for the process (then only counted).
LogOnce& bad_sample_log() {
  static LogOnce once;
  return once;
}

/// CPU time of the calling thread, ns (0 where the clock is missing).
std::int64_t thread_cpu_ns() noexcept {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// One device's energy-relevant readings at one instant.
struct Point {
  std::int64_t ns = 0;
  std::optional<double> counter;  // energy_joules
  std::optional<double> power;    // power_watts
  bool power_instant = true;      // power_kind instant or unset (not the driver's average)
};

Point point_of(const DeviceSample& d, std::int64_t ns) {
  Point p;
  p.ns = ns;
  if (const Reading& e = d.metrics[Metric::energy_joules]) p.counter = e.value();
  if (const Reading& w = d.metrics[Metric::power_watts]) p.power = w.value();
  p.power_instant = d.power_kind != PowerKind::average;
  return p;
}

bool valid_watts(double w) { return std::isfinite(w) && w >= 0; }

/// The fresh coverage from which the driver's samples are preferred to an energy counter that
/// moved only once in the window (it may have updated once inside it: its delta is then the
/// energy of a whole update period, not of the window).
constexpr double kSamplesPreferred = 0.9;

double seconds(std::int64_t ns) { return static_cast<double>(ns) * 1e-9; }

/// One edge of one probe in a bound window.
struct ProbeEdge {
  std::int64_t ns = 0;   // the edge instant
  bool sampled = false;  // a fresh sample is the edge; else ns is the call time
};

/// The estimate for one energy method at one edge: joules added, and how.
struct EdgeEstimate {
  EdgeKind kind = EdgeKind::unknown;
  double joules = 0;
};

template <typename T>
bool listed(const std::vector<T>& v, const T& x) {
  return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
}

struct MetricAcc {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double sum = 0;
  double last = 0;
  std::size_t count = 0;
  Source source = Source::none;

  void add(const Reading& r) {
    const double v = r.value();
    min = std::min(min, v);
    max = std::max(max, v);
    sum += v;
    last = v;
    ++count;
    source = r.source();
  }
};

struct DeviceAcc {
  std::string probe;
  std::string device_id;
  std::size_t samples = 0;
  std::array<MetricAcc, kMetricCount> metrics;
  // Energy counter.
  std::optional<double> last_counter;
  double counter_joules = 0;
  std::size_t counter_intervals = 0;
  std::size_t counter_resets = 0;
  EnergyKind counter_kind = EnergyKind::counter;
  // Power integration.
  std::optional<std::int64_t> last_power_ns;
  double last_power = 0;
  double integrated_joules = 0;
  std::size_t power_intervals = 0;
  // Edges (bound windows only).
  std::optional<Point> first, last, after;  // after: first point past an estimated end edge
  std::optional<Point> counter_prev;        // the counter reading before `last`'s
  bool begin_sampled = false;
  EdgeEstimate begin_counter, begin_power, end_counter, end_power;
  // Coverage (window_power.hpp). `fine`: instant power_watts and every driver power sample;
  // `coarse`: every power_watts reading, as the energy without driver samples is integrated.
  PowerTrace fine, coarse;
  ChangePeriod counter_period;
  std::optional<std::int64_t> first_ns, last_ns;  // this device's snapshots in the window
  std::optional<std::int64_t> last_sample_ns;     // the last driver power sample taken
  std::optional<std::pair<std::int64_t, double>> fine_after, coarse_after;
  bool after_taken = false;
  std::size_t ignored_samples = 0;
  std::string ignored_reason;

  /// The traces' begin edge and what precedes it: a bound window's point before its begin edge.
  void start_traces(std::int64_t begin_ns, bool hold, const std::optional<Point>& before) {
    fine.set_begin(begin_ns, hold);
    coarse.set_begin(begin_ns, hold);
    if (!before || before->ns >= begin_ns) return;
    last_ns = before->ns;  // the previous snapshot: driver samples come after it
    if (before->power) {
      coarse.add(before->ns, *before->power, false);
      if (before->power_instant) fine.add(before->ns, *before->power, false);
    }
  }

  void ignore_sample(const char* reason) {
    if (ignored_samples++ == 0) ignored_reason = reason;
    if (bad_sample_log().first(reason))
      logger()->warn(
          "measurement window: a driver power sample of {} device {} was ignored ({}); such "
          "samples are counted in ignored_power_samples (logged once per reason)",
          probe, device_id, reason);
  }

  /// The driver's power samples (strictly increasing, in (previous snapshot, this one]) and the
  /// snapshot's own power reading, into the traces; bad samples are counted, never integrated.
  void add_readings(const DeviceSample& d, std::int64_t ns) {
    take_samples(d, ns, ns);
    if (const Reading& w = d.metrics[Metric::power_watts]) {
      coarse.add(ns, w.value(), false);
      if (d.power_kind != PowerKind::average) fine.add(ns, w.value(), false);
    }
    if (const Reading& e = d.metrics[Metric::energy_joules]) counter_period.add(ns, e.value());
    if (!first_ns) first_ns = ns;
    last_ns = ns;
  }

  /// The samples of a snapshot at `ns` up to `limit`, validated, into the fine trace; returns
  /// the first good one after `limit`.
  std::optional<std::pair<std::int64_t, double>> take_samples(const DeviceSample& d,
                                                              std::int64_t ns, std::int64_t limit) {
    for (const PowerSample& p : d.power_samples) {
      const char* bad = nullptr;
      if (!valid_watts(p.watts))
        bad = "bad_watts";
      else if (p.monotonic_ns > ns)
        bad = "after_snapshot";
      else if (last_sample_ns && p.monotonic_ns == *last_sample_ns)
        bad = "repeated";
      else if (last_sample_ns && p.monotonic_ns < *last_sample_ns)
        bad = "backwards";
      else if (last_ns && p.monotonic_ns <= *last_ns)
        bad = "before_interval";
      if (bad) {
        ignore_sample(bad);
        continue;
      }
      if (p.monotonic_ns > limit) return std::pair{p.monotonic_ns, p.watts};
      last_sample_ns = p.monotonic_ns;
      fine.add(p.monotonic_ns, p.watts, true);
    }
    return std::nullopt;
  }

  /// The first snapshot past an estimated end edge at `end_ns`: its driver samples up to the
  /// edge are in the window (the driver took them before it), the next reading interpolates.
  void take_after(const DeviceSample& d, std::int64_t ns, std::int64_t end_ns) {
    if (after_taken) return;
    after_taken = true;
    fine_after = take_samples(d, ns, end_ns);
    const Reading& w = d.metrics[Metric::power_watts];
    if (!w) return;
    if (!fine_after && d.power_kind != PowerKind::average) fine_after = {ns, w.value()};
    coarse_after = {ns, w.value()};
  }

  void add_energy(const DeviceSample& d) {
    const Reading& e = d.metrics[Metric::energy_joules];
    if (!e) return;
    const double value = e.value();
    if (last_counter) {
      const double delta = value - *last_counter;
      if (delta >= 0) {
        counter_joules += delta;
      } else {
        // The counter went down: it restarted from zero. What it shows now was used since the
        // reset; what was used between the previous reading and the reset is unknown.
        ++counter_resets;
        counter_joules += std::max(0.0, value);
      }
      ++counter_intervals;
    }
    last_counter = value;
    counter_kind = d.energy_kind.value_or(EnergyKind::counter);
  }

  void add_power(const DeviceSample& d, std::int64_t monotonic_ns) {
    const Reading& p = d.metrics[Metric::power_watts];
    if (!p) return;
    if (last_power_ns) {
      const std::int64_t dt_ns = monotonic_ns - *last_power_ns;
      if (dt_ns <= 0) return;  // not later than the previous sample: no interval to integrate
      integrated_joules += (last_power + p.value()) / 2.0 * (static_cast<double>(dt_ns) * 1e-9);
      ++power_intervals;
    }
    last_power_ns = monotonic_ns;
    last_power = p.value();
  }

  void add_point(const Point& p) {
    if (last && last->counter && p.counter) counter_prev = last;
    if (!first) first = p;
    last = p;
  }

  /// The begin edge, once the first in-window point is known. `before`: the device's last
  /// point before the edge instant (for an estimated edge).
  void open(const ProbeEdge& edge, const std::optional<Point>& before) {
    const Point& p1 = *first;
    if (edge.sampled && p1.ns == edge.ns) {
      begin_sampled = true;
      begin_counter = begin_power = EdgeEstimate{EdgeKind::sampled, 0};
      return;
    }
    const std::int64_t dt = p1.ns - edge.ns;
    if (dt <= 0) {
      begin_counter = begin_power = EdgeEstimate{EdgeKind::interpolated, 0};
      return;
    }
    // Counter: the share of the increase from `before` to p1 that falls after the edge.
    if (before && before->counter && p1.counter && p1.ns > before->ns &&
        *p1.counter >= *before->counter)
      begin_counter = {EdgeKind::interpolated, (*p1.counter - *before->counter) *
                                                   static_cast<double>(dt) /
                                                   static_cast<double>(p1.ns - before->ns)};
    // Power: the trapezoid from `before` to p1, clipped at the edge.
    if (p1.power) {
      if (before && before->power && p1.ns > before->ns) {
        const double f =
            static_cast<double>(edge.ns - before->ns) / static_cast<double>(p1.ns - before->ns);
        const double at_edge = *before->power + (*p1.power - *before->power) * f;
        begin_power = {EdgeKind::interpolated, (at_edge + *p1.power) / 2.0 * seconds(dt)};
      } else {
        begin_power = {EdgeKind::held, *p1.power * seconds(dt)};
      }
    }
  }

  /// The end edge: nothing to add when the last point is the end edge sample; else from the
  /// last point to the edge instant, interpolated towards `after` or held.
  void close(const ProbeEdge& edge) {
    const Point& pn = *last;
    if (edge.sampled && pn.ns == edge.ns) {
      end_counter = end_power = EdgeEstimate{EdgeKind::sampled, 0};
      return;
    }
    const std::int64_t dt = edge.ns - pn.ns;
    if (dt <= 0) {
      end_counter = end_power = EdgeEstimate{EdgeKind::interpolated, 0};
      return;
    }
    if (pn.counter) {
      if (after && after->counter && after->ns > pn.ns && *after->counter >= *pn.counter) {
        end_counter = {EdgeKind::interpolated, (*after->counter - *pn.counter) *
                                                   static_cast<double>(dt) /
                                                   static_cast<double>(after->ns - pn.ns)};
      } else if (counter_prev && counter_prev->counter && pn.ns > counter_prev->ns &&
                 *pn.counter >= *counter_prev->counter) {
        const double rate =
            (*pn.counter - *counter_prev->counter) / static_cast<double>(pn.ns - counter_prev->ns);
        end_counter = {EdgeKind::held, rate * static_cast<double>(dt)};
      }
    }
    if (pn.power) {
      if (after && after->power && after->ns > pn.ns) {
        const double f = static_cast<double>(dt) / static_cast<double>(after->ns - pn.ns);
        const double at_edge = *pn.power + (*after->power - *pn.power) * f;
        end_power = {EdgeKind::interpolated, (*pn.power + at_edge) / 2.0 * seconds(dt)};
      } else {
        end_power = {EdgeKind::held, *pn.power * seconds(dt)};
      }
    }
  }
};

}  // namespace

struct MeasurementWindow::Accumulators {
  std::vector<DeviceAcc> devices;
  std::size_t snapshots = 0;

  // Bound windows: the edges of each probe, and each device's last point before its begin
  // edge (for an estimated begin). A probe without an entry uses the call times, estimated.
  bool bound = false;
  std::int64_t begin_call_ns = 0;
  std::int64_t end_call_ns = 0;
  bool closing = false;  // the end edges are set: points past them are left out
  std::map<std::string, ProbeEdge, std::less<>> begin_edges, end_edges;
  std::map<std::pair<std::string, std::string>, Point> before;

  ProbeEdge begin_edge(const std::string& probe) const {
    const auto it = begin_edges.find(probe);
    return it != begin_edges.end() ? it->second : ProbeEdge{begin_call_ns, false};
  }
  ProbeEdge end_edge(const std::string& probe) const {
    const auto it = end_edges.find(probe);
    return it != end_edges.end() ? it->second : ProbeEdge{end_call_ns, false};
  }

  DeviceAcc* find(const std::string& probe, const std::string& id) {
    for (auto& d : devices)
      if (d.device_id == id && d.probe == probe) return &d;
    return nullptr;
  }

  void remember_before(const GpuSnapshot& s, const SubscriptionFilter& filter) {
    for (const auto& dev : s.devices)
      if (listed(filter.devices, dev.id)) before[{s.probe, dev.id}] = point_of(dev, s.monotonic_ns);
  }

  /// A bound window's snapshot: before the begin edge it is only remembered (estimates); past
  /// an end edge it is left out (or remembered as `after` for an estimated end).
  void add_bound(const GpuSnapshot& s, const SubscriptionFilter& filter) {
    const ProbeEdge b = begin_edge(s.probe);
    if (s.monotonic_ns < b.ns) {
      remember_before(s, filter);
      return;
    }
    if (closing) {
      const ProbeEdge e = end_edge(s.probe);
      if (s.monotonic_ns > e.ns) {
        if (e.sampled) return;
        for (const auto& dev : s.devices) {
          DeviceAcc* acc = find(s.probe, dev.id);
          if (!acc) continue;
          if (!acc->after) acc->after = point_of(dev, s.monotonic_ns);
          acc->take_after(dev, s.monotonic_ns, e.ns);
        }
        return;
      }
    }
    add(s, filter);
  }

  DeviceAcc& device(const std::string& probe, const std::string& id) {
    for (auto& d : devices)
      if (d.device_id == id && d.probe == probe) return d;
    auto& d = devices.emplace_back();
    d.probe = probe;
    d.device_id = id;
    return d;
  }

  void add(const GpuSnapshot& s, const SubscriptionFilter& filter) {
    ++snapshots;
    for (const auto& dev : s.devices) {
      if (!listed(filter.devices, dev.id)) continue;
      DeviceAcc& acc = device(s.probe, dev.id);
      ++acc.samples;
      for (std::size_t i = 0; i < kMetricCount; ++i) {
        const auto m = static_cast<Metric>(i);
        if (dev.metrics[m] && listed(filter.metrics, m)) acc.metrics[i].add(dev.metrics[m]);
      }
      acc.add_energy(dev);
      acc.add_power(dev, s.monotonic_ns);
      if (acc.samples == 1) {
        if (bound) {
          const auto it = before.find({s.probe, dev.id});
          acc.start_traces(begin_edge(s.probe).ns, true,
                           it != before.end() ? std::optional<Point>(it->second) : std::nullopt);
        } else {
          acc.start_traces(s.monotonic_ns, false, std::nullopt);
        }
      }
      acc.add_readings(dev, s.monotonic_ns);
      if (bound) {
        acc.add_point(point_of(dev, s.monotonic_ns));
        if (acc.samples == 1) {
          const auto it = before.find({s.probe, dev.id});
          acc.open(begin_edge(s.probe),
                   it != before.end() ? std::optional<Point>(it->second) : std::nullopt);
        }
      }
    }
  }

  /// Sets every device's end edge (bound windows), once the stream up to end() is in.
  void close_all() {
    for (auto& acc : devices)
      if (acc.last) acc.close(end_edge(acc.probe));
  }

  std::vector<DeviceWindowSummary> summarize() const {
    std::vector<DeviceWindowSummary> out;
    out.reserve(devices.size());
    for (const auto& acc : devices) {
      auto& d = out.emplace_back();
      d.device_id = acc.device_id;
      d.probe = acc.probe;
      d.samples = acc.samples;
      for (std::size_t i = 0; i < kMetricCount; ++i) {
        const MetricAcc& m = acc.metrics[i];
        if (m.count == 0) continue;
        d.metrics[static_cast<Metric>(i)] = MetricSummary{
            m.min, m.max, m.sum / static_cast<double>(m.count), m.last, m.count, m.source};
      }
      d.energy_counter_resets = acc.counter_resets;
      d.counter_changes = acc.counter_period.changes();
      d.ignored_power_samples = acc.ignored_samples;
      d.ignored_power_samples_reason = acc.ignored_reason;
      summarize_energy(acc, d);
    }
    return out;
  }

  /// The device's window [begin, end], ns: its edges (bound), else its first and last samples.
  std::pair<std::int64_t, std::int64_t> span_of(const DeviceAcc& acc) const {
    if (!bound) return {acc.first_ns.value_or(0), acc.last_ns.value_or(0)};
    const std::int64_t b = acc.begin_sampled ? acc.first->ns : begin_edge(acc.probe).ns;
    const std::int64_t e =
        acc.end_counter.kind == EdgeKind::sampled ? acc.last->ns : end_edge(acc.probe).ns;
    return {b, e};
  }

  /// Energy, its method and the coverage figures. The counter is used unless it is too coarse
  /// for the window and power can be integrated instead: it did not move between the edges, or
  /// its measured update period is longer than the window, or it moved only once while the
  /// driver's samples cover at least kSamplesPreferred of the window freshly. Power is
  /// integrated from every driver sample when the device has any, else as before from the
  /// power_watts readings.
  void summarize_energy(const DeviceAcc& acc, DeviceWindowSummary& d) const {
    const auto [b, e] = span_of(acc);
    const std::int64_t length = e - b;
    const bool end_estimated = bound && !end_edge(acc.probe).sampled;
    std::optional<PowerTrace::Result> fine;
    if (acc.fine.any_driver_sample())
      fine = acc.fine.finish(e, end_estimated ? acc.fine_after : std::nullopt);
    const std::optional<std::int64_t> counter_period = acc.counter_period.period();
    const std::size_t moves = acc.counter_period.changes();
    const bool samples_cover = fine && fine->coverage && *fine->coverage >= kSamplesPreferred;
    const bool counter_coarse =
        moves == 0 || (counter_period && length < *counter_period) || (moves == 1 && samples_cover);
    const bool counter_moved = moves > 0;
    const bool power_possible = fine || (bound ? acc.first && acc.first->power &&
                                                     acc.begin_power.kind != EdgeKind::unknown &&
                                                     acc.end_power.kind != EdgeKind::unknown
                                               : acc.power_intervals > 0);
    const bool allow_counter = !(counter_coarse && power_possible);
    if (bound) {
      d.begin_edge_ns = b;
      d.end_edge_ns = e;
    }
    bool used_counter =
        bound ? summarize_bound(acc, d, allow_counter) : summarize_unbound(acc, d, allow_counter);
    if (fine && (!used_counter || !allow_counter)) {
      use_fine(acc, *fine, d);
      used_counter = false;
    }
    if (!d.energy_joules) return;
    if (used_counter) {
      d.energy_method = EnergyMethod::counter;
      d.update_period_ns = counter_period;
      if (!counter_period) d.coverage_reason = "energy counter: " + acc.counter_period.reason();
      if (counter_period && length <= 0) d.coverage_reason = "the window has no length";
      if (counter_period && length > 0)
        d.fresh_coverage =
            std::max(0.0, 1.0 - static_cast<double>(*counter_period) / static_cast<double>(length));
      if (counter_period)
        d.shorter_than_update_period = length < *counter_period;
      else if (!counter_moved)
        d.shorter_than_update_period = true;
      return;
    }
    const std::optional<PowerTrace::Result> r =
        fine ? fine : acc.coarse.finish(e, end_estimated ? acc.coarse_after : std::nullopt);
    d.energy_method = EnergyMethod::integrated;
    if (!r) return;  // (not expected: the readings that gave the energy reached the trace)
    d.energy_method = r->inner_readings > 0 ? EnergyMethod::integrated : EnergyMethod::edges;
    d.power_readings = r->readings;
    d.driver_power_samples = r->driver_samples;
    if (r->readings > 1 || r->begin != TraceEdge::exact) d.largest_gap_ns = r->largest_gap_ns;
    d.update_period_ns = r->period_ns;
    d.coverage_reason = r->period_ns ? r->coverage_reason : r->period_reason;
    d.fresh_coverage = r->coverage;
    if (r->period_ns)
      d.shorter_than_update_period = length < *r->period_ns;
    else if (acc.counter_period.readings() >= 2 && !counter_moved)
      d.shorter_than_update_period = true;
  }

  /// The energy integrated from the driver's samples, with the edges as the trace cut them.
  void use_fine(const DeviceAcc& acc, const PowerTrace::Result& r, DeviceWindowSummary& d) const {
    d.energy_joules = r.joules;
    d.energy_kind = EnergyKind::integrated;
    d.estimated_joules = 0;
    if (!bound) return;
    const auto edge = [](TraceEdge t, bool sampled, double joules, double& estimated) {
      if (t == TraceEdge::none) return EdgeKind::unknown;
      if (t == TraceEdge::held) {
        estimated += joules;
        return EdgeKind::held;
      }
      if (sampled) return EdgeKind::sampled;
      estimated += joules;  // the edge sample failed: the edge is the call time
      return EdgeKind::interpolated;
    };
    d.begin_edge = edge(r.begin, begin_edge(acc.probe).sampled && acc.begin_sampled, r.begin_joules,
                        d.estimated_joules);
    d.end_edge =
        edge(r.end, acc.end_counter.kind == EdgeKind::sampled, r.end_joules, d.estimated_joules);
  }

  /// A channel-only window: the counter's increases, else power integrated between the first
  /// and last readings. True when the counter was used.
  bool summarize_unbound(const DeviceAcc& acc, DeviceWindowSummary& d, bool allow_counter) const {
    if (acc.counter_intervals > 0 && allow_counter) {
      d.energy_joules = acc.counter_joules;
      d.energy_kind = acc.counter_kind;
      return true;
    }
    if (acc.power_intervals > 0) {
      d.energy_joules = acc.integrated_joules;
      d.energy_kind = EnergyKind::integrated;
    } else if (acc.counter_intervals > 0) {
      d.energy_joules = acc.counter_joules;
      d.energy_kind = acc.counter_kind;
      return true;
    }
    return false;
  }

  /// Energy and edges of a bound window's device: the counter when both its edges are known
  /// (and `allow_counter`), else power integrated over the edges, else whichever has readings
  /// (edges then say `unknown`). True when the counter was used.
  bool summarize_bound(const DeviceAcc& acc, DeviceWindowSummary& d, bool allow_counter) const {
    const auto known = [](const EdgeEstimate& x) { return x.kind != EdgeKind::unknown; };
    const bool has_counter = acc.first && acc.first->counter;
    const bool has_power = acc.first && acc.first->power;
    const bool counter_ok = has_counter && known(acc.begin_counter) && known(acc.end_counter);
    const bool power_ok = has_power && known(acc.begin_power) && known(acc.end_power);
    const auto use = [&](double body, const EdgeEstimate& x, const EdgeEstimate& y,
                         EnergyKind kind) {
      d.energy_joules = body + x.joules + y.joules;
      d.estimated_joules = x.joules + y.joules;
      d.energy_kind = kind;
      d.begin_edge = x.kind;
      d.end_edge = y.kind;
    };
    if (counter_ok && allow_counter) {
      use(acc.counter_joules, acc.begin_counter, acc.end_counter, acc.counter_kind);
      return true;
    }
    if (power_ok) {
      use(acc.integrated_joules, acc.begin_power, acc.end_power, EnergyKind::integrated);
    } else if (counter_ok) {
      use(acc.counter_joules, acc.begin_counter, acc.end_counter, acc.counter_kind);
      return true;
    } else if (acc.counter_intervals > 0) {
      use(acc.counter_joules, EdgeEstimate{}, EdgeEstimate{}, acc.counter_kind);
      return true;
    } else if (acc.power_intervals > 0) {
      use(acc.integrated_joules, EdgeEstimate{}, EdgeEstimate{}, EnergyKind::integrated);
    } else {
      d.begin_edge = acc.begin_counter.kind;
      d.end_edge = acc.end_counter.kind;
    }
    return false;
  }
};

std::string_view to_string(EdgeKind k) noexcept {
  switch (k) {
    case EdgeKind::none:
      return "none";
    case EdgeKind::sampled:
      return "sampled";
    case EdgeKind::interpolated:
      return "interpolated";
    case EdgeKind::held:
      return "held";
    case EdgeKind::unknown:
      return "unknown";
  }
  return "unknown";
}

std::string_view to_string(EnergyMethod m) noexcept {
  switch (m) {
    case EnergyMethod::counter:
      return "counter";
    case EnergyMethod::integrated:
      return "integrated";
    case EnergyMethod::edges:
      return "edges";
  }
  return "edges";
}

const MetricSummary* DeviceWindowSummary::find(Metric m) const {
  auto it = metrics.find(m);
  return it == metrics.end() ? nullptr : &it->second;
}

const DeviceWindowSummary* WindowSummary::find(std::string_view device_id) const {
  for (const auto& d : devices)
    if (d.device_id == device_id) return &d;
  return nullptr;
}

namespace {

/// Runs the sampler (no lock held) and records what it cost.
std::vector<EdgeSample> take_edges(const EdgeSampler& sampler, const SubscriptionFilter& filter,
                                   WindowSummary::Overhead& o, std::int64_t& latency_ns,
                                   std::vector<std::string>& errors, const char* edge) {
  const auto t0 = steady_now_ns();
  std::vector<EdgeSample> edges;
  try {
    edges = sampler(filter);
  } catch (const std::exception& e) {
    errors.push_back(std::string("sampler: ") + edge + ": threw: " + e.what());
  }
  latency_ns = steady_now_ns() - t0;
  for (const auto& e : edges) {
    ++o.edge_samples;
    o.max_sample_latency_ns = std::max(o.max_sample_latency_ns, e.latency_ns);
    if (e.ok()) continue;
    ++o.failed_edge_samples;
    errors.push_back(e.probe + ": " + edge + ": " + (e.error.empty() ? "no snapshot" : e.error) +
                     (e.message.empty() ? "" : ": " + e.message));
  }
  return edges;
}

/// What edges already taken (by the caller's sampler) cost: the requests run side by side, so
/// the slowest edge's latency, request to answer. (It was a literal 0: the overhead of every
/// shared edge — Telemetry::end_window(s), next_window — read 0.)
std::int64_t given_latency(const std::vector<EdgeSample>& edges) {
  std::int64_t slowest = 0;
  for (const auto& e : edges) slowest = std::max(slowest, e.latency_ns);
  return slowest;
}

}  // namespace

MeasurementWindow::MeasurementWindow(SubscriptionFilter filter)
    : filter_(std::move(filter)), acc_(std::make_unique<Accumulators>()) {}

MeasurementWindow::MeasurementWindow(SnapshotChannel& channel, SubscriptionFilter filter)
    : MeasurementWindow(channel, EdgeSampler{}, std::move(filter)) {}

MeasurementWindow::MeasurementWindow(SnapshotChannel& channel, EdgeSampler sampler,
                                     SubscriptionFilter filter)
    : channel_(&channel),
      sampler_(std::move(sampler)),
      filter_(std::move(filter)),
      acc_(std::make_unique<Accumulators>()) {
  SubscribeOptions options;
  options.filter = filter_;
  options.policy = Backpressure::lossless;
  options.capacity = 1024;
  subscription_ = channel.subscribe(
      std::move(options), [this](const SnapshotPtr& s) { on_snapshot(s); },
      [this](const Gap& g) { on_gap(g); });
}

MeasurementWindow::MeasurementWindow(SnapshotChannel& channel, EdgeSampler sampler,
                                     SubscriptionFilter filter, ExternalFeed)
    : channel_(&channel),
      sampler_(std::move(sampler)),
      filter_(std::move(filter)),
      acc_(std::make_unique<Accumulators>()) {}

MeasurementWindow::~MeasurementWindow() { subscription_.reset(); }

void MeasurementWindow::feed(const SnapshotPtr& s) {
  // What its own subscription's filter would have delivered (the rest is skipped as there).
  if (s && filter_.matches(*s)) on_snapshot(s);
}

void MeasurementWindow::feed_gap() { on_gap(Gap{}); }

void MeasurementWindow::open(std::uint64_t from_sequence) {
  std::lock_guard lock(mu_);
  acc_ = std::make_unique<Accumulators>();
  acc_->bound = bound();
  missed_ = 0;
  running_ = true;
  begin_ns_ = now_();
  acc_->begin_call_ns = begin_ns_;
  if (channel_) last_sequence_ = std::min(from_sequence, channel_->last_sequence());
  if (!bound()) return;
  // The stream waits until the edges are known; what arrives meanwhile is taken from the
  // channel's history afterwards, in order.
  edge_pending_ = true;
  // The last point of every device before begin, for an estimate if its edge sample fails.
  for (const auto& s : channel_->latest())
    if (s->sequence <= last_sequence_ && filter_.matches(*s)) acc_->remember_before(*s, filter_);
}

void MeasurementWindow::opened(const std::vector<EdgeSample>& edges, WindowSummary::Overhead o,
                               std::int64_t latency_ns, std::vector<std::string> errors,
                               std::int64_t cpu0) {
  std::lock_guard lock(mu_);
  edge_pending_ = false;
  if (!running_) return;  // end() ran meanwhile
  for (const auto& e : edges)
    acc_->begin_edges[e.probe] =
        e.ok() ? ProbeEdge{e.snapshot->monotonic_ns, true} : ProbeEdge{begin_ns_, false};
  overhead_ = o;
  overhead_.begin_latency_ns = latency_ns;
  edge_errors_ = std::move(errors);
  catch_up_locked();
  overhead_.caller_cpu_ns = thread_cpu_ns() - cpu0;
}

void MeasurementWindow::begin() {
  const auto cpu0 = thread_cpu_ns();
  open(std::numeric_limits<std::uint64_t>::max());
  if (!bound()) return;
  WindowSummary::Overhead o;
  std::int64_t latency = 0;
  std::vector<std::string> errors;
  const auto edges = take_edges(sampler_, filter_, o, latency, errors, "begin");
  opened(edges, o, latency, std::move(errors), cpu0);
}

void MeasurementWindow::begin(const std::vector<EdgeSample>& edges) {
  if (!bound())
    throw std::logic_error("MeasurementWindow::begin(edges): the window has no sampler");
  const auto cpu0 = thread_cpu_ns();
  // Take the stream from just before the first edge snapshot (they are published already).
  std::uint64_t from = std::numeric_limits<std::uint64_t>::max();
  for (const auto& e : edges)
    if (e.snapshot && e.snapshot->sequence > 0) from = std::min(from, e.snapshot->sequence - 1);
  open(from);
  WindowSummary::Overhead o;
  std::vector<std::string> errors;
  std::int64_t latency = 0;
  const EdgeSampler given = [&edges](const SubscriptionFilter&) { return edges; };
  const auto taken = take_edges(given, filter_, o, latency, errors, "begin");
  opened(taken, o, given_latency(edges), std::move(errors), cpu0);
}

std::int64_t MeasurementWindow::closing() {
  std::lock_guard lock(mu_);
  if (!running_) return -1;
  if (bound()) edge_pending_ = true;
  return now_();
}

WindowSummary MeasurementWindow::end() {
  const auto cpu0 = thread_cpu_ns();
  const auto end_call_ns = closing();
  if (end_call_ns < 0) return {};
  WindowSummary::Overhead o;
  std::int64_t latency = 0;
  std::vector<std::string> errors;
  std::vector<EdgeSample> edges;
  if (bound()) edges = take_edges(sampler_, filter_, o, latency, errors, "end");
  return closed(edges, end_call_ns, o, latency, std::move(errors), cpu0);
}

WindowSummary MeasurementWindow::end(const std::vector<EdgeSample>& edges) {
  if (!bound()) throw std::logic_error("MeasurementWindow::end(edges): the window has no sampler");
  const auto cpu0 = thread_cpu_ns();
  const auto end_call_ns = closing();
  if (end_call_ns < 0) return {};
  WindowSummary::Overhead o;
  std::int64_t latency = 0;
  std::vector<std::string> errors;
  const EdgeSampler given = [&edges](const SubscriptionFilter&) { return edges; };
  const auto taken = take_edges(given, filter_, o, latency, errors, "end");
  return closed(taken, end_call_ns, o, given_latency(edges), std::move(errors), cpu0);
}

WindowSummary MeasurementWindow::closed(const std::vector<EdgeSample>& edges,
                                        std::int64_t end_call_ns, const WindowSummary::Overhead& o,
                                        std::int64_t latency_ns, std::vector<std::string> errors,
                                        std::int64_t cpu0) {
  std::lock_guard lock(mu_);
  WindowSummary out;
  edge_pending_ = false;
  if (!running_) return out;
  if (bound()) {
    acc_->end_call_ns = end_call_ns;
    for (const auto& e : edges)
      acc_->end_edges[e.probe] =
          e.ok() ? ProbeEdge{e.snapshot->monotonic_ns, true} : ProbeEdge{end_call_ns, false};
    acc_->closing = true;
  }
  catch_up_locked();
  running_ = false;
  out.begin_ns = begin_ns_;
  out.end_ns = bound() ? end_call_ns : now_();
  out.snapshots = acc_->snapshots;
  out.missed_snapshots = missed_;
  if (bound()) acc_->close_all();
  out.devices = acc_->summarize();
  if (!bound()) return out;
  out.exact_edges = !out.devices.empty();
  for (const auto& d : out.devices)
    if (d.begin_edge != EdgeKind::sampled || d.end_edge != EdgeKind::sampled)
      out.exact_edges = false;
  out.edge_errors = std::move(edge_errors_);
  out.edge_errors.insert(out.edge_errors.end(), errors.begin(), errors.end());
  out.overhead = overhead_;
  out.overhead.edge_samples += o.edge_samples;
  out.overhead.failed_edge_samples += o.failed_edge_samples;
  out.overhead.max_sample_latency_ns =
      std::max(out.overhead.max_sample_latency_ns, o.max_sample_latency_ns);
  out.overhead.end_latency_ns = latency_ns;
  out.overhead.caller_cpu_ns += thread_cpu_ns() - cpu0;
  return out;
}

void MeasurementWindow::set_clock(std::function<std::int64_t()> now_ns) {
  std::lock_guard lock(mu_);
  now_ = now_ns ? std::move(now_ns) : std::function<std::int64_t()>(&steady_now_ns);
}

bool MeasurementWindow::running() const {
  std::lock_guard lock(mu_);
  return running_;
}

void MeasurementWindow::add(const GpuSnapshot& s) {
  std::lock_guard lock(mu_);
  if (running_ && filter_.matches(s)) take_locked(s);
}

void MeasurementWindow::take_locked(const GpuSnapshot& s) {
  if (acc_->bound)
    acc_->add_bound(s, filter_);
  else
    acc_->add(s, filter_);
}

void MeasurementWindow::on_snapshot(const SnapshotPtr& s) {
  std::lock_guard lock(mu_);
  // Before begin(), caught up already, or waiting for edges (taken from history afterwards).
  if (!running_ || edge_pending_ || s->sequence <= last_sequence_) return;
  last_sequence_ = s->sequence;
  take_locked(*s);
}

void MeasurementWindow::on_gap(const Gap&) {
  // The subscription overflowed: take what was lost from the channel's history instead.
  std::lock_guard lock(mu_);
  if (running_ && !edge_pending_) catch_up_locked();
}

void MeasurementWindow::catch_up_locked() {
  if (!channel_) return;
  std::optional<Gap> gap;
  const auto rest = channel_->history_since(last_sequence_, &gap);
  if (gap) {
    missed_ += gap->missed;
    last_sequence_ = gap->after_sequence + gap->missed;
  }
  for (const auto& s : rest) {
    if (filter_.matches(*s)) take_locked(*s);
    last_sequence_ = s->sequence;
  }
}

}  // namespace gpustream
