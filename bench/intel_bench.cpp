// The DRM client walk of the Intel (and AMD) probes on a generated /proc: 10,000 processes with
// 6 fds each, 50 of them holding one DRM fd (i915 or xe fdinfo). Compared with a
// straightforward walker in this binary that opens and parses every fdinfo file.
//
//   cmake --build build --target intel_bench && build/bench/intel_bench
//   (GPUSTREAM_BENCH_TREE=/dev/shm/x puts the tree elsewhere, and keeps it for later runs;
//    default: a fresh folder in $TMPDIR or /tmp, removed at exit)
//
// Exact system calls per walk, with strace on a kept tree (one walk, nothing else timed):
//   GPUSTREAM_BENCH_TREE=/dev/shm/gs build/bench/intel_bench --benchmark_filter=none
//   GPUSTREAM_BENCH_TREE=/dev/shm/gs GPUSTREAM_BENCH_ONCE=shared strace -c build/bench/intel_bench
//   GPUSTREAM_BENCH_TREE=/dev/shm/gs GPUSTREAM_BENCH_ONCE=naive strace -c build/bench/intel_bench
//
// Counters: ms per walk (the benchmark's time), `fs_ops` = opens + readlinks issued per walk
// (each is one system call; reads, getdents and closes come on top and scale the same way),
// `clients` found (both walkers must agree; main() checks it before timing).
#include <benchmark/benchmark.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "gpustream/probes/drm_fdinfo.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gpustream;

constexpr int kProcesses = 10000;
constexpr int kFdsPerProcess = 6;
constexpr int kDrmClients = 50;

void write_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error("cannot write " + path);
  ::close(fd);
}

/// Builds the tree once per process run; removed at exit.
class ProcTree {
 public:
  ProcTree() {
    const char* base = std::getenv("GPUSTREAM_BENCH_TREE");
    const char* tmp = std::getenv("TMPDIR");
    root_ = base ? fs::path(base) : fs::path(tmp ? tmp : "/tmp") / ("gpustream-intel-bench-" +
                                                                    std::to_string(::getpid()));
    keep_ = base != nullptr;
    if (keep_ && fs::exists(root_ / ".complete")) return;
    fs::create_directories(root_);
    const int every = kProcesses / kDrmClients;
    for (int i = 0; i < kProcesses; ++i) {
      const int pid = 1000 + i;
      const auto p = root_ / std::to_string(pid);
      fs::create_directories(p / "fd");
      fs::create_directories(p / "fdinfo");
      write_file((p / "comm").string(), "proc" + std::to_string(i) + "\n");
      for (int fd = 0; fd < kFdsPerProcess; ++fd) {
        const bool drm = fd == 5 && i % every == 0;
        const std::string target = drm ? (i % 2 ? "/dev/dri/renderD129" : "/dev/dri/card0")
                                   : fd < 3 ? "/dev/pts/3"
                                            : "socket:[" + std::to_string(40000 + i * 8 + fd) + "]";
        fs::create_symlink(target, p / "fd" / std::to_string(fd));
        std::string info = "pos:\t0\nflags:\t02\nmnt_id:\t26\nino:\t" + std::to_string(i) + "\n";
        if (drm) info += fdinfo(i);
        write_file((p / "fdinfo" / std::to_string(fd)).string(), info);
      }
    }
    write_file((root_ / ".complete").string(), "");
  }
  ~ProcTree() {
    std::error_code ec;
    if (!keep_) fs::remove_all(root_, ec);
  }
  std::string root() const { return root_.string(); }

 private:
  static std::string fdinfo(int i) {
    if (i % 2)
      return "drm-driver:\txe\ndrm-client-id:\t" + std::to_string(i) +
             "\ndrm-pdev:\t0000:03:00.0\ndrm-resident-gtt:\t192 KiB\ndrm-resident-vram0:\t23992 "
             "KiB\ndrm-cycles-rcs:\t28257900\ndrm-total-cycles-rcs:\t7655183225\n"
             "drm-cycles-ccs:\t0\ndrm-total-cycles-ccs:\t7655183225\ndrm-engine-capacity-ccs:\t4\n";
    return "drm-driver:\ti915\ndrm-client-id:\t" + std::to_string(i) +
           "\ndrm-pdev:\t0000:00:02.0\ndrm-resident-system0:\t6044 KiB\n"
           "drm-engine-render:\t346249 ns\ndrm-engine-copy:\t0 ns\ndrm-engine-video:\t0 ns\n";
  }
  fs::path root_;
  bool keep_ = false;
};

ProcTree& tree() {
  static ProcTree t;
  return t;
}

struct NaiveStats {
  std::size_t opens = 0, clients = 0;
};

bool read_whole(int dirfd, const char* name, std::string& out) {
  const int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out.clear();
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return n == 0;
}

/// The straightforward walker: every /proc/<pid>/fdinfo/<fd> is opened and parsed.
std::vector<drm::Client> naive_walk(const std::string& root, NaiveStats& st) {
  std::vector<drm::Client> out;
  DIR* proc = ::opendir(root.c_str());
  ++st.opens;
  if (!proc) return out;
  std::string text;
  while (dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string pdir = root + "/" + e->d_name;
    const int infodir = ::open((pdir + "/fdinfo").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ++st.opens;
    if (infodir < 0) continue;
    DIR* d = ::fdopendir(infodir);
    std::set<std::tuple<std::string, std::uint64_t>> seen;
    while (dirent* f = ::readdir(d)) {
      if (f->d_name[0] == '.') continue;
      ++st.opens;
      if (!read_whole(infodir, f->d_name, text)) continue;
      auto info = drm::parse_fdinfo(text);
      if (!info || (info->driver != "i915" && info->driver != "xe")) continue;
      if (!seen.emplace(info->pdev, info->client_id.value_or(0)).second) continue;
      std::string comm;
      ++st.opens;
      read_whole(::dirfd(proc), (std::string(e->d_name) + "/comm").c_str(), comm);
      out.push_back({std::stoll(e->d_name), comm, std::move(*info)});
    }
    ::closedir(d);
  }
  ::closedir(proc);
  st.clients = out.size();
  return out;
}

void BM_SharedWalker(benchmark::State& state) {
  drm::WalkOptions o;
  o.procfs_root = tree().root();
  o.drivers = {"i915", "xe"};
  o.max_processes = kProcesses + 1;
  drm::WalkStats st;
  for (auto _ : state) benchmark::DoNotOptimize(drm::walk_clients(o, &st));
  state.counters["fs_ops"] = static_cast<double>(st.opens + st.readlinks);
  state.counters["fdinfo_reads"] = static_cast<double>(st.fdinfo_reads);
  state.counters["clients"] = static_cast<double>(st.drm_fds);
}

void BM_NaiveWalker(benchmark::State& state) {
  NaiveStats st;
  for (auto _ : state) {
    st = {};
    benchmark::DoNotOptimize(naive_walk(tree().root(), st));
  }
  state.counters["fs_ops"] = static_cast<double>(st.opens);
  state.counters["fdinfo_reads"] = static_cast<double>(kProcesses * kFdsPerProcess);
  state.counters["clients"] = static_cast<double>(st.clients);
}

BENCHMARK(BM_SharedWalker)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_NaiveWalker)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

int main(int argc, char** argv) {
  if (const char* once = std::getenv("GPUSTREAM_BENCH_ONCE")) {  // one walk, for strace -c
    drm::WalkOptions o;
    o.procfs_root = tree().root();
    o.drivers = {"i915", "xe"};
    o.max_processes = kProcesses + 1;
    NaiveStats ns;
    const auto n = std::string(once) == "naive" ? naive_walk(tree().root(), ns).size()
                                                : drm::walk_clients(o).size();
    std::printf("%s walk: %zu clients\n", once, n);
    return n == kDrmClients ? 0 : 1;
  }
  // Both walkers must find the same 50 clients before anything is timed.
  drm::WalkOptions o;
  o.procfs_root = tree().root();
  o.drivers = {"i915", "xe"};
  o.max_processes = kProcesses + 1;
  NaiveStats ns;
  const auto a = drm::walk_clients(o);
  auto b = naive_walk(tree().root(), ns);
  if (a.size() != static_cast<std::size_t>(kDrmClients) || b.size() != a.size()) {
    std::fprintf(stderr, "walkers disagree: shared %zu, naive %zu, expected %d\n", a.size(),
                 b.size(), kDrmClients);
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
