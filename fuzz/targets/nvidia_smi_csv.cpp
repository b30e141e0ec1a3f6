// `nvidia-smi --query-gpu=... / --query-compute-apps=... --format=csv` output. The parsers
// never throw; rows they cannot use are reported in the errors.
#include <cmath>
#include <string_view>
#include <vector>

#include "common.hpp"
#include "gpustream/probes/nvidia_formats.hpp"

namespace nvidia = gpustream::nvidia;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = gpustream::fuzz::text_of(data, size);
  static constexpr std::string_view kGpu[] = {"index",
                                              "uuid",
                                              "name",
                                              "pci.bus_id",
                                              "memory.total",
                                              "memory.used",
                                              "utilization.gpu",
                                              "temperature.gpu",
                                              "power.draw",
                                              "clocks.gr",
                                              "clocks_throttle_reasons.active"};
  static constexpr std::string_view kApps[] = {"gpu_uuid", "pid", "used_gpu_memory",
                                               "process_name"};
  std::vector<gpustream::SampleError> errors;
  for (const auto& d : nvidia::smi_devices_from_csv(text, kGpu, &errors)) {
    FUZZ_CHECK(d.index >= 0);
    FUZZ_CHECK(!d.id.empty());
    for (std::size_t m = 0; m < gpustream::kMetricCount; ++m) {
      const auto& r = d.metrics[static_cast<gpustream::Metric>(m)];
      if (r) FUZZ_CHECK(std::isfinite(r.value()));
    }
  }
  for (const auto& a : nvidia::smi_compute_apps_from_csv(text, kApps, &errors))
    FUZZ_CHECK(a.pid > 0);
  if (const auto v = nvidia::parse_smi_value(text); v.value) FUZZ_CHECK(std::isfinite(*v.value));
  (void)nvidia::normalize_pci_bus_id(text);
  return 0;
}
