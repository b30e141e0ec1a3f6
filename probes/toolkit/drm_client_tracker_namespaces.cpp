// drm::ClientTracker and other mount namespaces: the device folder of each namespace other
// than ours that a known process lives in is watched too, while any of its pids is known
// (see gpustream/probes/drm_client_tracker.hpp).
#include <unistd.h>

#include <algorithm>
#include <string_view>

#include "drm_client_tracker_impl.hpp"
#include "gpustream/log.hpp"

namespace gpustream::drm {

std::uint64_t mount_ns(int dirfd, const char* rel) {
  char buf[64];
  const ssize_t n = ::readlinkat(dirfd, rel, buf, sizeof buf - 1);
  return n > 0 ? parse_ns_link(std::string_view(buf, static_cast<std::size_t>(n))) : 0;
}

// A pid seen for the first time, in watch mode: in a mount namespace other than ours, the
// device folder of that namespace is watched while any of its pids is known.
void ClientTracker::Impl::note_namespace(ProcRec& rec) {
  ++st->readlinks;
  const std::uint64_t ns = mount_ns(proc_fd, fmt("%d/ns/mnt", rec.pid));
  if (ns == 0 || ns == own_ns) return;
  NsWatch* free_slot = nullptr;
  for (auto& w : ns_watches) {
    if (w.ns == ns) {
      ++w.pids;
      rec.flags |= static_cast<std::uint32_t>(&w - ns_watches.data() + 1) << kNsShift;
      return;
    }
    if (w.ns == 0 && !free_slot) free_slot = &w;
  }
  if (ns_active >= std::min(o.max_namespace_watches, kMaxNsSlots)) {
    ++st->namespaces_unwatched;
    if (!ns_capped_logged) {
      ns_capped_logged = true;
      logger()->warn(
          "DRM clients: more than {} mount namespaces with a device folder: the others' GPU "
          "users are found by the fd-count pass and the sweep, not within the freshness period",
          o.max_namespace_watches);
    }
    return;
  }
  ns_path = o.procfs_root;
  ns_path += fmt("/%d/root/dev/dri", rec.pid);
  ++st->watch_adds;
  const int wd = watch.add(ns_path);
  if (wd < 0) return;  // no device folder in that namespace (or not ours to see)
  if (wd == watch.primary()) {
    if (own_ns == 0) own_ns = ns;  // our folder: its pids need nothing more
    return;
  }
  if (!free_slot) {
    ns_watches.emplace_back();
    free_slot = &ns_watches.back();
  }
  *free_slot = NsWatch{ns, wd, 1};
  ++ns_active;
  rec.flags |= static_cast<std::uint32_t>(free_slot - ns_watches.data() + 1) << kNsShift;
}

void ClientTracker::Impl::new_record(std::vector<ProcRec>& into, std::int32_t pid,
                                     std::uint32_t flags) {
  ++st->new_processes;
  ProcRec r{pid, kUnknownCount, flags | kScheduled};
  if (watching) note_namespace(r);
  into.push_back(r);
  todo.push_back(pid);
}

void ClientTracker::Impl::release_namespace(const ProcRec& r) {
  const std::uint32_t slot = r.flags >> kNsShift;
  if (slot == 0 || slot > ns_watches.size()) return;
  NsWatch& w = ns_watches[slot - 1];
  if (w.ns == 0 || --w.pids > 0) return;
  // Its last known pid is gone: so is the watch (unless another namespace shares the folder).
  if (w.wd >= 0 && std::none_of(ns_watches.begin(), ns_watches.end(), [&](const NsWatch& x) {
        return &x != &w && x.ns != 0 && x.wd == w.wd;
      }))
    watch.remove(w.wd);
  w = NsWatch{};
  --ns_active;
}

}  // namespace gpustream::drm
