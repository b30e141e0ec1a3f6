// gpustream_fuzz_replay TARGET PATH...: runs the fuzz target's entry point on every file named
// (directories: every regular file in them not starting with '.', sorted), the way a libFuzzer
// binary replays a corpus. Built with the normal compiler, so the seed corpora and regression
// inputs run in ctest without clang; under the ASan+UBSan build they run with the sanitizers.
// Each target's LLVMFuzzerTestOneInput is compiled as gpustream_fuzz_<target> (CMakeLists.txt).
// Fails when no input was found.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <cstring>

#include "common.hpp"

#define GPUSTREAM_FUZZ_TARGET(name) \
  extern "C" int gpustream_fuzz_##name(const std::uint8_t* data, std::size_t size);
#include "fuzz_targets.inc"
#undef GPUSTREAM_FUZZ_TARGET

namespace {

using Entry = int (*)(const std::uint8_t*, std::size_t);
struct Target {
  const char* name;
  Entry entry;
};
#define GPUSTREAM_FUZZ_TARGET(name) {#name, gpustream_fuzz_##name},
constexpr Target kTargets[] = {
#include "fuzz_targets.inc"
};
#undef GPUSTREAM_FUZZ_TARGET

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  Entry entry = nullptr;
  for (const auto& t : kTargets)
    if (argc > 1 && std::strcmp(argv[1], t.name) == 0) entry = t.entry;
  if (entry == nullptr) {
    std::fprintf(stderr, "usage: %s TARGET PATH...; targets:", argv[0]);
    for (const auto& t : kTargets) std::fprintf(stderr, " %s", t.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    const fs::path p(argv[i]);
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file() && e.path().filename().string().front() != '.')
          files.push_back(e.path());
    } else if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "replay: no input files\n");
    return 2;
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", f.c_str(), bytes.size());
    entry(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replay: %zu inputs ran\n", files.size());
  return 0;
}
