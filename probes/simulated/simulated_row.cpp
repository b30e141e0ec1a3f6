// The "simulated" row of the probe table (probes/registry.cpp lists it) and its doctor check.
#include "gpustream/probes/registry.hpp"
#include "gpustream/probes/simulated_probe.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream {
namespace {
static_assert(SimulatedProbe::kName == kSimulatedProbe,
              "Telemetry's no-GPU fallback asks the factory for kSimulatedProbe");

void check_simulated(const doctor::CheckContext& c) {
  c.add("simulated", "simulated", doctor::Status::info,
        c.options.simulate > 0
            ? std::to_string(c.options.simulate) + " simulated GPU(s): formulas, nothing is read"
            : "not asked for: --simulate N adds N simulated GPUs (nothing is read from the "
              "machine)");
}

}  // namespace

const ProbeRow& simulated_probe_row() noexcept {
  static constexpr ProbeRow kRow{SimulatedProbe::kName,
                                 "simulated GPUs with plausible moving values (--simulate N)",
                                 SimulatedProbe::kName,
                                 ProbeKind::simulated,
                                 {},
                                 &make_simulated_probe_from_config,
                                 nullptr,
                                 &check_simulated};
  return kRow;
}

}  // namespace gpustream
