// drm_client_tracker_impl.hpp — the state of drm::ClientTracker, shared by its two source
// files (private to probes/toolkit): drm_client_tracker.cpp (a process's full fd scan, the
// public class) and drm_client_tracker_sample.cpp (one sample, with and without the open
// signal). See gpustream/probes/drm_client_tracker.hpp for what it does.
//
// Thread safety: none; owned by one ClientTracker.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "drm_client_tracker_watch.hpp"
#include "gpustream/probes/drm_client_tracker.hpp"
#include "gpustream/probes/readers.hpp"
#include "proc_io.hpp"

namespace gpustream::drm {

inline constexpr std::uint32_t kUnknownCount = UINT32_MAX;
inline constexpr std::size_t kMaxFdinfoBytes = 64 * 1024;
// What one client may hold, whatever its fdinfo says (a real one has well under 16 keys per
// kind, names under 20 bytes): see ClientTracker::kBytesPerClient.
inline constexpr std::size_t kMaxKeysPerKind = 16, kMaxKeyBytes = 48, kMaxIdBytes = 64;

template <class Map>
bool bound_keys(Map& m) {
  const std::size_t before = m.size();
  std::erase_if(m, [](const auto& kv) { return kv.first.size() > kMaxKeyBytes; });
  while (m.size() > kMaxKeysPerKind) m.erase(std::prev(m.end()));
  return m.size() != before;
}

// Trims a parsed fdinfo to the per-client bound; true (and `truncated` set) when it had to.
inline bool bound_fdinfo(Fdinfo& f) {
  bool cut = false;
  for (auto* m : {&f.engine_ns, &f.engine_capacity, &f.cycles, &f.total_cycles, &f.resident_bytes,
                  &f.total_bytes, &f.legacy_memory_bytes})
    cut |= bound_keys(*m);
  for (auto* str : {&f.driver, &f.pdev})
    if (str->size() > kMaxIdBytes) {
      str->resize(kMaxIdBytes);
      cut = true;
    }
  if (cut) f.truncated = true;
  return cut;
}

// kSeen: listed during the sweep's current cycle (watch mode); kGone: found exited by a scan or
// a count check; kCounted: listed during the fd-count pass's current cycle (watch mode). The
// high 16 bits: 1 + the slot of the process's watched mount namespace (0: none).
enum Flag : std::uint32_t {
  kClient = 1,
  kDenied = 2,
  kScheduled = 4,
  kSeen = 8,
  kGone = 16,
  kCounted = 32
};
inline constexpr unsigned kNsShift = 16;
inline constexpr std::size_t kMaxNsSlots = 0xFFFE;

// One per pid listed: all the tracker keeps about a process that does not use a GPU.
struct ProcRec {
  std::int32_t pid;
  std::uint32_t fd_count;  // at the last full scan; kUnknownCount without the signal
  std::uint32_t flags;
};
static_assert(sizeof(ProcRec) == ClientTracker::kBytesPerProcess);

inline long stat_fd_count(int dirfd, const char* rel) {
  struct stat st;
  if (::fstatat(dirfd, rel, &st, 0) != 0) return -1;
  return static_cast<long>(st.st_size);
}

inline bool denied(int e) noexcept { return e == EACCES || e == EPERM; }

// How many of `n` records are due after `dt_ns` so that all are visited once per `period_ns`;
// `carry` keeps the fraction between samples (n = 600, period 60 s, a sample a second: 10 each).
inline std::size_t due(double& carry, std::size_t n, std::int64_t dt_ns, std::int64_t period_ns) {
  if (n == 0 || dt_ns <= 0) return 0;
  if (period_ns <= 0 || dt_ns >= period_ns) {
    carry = 0;
    return n;
  }
  carry += static_cast<double>(n) * static_cast<double>(dt_ns) / static_cast<double>(period_ns);
  const double k = std::floor(carry + 1e-6);
  carry = std::max(0.0, carry - k);
  if (k >= static_cast<double>(n)) {
    carry = 0;
    return n;
  }
  return static_cast<std::size_t>(k);
}

// Visits `k` records after the one with pid `cursor` (wrapping); returns the new cursor. A pid
// cursor, not an index, so records added or removed in between do not shift the cycle.
template <class Fn>
std::int32_t round_robin(std::vector<ProcRec>& recs, std::int32_t cursor, std::size_t k, Fn fn) {
  if (recs.empty() || k == 0) return cursor;
  k = std::min(k, recs.size());
  auto it = std::upper_bound(recs.begin(), recs.end(), cursor,
                             [](std::int32_t c, const ProcRec& r) { return c < r.pid; });
  auto i = static_cast<std::size_t>(it - recs.begin());
  for (std::size_t n = 0; n < k; ++n, ++i) {
    if (i == recs.size()) i = 0;
    fn(recs[i]);
    cursor = recs[i].pid;
  }
  return cursor;
}

using ClientKey = std::tuple<const std::string&, bool, std::uint64_t>;
inline ClientKey key_of(const Fdinfo& f) {
  return {f.pdev, f.client_id.has_value(), f.client_id.value_or(0)};
}

// A mount namespace other than ours whose device folder is watched; a free slot has ns == 0.
struct NsWatch {
  std::uint64_t ns = 0;  // the inode of its ns/mnt link's target
  std::int32_t wd = -1;  // -1: the kernel dropped it (the folder went away)
  std::uint32_t pids = 0;
};
static_assert(sizeof(NsWatch) == ClientTracker::kBytesPerNamespace);

// "mnt:[4026531840]" -> 4026531840; 0 for anything else.
inline std::uint64_t parse_ns_link(std::string_view s) {
  if (!s.starts_with("mnt:[") || !s.ends_with("]")) return 0;
  std::uint64_t v = 0;
  for (char c : s.substr(5, s.size() - 6)) {
    if (c < '0' || c > '9') return 0;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

// The mount namespace of `rel` (a "<pid>/ns/mnt" or "self/ns/mnt" link) under `dirfd`; 0 when
// it cannot be read (not ours to see, gone, or a generated tree without the link).
std::uint64_t mount_ns(int dirfd, const char* rel);

// A process holding DRM fds of a wanted driver.
struct ClientProc {
  int dir_fd = -1;  // kept O_DIRECTORY descriptor on <procfs>/<pid>; -1 when not kept
  std::uint64_t start_time = 0;
  std::uint64_t instance = 0;
  std::string comm;
  std::vector<int> drm_fds;  // fd numbers whose fdinfo named a wanted client
  std::vector<Client> clients;
};

struct ClientTracker::Impl {
  TrackerOptions o;
  long (*fd_count)(int, const char*) = stat_fd_count;
  bool signal = false;
  int proc_fd = -1;
  std::vector<ProcRec> recs, next;
  std::vector<std::int32_t> pids, todo;
  std::map<std::int32_t, ClientProc> clients;
  std::size_t kept = 0, tracked = 0;  // kept descriptors, clients tracked
  std::uint64_t next_instance = 0;
  std::int64_t last_now = 0;
  bool first = true, watching = false;
  double check_carry = 0, sweep_carry = 0;
  std::int32_t check_cursor = -1, sweep_cursor = -1;
  // Watch mode (the open signal): no listing of every pid per sample; see sample_watching().
  DeviceWatch watch;
  PidCursor pass_cur, sweep_cur, tail_cur;
  off_t tail_pos = 0;          // ascending: the listing position of the highest pid seen (tail_max)
  std::int32_t tail_max = -1;  // newest_first: the first pid of the last read
  enum class TailOrder { none, ascending, newest_first } tail_order = TailOrder::none;
  bool pass_active = false, pass_boost = false, pass_need_wrap = false, pass_wrapped = false;
  off_t pass_stop = 0;
  double pass_carry = 0;
  std::vector<std::int32_t> added;
  // Other mount namespaces' device folders (watch mode); see note_namespace().
  std::vector<NsWatch> ns_watches;
  std::size_t ns_active = 0;
  std::uint64_t own_ns = 0;
  bool ns_capped_logged = false;
  std::string ns_path;
  std::vector<char> list_buf = std::vector<char>(256 * 1024), fd_buf = std::vector<char>(32 * 1024);
  std::vector<int> drm_tmp;
  std::string text;
  char path[64];
  WalkStats* st = nullptr;

  const char* fmt(const char* f, std::int32_t v) {
    std::snprintf(path, sizeof path, f, v);
    return path;
  }
  bool wanted(const std::string& driver) const {
    return o.drivers.empty() ||
           std::find(o.drivers.begin(), o.drivers.end(), driver) != o.drivers.end();
  }
  ProcRec* rec_of(std::int32_t pid) {
    auto it = std::lower_bound(recs.begin(), recs.end(), pid,
                               [](const ProcRec& r, std::int32_t p) { return r.pid < p; });
    return it != recs.end() && it->pid == pid ? &*it : nullptr;
  }
  void schedule(ProcRec& r) {
    if (r.flags & kScheduled) return;
    r.flags |= kScheduled;
    todo.push_back(r.pid);
  }
  void drop_client(std::int32_t pid) {
    auto it = clients.find(pid);
    if (it == clients.end()) return;
    if (it->second.dir_fd >= 0) {
      ::close(it->second.dir_fd);
      --kept;
    }
    tracked -= it->second.clients.size();
    clients.erase(it);
    if (auto* r = rec_of(pid)) r->flags &= ~kClient;
  }
  // A process record leaves (exited, or the root was lost): its client and namespace too.
  void forget(const ProcRec& r) {
    if (r.flags & kClient) drop_client(r.pid);
    release_namespace(r);
  }
  void release_namespace(const ProcRec& r);
  void drop_all() {
    while (!clients.empty()) drop_client(clients.begin()->first);
    for (const auto& r : recs) release_namespace(r);
    recs.clear();
  }

  // Reads the fdinfo of `fds` under `pdir` into `out` (deduplicated, wanted drivers only) and
  // the fds that named a client into `used`. False when the fdinfo may not be read (EACCES);
  // with `strict`, also when an fd no longer names a wanted DRM client.
  bool read_clients(int pdir, std::int32_t pid, const std::vector<int>& fds, bool strict,
                    std::vector<Client>& out, std::vector<int>& used) {
    for (int fd : fds) {
      ++st->fdinfo_reads;
      if (!proc_io::read_small(pdir, fmt("fdinfo/%d", fd), text, kMaxFdinfoBytes, st->opens)) {
        if (denied(errno)) return false;
        if (strict) return false;  // closed since: the full scan sorts it out
        continue;
      }
      auto info = parse_fdinfo(text);
      if (!info || !wanted(info->driver)) {
        if (strict) return false;  // the fd number now names another file
        continue;
      }
      bound_fdinfo(*info);
      if (info->truncated) ++st->truncated;
      used.push_back(fd);
      const auto key = key_of(*info);
      if (std::any_of(out.begin(), out.end(),
                      [&](const Client& c) { return key_of(c.info) == key; }))
        continue;  // another fd of the same client
      out.push_back(Client{pid, {}, std::move(*info)});
    }
    return true;
  }

  bool refresh(std::int32_t pid, ClientProc& cp) {
    if (cp.dir_fd < 0) return false;  // not kept: scanned by path every sample
    std::vector<Client> found;
    std::vector<int> used;
    if (!read_clients(cp.dir_fd, pid, cp.drm_fds, true, found, used) || found.empty()) return false;
    for (auto& c : found) {
      c.comm = cp.comm;
      c.start_time = cp.start_time;
      c.instance = cp.instance;
    }
    tracked = tracked - cp.clients.size() + found.size();
    cp.clients = std::move(found);
    return true;
  }

  static std::int64_t ns(std::chrono::milliseconds m) {
    return static_cast<std::int64_t>(m.count()) * 1'000'000;
  }
  // The sweep's period: as set, else 600 s with the open signal, 60 s with only the fd-count
  // signal, `freshness` with neither (then the sweep is what finds new GPU users).
  std::int64_t sweep_ns() const {
    if (o.sweep_period.count() > 0) return ns(o.sweep_period);
    if (watching) return ns(std::chrono::seconds(600));
    return signal ? ns(std::chrono::seconds(60)) : ns(o.freshness);
  }
  // Compares a process's fd count with the one of its last scan; a change schedules a scan.
  void check_count(ProcRec& r) {
    if (r.flags & kScheduled) return;
    ++st->count_checks;
    ++st->stats;
    auto c = clients.find(r.pid);
    const long n = c != clients.end() && c->second.dir_fd >= 0
                       ? fd_count(c->second.dir_fd, "fd")
                       : fd_count(proc_fd, fmt("%d/fd", r.pid));
    if (n >= 0 && static_cast<std::uint32_t>(n) != r.fd_count) {
      ++st->count_changes;
      schedule(r);
    } else if (n < 0 && errno == ENOENT && watching && !(r.flags & kClient)) {
      r.flags |= kGone;  // exited (a client's exit is the kept descriptor's to tell)
    }                    // else: not inspectable, or in listing mode (the next listing tells)
  }
  // The fd-count pass runs on its own (every count_period) only with the fd-count signal.
  bool periodic_pass() const { return signal && o.count_period.count() > 0; }
  void start_pass() {
    pass_boost = true;
    if (!pass_active) {
      pass_active = true;
      pass_need_wrap = pass_wrapped = false;
      pass_carry = 0;
      pass_cur.rewind();
    } else {  // the processes behind the cursor are checked again, up to here
      pass_stop = pass_cur.position();
      pass_need_wrap = true;
      pass_wrapped = false;
    }
  }
  bool lose_root() {  // the next sample starts over: opens the root, lists and scans everything
    ::close(proc_fd);
    proc_fd = -1;
    first = true;
    drop_all();
    return false;
  }

  void scan(ProcRec& rec);
  void note_namespace(ProcRec& rec);
  void new_record(std::vector<ProcRec>& into, std::int32_t pid, std::uint32_t flags);
  void sample(std::int64_t now);
  bool sample_listing(std::int64_t now);
  bool sample_watching(std::int64_t now);
  bool start_tail();
  bool read_tail();
};

}  // namespace gpustream::drm
