// Builds the bytes of an amdgpu sysfs gpu_metrics file of a given revision, from the layouts of
// the kernel's kgd_pp_interface.h as worked out by hand here (sizes and offsets written as
// numbers, independently of the parser's structs). Every byte the table does not set is 0x7F, so
// a read at a wrong offset finds 0x7F7F (32639: beyond 100 % in whole and in 1/100 percents).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

namespace gpustream::test {

/// Where one revision keeps what the tests set.
struct GpuMetricsLayout {
  int format, content;
  std::size_t size;
  std::size_t gfx;                 // average_gfx_activity
  std::optional<std::size_t> umc;  // average_umc_activity (discrete tables)
  std::size_t media;               // average_mm_activity / vcn_activity[0]
  std::size_t clock_counter;       // system_clock_counter (uint64)
};

inline GpuMetricsLayout gpu_metrics_layout(int format, int content) {
  switch (format * 10 + content) {
    case 10:  // v1_0: header, 4 bytes of padding, system_clock_counter first
      return {1, 0, 80, 28, 30, 32, 8};
    case 11:  // v1_1: temperatures[6] then gfx/umc/mm
      return {1, 1, 96, 16, 18, 20, 32};
    case 12:
      return {1, 2, 104, 16, 18, 20, 32};
    case 13:  // Navi 1x/2x/3x
      return {1, 3, 120, 16, 18, 20, 32};
    case 14:  // MI300: hotspot/mem/vrsoc, curr_socket_power, gfx, umc, vcn_activity[4]
      return {1, 4, 288, 12, 14, 16, 32};
    case 15:  // + jpeg_activity[32] before energy_accumulator
      return {1, 5, 360, 12, 14, 16, 96};
    case 20:  // v2_0: header, padding, system_clock_counter, temperatures[12], gfx, mm
      return {2, 0, 120, 40, std::nullopt, 42, 8};
    case 21:  // v2_1: temperatures[12], gfx, mm, system_clock_counter
      return {2, 1, 120, 28, std::nullopt, 30, 32};
    case 22:
      return {2, 2, 128, 28, std::nullopt, 30, 32};
    case 23:
      return {2, 3, 152, 28, std::nullopt, 30, 32};
    case 24:
      return {2, 4, 168, 28, std::nullopt, 30, 32};
    case 30:  // v3_0: temperatures[19], gfx, vcn, ...; system_clock_counter at 104
      return {3, 0, 264, 42, std::nullopt, 44, 104};
    default:
      throw std::invalid_argument("no test layout for gpu_metrics " + std::to_string(format) + "." +
                                  std::to_string(content));
  }
}

/// What a test puts in a table. Raw values: whole percents in 1.x, 1/100 % in 2.x.
struct GpuMetricsSpec {
  int format = 1, content = 3;
  std::uint16_t gfx = 0, umc = 0, media = 0;
  std::optional<std::uint16_t> structure_size;  // default: the revision's size
  std::optional<std::size_t> length;            // bytes written; default: the revision's size
};

inline void put16(std::string& b, std::size_t at, std::uint16_t v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

inline std::string gpu_metrics_bytes(const GpuMetricsSpec& s) {
  const auto l = gpu_metrics_layout(s.format, s.content);
  std::string b(l.size, '\x7F');
  put16(b, 0, s.structure_size.value_or(static_cast<std::uint16_t>(l.size)));
  b[2] = static_cast<char>(s.format);
  b[3] = static_cast<char>(s.content);
  put16(b, l.gfx, s.gfx);
  if (l.umc) put16(b, *l.umc, s.umc);
  put16(b, l.media, s.media);
  const std::uint64_t ns = 123456789012345;
  std::memcpy(b.data() + l.clock_counter, &ns, sizeof ns);
  b.resize(s.length.value_or(l.size), '\x7F');
  return b;
}

/// A table of an unknown revision: a header and `size` bytes.
inline std::string gpu_metrics_unknown(int format, int content, std::uint16_t size) {
  std::string b(size, '\0');
  put16(b, 0, size);
  b[2] = static_cast<char>(format);
  b[3] = static_cast<char>(content);
  return b;
}

}  // namespace gpustream::test
