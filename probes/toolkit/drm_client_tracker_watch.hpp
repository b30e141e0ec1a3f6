// drm_client_tracker_watch.hpp — the two pieces that let drm::ClientTracker skip per-process
// work while nothing changes (private to probes/toolkit):
//
//   DeviceWatch  an inotify watch (IN_OPEN) on the DRM device folder (/dev/dri), plus any
//                number of added ones (other mount namespaces' device folders) on the same
//                inotify descriptor: tells that some process opened card* or renderD* in one
//                of them since the last drain, not which one. Fds received over a socket or
//                inherited across fork never show here; the tracker's fd-count pass and sweep
//                find those.
//   PidCursor    a listing of <procfs_root> read a chunk at a time through its own descriptor,
//                continuing where the last chunk stopped, so that a full pass over 10,000 pids
//                can be spread over many samples. Positions are getdents64's d_off (procfs: the
//                pid; tmpfs: the insertion index), which only grow along one listing; so the
//                position of the highest pid read, sought again, lists the pids made since
//                (until the pid counter wraps).
//
// Thread safety: none; owned by one tracker.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpustream::drm {

class DeviceWatch {
 public:
  DeviceWatch() = default;
  ~DeviceWatch();
  DeviceWatch(const DeviceWatch&) = delete;
  DeviceWatch& operator=(const DeviceWatch&) = delete;

  /// Watches `dir` for opens of its files; false (errno set) when inotify or the watch fails.
  bool start(const std::string& dir);
  bool active() const noexcept { return fd_ >= 0; }
  /// The watch descriptor of the folder given to start().
  int primary() const noexcept { return wd_; }
  /// Adds a watch on `dir`, another device folder: its watch descriptor (the primary one, or
  /// one added before, when `dir` is the same folder), or -1 (errno set).
  int add(const std::string& dir);
  /// Removes an added watch (never the primary one).
  void remove(int wd) noexcept;

  struct Drained {
    std::size_t opens = 0;  // IN_OPEN events naming card* or renderD*
    bool overflow = false;  // the kernel dropped events: anything may have been opened
    bool lost = false;      // the primary watch is gone (folder removed or unmounted): stopped
    std::vector<int> gone;  // added watches the kernel dropped (their folder went away)
  };
  /// Reads every pending event (non-blocking). `calls` counts the read system calls.
  Drained drain(std::size_t& calls);
  void stop() noexcept;

 private:
  int fd_ = -1, wd_ = -1;
  std::vector<char> buf_ = std::vector<char>(16 * 1024);
};

class PidCursor {
 public:
  PidCursor() = default;
  ~PidCursor();
  PidCursor(const PidCursor&) = delete;
  PidCursor& operator=(const PidCursor&) = delete;

  /// Opens its own descriptor on `root` (a listing position is per open file).
  bool open(const std::string& root);
  /// Back to the start of the listing.
  void rewind();
  /// To `pos`, a position passed to next()'s `fn` as `start` (that entry is read again).
  void seek(off_t pos);
  /// Frees the read buffer (after a one-off long read; it grows again as needed).
  void release_buffer() {
    buf_.clear();
    buf_.shrink_to_fit();
  }
  /// Reads on from the current position until at least `want` pids were passed to
  /// `fn(std::int32_t pid, off_t start)` (`start`: the entry's position in the listing) or the
  /// listing ended (entries read past the last one wanted are read again next time). `fn`
  /// returns false to stop here (the position is then undefined until rewind()). Returns true at
  /// the end of the listing, false otherwise (also on error, with `failed` set). `calls` counts
  /// getdents64 calls.
  template <class Fn>
  bool next(std::size_t want, std::size_t& calls, Fn&& fn);
  off_t position() const noexcept { return pos_; }
  bool failed() const noexcept { return failed_; }

 private:
  long read_chunk(std::size_t want, std::size_t& calls);
  // Entries were read past the last one delivered: the next chunk starts after that one.
  bool seek_back() noexcept;
  bool fail() noexcept {
    failed_ = true;
    return false;
  }
  int fd_ = -1;
  off_t pos_ = 0;
  bool failed_ = false;
  std::vector<char> buf_;
};

// ---------------------------------------------------------------------------------------------

/// Of one linux_dirent64 record: its pid (-1 for a name that is not one) and its d_off.
std::int32_t pid_of_entry(const char* rec, off_t& next) noexcept;
std::size_t entry_length(const char* rec) noexcept;

template <class Fn>
bool PidCursor::next(std::size_t want, std::size_t& calls, Fn&& fn) {
  std::size_t seen = 0;
  while (seen < want) {
    const long n = read_chunk(want - seen, calls);
    if (n < 0) return false;
    if (n == 0) return true;
    for (long off = 0; off < n;) {
      const char* rec = buf_.data() + off;
      const std::size_t reclen = entry_length(rec);
      if (reclen == 0) return fail();  // never from a sane kernel; do not loop forever
      off_t after = 0;
      const std::int32_t pid = pid_of_entry(rec, after);
      const off_t start = pos_;
      pos_ = after;
      if (pid >= 0) {
        if (!fn(pid, start)) return false;  // the caller is done with this listing
        if (++seen == want && off + static_cast<long>(reclen) < n) return seek_back();
      }
      off += static_cast<long>(reclen);
    }
  }
  return false;
}

}  // namespace gpustream::drm
