// The "host" row of the probe table (probes/registry.cpp lists it): its doctor checks are
// host_doctor.cpp.
#include "gpustream/probes/host_probe.hpp"
#include "gpustream/probes/registry.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream {
namespace doctor {
void check_host(const CheckContext& c);
}
const ProbeRow& host_probe_row() noexcept {
  static constexpr ProbeRow kRow{
      HostProbe::kName,
      "host RAM and swap (/proc/meminfo), RSS of this process and watched pids",
      HostProbe::kName,
      ProbeKind::host,
      {},
      &make_host_probe_from_config,
      nullptr,
      &doctor::check_host};
  return kRow;
}

}  // namespace gpustream
