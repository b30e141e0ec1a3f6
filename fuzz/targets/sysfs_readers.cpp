// The procfs/sysfs value readers: numbers, byte sizes, "Key: value" lines, pp_dpm levels.
#include <string>

#include "common.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/readers.hpp"

namespace readers = gpustream::readers;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = gpustream::fuzz::text_of(data, size);
  const auto trimmed = readers::trim(text);
  FUZZ_CHECK(trimmed.size() <= text.size());
  if (const auto v = readers::parse_uint(text)) {
    // A decimal number reads back from its own digits.
    FUZZ_CHECK(readers::parse_uint(std::to_string(*v)) == v);
    FUZZ_CHECK(readers::parse_byte_size(text) == v);  // no unit: bytes
  }
  (void)readers::parse_uint(text, 16);
  if (const auto v = readers::parse_int(text))
    FUZZ_CHECK(readers::parse_int(std::to_string(*v)) == v);
  (void)readers::parse_byte_size(text);
  std::size_t pairs = 0;
  readers::for_each_key_value(text, [&](const readers::KeyValue& kv) {
    FUZZ_CHECK(!kv.key.empty());
    ++pairs;
  });
  FUZZ_CHECK(pairs <= size);
  if (const auto kv = readers::split_key_value(text)) (void)readers::find_value(text, kv->key);
  if (const auto mhz = gpustream::parse_dpm_current_mhz(text)) FUZZ_CHECK(*mhz >= 0);
  return 0;
}
