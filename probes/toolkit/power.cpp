#include "gpustream/probes/power.hpp"

namespace gpustream::power {

void settle(DeviceSample& d) noexcept {
  auto& m = d.metrics;
  if (m[Metric::power_watts] || !m[Metric::power_average_watts]) return;
  m[Metric::power_watts] = m[Metric::power_average_watts];
  d.power_kind = PowerKind::average;
}

}  // namespace gpustream::power
