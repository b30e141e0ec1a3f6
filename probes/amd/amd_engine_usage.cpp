// Engine busy-time counters -> per-process utilization, shared by AmdSysfsProbe (fdinfo) and
// AmdProbe (amd-smi process usage).
#include <algorithm>
#include <utility>

#include "gpustream/probes/amd_probe.hpp"

namespace gpustream {

void EngineBusyTracker::begin(std::int64_t monotonic_ns) {
  previous_ = std::move(current_);
  current_ = Seen{};
  current_.time_ns = monotonic_ns;
}

EngineUsage EngineBusyTracker::update(const Key& key,
                                      const std::map<std::string, std::uint64_t>& busy_ns) {
  EngineUsage out;
  const auto prev = previous_.counters.find(key);
  const bool seeded = prev != previous_.counters.end() && current_.time_ns > previous_.time_ns;
  const double elapsed_ns = static_cast<double>(current_.time_ns - previous_.time_ns);
  for (const auto& [engine, ns] : busy_ns) {
    auto& pct = out[engine];
    if (!seeded) continue;
    const auto before = prev->second.find(engine);
    // A new engine, or a counter that went backwards (restarted process, reused pid): reseed.
    if (before == prev->second.end() || ns < before->second) continue;
    pct = static_cast<double>(ns - before->second) / elapsed_ns * 100.0;
  }
  auto& mine = current_.counters[key];
  for (const auto& [engine, ns] : busy_ns) mine[engine] = ns;  // several fds of one client
  return out;
}

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
