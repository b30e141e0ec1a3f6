// proc_io.hpp — raw, allocation-free procfs reading for the DRM client tracker (private to
// probes/toolkit): directory listing with getdents64 into a caller's buffer, small-file reads
// into a reused string, start time from <pid>/stat.
//
// Thread safety: reentrant; no state. Every call retries EINTR.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpustream::drm::proc_io {

/// Calls `fn(const char* name, unsigned char d_type)` for every entry of the open directory
/// `dirfd` (from its current offset), reading with getdents64 into `buf`. Returns false when
/// getdents64 failed (errno set). `calls` counts the system calls issued. With
/// `short_read_ends`, a call that left room for another entry ends the listing (saves the call
/// that would return 0): procfs, tmpfs and ext4 fill the buffer while entries remain; a
/// filesystem that returns partial listings (some network ones) must not be read that way.
template <class Fn>
bool for_each_entry(int dirfd, std::vector<char>& buf, std::size_t& calls, bool short_read_ends,
                    Fn&& fn);

/// A decimal pid / fd number ("123" -> 123); nullopt for anything else ("self", ".", "1a").
std::optional<std::int32_t> parse_number(const char* name) noexcept;

/// Opens `rel` under `dirfd` and reads it into `out` (cleared first), at most `max` bytes.
/// False with errno set when it cannot be opened or read. `opens` counts open calls.
bool read_small(int dirfd, const char* rel, std::string& out, std::size_t max, std::size_t& opens);

/// Field 22 of a /proc/<pid>/stat text (start time in clock ticks); nullopt when malformed.
std::optional<std::uint64_t> parse_stat_start_time(std::string_view stat) noexcept;

/// openat with O_CLOEXEC, retrying EINTR; -1 with errno set on failure.
int open_at(int dirfd, const char* rel, int flags) noexcept;

// ---------------------------------------------------------------------------------------------

// struct linux_dirent64: u64 d_ino, s64 d_off, u16 d_reclen, u8 d_type, char d_name[] at 19.
inline constexpr std::size_t kReclenOffset = 16, kTypeOffset = 18, kNameOffset = 19;
inline constexpr std::size_t kMaxEntryBytes = 24 + 256;  // header, NAME_MAX + 1, padding

long getdents64(int fd, char* buf, std::size_t size) noexcept;

template <class Fn>
bool for_each_entry(int dirfd, std::vector<char>& buf, std::size_t& calls, bool short_read_ends,
                    Fn&& fn) {
  for (;;) {
    ++calls;
    const long n = getdents64(dirfd, buf.data(), buf.size());
    if (n < 0) return false;
    if (n == 0) return true;
    for (long off = 0; off < n;) {
      const char* rec = buf.data() + off;
      unsigned short reclen = 0;
      std::memcpy(&reclen, rec + kReclenOffset, sizeof reclen);
      if (reclen == 0) return false;  // never from a sane kernel; do not loop forever
      fn(rec + kNameOffset, static_cast<unsigned char>(rec[kTypeOffset]));
      off += reclen;
    }
    if (short_read_ends && static_cast<std::size_t>(n) + kMaxEntryBytes <= buf.size()) return true;
  }
}

}  // namespace gpustream::drm::proc_io
