// One sample of 2 AMD GPUs with 50 GPU processes among 100, 2,000 or 10,000 processes:
//   BM_AmdSysfsSample    AmdSysfsProbe over a generated sysfs + procfs tree (no subprocess), in
//                        steady state: one sample per second of driven time, after the first
//   BM_DrmWalk           the one-shot /proc fdinfo walk every sample did before the tracker,
//                        with per-walk open/readlink counters
//   BM_AmdSmiFakeSample  AmdProbe through the fake amd-smi (metric + process: 2 spawns + parse)
//   BM_RocmSmiStartup    the real Debian `rocm-smi` with the probe's flags (no GPU here: its
//                        fixed start-up cost is the baseline); skipped when not installed
//
// Reproduce: build-bench/bench/amd_bench --benchmark_min_time=2
// GPUSTREAM_BENCH_TREE=/dev/shm/amd keeps the trees (<dir>/<processes>/{sys,proc,dev}) for later
// runs, e.g. `gpustream serve --sysfs-root /dev/shm/amd/10000/sys --procfs-root
// /dev/shm/amd/10000/proc --devfs-root /dev/shm/amd/10000/dev`; `--benchmark_filter=none` only
// builds them.
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/drm_fdinfo.hpp"
#include "gpustream/subprocess.hpp"
#ifdef GPUSTREAM_HAVE_FAKES
#include "gpustream_fake_amd_paths.hpp"
#endif

namespace {

namespace fs = std::filesystem;
using namespace gpustream;

constexpr int kGpus = 2;
constexpr int kGpuProcesses = 50;

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << s;
}

// A sysfs + procfs tree built once per process count for the whole program.
struct Tree {
  fs::path root;
  bool keep = false;
  explicit Tree(int processes) {
    const char* base = std::getenv("GPUSTREAM_BENCH_TREE");
    keep = base != nullptr;
    root =
        (keep ? fs::path(base)
              : fs::temp_directory_path() / ("gpustream-amd-bench-" + std::to_string(::getpid()))) /
        std::to_string(processes);
    // The device nodes: <root>/dev is the tree's devfs root (the DRM client tracker watches
    // <devfs_root>/dri for opens).
    for (const char* node : {"card0", "card1", "renderD128", "renderD129"})
      if (!fs::exists(root / "dev/dri" / node)) write(root / "dev/dri" / node, "");
    if (keep && fs::exists(root / ".complete")) return;
    for (int i = 0; i < kGpus; ++i) {
      const auto dev = root / "sys/class/drm" / ("card" + std::to_string(i)) / "device";
      write(dev / "vendor", "0x1002\n");
      write(dev / "uevent", "PCI_SLOT_NAME=0000:0" + std::to_string(i + 3) + ":00.0\n");
      write(dev / "power/runtime_status", "active\n");
      write(dev / "gpu_busy_percent", "37\n");
      write(dev / "mem_busy_percent", "4\n");
      write(dev / "mem_info_vram_total", "25753026560\n");
      write(dev / "mem_info_vram_used", "1073741824\n");
      write(dev / "mem_info_gtt_total", "8589934592\n");
      write(dev / "mem_info_gtt_used", "33554432\n");
      write(dev / "pp_dpm_sclk", "0: 500Mhz\n1: 2100Mhz *\n");
      write(dev / "pp_dpm_mclk", "0: 96Mhz\n1: 1250Mhz *\n");
      write(dev / "unique_id", "8d7a1f3e02b1c4d5\n");
      const auto h = dev / "hwmon/hwmon2";
      write(h / "temp1_input", "45000\n");
      write(h / "temp1_label", "edge\n");
      write(h / "power1_average", "87000000\n");
      write(h / "fan1_input", "1450\n");
      write(h / "freq1_input", "2100000000\n");
      write(h / "freq1_label", "sclk\n");
    }
    for (int pid = 1; pid <= processes; ++pid) {
      const auto p = root / "proc" / std::to_string(pid);
      write(p / "comm", "proc" + std::to_string(pid) + "\n");
      fs::create_directories(p / "fd");
      fs::create_directories(p / "fdinfo");
      const bool gpu = pid % (processes / kGpuProcesses) == 0;
      const char* others[] = {"/dev/null", "/dev/pts/0", "socket:[1234]", "/var/log/x.log"};
      for (int fd = 0; fd < 4; ++fd) {
        fs::create_symlink(others[fd], p / "fd" / std::to_string(fd));
        write(p / "fdinfo" / std::to_string(fd), "pos:\t0\nflags:\t02\nmnt_id:\t24\n");
      }
      if (!gpu) continue;
      const int card = (pid / (processes / kGpuProcesses)) % kGpus;  // both cards
      const std::string info = "pos:\t0\ndrm-driver:\tamdgpu\ndrm-client-id:\t" +
                               std::to_string(pid) + "\ndrm-pdev:\t0000:0" +
                               std::to_string(card + 3) +
                               ":00.0\ndrm-resident-vram:\t544428 KiB\n"
                               "drm-memory-gtt:\t22528 KiB\ndrm-engine-gfx:\t39456116802 ns\n";
      for (int fd = 4; fd < 6; ++fd) {  // two fds of the same client
        fs::create_symlink("/dev/dri/renderD" + std::to_string(128 + card),
                           p / "fd" / std::to_string(fd));
        write(p / "fdinfo" / std::to_string(fd), info);
      }
    }
    write(root / ".complete", "");
  }
  ~Tree() {
    std::error_code ec;
    if (!keep) fs::remove_all(root.parent_path(), ec);
  }
  SystemPaths paths() const {
    return {.sysfs_root = (root / "sys").string(),
            .procfs_root = (root / "proc").string(),
            .devfs_root = (root / "dev").string()};
  }
};

Tree& tree(int processes) {
  static std::map<int, std::unique_ptr<Tree>> trees;
  auto& t = trees[processes];
  if (!t) t = std::make_unique<Tree>(processes);
  return *t;
}

void BM_AmdSysfsSample(benchmark::State& state) {
  std::int64_t now = 0;
  AmdSysfsProbe probe({}, {.paths = tree(static_cast<int>(state.range(0))).paths(),
                           .monotonic_clock = [&now] { return now += 1'000'000'000; }});
  probe.detect_now();
  (void)probe.sample_now();  // the first sample scans every process once
  std::size_t procs = 0;
  for (auto _ : state) {
    auto snap = probe.sample_now();
    procs = 0;
    for (const auto& d : snap.devices) procs += d.processes.size();
    benchmark::DoNotOptimize(snap);
  }
  state.counters["gpu_processes"] = static_cast<double>(procs);
}
BENCHMARK(BM_AmdSysfsSample)->Arg(100)->Arg(2000)->Arg(10000)->Unit(benchmark::kMillisecond);

void BM_DrmWalk(benchmark::State& state) {
  drm::WalkStats st;
  for (auto _ : state) {
    auto clients = drm::walk_clients(
        {.procfs_root = tree(static_cast<int>(state.range(0))).paths().procfs_root,
         .drivers = {"amdgpu"},
         .max_processes = 1 << 30},
        &st);
    benchmark::DoNotOptimize(clients);
  }
  state.counters["processes"] = static_cast<double>(st.processes);
  state.counters["fds"] = static_cast<double>(st.fds);
  state.counters["readlinks_per_walk"] = static_cast<double>(st.readlinks);
  state.counters["opens_per_walk"] = static_cast<double>(st.opens);
  state.counters["fdinfo_reads_per_walk"] = static_cast<double>(st.fdinfo_reads);
}
BENCHMARK(BM_DrmWalk)->Arg(100)->Arg(2000)->Arg(10000)->Unit(benchmark::kMillisecond);

#ifdef GPUSTREAM_HAVE_FAKES
void BM_AmdSmiFakeSample(benchmark::State& state) {
  ::setenv("GPUSTREAM_FAKE_AMD_DATA", fakes::kFakeAmdData, 1);
  AmdProbe probe({}, {.tool = AmdTool::amd_smi, .path = fakes::kFakeAmdSmi});
  const auto det = probe.detect_now();
  if (!det.available) {
    state.SkipWithError(det.reason.c_str());
    return;
  }
  for (auto _ : state) {
    auto snap = probe.sample_now();
    benchmark::DoNotOptimize(snap);
  }
}
BENCHMARK(BM_AmdSmiFakeSample)->Unit(benchmark::kMillisecond);
#endif

void BM_RocmSmiStartup(benchmark::State& state) {
  if (::access("/usr/bin/rocm-smi", X_OK) != 0) {
    state.SkipWithError("rocm-smi is not installed (apt-get install rocm-smi)");
    return;
  }
  for (auto _ : state) {
    RunOptions o;
    o.argv = {"/usr/bin/rocm-smi"};
    for (auto& a : amd_cli::rocm_smi_args()) o.argv.push_back(a);
    boost::system::error_code ec;
    auto r = run(std::move(o), ec);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_RocmSmiStartup)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
