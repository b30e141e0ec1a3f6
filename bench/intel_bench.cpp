// Per-process attribution on a generated /proc: 50 DRM clients (i915 and xe, two devices) among
// 100, 2,000 or 10,000 processes of 6 fds each, and the real /proc of this machine. Three ways
// to find the clients, in one binary:
//   BM_Tracker*      drm::ClientTracker (what the AMD and Intel probes use): a steady-state
//                    sample, one a second of driven time, after the first (full) one.
//                    Watch: the open signal (inotify on the tree's dev/dri) and the fd-count
//                    signal, the default on Linux >= 6.2 with a /dev/dri (the fd-count pass
//                    every 300 s); WatchNoPass: the same without the fd-count pass; Signal: the
//                    fd-count signal alone, every pid listed each sample (no watchable device
//                    folder); Sweep: neither (older kernels, or a tree that is not procfs).
//   BM_SharedWalker  drm::walk_clients, the one-shot walker every sample used before (links
//                    first, fdinfo only for DRM nodes).
//   BM_NaiveWalker   opens and parses every fdinfo file.
// All three must find the same 50 clients before anything is timed.
//
//   cmake --build build --target intel_bench && build/bench/intel_bench
//   (GPUSTREAM_BENCH_TREE=/dev/shm/x puts the trees elsewhere, and keeps them for later runs;
//    default: a fresh folder in $TMPDIR or /tmp, removed at exit)
//
// Exact system calls per sample, with strace on a kept tree: GPUSTREAM_BENCH_ONCE=<walker> (watch,
// watch_nopass, signal, sweep, shared, naive) runs
// the first sample (a tracker's full scan) plus GPUSTREAM_BENCH_SAMPLES steady samples (default
// 0) on GPUSTREAM_BENCH_PROCS processes (default 10000; "proc" = the real /proc). The steady
// cost is the difference of two runs divided by the sample count:
//   GPUSTREAM_BENCH_TREE=/dev/shm/gs build/bench/intel_bench --benchmark_filter=none
//   GPUSTREAM_BENCH_TREE=/dev/shm/gs GPUSTREAM_BENCH_ONCE=signal GPUSTREAM_BENCH_SAMPLES=100
//     strace -c -f build/bench/intel_bench      (and again with GPUSTREAM_BENCH_SAMPLES=0)
//   GPUSTREAM_BENCH_TREE=/dev/shm/gs GPUSTREAM_BENCH_ONCE=shared strace -c build/bench/intel_bench
//   GPUSTREAM_BENCH_TREE=/dev/shm/gs GPUSTREAM_BENCH_ONCE=naive strace -c build/bench/intel_bench
//
// Counters: `fs_ops` = opens + readlinks + stats + getdents issued per sample (each is one
// system call; closes and reads come on top), `scans` = processes fully scanned per sample,
// `clients` found.
#include <benchmark/benchmark.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "gpustream/probes/drm_client_tracker.hpp"
#include "gpustream/probes/drm_fdinfo.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gpustream;

constexpr int kFdsPerProcess = 6;
constexpr int kDrmClients = 50;
constexpr std::int64_t kSecond = 1'000'000'000;
const std::vector<std::string> kDrivers = {"i915", "xe"};

void write_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error("cannot write " + path);
  ::close(fd);
}

std::string fdinfo(int i) {
  if (i % 2)
    return "drm-driver:\txe\ndrm-client-id:\t" + std::to_string(i) +
           "\ndrm-pdev:\t0000:03:00.0\ndrm-resident-gtt:\t192 KiB\ndrm-resident-vram0:\t23992 "
           "KiB\ndrm-cycles-rcs:\t28257900\ndrm-total-cycles-rcs:\t7655183225\n"
           "drm-cycles-ccs:\t0\ndrm-total-cycles-ccs:\t7655183225\ndrm-engine-capacity-ccs:\t4\n";
  return "drm-driver:\ti915\ndrm-client-id:\t" + std::to_string(i) +
         "\ndrm-pdev:\t0000:00:02.0\ndrm-resident-system0:\t6044 KiB\n"
         "drm-engine-render:\t346249 ns\ndrm-engine-copy:\t0 ns\ndrm-engine-video:\t0 ns\n";
}

/// A generated /proc of `n` processes, 50 of them DRM clients; built once per count.
class ProcTree {
 public:
  explicit ProcTree(int n) {
    const char* base = std::getenv("GPUSTREAM_BENCH_TREE");
    const char* tmp = std::getenv("TMPDIR");
    const fs::path top = base ? fs::path(base)
                              : fs::path(tmp ? tmp : "/tmp") /
                                    ("gpustream-intel-bench-" + std::to_string(::getpid()));
    root_ = top / std::to_string(n);
    // The device folder beside the trees (the tracker's default for <top>/<n>: <top>/dev/dri).
    fs::create_directories(top / "dev" / "dri");
    for (const char* node : {"card0", "renderD129"})
      write_file((top / "dev/dri" / node).string(), "");
    keep_ = base != nullptr;
    if (keep_ && fs::exists(root_ / ".complete")) return;
    fs::create_directories(root_);
    const int every = n / kDrmClients;
    for (int i = 0; i < n; ++i) {
      const int pid = 1000 + i;
      const auto p = root_ / std::to_string(pid);
      fs::create_directories(p / "fd");
      fs::create_directories(p / "fdinfo");
      write_file((p / "comm").string(), "proc" + std::to_string(i) + "\n");
      for (int fd = 0; fd < kFdsPerProcess; ++fd) {
        const bool drm = fd == 5 && i % every == 0;
        const std::string target = drm      ? (i % 2 ? "/dev/dri/renderD129" : "/dev/dri/card0")
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
    if (!keep_) fs::remove_all(root_.parent_path(), ec);
  }
  std::string root() const { return root_.string(); }

 private:
  fs::path root_;
  bool keep_ = false;
};

/// The root for a process count; 0 = the real /proc.
std::string tree(int n) {
  if (n == 0) return "/proc";
  static std::map<int, std::unique_ptr<ProcTree>> trees;
  auto& t = trees[n];
  if (!t) t = std::make_unique<ProcTree>(n);
  return t->root();
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

drm::WalkOptions shared_options(int n) {
  drm::WalkOptions o;
  o.procfs_root = tree(n);
  o.drivers = kDrivers;
  o.max_processes = 1 << 30;  // the cap this walker had would hide clients
  return o;
}

long env_ms(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v ? std::atol(v) : fallback;
}

// watch: the defaults (open signal, fd-count pass every 300 s, sweep 600 s); watch_nopass: the
// same without the fd-count pass (what the tracker did before it: a pass only after an open).
enum class Mode { watch, watch_nopass, signal, sweep };

drm::TrackerOptions tracker_options(int n, Mode mode) {
  const bool watch = mode == Mode::watch || mode == Mode::watch_nopass;
  return {
      .procfs_root = tree(n),
      // The trees' devfs root: <top>/dev, beside <top>/<n> (the real /dev for the real /proc).
      .devfs_root = n == 0 ? "/dev" : (fs::path(tree(n)).parent_path() / "dev").string(),
      .drivers = kDrivers,
      // GPUSTREAM_BENCH_COUNT_MS / GPUSTREAM_BENCH_SWEEP_MS: other periods than the defaults.
      .sweep_period = std::chrono::milliseconds(env_ms("GPUSTREAM_BENCH_SWEEP_MS", 0)),
      .count_period = mode == Mode::watch_nopass ? std::chrono::milliseconds(0)
                                                 : std::chrono::milliseconds(env_ms(
                                                       "GPUSTREAM_BENCH_COUNT_MS",
                                                       drm::TrackerOptions{}.count_period.count())),
      .signal = mode == Mode::sweep ? drm::FdCountSignal::none : drm::FdCountSignal::fd_dir_size,
      .open_signal = watch ? drm::OpenSignal::automatic : drm::OpenSignal::none};
}

std::size_t fs_ops(const drm::WalkStats& st) {
  return st.opens + st.readlinks + st.stats + st.getdents;
}

// A steady-state sample: the first (full) sample is outside the timing; then one sample per
// second of driven time, averaged over at least a full sweep period when iterations allow.
void tracker_bench(benchmark::State& state, Mode mode) {
  const int n = static_cast<int>(state.range(0));
  drm::ClientTracker tr(tracker_options(n, mode));
  state.counters["open_signal"] = tr.uses_open_signal() ? 1 : 0;  // the real /proc: if /dev/dri
  const bool watch = mode == Mode::watch || mode == Mode::watch_nopass;
  if (n != 0 && watch != tr.uses_open_signal()) {
    state.SkipWithError("the open signal is not what this case needs");
    return;
  }
  std::int64_t now = kSecond;
  drm::WalkStats st;
  tr.sample(now, &st);
  std::size_t ops = 0, scans = 0, samples = 0, clients = 0;
  for (auto _ : state) {
    now += kSecond;
    auto cs = tr.sample(now, &st);
    clients = cs.size();
    benchmark::DoNotOptimize(cs);
    ops += fs_ops(st);
    scans += st.scans;
    ++samples;
  }
  state.counters["fs_ops"] = static_cast<double>(ops) / static_cast<double>(samples);
  state.counters["scans"] = static_cast<double>(scans) / static_cast<double>(samples);
  state.counters["clients"] = static_cast<double>(clients);
  state.counters["processes"] = static_cast<double>(st.processes);
}

void BM_TrackerWatch(benchmark::State& state) { tracker_bench(state, Mode::watch); }
void BM_TrackerWatchNoPass(benchmark::State& state) { tracker_bench(state, Mode::watch_nopass); }
void BM_TrackerSignal(benchmark::State& state) { tracker_bench(state, Mode::signal); }
void BM_TrackerSweep(benchmark::State& state) { tracker_bench(state, Mode::sweep); }

void BM_SharedWalker(benchmark::State& state) {
  const auto o = shared_options(static_cast<int>(state.range(0)));
  drm::WalkStats st;
  std::size_t clients = 0;
  for (auto _ : state) {
    auto cs = drm::walk_clients(o, &st);
    clients = cs.size();
    benchmark::DoNotOptimize(cs);
  }
  state.counters["fs_ops"] = static_cast<double>(st.opens + st.readlinks);
  state.counters["scans"] = static_cast<double>(st.processes);
  state.counters["clients"] = static_cast<double>(clients);
}

void BM_NaiveWalker(benchmark::State& state) {
  NaiveStats st;
  for (auto _ : state) {
    st = {};
    benchmark::DoNotOptimize(naive_walk(tree(static_cast<int>(state.range(0))), st));
  }
  state.counters["fs_ops"] = static_cast<double>(st.opens);
  state.counters["clients"] = static_cast<double>(st.clients);
}

// 0 = the real /proc of this machine (its own processes and clients, if any).
BENCHMARK(BM_TrackerWatch)
    ->Arg(100)
    ->Arg(2000)
    ->Arg(10000)
    ->Arg(0)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(2.0);
BENCHMARK(BM_TrackerWatchNoPass)
    ->Arg(100)
    ->Arg(2000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(2.0);
BENCHMARK(BM_TrackerSignal)
    ->Arg(100)
    ->Arg(2000)
    ->Arg(10000)
    ->Arg(0)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(2.0);
BENCHMARK(BM_TrackerSweep)
    ->Arg(100)
    ->Arg(2000)
    ->Arg(10000)
    ->Arg(0)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(2.0);
BENCHMARK(BM_SharedWalker)
    ->Arg(100)
    ->Arg(2000)
    ->Arg(10000)
    ->Arg(0)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(2.0);
BENCHMARK(BM_NaiveWalker)
    ->Arg(100)
    ->Arg(2000)
    ->Arg(10000)
    ->Arg(0)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(2.0);

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* once = std::getenv("GPUSTREAM_BENCH_ONCE")) {  // for strace -c
    const char* procs = std::getenv("GPUSTREAM_BENCH_PROCS");
    const int n =
        procs && std::string(procs) == "proc" ? 0 : env_int("GPUSTREAM_BENCH_PROCS", 10000);
    const int samples = env_int("GPUSTREAM_BENCH_SAMPLES", 0);
    const std::string how = once;
    std::size_t found = 0;
    if (how == "naive") {
      NaiveStats ns;
      found = naive_walk(tree(n), ns).size();
    } else if (how == "shared") {
      found = drm::walk_clients(shared_options(n)).size();
    } else {
      const Mode mode = how == "watch"          ? Mode::watch
                        : how == "watch_nopass" ? Mode::watch_nopass
                        : how == "signal"       ? Mode::signal
                                                : Mode::sweep;
      drm::ClientTracker tr(tracker_options(n, mode));
      std::int64_t now = kSecond;
      found = tr.sample(now).size();
      for (int i = 0; i < samples; ++i) found = tr.sample(now += kSecond).size();
    }
    std::printf("%s: %zu clients\n", once, found);
    return n == 0 || found == kDrmClients ? 0 : 1;
  }
  // Every walker must find the same 50 clients on every generated tree before anything is timed.
  for (int n : {100, 2000, 10000}) {
    NaiveStats ns;
    const auto a = drm::walk_clients(shared_options(n)).size();
    const auto b = naive_walk(tree(n), ns).size();
    drm::ClientTracker tr(tracker_options(n, Mode::signal)), tw(tracker_options(n, Mode::watch));
    const auto c = tr.sample(kSecond).size();
    const auto d = tr.sample(2 * kSecond).size();
    const auto e = tw.sample(kSecond).size() + tw.sample(2 * kSecond).size();
    if (a != kDrmClients || b != a || c != a || d != a || e != 2 * a) {
      std::fprintf(stderr,
                   "%d processes: walkers disagree: shared %zu, naive %zu, tracker %zu/%zu\n", n, a,
                   b, c, d);
      return 1;
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
