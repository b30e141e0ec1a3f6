#include "drm_client_tracker_watch.hpp"

#include <fcntl.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>

#include "proc_io.hpp"

namespace gpustream::drm {

DeviceWatch::~DeviceWatch() { stop(); }

bool DeviceWatch::start(const std::string& dir) {
  stop();
  fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) return false;
  // The folder, not each node: one watch covers nodes added later, and opens through the
  // /dev/dri/by-path links (they resolve to a dentry in this folder).
  wd_ = ::inotify_add_watch(fd_, dir.c_str(), IN_OPEN | IN_ONLYDIR);
  if (wd_ < 0) {
    const int e = errno;
    stop();
    errno = e;
    return false;
  }
  return true;
}

int DeviceWatch::add(const std::string& dir) {
  if (fd_ < 0) {
    errno = EBADF;
    return -1;
  }
  return ::inotify_add_watch(fd_, dir.c_str(), IN_OPEN | IN_ONLYDIR);
}

void DeviceWatch::remove(int wd) noexcept {
  if (fd_ >= 0 && wd >= 0 && wd != wd_) ::inotify_rm_watch(fd_, wd);
}

void DeviceWatch::stop() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = wd_ = -1;
}

DeviceWatch::Drained DeviceWatch::drain(std::size_t& calls) {
  Drained d;
  while (fd_ >= 0) {
    ++calls;
    const ssize_t n = ::read(fd_, buf_.data(), buf_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) {  // a broken watch is treated as lost: the tracker falls back
        d.lost = true;
        stop();
      }
      break;
    }
    if (n == 0) break;
    for (ssize_t off = 0; off + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      inotify_event ev;
      std::memcpy(&ev, buf_.data() + off, sizeof ev);
      const std::string_view name(buf_.data() + off + sizeof ev,
                                  ::strnlen(buf_.data() + off + sizeof ev, ev.len));
      if (ev.mask & IN_Q_OVERFLOW) d.overflow = true;
      if (ev.mask & IN_IGNORED) {
        if (ev.wd == wd_) {
          d.lost = true;
        } else {
          d.gone.push_back(ev.wd);
        }
      }
      if ((ev.mask & IN_OPEN) && !(ev.mask & IN_ISDIR) &&
          (name.starts_with("card") || name.starts_with("renderD")))
        ++d.opens;
      off += static_cast<ssize_t>(sizeof ev + ev.len);
    }
    if (static_cast<std::size_t>(n) + sizeof(inotify_event) + NAME_MAX + 1 <= buf_.size())
      break;  // a short read: the queue is empty (saves the read that would say EAGAIN)
  }
  if (d.lost) stop();
  return d;
}

PidCursor::~PidCursor() {
  if (fd_ >= 0) ::close(fd_);
}

bool PidCursor::open(const std::string& root) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = proc_io::open_at(AT_FDCWD, root.c_str(), O_RDONLY | O_DIRECTORY);
  pos_ = 0;
  failed_ = fd_ < 0;
  return fd_ >= 0;
}

void PidCursor::rewind() {
  pos_ = 0;
  if (fd_ >= 0 && ::lseek(fd_, 0, SEEK_SET) != 0) failed_ = true;
}

void PidCursor::seek(off_t pos) {
  pos_ = pos;
  if (fd_ < 0 || ::lseek(fd_, pos, SEEK_SET) != pos) failed_ = true;
}

long PidCursor::read_chunk(std::size_t want, std::size_t& calls) {
  if (fd_ < 0) {
    failed_ = true;
    return -1;
  }
  // About 32 bytes per pid entry: a chunk sized for `want` pids (plus procfs's few named
  // entries at the start) keeps one sample's share to one or two calls.
  const std::size_t size = std::clamp<std::size_t>(want * 32 + 2048, 4096, 256 * 1024);
  if (buf_.size() < size) buf_.resize(size);
  ++calls;
  const long n = proc_io::getdents64(fd_, buf_.data(), size);
  if (n < 0) failed_ = true;
  return n;
}

bool PidCursor::seek_back() noexcept {
  if (::lseek(fd_, pos_, SEEK_SET) != pos_) failed_ = true;
  return false;
}

std::size_t entry_length(const char* rec) noexcept {
  unsigned short reclen = 0;
  std::memcpy(&reclen, rec + proc_io::kReclenOffset, sizeof reclen);
  return reclen;
}

std::int32_t pid_of_entry(const char* rec, off_t& next) noexcept {
  std::int64_t off = 0;
  std::memcpy(&off, rec + 8, sizeof off);
  next = static_cast<off_t>(off);
  const auto pid = proc_io::parse_number(rec + proc_io::kNameOffset);
  return pid ? *pid : -1;
}

}  // namespace gpustream::drm
