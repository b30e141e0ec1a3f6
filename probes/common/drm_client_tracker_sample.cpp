// One sample of drm::ClientTracker: with the open signal (sample_watching) or by listing every
// pid (sample_listing). See gpustream/probes/drm_client_tracker.hpp.
#include <algorithm>

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

}  // namespace gpustream::drm
