// Engine busy-time counters -> per-process utilization, shared by AmdSysfsProbe (fdinfo) and
// AmdProbe (amd-smi process usage).
#include <algorithm>
#include <utility>

#include "gpustream/probes/amd_probe.hpp"

namespace gpustream {

void EngineBusyTracker::begin(std::int64_t monotonic_ns) {
  now_ns_ = monotonic_ns;
  seen_.clear();
  rates_.begin();
}

EngineUsage EngineBusyTracker::update(const Key& key,
                                      const std::map<std::string, std::uint64_t>& busy_ns) {
  EngineUsage out;
  seen_.insert(key);
  const auto now = static_cast<std::uint64_t>(std::max<std::int64_t>(now_ns_, 0));
  // A first sight, a counter that went backwards (restarted process, reused pid) or no time
  // passed: no value; the counter seeds.
  for (const auto& [engine, ns] : busy_ns) out[engine] = rates_.update(key, engine, ns, now);
  return out;
}

std::size_t EngineBusyTracker::tracked() const noexcept { return seen_.size(); }

void add_engine_usage(EngineUsage& total, const EngineUsage& part) {
  for (const auto& [engine, pct] : part) {
    auto [it, inserted] = total.try_emplace(engine, pct);
    if (inserted) continue;
    if (!it->second || !pct) {
      it->second.reset();
    } else {
      *it->second += *pct;
    }
  }
}

void set_engine_usage(ProcessSample& p, const EngineUsage& usage, Source source) {
  p.engines.clear();
  p.gpu_utilization_percent.reset();
  for (const auto& [engine, pct] : usage) {
    EngineSample e;
    e.name = engine;
    if (pct) {
      const double capped = std::min(*pct, 100.0);
      e.utilization_percent = Reading::of(capped, source);
      if (engine == "gfx") p.gpu_utilization_percent = capped;
    } else {
      e.utilization_percent = Reading::missing(Absence::not_yet_seeded, source);
    }
    p.engines.push_back(std::move(e));
  }
}

}  // namespace gpustream
