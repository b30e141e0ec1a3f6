// The `gpustream/1` snapshot decoder (what RemoteSubscriber and `replay` read). It may only throw
// JsonError, and what it accepts must survive a round trip: decode(encode(s)) == s.
#include "common.hpp"
#include "gpustream/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpustream::GpuSnapshot s;
  try {
    s = gpustream::snapshot_from_json_string(gpustream::fuzz::text_of(data, size));
  } catch (const gpustream::JsonError&) {
    return 0;
  }
  const std::string again = gpustream::to_json_string(s);
  FUZZ_CHECK(gpustream::is_valid_utf8(again));
  FUZZ_CHECK(gpustream::snapshot_from_json_string(again) == s);
  return 0;
}
