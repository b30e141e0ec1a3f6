#include "gpustream/probes/intel_probe.hpp"

#include <algorithm>
#include <cstdio>

#include "gpustream/probes/readers.hpp"
#include "intel_engines.hpp"
#include "intel_sysfs.hpp"
#include "level_zero.hpp"

namespace gpustream {

struct IntelGpuProbe::DeviceState {
  intel::EnergyTracker energy;
};

namespace {

std::string device_name(const intel::Card& card) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "Intel %s GPU [8086:%04x] (%s)",
                card.discrete ? "discrete" : "integrated", card.device_id, card.driver.c_str());
  return buf;
}

}  // namespace

IntelGpuProbe::IntelGpuProbe(ProbeExecutors executors, IntelProbeOptions options)
    : BlockingProbe(std::move(executors)),
      options_(std::move(options)),
      engines_(std::make_unique<IntelEngineAccounting>()),
      process_table_(options_.paths.procfs_root) {
  if (!options_.monotonic_clock) options_.monotonic_clock = [] { return steady_now_ns(); };
  if (!options_.level_zero_library.empty())
    level_zero_ =
        std::make_unique<LevelZeroAugment>(options_.level_zero_library, options_.session_mode);
}

IntelGpuProbe::~IntelGpuProbe() = default;

IntelGpuProbe::DeviceState& IntelGpuProbe::state_for(const std::string& pci_bus_id) {
  auto& s = states_[pci_bus_id];
  if (!s) s = std::make_unique<DeviceState>();
  return *s;
}

drm::WalkStats IntelGpuProbe::last_walk_stats() const {
  std::lock_guard lock(stats_mu_);
  return walk_stats_;
}

std::string IntelGpuProbe::level_zero_status() const {
  std::lock_guard lock(stats_mu_);
  return level_zero_ ? level_zero_->status() : "disabled";
}

Detection IntelGpuProbe::detect() {
  Detection d;
  const auto cards = intel::discover_cards(options_.paths.sysfs_root);
  std::string l0 = "disabled";
  if (level_zero_) {
    std::lock_guard lock(stats_mu_);
    l0 = level_zero_->refresh();
  }
  if (log_once_.first("l0:" + l0)) logger()->info("intel probe: Level Zero: {}", l0);
  if (cards.empty()) {
    d.reason = "no Intel GPU (i915/xe) under " +
               readers::join_path(options_.paths.sysfs_root, "class/drm") + "; Level Zero: " + l0;
    return d;
  }
  d.available = true;
  int index = 0;
  for (const auto& card : cards)
    d.devices.push_back(
        {card.pci_bus_id, Vendor::intel, index++, device_name(card), card.pci_bus_id});
  return d;
}

GpuSnapshot IntelGpuProbe::sample() {
  GpuSnapshot snap;
  snap.probe = std::string(kName);
  const std::int64_t now = options_.monotonic_clock();
  snap.monotonic_ns = now;
  const auto cards = intel::discover_cards(options_.paths.sysfs_root);

  int index = 0;
  for (const auto& card : cards) {
    DeviceSample d;
    d.id = card.pci_bus_id;
    d.vendor = Vendor::intel;
    d.index = index++;
    d.name = device_name(card);
    d.pci_bus_id = card.pci_bus_id;
    d.attributes["driver"] = card.driver;
    d.attributes["form_factor"] = card.discrete ? "discrete" : "integrated";
    if (!card.card.empty()) d.attributes["card"] = card.card;
    if (!card.render.empty()) d.attributes["render_node"] = card.render;
    intel::read_sysfs_metrics(card, d, state_for(card.pci_bus_id).energy, now);
    snap.devices.push_back(std::move(d));
  }
  if (cards.empty()) return snap;  // no Intel device: skip the /proc walk

  if (!clients_)
    clients_ = std::make_unique<drm::ClientTracker>(
        drm::TrackerOptions{.procfs_root = options_.paths.procfs_root,
                            .devfs_root = options_.paths.devfs_root,
                            .drivers = {"i915", "xe"},
                            .freshness = options_.process_freshness,
                            .sweep_period = options_.process_sweep,
                            .count_period = options_.process_fd_count_period,
                            .max_clients = options_.max_clients});
  drm::WalkStats stats;
  const auto clients = clients_->sample(now, &stats);
  {
    std::lock_guard lock(stats_mu_);
    walk_stats_ = stats;
  }
  if (stats.clients_capped > 0) {
    // The count changes from tick to tick; the message must not (the Scheduler logs each
    // distinct message once): the count is in last_walk_stats().
    snap.errors.push_back({"clients_capped",
                           "more than " + std::to_string(options_.max_clients) +
                               " DRM clients: the others are not reported",
                           {}});
  }
  const bool seeded_before = engines_->seeded();
  auto usage = engines_->update(clients, now);
  for (auto& d : snap.devices) {
    auto it = usage.find(d.pci_bus_id);
    std::optional<double> busiest;
    if (it != usage.end()) {
      d.engines = std::move(it->second.engines);
      d.processes = std::move(it->second.processes);
      for (const auto& e : d.engines)
        if (e.utilization_percent)
          busiest = std::max(busiest.value_or(0.0), e.utilization_percent.value());
    } else if (seeded_before) {
      busiest = 0.0;  // no client holds the device: its engines are idle
    }
    if (busiest)
      d.metrics.set(Metric::utilization_percent, *busiest, Source::fdinfo);
    else
      d.metrics.set_absent(Metric::utilization_percent, Absence::not_yet_seeded, Source::fdinfo);
  }
  process_table_.fill(snap.devices);  // name and host RSS from /proc/<pid>/{comm,statm}

  if (level_zero_) {
    std::lock_guard lock(stats_mu_);
    level_zero_->augment(snap.devices, now);
  } else {
    for (auto& d : snap.devices) d.attributes["metrics_source"] = "sysfs";
  }
  for (auto& d : snap.devices) d.metrics.fill_absent(Absence::unsupported);
  return snap;
}

std::shared_ptr<IntelGpuProbe> make_intel_probe(ProbeExecutors executors,
                                                IntelProbeOptions options) {
  return std::make_shared<IntelGpuProbe>(std::move(executors), std::move(options));
}

}  // namespace gpustream
