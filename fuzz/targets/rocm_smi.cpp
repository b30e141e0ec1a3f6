// `rocm-smi ... --json` output. The parser may only throw ToolError.
#include <cmath>

#include "common.hpp"
#include "gpustream/probes/amd_probe.hpp"

namespace amd_cli = gpustream::amd_cli;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    for (const auto& d : amd_cli::parse_rocm_smi(gpustream::fuzz::text_of(data, size))) {
      FUZZ_CHECK(d.index >= 0);
      FUZZ_CHECK(!d.id.empty());
      for (std::size_t m = 0; m < gpustream::kMetricCount; ++m) {
        const auto& r = d.metrics[static_cast<gpustream::Metric>(m)];
        if (r) FUZZ_CHECK(std::isfinite(r.value()));
      }
    }
  } catch (const amd_cli::ToolError&) {}
  return 0;
}
