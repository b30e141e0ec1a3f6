#include "output.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include <boost/json.hpp>

#include "gpustream/detail/json_text.hpp"

namespace gpustream::cli {

Output Output::standard_output() { return Output(STDOUT_FILENO, "standard output", false); }

Output Output::create_file(const std::string& path, const KeepWaiting& keep_waiting) {
  // O_NONBLOCK: a FIFO without a reader answers ENXIO at once instead of blocking open(2),
  // which no signal interrupts (SIGINT's handler restarts it).
  int fd;
  for (;;) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd >= 0) break;
    if (errno == EINTR) continue;
    if (errno != ENXIO || !keep_waiting) break;
    if (!keep_waiting()) {
      errno = EINTR;
      break;
    }
  }
  if (fd >= 0) {
    // Blocking writes from here on, as for any file: the Output waits for a slow reader.
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
      const int err = errno;
      ::close(fd);
      fd = -1;
      errno = err;
    }
  }
  Output out(fd, path, true);
  if (fd < 0) out.error_ = errno;
  return out;
}

Output::Output(Output&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      name_(std::move(o.name_)),
      owned_(o.owned_),
      error_(o.error_) {}

Output::~Output() {
  if (owned_ && fd_ >= 0) ::close(fd_);
}

bool Output::fail(int err) {
  if (error_ == 0) error_ = err;
  return false;
}

bool Output::write(std::string_view data) {
  if (fd_ < 0 || error_ != 0) return false;
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno);
    }
    if (n == 0) return fail(EIO);
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool Output::sync() {
  if (fd_ < 0 || error_ != 0) return false;
  int r;
  do {
    r = ::fsync(fd_);
  } while (r != 0 && errno == EINTR);
  // EINVAL / EROFS: a pipe, terminal or device that has nothing to sync (/dev/null, /dev/full).
  if (r != 0 && errno != EINVAL && errno != EROFS && errno != ENOTSUP) return fail(errno);
  return true;
}

bool Output::finish() {
  bool ok = sync();
  if (owned_ && fd_ >= 0) {
    // close() can report a failed delayed write (NFS); the descriptor is gone in any case.
    if (::close(fd_) != 0 && errno != EINTR) {
      fail(errno);
      ok = false;
    }
    fd_ = -1;
  }
  return ok && error_ == 0;
}

bool Output::broken_pipe() const noexcept { return error_ == EPIPE; }

bool Output::reader_gone() const noexcept {
  if (fd_ < 0) return false;
  pollfd p{fd_, 0, 0};  // no events asked: only POLLERR / POLLHUP / POLLNVAL come back
  if (::poll(&p, 1, 0) != 1) return false;
  return (p.revents & (POLLERR | POLLHUP)) != 0;
}

std::string Output::describe_error() const {
  if (error_ == 0) return {};
  return "cannot write to '" + name_ + "': " + std::generic_category().message(error_);
}

std::string gap_line(const Gap& gap) {
  boost::json::object o;
  o["type"] = "gap";
  o["after_sequence"] = gap.after_sequence;
  o["missed"] = gap.missed;
  o["reason"] = gap.reason;
  std::string line;
  detail::append_json_value(line, o);  // a reason from a server: UTF-8 repaired
  return line + "\n";
}

}  // namespace gpustream::cli
