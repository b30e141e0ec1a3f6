// fits() / best_device(): free device memory over snapshots.
#include "gpustream/planner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

namespace gpustream {
namespace {

/// The device's free memory: its own reading, else derived from total − used.
std::optional<std::pair<double, Source>> free_memory(const DeviceSample& d) {
  if (const auto& f = d.metrics[Metric::memory_free_bytes]) return {{f.value(), f.source()}};
  DeviceSample copy;
  copy.metrics[Metric::memory_total_bytes] = d.metrics[Metric::memory_total_bytes];
  copy.metrics[Metric::memory_used_bytes] = d.metrics[Metric::memory_used_bytes];
  derive_metrics(copy);
  if (const auto& f = copy.metrics[Metric::memory_free_bytes]) return {{f.value(), f.source()}};
  return std::nullopt;
}

/// a is the better figure for one device than b: reported beats derived, then the smaller.
bool better_figure(const DeviceFit& a, const DeviceFit& b) {
  const bool a_reported = a.source != Source::derived;
  const bool b_reported = b.source != Source::derived;
  if (a_reported != b_reported) return a_reported;
  return a.free_bytes < b.free_bytes;
}

}  // namespace

std::vector<DeviceFit> fits(const std::vector<SnapshotPtr>& snapshots, std::uint64_t bytes) {
  std::vector<DeviceFit> all;
  // (node, device id) → index in `all`: a fleet has many devices, and ids repeat across nodes.
  std::map<std::pair<std::string_view, std::string_view>, std::size_t> index;
  for (const auto& s : snapshots) {
    if (!s) continue;
    for (const auto& d : s->devices) {
      if (d.partitioned) continue;  // its MIG instances are the candidates
      const auto f = free_memory(d);
      if (!f || !std::isfinite(f->first) || f->first < 0) continue;
      DeviceFit fit{
          d.id,      d.name,  s->probe,        d.vendor, static_cast<std::uint64_t>(f->first),
          f->second, s->node, s->time_unix_ns, d.parent};
      const auto [it, fresh] = index.try_emplace({s->node, d.id}, all.size());
      if (fresh)
        all.push_back(std::move(fit));
      else if (better_figure(fit, all[it->second]))
        all[it->second] = std::move(fit);
    }
  }
  std::erase_if(all, [&](const DeviceFit& x) { return x.free_bytes < bytes; });
  std::stable_sort(all.begin(), all.end(), [](const DeviceFit& a, const DeviceFit& b) {
    return a.free_bytes > b.free_bytes;
  });
  return all;
}

std::string_view to_string(ExclusionReason r) noexcept {
  return r == ExclusionReason::fatal_event ? "fatal_event" : "excluded";
}

std::optional<DeviceFit> FitPlan::best() const {
  if (fits.empty()) return std::nullopt;
  return fits.front();
}

std::optional<FitExclusion> exclusion(const DeviceFit& device, const FitOptions& options,
                                      const std::vector<EventPtr>& events,
                                      std::int64_t now_unix_ns) {
  if (std::ranges::find(options.exclude, device.device_id) != options.exclude.end())
    return FitExclusion{device, ExclusionReason::excluded, "in the request's exclusions", {}};
  const auto window = options.fatal_event_window.count();
  if (window <= 0 || !device.node.empty()) return std::nullopt;
  // The newest fatal event of the device (or of its parent GPU, for a MIG instance).
  EventPtr found;
  for (const auto& e : events) {
    if (!e || !is_fatal(*e)) continue;
    if (e->device_id != device.device_id &&
        (device.parent.empty() || e->device_id != device.parent))
      continue;
    if (!found || e->time_unix_ns > found->time_unix_ns) found = e;
  }
  if (!found) return std::nullopt;
  // An event stamped in the future (the wall clock stepped back) counts as now.
  constexpr std::int64_t kNs = 1'000'000'000;
  const std::int64_t age_ns = std::max<std::int64_t>(0, now_unix_ns - found->time_unix_ns);
  const std::int64_t window_ns = window >= std::numeric_limits<std::int64_t>::max() / kNs
                                     ? std::numeric_limits<std::int64_t>::max()
                                     : window * kNs;
  if (age_ns > window_ns) return std::nullopt;
  const std::int64_t age_s = age_ns / kNs;
  std::string detail(to_string(found->kind));
  if (found->data) detail += " " + std::to_string(*found->data);
  if (found->device_id != device.device_id) detail += " on its GPU " + found->device_id;
  detail += " " + std::to_string(age_s) + " s ago (event #" + std::to_string(found->sequence) +
            ", " + found->probe + ")";
  return FitExclusion{device, ExclusionReason::fatal_event, std::move(detail), found};
}

FitPlan fits(const std::vector<SnapshotPtr>& snapshots, std::uint64_t bytes,
             const FitOptions& options, const std::vector<EventPtr>& events,
             std::int64_t now_unix_ns) {
  FitPlan plan;
  for (auto& f : fits(snapshots, bytes)) {
    if (auto x = exclusion(f, options, events, now_unix_ns))
      plan.excluded.push_back(std::move(*x));
    else
      plan.fits.push_back(std::move(f));
  }
  return plan;
}

std::optional<DeviceFit> best_device(const std::vector<SnapshotPtr>& snapshots,
                                     std::uint64_t bytes) {
  auto all = fits(snapshots, bytes);
  if (all.empty()) return std::nullopt;
  return std::move(all.front());
}

}  // namespace gpustream
