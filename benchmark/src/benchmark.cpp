#include "gpustream/benchmark.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "gpustream/probes/registry.hpp"

namespace gpustream::benchmark {

namespace {

/// The process-wide Telemetry and what builds it. Leaked on purpose: the Telemetry is stopped
/// and deleted by an atexit handler registered once it exists, which therefore runs before the
/// statics it uses (the logger, made while it was built) are destroyed.
struct Process {
  std::mutex mu;
  std::optional<Config> config;
  ProbeFactory factory;
  Telemetry* telemetry = nullptr;
  std::string error;  // why building it failed (every later call fails the same way)
};

Process& process() {
  // Leaked on purpose (see Process); the pointer itself never changes.
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory,cppcoreguidelines-avoid-non-const-global-variables)
  static auto* const p = new Process();
  return *p;
}

void stop_at_exit() {
  Telemetry* t = nullptr;
  {
    std::lock_guard lock(process().mu);
    t = std::exchange(process().telemetry, nullptr);
  }
  delete t;  // NOLINT(cppcoreguidelines-owning-memory): the one owner, see Process
}

Config config_from_environment() {
  if (const char* path = std::getenv(kConfigEnv); path != nullptr && *path != '\0')
    return load_config(path, {}, config_sections());
  return {};
}

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += separator;
    out += p;
  }
  return out;
}

std::atomic<std::uint64_t> g_runs{0};  // NOLINT: numbers the windows of this process

}  // namespace

void configure(Config config) { configure(std::move(config), probe_factory()); }

void configure(Config config, ProbeFactory factory) {
  auto& p = process();
  std::lock_guard lock(p.mu);
  if (p.telemetry != nullptr || !p.error.empty())
    throw std::logic_error(
        "gpustream::benchmark::configure: the process-wide Telemetry is already built (call "
        "configure before the first benchmark runs)");
  p.config = std::move(config);
  p.factory = std::move(factory);
}

Telemetry& telemetry() {
  auto& p = process();
  std::lock_guard lock(p.mu);
  if (p.telemetry != nullptr) return *p.telemetry;
  if (!p.error.empty()) throw ConfigError(p.error);
  try {
    Config c = p.config ? *p.config : config_from_environment();
    ProbeFactory f = p.factory ? p.factory : probe_factory();
    auto t = std::make_unique<Telemetry>(std::move(c), std::move(f));
    t->start();
    t->wait_for_first_samples(std::chrono::seconds{10});
    p.telemetry = t.release();
  } catch (const std::exception& e) {
    p.error = std::string("gpustream::benchmark: ") + e.what();
    throw ConfigError(p.error);
  }
  std::atexit(&stop_at_exit);
  return *p.telemetry;
}

Figures figures_of(const WindowSummary& summary, const std::string& device) {
  Figures f;
  std::vector<const DeviceWindowSummary*> ds;
  for (const auto& d : summary.devices)
    if (device.empty() || d.device_id == device) ds.push_back(&d);
  if (ds.empty()) {
    f.absent.push_back(device.empty()
                           ? "every figure: the window saw no device"
                           : "every figure: the window did not see device '" + device + "'");
    return f;
  }
  double energy = 0;
  double power_mean = 0;
  double power_max = 0;
  double util_max = 0;
  double mem_peak = 0;
  double coverage = 1;
  double window_s = 0;
  bool has_energy = true;
  bool has_power_max = true;
  bool has_util = true;
  bool has_mem = true;
  bool has_coverage = true;
  bool exact = true;
  for (const auto* d : ds) {
    f.devices.push_back(d->device_id);
    const double length_s = static_cast<double>(d->end_edge_ns - d->begin_edge_ns) / 1e9;
    window_s = std::max(window_s, length_s);
    if (d->begin_edge != EdgeKind::sampled || d->end_edge != EdgeKind::sampled) exact = false;
    if (d->energy_joules && length_s > 0) {
      energy += *d->energy_joules;
      power_mean += *d->energy_joules / length_s;
      if (d->energy_method)
        f.methods.push_back(d->device_id + " energy=" + std::string(to_string(*d->energy_method)));
    } else if (has_energy) {
      has_energy = false;
      f.absent.push_back("energy_J, power_mean_W: " + d->device_id +
                         (d->energy_joules ? ": the window has no length"
                                           : ": no energy counter or power reading in the window"));
    }
    if (const auto* m = d->find(Metric::power_watts)) {
      power_max += m->max;
    } else if (has_power_max) {
      has_power_max = false;
      f.absent.push_back("power_max_W: " + d->device_id + ": no power reading");
    }
    if (const auto* m = d->find(Metric::utilization_percent)) {
      util_max = std::max(util_max, m->max);
    } else if (has_util) {
      has_util = false;
      f.absent.push_back("util_max_pct: " + d->device_id + ": no utilization reading");
    }
    if (const auto* m = d->find(Metric::memory_used_bytes)) {
      mem_peak += m->max;
    } else if (has_mem) {
      has_mem = false;
      f.absent.push_back("mem_peak_B: " + d->device_id + ": no memory reading");
    }
    if (d->fresh_coverage) {
      coverage = std::min(coverage, *d->fresh_coverage);
    } else if (has_coverage) {
      has_coverage = false;
      f.absent.push_back("coverage: " + d->device_id + ": " +
                         (d->coverage_reason.empty() ? "unknown" : d->coverage_reason));
    }
  }
  f.exact_edges = exact;
  if (has_energy) {
    f.energy_joules = energy;
    f.power_mean_watts = power_mean;
  }
  if (has_power_max) f.power_max_watts = power_max;
  if (has_util) f.utilization_max_percent = util_max;
  if (has_mem) f.memory_peak_bytes = mem_peak;
  if (has_coverage) f.fresh_coverage = coverage;
  if (window_s > 0) f.window_seconds = window_s;
  return f;
}

Meter::Meter(Options options) : options_(std::move(options)) {}

void Meter::begin(::benchmark::State& state) {
  if (state.thread_index() != 0) return;
  // Unique while open: one window per run, numbered in this process.
  std::string name = "gpustream-benchmark-" + std::to_string(++g_runs);
  SubscriptionFilter filter;
  filter.probes = options_.probes;
  if (!options_.device.empty()) filter.devices = {options_.device};
  try {
    telemetry().begin_window(name, std::move(filter));
    window_ = std::move(name);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void Meter::end(::benchmark::State& state) {
  if (state.thread_index() != 0 || window_.empty()) return;
  const std::string name = std::exchange(window_, {});
  WindowSummary summary;
  try {
    summary = telemetry().end_window(name);
  } catch (const std::exception& e) {
    if (options_.label) state.SetLabel(std::string("gpustream: ") + e.what());
    return;
  }
  last_ = figures_of(summary, options_.device);
  using ::benchmark::Counter;
  const auto set = [&](const char* name, const std::optional<double>& v,
                       Counter::Flags flags = Counter::kDefaults,
                       Counter::OneK k = Counter::kIs1000) {
    if (v) state.counters[options_.prefix + name] = Counter(*v, flags, k);
  };
  set("energy_J", last_.energy_joules, Counter::kAvgIterations);
  set("power_mean_W", last_.power_mean_watts);
  set("power_max_W", last_.power_max_watts);
  set("util_max_pct", last_.utilization_max_percent);
  set("mem_peak_B", last_.memory_peak_bytes, Counter::kDefaults, Counter::kIs1024);
  set("coverage", last_.fresh_coverage);
  if (last_.exact_edges) set("exact_edges", *last_.exact_edges ? 1.0 : 0.0);
  set("window_s", last_.window_seconds);
  if (!options_.label) return;
  std::vector<std::string> parts;
  if (!last_.methods.empty()) parts.push_back(join(last_.methods, ", "));
  if (!last_.absent.empty()) parts.push_back("absent: " + join(last_.absent, "; "));
  if (!summary.edge_errors.empty())
    parts.push_back("edge estimated: " + summary.edge_errors.front());
  state.SetLabel("gpustream: " + join(parts, "; "));
}

void EnergyFixture::SetUp(::benchmark::State& state) {
  if (state.thread_index() != 0) return;  // thread 0 alone owns the meter
  if (!meter_) meter_ = std::make_unique<Meter>(energy_options());
  meter_->begin(state);
}

void EnergyFixture::TearDown(::benchmark::State& state) {
  if (state.thread_index() != 0 || !meter_) return;
  meter_->end(state);
}

}  // namespace gpustream::benchmark
