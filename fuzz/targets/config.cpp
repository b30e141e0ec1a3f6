// The config file (`--config FILE`): load_config on a file holding the input. It may only throw
// ConfigError.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common.hpp"
#include "gpustream/config.hpp"

namespace {

// One file per process, rewritten for each input.
const std::string& scratch_path() {
  static const std::string path = [] {
    char name[] = "/tmp/gpustream-fuzz-config-XXXXXX";
    const int fd = ::mkstemp(name);
    FUZZ_CHECK(fd >= 0);
    ::close(fd);
    std::atexit([] { ::unlink(scratch_path().c_str()); });
    return std::string(name);
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int fd = ::open(scratch_path().c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  FUZZ_CHECK(fd >= 0);
  std::size_t done = 0;
  while (done < size) {
    const auto n = ::write(fd, data + done, size - done);
    FUZZ_CHECK(n > 0);
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  try {
    const auto c = gpustream::load_config(scratch_path());
    FUZZ_CHECK(c.simulate >= 0 && c.simulate <= 256);
    FUZZ_CHECK(c.interval.count() > 0);
  } catch (const gpustream::ConfigError&) {
  }
  return 0;
}
