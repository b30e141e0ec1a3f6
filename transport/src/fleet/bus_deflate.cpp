// The fleet bus's raw DEFLATE bodies over libdeflate's whole-buffer API.
#include "fleet/bus_deflate.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <new>

#include <libdeflate.h>

namespace gpustream::transport {

namespace {

struct BusCompressorFree {
  void operator()(libdeflate_compressor* c) const noexcept { libdeflate_free_compressor(c); }
};
struct BusDecompressorFree {
  void operator()(libdeflate_decompressor* d) const noexcept { libdeflate_free_decompressor(d); }
};
using BusCompressor = std::unique_ptr<libdeflate_compressor, BusCompressorFree>;
using BusDecompressor = std::unique_ptr<libdeflate_decompressor, BusDecompressorFree>;

constexpr int kBusMinLevel = 1;
constexpr int kBusMaxLevel = 9;

/// This thread's compressor at `level` (1..9), allocated on first use.
libdeflate_compressor& bus_compressor(int level) {
  thread_local std::array<BusCompressor, kBusMaxLevel + 1> by_level;
  auto& c = by_level[static_cast<std::size_t>(level)];
  if (!c) {
    c.reset(libdeflate_alloc_compressor(level));
    if (!c) throw std::bad_alloc();
  }
  return *c;
}

/// This thread's decompressor, allocated on first use.
libdeflate_decompressor& bus_decompressor() {
  thread_local BusDecompressor d;
  if (!d) {
    d.reset(libdeflate_alloc_decompressor());
    if (!d) throw std::bad_alloc();
  }
  return *d;
}

}  // namespace

void bus_deflate_into(std::string& out, std::string_view in, int level) {
  auto& c = bus_compressor(std::clamp(level, kBusMinLevel, kBusMaxLevel));
  const std::size_t start = out.size();
  // The bound holds for any input: compression cannot fail for lack of room.
  out.resize(start + libdeflate_deflate_compress_bound(&c, in.size()));
  const std::size_t n =
      libdeflate_deflate_compress(&c, in.data(), in.size(), out.data() + start, out.size() - start);
  out.resize(start + n);
}

BusInflateResult bus_inflate_exact(std::string_view in, std::size_t expected, std::string& out) {
  auto& d = bus_decompressor();
  out.resize(expected);
  std::size_t read = 0;
  std::size_t wrote = 0;
  const libdeflate_result r = libdeflate_deflate_decompress_ex(&d, in.data(), in.size(), out.data(),
                                                               expected, &read, &wrote);
  switch (r) {
    case LIBDEFLATE_SUCCESS:
      return wrote == expected && read == in.size() ? BusInflateResult::ok
                                                    : BusInflateResult::short_body;
    case LIBDEFLATE_INSUFFICIENT_SPACE:
      return BusInflateResult::past;
    case LIBDEFLATE_SHORT_OUTPUT:  // only when the actual size is not asked for
      return BusInflateResult::short_body;
    case LIBDEFLATE_BAD_DATA:
    default:
      return BusInflateResult::bad_data;
  }
}

}  // namespace gpustream::transport
