#include "gpustream/probes/drm_client_tracker.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "drm_client_tracker_impl.hpp"

namespace gpustream::drm {
namespace {

constexpr long kProcSuperMagic = 0x9fa0;

}  // namespace

bool procfs_reports_fd_count(const std::string& procfs_root) {
  struct statfs fs;
  if (::statfs(procfs_root.c_str(), &fs) != 0 || static_cast<long>(fs.f_type) != kProcSuperMagic)
    return false;
  return stat_fd_count(AT_FDCWD, (procfs_root + "/self/fd").c_str()) > 0;  // 0 before 6.2
}

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

ClientTracker::ClientTracker(TrackerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->o = std::move(options);
  auto& o = impl_->o;
  if (o.fd_count) impl_->fd_count = o.fd_count;
  if (o.open_signal != OpenSignal::none) {
    impl_->watching = impl_->watch.start(o.devfs_root + "/dri");
    impl_->own_ns = mount_ns(AT_FDCWD, (o.procfs_root + "/self/ns/mnt").c_str());
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
std::size_t ClientTracker::namespace_watches() const noexcept { return impl_->ns_active; }

}  // namespace gpustream::drm
