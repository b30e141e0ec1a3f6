#include "token_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "gpustream/config.hpp"

namespace gpustream::cli {

namespace {
constexpr std::size_t kMaxTokenFileBytes = 4096;
constexpr const char* kWhitespace = " \t\r\n";
}  // namespace

namespace {

// At most kMaxTokenFileBytes + 1 bytes of `path`. The open never blocks: O_NONBLOCK (cleared
// once open), so a FIFO without a writer is an empty file instead of a hang no signal ends.
std::string read_bounded(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw ConfigError("cannot read the token file '" + path + "'");
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::string content(kMaxTokenFileBytes + 1, '\0');
  std::size_t got = 0;
  while (got < content.size()) {
    const ssize_t n = ::read(fd, content.data() + got, content.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      throw ConfigError("cannot read the token file '" + path + "'");
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  content.resize(got);
  return content;
}

}  // namespace

std::string read_token_file(const std::string& path) {
  std::string content = read_bounded(path);
  if (content.size() > kMaxTokenFileBytes)
    throw ConfigError("the token file '" + path + "' is larger than " +
                      std::to_string(kMaxTokenFileBytes) + " bytes; it must hold one token");
  const auto first = content.find_first_not_of(kWhitespace);
  if (first == std::string::npos) throw ConfigError("the token file '" + path + "' is empty");
  std::string token = content.substr(first, content.find_last_not_of(kWhitespace) - first + 1);
  for (const char c : token) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f)
      throw ConfigError("the token file '" + path + "' must hold one token on one line (found " +
                        (c == '\n' || c == '\r' ? std::string("a line break")
                                                : std::string("a control character")) +
                        " inside it)");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 077) != 0)
    std::cerr << "gpustream: warning: the token file '" << path
              << "' is readable by other users (chmod 600 it)\n";
  return token;
}

}  // namespace gpustream::cli
