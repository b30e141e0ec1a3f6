// `amd-smi static|metric|process --json` output. The parsers may only throw ToolError (the
// probe's handler catches that type); one bad field must not cost the rest.
#include <cmath>

#include "common.hpp"
#include "gpustream/probes/amd_probe.hpp"

namespace amd_cli = gpustream::amd_cli;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = gpustream::fuzz::text_of(data, size);
  try {
    for (const auto& s : amd_cli::parse_amd_smi_static(text)) {
      FUZZ_CHECK(s.index >= 0);
      if (s.vram_total_bytes) FUZZ_CHECK(std::isfinite(*s.vram_total_bytes));
    }
  } catch (const amd_cli::ToolError&) {}
  try {
    for (const auto& [index, metrics] : amd_cli::parse_amd_smi_metric(text)) {
      FUZZ_CHECK(index >= 0);
      for (std::size_t m = 0; m < gpustream::kMetricCount; ++m) {
        const auto& r = metrics[static_cast<gpustream::Metric>(m)];
        if (r) FUZZ_CHECK(std::isfinite(r.value()));
      }
    }
  } catch (const amd_cli::ToolError&) {}
  try {
    for (const auto& [index, processes] : amd_cli::parse_amd_smi_process(text)) {
      FUZZ_CHECK(index >= 0);
      for (const auto& p : processes) FUZZ_CHECK(p.process.pid > 0);
    }
  } catch (const amd_cli::ToolError&) {}
  return 0;
}
