// One sample of drm::ClientTracker: with the open signal (sample_watching) or by listing every
// pid (sample_listing). See gpustream/probes/drm_client_tracker.hpp.
#include <sys/vfs.h>

#include <algorithm>
#include <cstddef>

#include "drm_client_tracker_impl.hpp"

namespace gpustream::drm {

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
    for (const int wd : d.gone)  // a namespace's device folder went away with its watch
      for (auto& w : ns_watches)
        if (w.ns != 0 && w.wd == wd) w.wd = -1;
    if (d.lost) {
      watching = false;  // the device folder went away: list every pid each sample from now on
      for (auto& r : recs) r.flags &= (1u << kNsShift) - 1;  // the namespaces' watches went too
      ns_watches.clear();
      ns_active = 0;
    } else {
      if (st->open_events) start_pass();
      if (!sample_watching(now)) return;
      listed = true;
    }
  }
  if (!listed) {
    if (!sample_listing(now)) return;
    if (watching && first &&
        (!pass_cur.open(o.procfs_root) || !sweep_cur.open(o.procfs_root) || !start_tail()))
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
      forget(recs[i]);
    }
    if (i < recs.size() && recs[i].pid == pid) {
      next.push_back(recs[i++]);
    } else {
      new_record(next, pid, 0);
    }
  }
  for (; i < recs.size(); ++i) {
    ++st->exited;
    forget(recs[i]);
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

// The new end of the listing: pids made since the last sample, at one lseek and one getdents64 a
// sample. Procfs lists pids in ascending order: new pids come after the highest seen (until the
// pid counter wraps; after that, new pids are found by the passes). A tmpfs (generated trees)
// lists newest first: new entries come before the one that was first last time. Elsewhere (a
// generated tree on ext4 lists in hash order) new pids wait for the passes.
bool ClientTracker::Impl::start_tail() {
  struct statfs fs;
  constexpr long kProcSuperMagic = 0x9fa0, kTmpfsMagic = 0x01021994;
  const bool known = ::statfs(o.procfs_root.c_str(), &fs) == 0;
  tail_order = !known                                            ? TailOrder::none
               : static_cast<long>(fs.f_type) == kProcSuperMagic ? TailOrder::ascending
               : static_cast<long>(fs.f_type) == kTmpfsMagic     ? TailOrder::newest_first
                                                                 : TailOrder::none;
  if (tail_order == TailOrder::none) return true;
  if (!tail_cur.open(o.procfs_root)) return false;
  if (tail_order == TailOrder::newest_first) return read_tail();  // notes the first entry
  tail_cur.next(std::size_t{1} << 24, st->getdents, [&](std::int32_t pid, off_t start) {
    if (pid > tail_max) {
      tail_max = pid;
      tail_pos = start;
    }
    return true;
  });
  tail_cur.release_buffer();  // the whole listing, once: later reads are a few entries
  return !tail_cur.failed();
}

bool ClientTracker::Impl::read_tail() {
  switch (tail_order) {
    case TailOrder::none:
      return true;
    case TailOrder::ascending:
      tail_cur.seek(tail_pos);
      // At most 256 new pids a sample (a 10 KiB read); the rest at the next one.
      tail_cur.next(256, st->getdents, [&](std::int32_t pid, off_t start) {
        if (pid > tail_max) {
          ++st->listed;
          tail_max = pid;
          tail_pos = start;
          if (!rec_of(pid)) added.push_back(pid);
        }
        return true;
      });
      return !tail_cur.failed();
    case TailOrder::newest_first: {
      tail_cur.rewind();
      std::int32_t first = -1;
      tail_cur.next(256, st->getdents, [&](std::int32_t pid, off_t) {
        if (first < 0) first = pid;
        if (pid == tail_max) return false;  // the newest of the last read: nothing past it is new
        ++st->listed;
        if (!rec_of(pid)) added.push_back(pid);
        return true;
      });
      if (first >= 0) tail_max = first;
      return !tail_cur.failed();
    }
  }
  return true;
}

// With the open signal: the known clients, the fd-count pass's share of the listing (faster for
// a cycle after an open of a watched node), the sweep's share; nothing else.
bool ClientTracker::Impl::sample_watching(std::int64_t now) {
  todo.clear();
  added.clear();
  const std::int64_t dt = now - last_now;
  for (auto& [pid, cp] : clients)
    if (!refresh(pid, cp))
      if (auto* r = rec_of(pid)) schedule(*r);

  // The fd-count pass: every count_period with the fd-count signal, at `freshness` speed for a
  // whole cycle after an open (then only, without the signal).
  if (!pass_active && periodic_pass()) {
    pass_active = true;
    pass_carry = 0;
    pass_cur.rewind();
  }
  if (pass_active) {
    const auto period = pass_boost ? ns(o.freshness) : ns(o.count_period);
    // A little over the records: new pids are listed too.
    const auto k = due(pass_carry, recs.size() + recs.size() / 16 + 16, dt, period);
    const bool end = pass_cur.next(k, st->getdents, [&](std::int32_t pid, off_t start) {
      if (pass_wrapped && start >= pass_stop) {  // a whole cycle since the last open
        pass_wrapped = pass_boost = false;
        if (!periodic_pass()) return pass_active = false;
      }
      ++st->listed;
      if (ProcRec* r = rec_of(pid)) {
        r->flags |= kCounted;
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
    if (end && pass_boost && pass_need_wrap) {  // opened again: once more up to that point
      pass_need_wrap = false;
      pass_wrapped = true;
    } else if (end) {
      pass_boost = false;
      pass_active = periodic_pass();
    }
    if (end) {
      pass_cur.rewind();
      if (periodic_pass()) {  // a whole listing from its start: who it did not list has exited
        for (auto& r : recs) {
          if (!(r.flags & kCounted)) r.flags |= kGone;
          r.flags &= ~kCounted;
        }
      }
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
      forget(r);
      return true;
    });
    for (auto& r : recs) r.flags &= ~kSeen;
    sweep_cur.rewind();
  }

  if (!read_tail()) return lose_root();

  if (!added.empty()) {  // new pids: merged in and scanned now
    std::sort(added.begin(), added.end());
    added.erase(std::unique(added.begin(), added.end()), added.end());
    next.clear();
    std::size_t i = 0;
    for (const std::int32_t pid : added) {
      for (; i < recs.size() && recs[i].pid < pid; ++i) next.push_back(recs[i]);
      if (i < recs.size() && recs[i].pid == pid) continue;
      new_record(next, pid, kSeen | kCounted);
    }
    for (; i < recs.size(); ++i) next.push_back(recs[i]);
    recs.swap(next);
  }

  for (const std::int32_t pid : todo)
    if (auto* r = rec_of(pid)) {
      scan(*r);
      r->flags &= ~kScheduled;
    }
  std::erase_if(recs, [&](const ProcRec& r) {  // exits found by the scans and the pass
    if (!(r.flags & kGone)) return false;
    ++st->exited;
    forget(r);
    return true;
  });
  return true;
}

}  // namespace gpustream::drm
