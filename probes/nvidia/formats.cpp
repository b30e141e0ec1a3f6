// Pure parsers of the NVIDIA probe: process-info buffers and small decoders. The nvidia-smi CSV
// parsers are in smi_csv.cpp.
#include <cstdio>
#include <cstring>

#include "gpustream/probes/nvidia_formats.hpp"
#include "gpustream/probes/readers.hpp"

namespace gpustream::nvidia {
namespace {

template <class T>
T load(std::span<const std::byte> buffer, std::size_t offset) {
  T v{};
  std::memcpy(&v, buffer.data() + offset, sizeof v);
  return v;
}

}  // namespace

std::size_t detect_process_info_stride(std::span<const std::byte> buffer, std::size_t count) {
  if (count == 0 || buffer.size() < count * kProcessInfoV3Stride) return kProcessInfoV2Stride;
  // The last 8 bytes of entry count-1 in a 32-byte grid (usedGpuCcProtectedMemory) lie at or
  // beyond count * 24, so a 24-byte writer never touches them.
  const std::size_t tail = count * kProcessInfoV3Stride - 8;
  for (std::size_t i = tail; i < tail + 8; ++i) {
    if (std::to_integer<std::uint8_t>(buffer[i]) != kProcessInfoSentinel)
      return kProcessInfoV3Stride;
  }
  return kProcessInfoV2Stride;
}

std::vector<NvmlProcessEntry> parse_process_infos(std::span<const std::byte> buffer,
                                                  std::size_t count, std::size_t stride) {
  std::vector<NvmlProcessEntry> out;
  if (stride < kProcessInfoV1Stride) return out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t at = i * stride;
    if (at + kProcessInfoV1Stride > buffer.size()) break;
    NvmlProcessEntry e;
    e.pid = load<std::uint32_t>(buffer, at);
    const auto used = load<std::uint64_t>(buffer, at + 8);
    if (used != ~std::uint64_t{0}) e.used_gpu_memory_bytes = used;
    out.push_back(e);
  }
  return out;
}

std::vector<std::string> decode_clock_event_reasons(std::uint64_t bits) {
  std::vector<std::string> out;
  for (unsigned bit = 0; bit < 64; ++bit) {
    const std::uint64_t mask = std::uint64_t{1} << bit;
    if (!(bits & mask)) continue;
    if (bit < kNvmlClockEventReasons.size()) {
      out.emplace_back(kNvmlClockEventReasons[bit]);
    } else {
      char buf[24];
      std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(mask));
      out.emplace_back(buf);
    }
  }
  return out;
}

}  // namespace gpustream::nvidia
