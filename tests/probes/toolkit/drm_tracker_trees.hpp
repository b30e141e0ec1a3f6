// drm_tracker_trees.hpp — generated /proc (and /dev/dri) trees for the drm::ClientTracker
// tests: processes with numbered fd links and fdinfo files, amdgpu fdinfo texts, a driven
// sampling loop.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/probes/drm_client_tracker.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::drm::test_trees {

using gpustream::test::TempTree;

inline constexpr std::int64_t kSecond = 1'000'000'000;

inline std::string amdgpu_fdinfo(std::uint64_t client, std::uint64_t gfx_ns) {
  return "pos:\t0\ndrm-driver:\tamdgpu\ndrm-client-id:\t" + std::to_string(client) +
         "\ndrm-pdev:\t0000:03:00.0\ndrm-resident-vram:\t1024 KiB\ndrm-engine-gfx:\t" +
         std::to_string(gfx_ns) + " ns\n";
}

// /proc/<pid>/stat with `start` as field 22 (and a comm with spaces and parentheses in it).
inline std::string stat_text(int pid, std::uint64_t start) {
  std::string s = std::to_string(pid) + " (odd) name) S";
  for (int field = 4; field <= 21; ++field) s += " 0";
  return s + " " + std::to_string(start) + " 0 0\n";
}

// The generated tree of a /proc: processes with numbered fds pointing anywhere.
struct Proc {
  TempTree t;
  void process(int pid, std::string_view comm, std::uint64_t start = 0) {
    const std::string base = "proc/" + std::to_string(pid);
    t.file(base + "/comm", std::string(comm) + "\n");
    if (start) t.file(base + "/stat", stat_text(pid, start));
    t.dir(base + "/fd");
    t.dir(base + "/fdinfo");
  }
  void fd(int pid, int n, std::string_view target, std::string_view info = "pos:\t0\n") {
    const std::string base = "proc/" + std::to_string(pid);
    t.remove(base + "/fd/" + std::to_string(n));
    t.symlink(base + "/fd/" + std::to_string(n), target);
    t.file(base + "/fdinfo/" + std::to_string(n), info);
  }
  void close(int pid, int n) {
    const std::string base = "proc/" + std::to_string(pid);
    t.remove(base + "/fd/" + std::to_string(n));
    t.remove(base + "/fdinfo/" + std::to_string(n));
  }
  // A process with one fd on /dev/null, made with bare system calls (thousands of them are).
  void plain(int pid) {
    const std::string dir = root() + "/" + std::to_string(pid);
    if (::mkdir(dir.c_str(), 0755) != 0 || ::mkdir((dir + "/fd").c_str(), 0755) != 0 ||
        ::symlink("/dev/null", (dir + "/fd/0").c_str()) != 0)
      throw std::runtime_error("cannot make " + dir);
  }
  void client(int pid, std::uint64_t id, std::uint64_t gfx_ns = 1, int n = 3) {
    process(pid, "gpu" + std::to_string(pid));
    fd(pid, n, "/dev/dri/renderD128", amdgpu_fdinfo(id, gfx_ns));
  }
  std::string root() const { return t.path("proc"); }
  // The tree's devfs root (TrackerOptions::devfs_root): T/dev.
  std::string dev() const { return t.path("dev"); }
  // T/dev/dri, with card0 and renderD128 as plain files: the device folder of this tree's devfs
  // root, watched with inotify like the real /dev/dri. Also T/proc/self/ns/mnt: our mount
  // namespace (kOwnNs).
  void devices() {
    t.file("dev/dri/card0", "");
    t.file("dev/dri/renderD128", "");
    t.dir("proc/self/ns");
    t.symlink("proc/self/ns/mnt", ns_link(kOwnNs));
  }

  // Other mount namespaces, emulated. On procfs, <pid>/ns/mnt is a magic link whose readlink
  // text is "mnt:[<inode>]" and <pid>/root a magic link to the process's root in its own mount
  // namespace. Here: <pid>/ns/mnt is a dangling symlink with that same text (the tracker only
  // reads the text), and <pid>/root a symlink to T/ns/<inode>, a folder shared by the pids of
  // that namespace, with its own dev/dri (card0, renderD128): what a container's own mknod'ed
  // /dev/dri is. The inotify watches on it, and the opens of its nodes, are the kernel's. What is
  // not emulated: the kernel's path walk into another mount namespace and its permission check
  // (ptrace read access to the pid).
  static constexpr std::uint64_t kOwnNs = 4026531840;
  static std::string ns_link(std::uint64_t ns) { return "mnt:[" + std::to_string(ns) + "]"; }
  std::string ns_root(std::uint64_t ns) const { return t.path("ns/" + std::to_string(ns)); }
  // A namespace with its own device folder (`with_devices`) or without one (no GPU given to it).
  void mount_namespace(std::uint64_t ns, bool with_devices = true) {
    t.dir("ns/" + std::to_string(ns));
    if (!with_devices) return;
    t.file("ns/" + std::to_string(ns) + "/dev/dri/card0", "");
    t.file("ns/" + std::to_string(ns) + "/dev/dri/renderD128", "");
  }
  // `pid` (made with process() or client()) lives in mount namespace `ns`.
  void in_namespace(int pid, std::uint64_t ns) {
    const std::string base = "proc/" + std::to_string(pid);
    t.dir(base + "/ns");
    t.symlink(base + "/ns/mnt", ns_link(ns));
    t.symlink(base + "/root", ns_root(ns));
  }
  // `pid` starts using the GPU through its namespace's own node: a DRM fd in its tree, then the
  // open, which the kernel reports on the namespace's folder, not on T/dev/dri.
  void opens_gpu_in(std::uint64_t ns, int pid, int n, std::uint64_t client) {
    fd(pid, n, "/dev/dri/renderD128", amdgpu_fdinfo(client, 1));
    open_node_in(ns);
  }
  void open_node_in(std::uint64_t ns) const {
    const std::string node = ns_root(ns) + "/dev/dri/renderD128";
    const int f = ::open(node.c_str(), O_RDWR | O_CLOEXEC);
    if (f < 0) throw std::runtime_error("cannot open the fake node " + node);
    ::close(f);
  }
  // Removes a process from the tree (it exited).
  void exits(int pid) { t.remove("proc/" + std::to_string(pid)); }
  // What a GPU user does first: open the node (really, so the kernel reports IN_OPEN).
  void open_node(std::string_view node = "renderD128") const {
    const int fd = ::open(t.path("dev/dri/" + std::string(node)).c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot open the fake node " + std::string(node));
    ::close(fd);
  }
  // `pid` starts using the GPU: a DRM fd in its tree, then the open the kernel sees.
  void opens_gpu(int pid, int n, std::uint64_t client) {
    fd(pid, n, "/dev/dri/renderD128", amdgpu_fdinfo(client, 1));
    open_node();
  }
};

// Puts the TempTrees made while it lives in memory (/dev/shm) when that can be written: the
// trees of thousands of processes take a minute to make and remove on a busy disk.
class InMemoryTmpdir {
 public:
  InMemoryTmpdir() {
    if (::access("/dev/shm", W_OK | X_OK) != 0) return;
    if (const char* old = std::getenv("TMPDIR")) old_ = old;
    had_ = std::getenv("TMPDIR") != nullptr;
    ::setenv("TMPDIR", "/dev/shm", 1);
    set_ = true;
  }
  ~InMemoryTmpdir() {
    if (!set_) return;
    if (had_) {
      ::setenv("TMPDIR", old_.c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }

 private:
  std::string old_;
  bool had_ = false, set_ = false;
};

// Whether the tree lists new entries at one end (tmpfs: newest first), as procfs lists new pids
// last: the tracker then reads that end of the listing every sample (see start_tail()).
inline bool lists_in_creation_order(const Proc& p) {
  struct statfs fs;
  return ::statfs(p.t.path().c_str(), &fs) == 0 && fs.f_type == 0x01021994;  // TMPFS_MAGIC
}

// What procfs's st_size says on Linux >= 6.2, for generated fd folders (ordinary directories).
inline long count_entries(int dirfd, const char* rel) {
  const int fd = ::openat(dirfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  DIR* d = ::fdopendir(fd);
  long n = 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

inline TrackerOptions with_signal(const Proc& p) {
  return {.procfs_root = p.root(),
          .devfs_root = p.dev(),
          .signal = FdCountSignal::fd_dir_size,
          .fd_count = count_entries};
}

inline bool has_pid(const std::vector<Client>& cs, std::int64_t pid) {
  for (const auto& c : cs)
    if (c.pid == pid) return true;
  return false;
}

// Samples once a second from t = 1 s until `pid` is reported; the sample number (1-based), or
// 0 when it is not reported within `max_samples`.
inline int samples_until_reported(ClientTracker& tr, std::int64_t& now, std::int64_t pid,
                                  int max_samples, WalkStats* last = nullptr) {
  for (int i = 1; i <= max_samples; ++i) {
    now += kSecond;
    WalkStats st;
    const bool found = has_pid(tr.sample(now, &st), pid);
    if (last) *last = st;
    if (found) return i;
  }
  return 0;
}

}  // namespace gpustream::drm::test_trees
