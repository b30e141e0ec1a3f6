// gpustream/probes/engine_busy.hpp — per-client engine busy counters → percent of the engine,
// one mechanism for every probe that reads DRM fdinfo clients or a tool's per-process counters.
//
// A client (a DRM file descriptor, a process on a device: the caller's key) reports, per engine,
// a cumulative busy counter measured against a base (busy ns against the sample time in ns, or
// busy cycles against total cycles). Between two samples the engine's percent is
// 100 × Δbusy / Δbase / capacity (capacity: how many engines of the class the counter sums,
// drm-engine-capacity-<class>; 1 when unknown). The counter rules are counter_rate.hpp's: the
// first sight seeds (no value), a counter that went backwards (a reused pid or client id) seeds
// again, a key not seen in a whole sample is forgotten. Values are not clamped here.
//
// Thread safety: none; the owner serialises calls. Cancellation: nothing to cancel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "gpustream/probes/counter_rate.hpp"

namespace gpustream::engine {

template <class ClientKey>
class BusyRates {
 public:
  /// Starts a sample: counters not updated during the previous one are forgotten.
  void begin() { rates_.begin(); }
  /// The percent busy of `engine` for `client` since its previous reading; nullopt while the
  /// counter seeds (first sight, went backwards, base did not advance).
  std::optional<double> update(const ClientKey& client, const std::string& engine,
                               std::uint64_t busy, std::uint64_t base, double capacity = 1.0) {
    const auto step = rates_.update({client, engine}, busy, base);
    if (!step.rate) return std::nullopt;
    return *step.rate / capacity * 100.0;
  }

 private:
  rate::CounterRates<std::pair<ClientKey, std::string>> rates_;
};

}  // namespace gpustream::engine
