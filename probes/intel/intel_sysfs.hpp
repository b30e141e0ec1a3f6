// intel_sysfs.hpp — reads one Intel card's sysfs and hwmon files into a DeviceSample (private to
// the Intel probe). See gpustream/probes/intel_probe.hpp for what is read and why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gpustream/model.hpp"
#include "gpustream/probes/counter_rate.hpp"
#include "gpustream/probes/intel_probe.hpp"

namespace gpustream::intel {

/// The previous energy reading of a card, for power from energy deltas.
struct EnergyTracker {
  rate::CounterRate uj_per_ns;  // the energy counter (µJ) over the sample time (ns)
  std::string counter;          // which file the last value came from ("energy1_input"...)
};

/// Fills frequency, energy, power, power limit, temperature, fan, VRAM and power state of
/// `card` into `out` (values with Source::sysfs; what the card does not have is absent
/// `unsupported`). `now_ns` is the monotonic time of the sample.
void read_sysfs_metrics(const Card& card, DeviceSample& out, EnergyTracker& energy,
                        std::int64_t now_ns);

}  // namespace gpustream::intel
