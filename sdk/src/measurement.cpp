// MeasurementWindow: min/max/mean/last per metric and energy per device over a window.
#include "gpustream/measurement.hpp"

#include <algorithm>
#include <array>
#include <limits>

namespace gpustream {
namespace {

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
};

}  // namespace

struct MeasurementWindow::Accumulators {
  std::vector<DeviceAcc> devices;
  std::size_t snapshots = 0;

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
    }
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
      if (acc.counter_intervals > 0) {
        d.energy_joules = acc.counter_joules;
        d.energy_kind = acc.counter_kind;
      } else if (acc.power_intervals > 0) {
        d.energy_joules = acc.integrated_joules;
        d.energy_kind = EnergyKind::integrated;
      }
      d.energy_counter_resets = acc.counter_resets;
    }
    return out;
  }
};

const MetricSummary* DeviceWindowSummary::find(Metric m) const {
  auto it = metrics.find(m);
  return it == metrics.end() ? nullptr : &it->second;
}

const DeviceWindowSummary* WindowSummary::find(std::string_view device_id) const {
  for (const auto& d : devices)
    if (d.device_id == device_id) return &d;
  return nullptr;
}

MeasurementWindow::MeasurementWindow(SubscriptionFilter filter)
    : filter_(std::move(filter)), acc_(std::make_unique<Accumulators>()) {}

MeasurementWindow::MeasurementWindow(SnapshotChannel& channel, SubscriptionFilter filter)
    : channel_(&channel), filter_(std::move(filter)), acc_(std::make_unique<Accumulators>()) {
  SubscribeOptions options;
  options.filter = filter_;
  options.policy = Backpressure::lossless;
  options.capacity = 1024;
  subscription_ = channel.subscribe(
      std::move(options), [this](const SnapshotPtr& s) { on_snapshot(s); },
      [this](const Gap& g) { on_gap(g); });
}

MeasurementWindow::~MeasurementWindow() { subscription_.reset(); }

void MeasurementWindow::begin() {
  std::lock_guard lock(mu_);
  acc_ = std::make_unique<Accumulators>();
  missed_ = 0;
  running_ = true;
  begin_ns_ = steady_now_ns();
  if (channel_) last_sequence_ = channel_->last_sequence();
}

WindowSummary MeasurementWindow::end() {
  std::lock_guard lock(mu_);
  WindowSummary out;
  if (!running_) return out;
  catch_up_locked();
  running_ = false;
  out.begin_ns = begin_ns_;
  out.end_ns = steady_now_ns();
  out.snapshots = acc_->snapshots;
  out.missed_snapshots = missed_;
  out.devices = acc_->summarize();
  return out;
}

bool MeasurementWindow::running() const {
  std::lock_guard lock(mu_);
  return running_;
}

void MeasurementWindow::add(const GpuSnapshot& s) {
  std::lock_guard lock(mu_);
  if (running_ && filter_.matches(s)) acc_->add(s, filter_);
}

void MeasurementWindow::on_snapshot(const SnapshotPtr& s) {
  std::lock_guard lock(mu_);
  if (!running_ || s->sequence <= last_sequence_) return;  // before begin(), or caught up
  last_sequence_ = s->sequence;
  acc_->add(*s, filter_);
}

void MeasurementWindow::on_gap(const Gap&) {
  // The subscription overflowed: take what was lost from the channel's history instead.
  std::lock_guard lock(mu_);
  if (running_) catch_up_locked();
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
    if (filter_.matches(*s)) acc_->add(*s, filter_);
    last_sequence_ = s->sequence;
  }
}

}  // namespace gpustream
