#include "gpustream/probes/drm_client_tracker.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "drm_client_tracker_watch.hpp"
#include "gpustream/probes/readers.hpp"
#include "proc_io.hpp"

namespace gpustream::drm {
namespace {

constexpr long kProcSuperMagic = 0x9fa0;
constexpr std::uint32_t kUnknownCount = UINT32_MAX;
constexpr std::size_t kMaxFdinfoBytes = 64 * 1024;
// What one client may hold, whatever its fdinfo says (a real one has well under 16 keys per
// kind, names under 20 bytes): see ClientTracker::kBytesPerClient.
constexpr std::size_t kMaxKeysPerKind = 16, kMaxKeyBytes = 48, kMaxIdBytes = 64;

template <class Map>
bool bound_keys(Map& m) {
  const std::size_t before = m.size();
  std::erase_if(m, [](const auto& kv) { return kv.first.size() > kMaxKeyBytes; });
  while (m.size() > kMaxKeysPerKind) m.erase(std::prev(m.end()));
  return m.size() != before;
}

// Trims a parsed fdinfo to the per-client bound; true (and `truncated` set) when it had to.
bool bound_fdinfo(Fdinfo& f) {
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

// kSeen: listed during the sweep's current cycle (watch mode); kGone: found exited by a scan.
enum Flag : std::uint32_t { kClient = 1, kDenied = 2, kScheduled = 4, kSeen = 8, kGone = 16 };

// One per pid listed: all the tracker keeps about a process that does not use a GPU.
struct ProcRec {
  std::int32_t pid;
  std::uint32_t fd_count;  // at the last full scan; kUnknownCount without the signal
  std::uint32_t flags;
};
static_assert(sizeof(ProcRec) == ClientTracker::kBytesPerProcess);

long stat_fd_count(int dirfd, const char* rel) {
  struct stat st;
  if (::fstatat(dirfd, rel, &st, 0) != 0) return -1;
  return static_cast<long>(st.st_size);
}

bool denied(int e) noexcept { return e == EACCES || e == EPERM; }

// How many of `n` records are due after `dt_ns` so that all are visited once per `period_ns`;
// `carry` keeps the fraction between samples (n = 600, period 60 s, a sample a second: 10 each).
std::size_t due(double& carry, std::size_t n, std::int64_t dt_ns, std::int64_t period_ns) {
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
ClientKey key_of(const Fdinfo& f) {
  return {f.pdev, f.client_id.has_value(), f.client_id.value_or(0)};
}

}  // namespace

bool procfs_reports_fd_count(const std::string& procfs_root) {
  struct statfs fs;
  if (::statfs(procfs_root.c_str(), &fs) != 0 || static_cast<long>(fs.f_type) != kProcSuperMagic)
    return false;
  return stat_fd_count(AT_FDCWD, (procfs_root + "/self/fd").c_str()) > 0;  // 0 before 6.2
}

std::string default_device_root(const std::string& procfs_root) {
  std::string root = procfs_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  const auto slash = root.rfind('/');
  if (slash == std::string::npos) return "dev/dri";  // "proc": relative, beside it
  return root.substr(0, slash) + "/dev/dri";         // "/proc" -> "/dev/dri"
}

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
  PidCursor pass_cur, sweep_cur;
  bool pass_active = false, pass_need_wrap = false, pass_wrapped = false;
  off_t pass_stop = 0;
  double pass_carry = 0;
  std::vector<std::int32_t> added;
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
  void drop_all() {
    while (!clients.empty()) drop_client(clients.begin()->first);
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
    }  // n < 0: exited (found by the next listing or sweep) or not inspectable
  }
  void start_pass() {
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
  bool lose_root() {
    ::close(proc_fd);
    proc_fd = -1;
    drop_all();
    return false;
  }

  void scan(ProcRec& rec);
  void sample(std::int64_t now);
  bool sample_listing(std::int64_t now);
  bool sample_watching(std::int64_t now);
};

void ClientTracker::Impl::scan(ProcRec& rec) {
  const std::int32_t pid = rec.pid;
  ++st->scans;
  auto cit = clients.find(pid);
  ClientProc* cp = cit == clients.end() ? nullptr : &cit->second;
  const bool via_kept = cp && cp->dir_fd >= 0;
  // The fd folder straight from the procfs root (one open): <pid> itself is opened only for a
  // process that turns out to hold DRM fds.
  ++st->opens;
  const int fd_dir = via_kept
                         ? proc_io::open_at(cp->dir_fd, "fd", O_RDONLY | O_DIRECTORY)
                         : proc_io::open_at(proc_fd, fmt("%d/fd", pid), O_RDONLY | O_DIRECTORY);
  if (fd_dir < 0) {
    const int e = errno;
    drop_client(pid);  // closes a kept descriptor
    if (denied(e)) {
      rec.flags |= kDenied;
    } else if (via_kept) {
      scan(rec);  // that process is gone; the pid may be listed still: whoever has it now
    } else {
      rec.flags |= kGone;
      if (!watching || first)
        ++st->vanished;  // listed, then gone; in watch mode it counts as exited
    }
    return;
  }
  long count = -1;
  if (signal) {
    ++st->stats;
    count = fd_count(fd_dir, ".");  // before listing: a change after it shows at the next check
  }
  // Also for a process we may not inspect: it is tried again only when its count changes.
  rec.fd_count = count >= 0 ? static_cast<std::uint32_t>(std::min<long>(count, UINT32_MAX - 1))
                            : kUnknownCount;
  drm_tmp.clear();
  proc_io::for_each_entry(
      fd_dir, fd_buf, st->getdents, /*short_read_ends=*/true, [&](const char* name, unsigned char) {
        const auto n = proc_io::parse_number(name);
        if (!n) return;
        ++st->fds;
        ++st->readlinks;
        char target[256];
        const ssize_t len = ::readlinkat(fd_dir, name, target, sizeof target - 1);
        if (len <= 0 || !is_drm_node(std::string_view(target, static_cast<std::size_t>(len))))
          return;
        ++st->drm_fds;
        drm_tmp.push_back(*n);
      });
  ::close(fd_dir);
  rec.flags &= ~kDenied;
  if (drm_tmp.empty()) return drop_client(pid);  // the common case: no GPU, nothing more

  int pdir = via_kept ? cp->dir_fd : -1;
  if (!via_kept) {
    ++st->opens;
    pdir = proc_io::open_at(proc_fd, fmt("%d", pid), O_RDONLY | O_DIRECTORY);
    if (pdir < 0) {
      if (denied(errno)) {
        rec.flags |= kDenied;
      } else {
        rec.flags |= kGone;
        if (!watching || first) ++st->vanished;
      }
      return drop_client(pid);
    }
  }
  std::vector<Client> found;
  std::vector<int> used;
  if (!read_clients(pdir, pid, drm_tmp, false, found, used)) {
    rec.flags |= kDenied;  // its other fds are just as private
    found.clear();
  }
  const std::size_t before = cp ? cp->clients.size() : 0;
  if (!found.empty() && tracked - before + found.size() > o.max_clients) {
    st->clients_capped += found.size();
    found.clear();
  }
  if (found.empty()) {
    if (!via_kept) ::close(pdir);
    drop_client(pid);
    return;
  }
  // Identity: a kept descriptor names one process; by path, the start time tells.
  std::uint64_t start = cp ? cp->start_time : 0;
  if (!via_kept) {
    start = 0;
    if (proc_io::read_small(pdir, "stat", text, 4096, st->opens))
      start = proc_io::parse_stat_start_time(text).value_or(0);
  }
  if (cp && !via_kept && start != cp->start_time) {
    drop_client(pid);  // the pid now belongs to another process
    cp = nullptr;
  }
  if (!cp) {
    cp = &clients[pid];
    cp->instance = ++next_instance;
    cp->start_time = start;
  }
  cp->comm.clear();
  if (proc_io::read_small(pdir, "comm", text, 256, st->opens))
    cp->comm = std::string(readers::trim(text));
  if (!via_kept) {
    if (cp->dir_fd < 0 && kept < o.max_kept_fds) {
      cp->dir_fd = pdir;
      ++kept;
    } else {
      ::close(pdir);
    }
  }
  for (auto& c : found) {
    c.comm = cp->comm;
    c.start_time = cp->start_time;
    c.instance = cp->instance;
  }
  tracked = tracked - cp->clients.size() + found.size();
  cp->clients = std::move(found);
  cp->drm_fds = std::move(used);
  rec.flags |= kClient;
}

void ClientTracker::Impl::sample(std::int64_t now) {
  if (proc_fd < 0) {
    ++st->opens;
    proc_fd = ::open(o.procfs_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (proc_fd < 0) return drop_all();
  }
  bool listed = false;
  if (watching && !first) {
    const auto d = watch.drain(st->watch_reads);
    st->open_events = d.opens + (d.overflow ? 1 : 0);
    if (d.lost) {
      watching = false;  // the device folder went away: list every pid each sample from now on
    } else {
      if (st->open_events) start_pass();
      if (!sample_watching(now)) return;
      listed = true;
    }
  }
  if (!listed) {
    if (!sample_listing(now)) return;
    if (watching && first && (!pass_cur.open(o.procfs_root) || !sweep_cur.open(o.procfs_root)))
      watching = false;
  }
  for (const auto& r : recs)
    if (r.flags & kDenied) ++st->permission_skipped;
  st->processes = recs.size();
  last_now = now;
  first = false;
}

// Without the open signal: every pid listed every sample, the fd-count round robin, the sweep.
bool ClientTracker::Impl::sample_listing(std::int64_t now) {
  // 1. The pids, merged with the last sample's records.
  pids.clear();
  const bool listed = ::lseek(proc_fd, 0, SEEK_SET) == 0 &&
                      proc_io::for_each_entry(proc_fd, list_buf, st->getdents, true,
                                              [&](const char* name, unsigned char) {
                                                if (auto p = proc_io::parse_number(name))
                                                  pids.push_back(*p);
                                              });
  if (!listed) return lose_root();
  if (!std::is_sorted(pids.begin(), pids.end())) std::sort(pids.begin(), pids.end());
  next.clear();
  todo.clear();
  std::size_t i = 0;
  for (const std::int32_t pid : pids) {
    for (; i < recs.size() && recs[i].pid < pid; ++i) {  // gone from the listing: exited
      ++st->exited;
      if (recs[i].flags & kClient) drop_client(recs[i].pid);
    }
    if (i < recs.size() && recs[i].pid == pid) {
      next.push_back(recs[i++]);
    } else {
      ++st->new_processes;
      next.push_back({pid, kUnknownCount, kScheduled});
      todo.push_back(pid);
    }
  }
  for (; i < recs.size(); ++i) {
    ++st->exited;
    if (recs[i].flags & kClient) drop_client(recs[i].pid);
  }
  recs.swap(next);
  st->processes = recs.size();

  // 2. Known clients: re-read their DRM fds; anything odd makes a full scan.
  for (auto& [pid, cp] : clients)
    if (!refresh(pid, cp))
      if (auto* r = rec_of(pid)) schedule(*r);

  // 3. The change signal and 4. the sweep, each a round-robin share of the processes.
  const std::int64_t dt = first ? 0 : now - last_now;
  if (signal) {
    const auto k = due(check_carry, recs.size(), dt, ns(o.freshness));
    check_cursor = round_robin(recs, check_cursor, k, [&](ProcRec& r) { check_count(r); });
  }
  const auto k = due(sweep_carry, recs.size(), dt, sweep_ns());
  sweep_cursor = round_robin(recs, sweep_cursor, k, [&](ProcRec& r) { schedule(r); });

  // 5. Full scans: new pids, changed counts, the sweep's share, clients that need it.
  for (const std::int32_t pid : todo)
    if (auto* r = rec_of(pid)) {
      scan(*r);
      r->flags &= ~kScheduled;
    }
  return true;
}

// With the open signal: the known clients, the sweep's share of the listing and, after an open
// of a watched node, a pass over every pid spread over `freshness`; nothing else.
bool ClientTracker::Impl::sample_watching(std::int64_t now) {
  todo.clear();
  added.clear();
  const std::int64_t dt = now - last_now;
  for (auto& [pid, cp] : clients)
    if (!refresh(pid, cp))
      if (auto* r = rec_of(pid)) schedule(*r);

  if (pass_active) {
    // A little over the records: new pids are listed too.
    const auto k = due(pass_carry, recs.size() + recs.size() / 16 + 16, dt, ns(o.freshness));
    const bool end = pass_cur.next(k, st->getdents, [&](std::int32_t pid, off_t start) {
      if (pass_wrapped && start >= pass_stop) return pass_active = false;
      ++st->listed;
      if (ProcRec* r = rec_of(pid)) {
        if (signal) {
          check_count(*r);
        } else {
          schedule(*r);
        }
      } else {
        added.push_back(pid);
      }
      return true;
    });
    if (pass_cur.failed()) return lose_root();
    if (end && pass_need_wrap) {  // opened again during the pass: once more up to that point
      pass_cur.rewind();
      pass_need_wrap = false;
      pass_wrapped = true;
    } else if (end) {
      pass_active = false;
    }
  }

  const auto k = due(sweep_carry, recs.size() + 1, dt, sweep_ns());
  const bool end = sweep_cur.next(k, st->getdents, [&](std::int32_t pid, off_t) {
    ++st->listed;
    if (ProcRec* r = rec_of(pid)) {
      r->flags |= kSeen;
      schedule(*r);
    } else {
      added.push_back(pid);
    }
    return true;
  });
  if (sweep_cur.failed()) return lose_root();
  if (end) {  // a whole cycle: whoever it did not list has exited
    std::erase_if(recs, [&](ProcRec& r) {
      if (r.flags & kSeen) return false;
      ++st->exited;
      if (r.flags & kClient) drop_client(r.pid);
      return true;
    });
    for (auto& r : recs) r.flags &= ~kSeen;
    sweep_cur.rewind();
  }

  if (!added.empty()) {  // new pids: merged in and scanned now
    std::sort(added.begin(), added.end());
    added.erase(std::unique(added.begin(), added.end()), added.end());
    next.clear();
    std::size_t i = 0;
    for (const std::int32_t pid : added) {
      for (; i < recs.size() && recs[i].pid < pid; ++i) next.push_back(recs[i]);
      if (i < recs.size() && recs[i].pid == pid) continue;
      ++st->new_processes;
      next.push_back({pid, kUnknownCount, kSeen | kScheduled});
      todo.push_back(pid);
    }
    for (; i < recs.size(); ++i) next.push_back(recs[i]);
    recs.swap(next);
  }

  for (const std::int32_t pid : todo)
    if (auto* r = rec_of(pid)) {
      scan(*r);
      r->flags &= ~kScheduled;
    }
  std::erase_if(recs, [&](const ProcRec& r) {  // exits found by the scans
    if (!(r.flags & kGone)) return false;
    ++st->exited;
    return true;
  });
  return true;
}

ClientTracker::ClientTracker(TrackerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->o = std::move(options);
  auto& o = impl_->o;
  if (o.fd_count) impl_->fd_count = o.fd_count;
  if (o.open_signal != OpenSignal::none) {
    const std::string dir =
        o.device_root.empty() ? default_device_root(o.procfs_root) : o.device_root;
    impl_->watching = impl_->watch.start(dir);
  }
  switch (o.signal) {
    case FdCountSignal::automatic:
      impl_->signal = o.fd_count != nullptr || procfs_reports_fd_count(o.procfs_root);
      break;
    case FdCountSignal::fd_dir_size:
      impl_->signal = true;
      break;
    case FdCountSignal::none:
      impl_->signal = false;
      break;
  }
}

ClientTracker::~ClientTracker() {
  impl_->drop_all();
  if (impl_->proc_fd >= 0) ::close(impl_->proc_fd);
}

std::vector<Client> ClientTracker::sample(std::int64_t now_ns, WalkStats* stats) {
  WalkStats local;
  impl_->st = stats ? stats : &local;
  *impl_->st = WalkStats{};
  impl_->sample(now_ns);
  std::vector<Client> out;
  out.reserve(impl_->tracked);
  for (const auto& [pid, cp] : impl_->clients)
    out.insert(out.end(), cp.clients.begin(), cp.clients.end());
  std::sort(out.begin(), out.end(), [](const Client& a, const Client& b) {
    return std::tie(a.pid, a.info.pdev, a.info.client_id) <
           std::tie(b.pid, b.info.pdev, b.info.client_id);
  });
  impl_->st = nullptr;
  return out;
}

bool ClientTracker::uses_fd_count_signal() const noexcept { return impl_->signal; }
bool ClientTracker::uses_open_signal() const noexcept { return impl_->watching; }
std::size_t ClientTracker::processes() const noexcept { return impl_->recs.size(); }
std::size_t ClientTracker::kept_fds() const noexcept { return impl_->kept; }

}  // namespace gpustream::drm
