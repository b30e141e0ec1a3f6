#include "proc_io.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace gpustream::drm::proc_io {

long getdents64(int fd, char* buf, std::size_t size) noexcept {
  long n;
  do {
    n = ::syscall(SYS_getdents64, fd, buf, size);
  } while (n < 0 && errno == EINTR);
  return n;
}

std::optional<std::int32_t> parse_number(const char* name) noexcept {
  if (*name < '0' || *name > '9') return std::nullopt;
  std::int64_t v = 0;
  for (; *name; ++name) {
    if (*name < '0' || *name > '9') return std::nullopt;
    v = v * 10 + (*name - '0');
    if (v > INT32_MAX) return std::nullopt;
  }
  return static_cast<std::int32_t>(v);
}

int open_at(int dirfd, const char* rel, int flags) noexcept {
  int fd;
  do {
    fd = ::openat(dirfd, rel, flags | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

bool read_small(int dirfd, const char* rel, std::string& out, std::size_t max, std::size_t& opens) {
  ++opens;
  const int fd = open_at(dirfd, rel, O_RDONLY);
  if (fd < 0) return false;
  out.clear();
  // One read usually returns the whole text (procfs builds it at once); the buffer only grows
  // for a text longer than any seen before.
  if (out.capacity() < 4096) out.reserve(4096);
  bool ok = true;
  while (out.size() < max) {
    const std::size_t old = out.size();
    const std::size_t want = std::min(max - old, std::max<std::size_t>(out.capacity() - old, 1024));
    out.resize(old + want);
    const ssize_t n = ::read(fd, out.data() + old, want);
    if (n < 0) {
      out.resize(old);
      if (errno == EINTR) continue;
      ok = false;
      break;
    }
    out.resize(old + static_cast<std::size_t>(n));
    if (n == 0 || static_cast<std::size_t>(n) < want) break;  // end of the text
  }
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

std::optional<std::uint64_t> parse_stat_start_time(std::string_view stat) noexcept {
  // "pid (comm) state ppid ...": comm may hold spaces and ')', so count from the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = stat.substr(close + 1);
  int field = 2;  // the ')' ends field 2
  std::size_t i = 0;
  while (i < rest.size()) {
    while (i < rest.size() && rest[i] == ' ') ++i;
    if (i >= rest.size()) break;
    ++field;
    std::size_t j = i;
    while (j < rest.size() && rest[j] != ' ' && rest[j] != '\n') ++j;
    if (field == 22) {
      std::uint64_t v = 0;
      if (j == i) return std::nullopt;
      for (std::size_t k = i; k < j; ++k) {
        if (rest[k] < '0' || rest[k] > '9') return std::nullopt;
        v = v * 10 + static_cast<std::uint64_t>(rest[k] - '0');
      }
      return v;
    }
    i = j;
    if (i < rest.size() && rest[i] == '\n') break;
  }
  return std::nullopt;
}

}  // namespace gpustream::drm::proc_io
