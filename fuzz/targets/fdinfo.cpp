// DRM fdinfo text (/proc/<pid>/fdinfo/<fd>) -> drm::Fdinfo.
#include "common.hpp"
#include "gpustream/probes/drm_fdinfo.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = gpustream::fuzz::text_of(data, size);
  const auto info = gpustream::drm::parse_fdinfo(text);
  if (info) FUZZ_CHECK(!info->driver.empty());
  (void)gpustream::drm::is_drm_node(text);
  return 0;
}
