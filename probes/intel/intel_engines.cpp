#include "intel_engines.hpp"

#include <algorithm>
#include <optional>

#include "gpustream/probes/intel_probe.hpp"
#include "gpustream/probes/pci.hpp"
#include "intel_sysfs.hpp"

namespace gpustream {
namespace intel {

std::string engine_name(std::string_view cls) {
  static const std::map<std::string_view, std::string_view> kXe = {{"rcs", "render"},
                                                                   {"bcs", "copy"},
                                                                   {"vcs", "video"},
                                                                   {"vecs", "video-enhance"},
                                                                   {"ccs", "compute"}};
  auto it = kXe.find(cls);
  return std::string(it == kXe.end() ? cls : it->second);
}

}  // namespace intel

namespace {

double capacity_of(const drm::Fdinfo& info, const std::string& cls) {
  auto it = info.engine_capacity.find(cls);
  return it == info.engine_capacity.end() || it->second == 0 ? 1.0
                                                             : static_cast<double>(it->second);
}

// A client's memory: the sum of its drm-resident-<region> keys (drm-total-<region> where the
// driver prints no residency). Unknown (nullopt), never 0, when it prints neither: i915 before
// its memory stats and xe builds without them print engines only.
std::optional<std::uint64_t> client_memory(const drm::Fdinfo& info) {
  const auto& regions = info.resident_bytes.empty() ? info.total_bytes : info.resident_bytes;
  if (regions.empty()) return std::nullopt;
  std::uint64_t sum = 0;
  for (const auto& [region, bytes] : regions) sum += bytes;
  return sum;
}

}  // namespace

std::map<std::string, IntelEngineAccounting::DeviceUsage> IntelEngineAccounting::update(
    const std::vector<drm::Client>& clients, std::int64_t now_ns) {
  struct ProcAcc {
    std::string name;
    std::optional<std::uint64_t> memory;  // summed over the clients that say
    bool memory_unknown = false;          // a client printed no memory keys
    std::map<std::string, double> util;
    std::set<std::string> classes;
    bool any_seeded = false;
  };
  std::map<std::string, std::map<std::string, double>> device_util;
  std::map<std::string, std::map<std::int64_t, ProcAcc>> procs;
  std::set<Key> current;
  engine_ns_.begin();
  cycles_.begin();
  const auto now = static_cast<std::uint64_t>(std::max<std::int64_t>(now_ns, 0));

  for (const auto& c : clients) {
    const auto pdev = pci::normalize_bus_id(c.info.pdev);
    if (pdev.empty()) continue;
    const Key key{c.pid, c.instance, pdev, c.info.client_id.value_or(0)};
    auto& proc = procs[pdev][c.pid];
    proc.name = c.comm;
    if (const auto bytes = client_memory(c.info))
      proc.memory = proc.memory.value_or(0) + *bytes;
    else
      proc.memory_unknown = true;
    for (const auto& m : {c.info.engine_ns, c.info.cycles})
      for (const auto& [cls, v] : m) {
        proc.classes.insert(intel::engine_name(cls));
        classes_[pdev].insert(intel::engine_name(cls));
      }
    // Per class, the client's busy share since the previous walk (the toolkit's engine_busy:
    // first sight seeds, a counter that went backwards reseeds), divided by the capacity.
    std::map<std::string, double> util;
    for (const auto& [cls, ns] : c.info.engine_ns)
      if (const auto pct = engine_ns_.update(key, cls, ns, now, capacity_of(c.info, cls)))
        util[cls] = std::clamp(*pct, 0.0, 100.0);
    for (const auto& [cls, cycles] : c.info.cycles) {
      const auto total = c.info.total_cycles.find(cls);
      if (total == c.info.total_cycles.end()) continue;
      if (const auto pct =
              cycles_.update(key, cls, cycles, total->second, capacity_of(c.info, cls)))
        util[cls] = std::clamp(*pct, 0.0, 100.0);
    }
    if (previous_.contains(key)) {
      proc.any_seeded = true;
      for (const auto& [cls, u] : util) {
        const auto name = intel::engine_name(cls);
        proc.util[name] += u;
        device_util[pdev][name] += u;
      }
    }
    current.insert(key);
  }
  const bool seeded_before = walks_ > 0;
  previous_ = std::move(current);  // vanished clients drop out here
  ++walks_;

  std::map<std::string, DeviceUsage> out;
  for (const auto& [pdev, classes] : classes_) {
    auto& usage = out[pdev];
    for (const auto& cls : classes) {
      EngineSample e{cls, {}};
      if (!seeded_before) {
        e.utilization_percent = Reading::missing(Absence::not_yet_seeded, Source::fdinfo);
      } else {
        double u = 0;
        if (auto d = device_util.find(pdev); d != device_util.end())
          if (auto it = d->second.find(cls); it != d->second.end()) u = it->second;
        e.utilization_percent = Reading::of(std::min(u, 100.0), Source::fdinfo);
      }
      usage.engines.push_back(std::move(e));
    }
    for (auto& [pid, acc] : procs[pdev]) {
      ProcessSample p;
      p.pid = pid;
      p.name = acc.name;
      // A client without memory keys makes the sum unknown: part of it would understate.
      if (!acc.memory_unknown) p.gpu_memory_bytes = acc.memory;
      std::optional<double> busiest;
      for (const auto& cls : acc.classes) {
        EngineSample e{cls, {}};
        if (acc.any_seeded) {
          const double u = std::min(acc.util.count(cls) ? acc.util.at(cls) : 0.0, 100.0);
          e.utilization_percent = Reading::of(u, Source::fdinfo);
          busiest = std::max(busiest.value_or(0.0), u);
        } else {
          e.utilization_percent = Reading::missing(Absence::not_yet_seeded, Source::fdinfo);
        }
        p.engines.push_back(std::move(e));
      }
      p.gpu_utilization_percent = busiest;
      usage.processes.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace gpustream
