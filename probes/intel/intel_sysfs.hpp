// intel_sysfs.hpp — reads one Intel card's sysfs and hwmon files into a DeviceSample (private to
// the Intel probe). See gpustream/probes/intel_probe.hpp for what is read and why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gpustream/model.hpp"
#include "gpustream/probes/intel_probe.hpp"

namespace gpustream::intel {

/// The previous energy reading of a card, for power from energy deltas.
struct EnergyTracker {
  std::optional<std::uint64_t> last_uj;
  std::int64_t last_ns = 0;
  std::string counter;  // which file the last value came from ("energy1_input"...)
};

/// Fills frequency, energy, power, power limit, temperature, fan, VRAM and power state of
/// `card` into `out` (values with Source::sysfs; what the card does not have is absent
/// `unsupported`). `now_ns` is the monotonic time of the sample.
void read_sysfs_metrics(const Card& card, DeviceSample& out, EnergyTracker& energy,
                        std::int64_t now_ns);

/// "0000:03:00.0" form, lower case; empty for anything else.
std::string normalize_pci_bus_id(std::string_view s);

}  // namespace gpustream::intel
