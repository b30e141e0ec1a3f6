// drm_tracker_trees.hpp — generated /proc (and /dev/dri) trees for the drm::ClientTracker
// tests: processes with numbered fd links and fdinfo files, amdgpu fdinfo texts, a driven
// sampling loop.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
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
  // T/dev/dri beside T/proc, with card0 and renderD128 as plain files: the tracker's default
  // device folder for this tree, watched with inotify like the real /dev/dri.
  void devices() {
    t.file("dev/dri/card0", "");
    t.file("dev/dri/renderD128", "");
  }
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
  return {.procfs_root = p.root(), .signal = FdCountSignal::fd_dir_size, .fd_count = count_entries};
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
