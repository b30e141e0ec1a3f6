// One line of `macmon pipe`. The parser may only throw JsonError.
#include "common.hpp"
#include "gpustream/json.hpp"
#include "gpustream/probes/apple_probe.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = gpustream::fuzz::text_of(data, size);
  try {
    const auto s = gpustream::parse_macmon_line(text);
    if (s.soc) FUZZ_CHECK(!s.soc->memory_gb || *s.soc->memory_gb >= 0);
  } catch (const gpustream::JsonError&) {}
  (void)gpustream::parse_rfc3339_ns(text);
  return 0;
}
