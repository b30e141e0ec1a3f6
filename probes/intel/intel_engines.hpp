// intel_engines.hpp — engine utilization and per-process memory from DRM fdinfo clients, as
// deltas between two walks (private to the Intel probe).
//
// i915 clients report drm-engine-<class> in ns: utilization = delta ns / delta wall time /
// drm-engine-capacity-<class>. xe clients report drm-cycles-<class> and drm-total-cycles-<class>:
// utilization = delta cycles / delta total cycles / capacity. A client seen for the first time
// only seeds; a client that is gone contributes nothing; counters that went backwards (a reused
// client id) seed again. Device utilization per class is the sum over clients, clamped to 100.
// A process's memory is the sum of its clients' drm-resident-<region> (else drm-total-<region>)
// keys; it is unset (unknown, never 0) when one of its clients prints no memory key at all (i915
// before its memory stats).
//
// Thread safety: none; owned by the probe, used by one sample at a time.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gpustream/model.hpp"
#include "gpustream/probes/drm_fdinfo.hpp"
#include "gpustream/probes/engine_busy.hpp"

namespace gpustream {

class IntelEngineAccounting {
 public:
  struct DeviceUsage {
    std::vector<EngineSample> engines;     // by class name, sorted
    std::vector<ProcessSample> processes;  // sorted by pid
  };

  /// Folds one walk in. Returns usage per PCI bus id (lower case) of every device that has
  /// ever had a client; devices absent from the result had none.
  std::map<std::string, DeviceUsage> update(const std::vector<drm::Client>& clients,
                                            std::int64_t now_ns);
  /// True once a walk has been folded in (the next one reports values).
  bool seeded() const noexcept { return walks_ > 0; }

 private:
  // pid, tracker instance (a reused pid starts afresh), pdev, client id
  using Key = std::tuple<std::int64_t, std::uint64_t, std::string, std::uint64_t>;

  std::set<Key> previous_;            // the clients of the previous walk
  engine::BusyRates<Key> engine_ns_;  // i915 drm-engine-<class> ns over wall time
  engine::BusyRates<Key> cycles_;     // xe drm-cycles-<class> over drm-total-cycles
  std::map<std::string, std::set<std::string>> classes_;  // pdev -> engine classes seen
  std::uint64_t walks_ = 0;
};

}  // namespace gpustream
