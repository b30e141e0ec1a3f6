// The config file (`--config FILE`): load_config on a file holding the input. It may only throw
// ConfigError.
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "common.hpp"
#include "gpustream/config.hpp"

namespace {

// One scratch file per process, unlinked at once and reached through /proc/self/fd, so nothing
// is left behind however the fuzzer exits. It is rewritten for each input.
struct Scratch {
  int fd = -1;
  std::string path;
};

const Scratch& scratch() {
  static const Scratch s = [] {
    char name[] = "/tmp/gpustream-fuzz-config-XXXXXX";
    Scratch out;
    out.fd = ::mkstemp(name);
    FUZZ_CHECK(out.fd >= 0);
    ::unlink(name);
    out.path = "/proc/self/fd/" + std::to_string(out.fd);
    return out;
  }();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int fd = scratch().fd;
  FUZZ_CHECK(::ftruncate(fd, 0) == 0);
  std::size_t done = 0;
  while (done < size) {
    const auto n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    FUZZ_CHECK(n > 0);
    done += static_cast<std::size_t>(n);
  }
  try {
    const auto c = gpustream::load_config(scratch().path);
    FUZZ_CHECK(c.simulate >= 0 && c.simulate <= 256);
    FUZZ_CHECK(c.interval.count() > 0);
  } catch (const gpustream::ConfigError&) {}
  return 0;
}
