// Helpers shared by the fuzz targets (fuzz/targets/*.cpp). Each target defines
// LLVMFuzzerTestOneInput; it is linked either with libFuzzer (clang, fuzz/CMakeLists.txt run on
// its own) or with replay_main.cpp (the normal build: ctest replays the corpus and every
// regression input through the same function).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

/// An invariant of the code under test; a failure aborts, which libFuzzer reports as a crash.
#define FUZZ_CHECK(cond)                                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

namespace gpustream::fuzz {

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) noexcept {
  return {reinterpret_cast<const char*>(data), size};
}

/// The input split at '\n' (without the newlines); at most `max_parts`, the last takes the rest.
inline std::vector<std::string_view> split_lines(std::string_view s, std::size_t max_parts) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < max_parts) {
    const auto nl = s.find('\n');
    if (nl == std::string_view::npos) break;
    out.push_back(s.substr(0, nl));
    s.remove_prefix(nl + 1);
  }
  out.push_back(s);
  return out;
}

}  // namespace gpustream::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
