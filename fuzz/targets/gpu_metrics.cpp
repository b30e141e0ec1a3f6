// The amdgpu sysfs gpu_metrics binary table (probes/amd/amdgpu_gpu_metrics.cpp). The parser never
// throws, never reads past the input, and gives a percentage or an absence for each figure.
#include <string>

#include "amd/amdgpu_gpu_metrics.hpp"
#include "common.hpp"
#include "gpustream/probes/amd_probe.hpp"  // marks the target as the AMD probe's (CMake)

namespace amdgpu = gpustream::amdgpu;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto t = amdgpu::parse_gpu_metrics(gpustream::fuzz::text_of(data, size));
  for (const auto* r : {&t.graphics, &t.memory_controller}) {
    if (*r) {
      FUZZ_CHECK(r->value() >= 0.0 && r->value() <= 100.0);
    } else {
      FUZZ_CHECK(r->reason() == gpustream::Absence::unsupported ||
                 r->reason() == gpustream::Absence::tool_failed);
    }
  }
  // A refused table or field says why; an input without a header has no revision.
  if (!t.graphics && !t.memory_controller && t.graphics.reason() == gpustream::Absence::tool_failed)
    FUZZ_CHECK(!t.problem.empty());
  if (size < 4) FUZZ_CHECK(t.revision.empty());
  return 0;
}
