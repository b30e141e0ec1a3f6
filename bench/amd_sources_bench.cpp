// One sample of 4 AMD GPUs through each AMD source, in the same process:
//   BM_AmdLibrarySample/persistent  AmdSmiLibProbe through the FAKE libamd_smi.so (tests/fakes/
//                                   amd_smi_lib), initialized once: the cost of gpustream's side
//                                   of the library path (lookups, struct reads, mapping); a real
//                                   library adds its own per-call cost (sysfs reads, ioctls)
//   BM_AmdLibrarySample/lazy        the same, amdsmi_init + amdsmi_shut_down around every sample
//                                   (the fake's init re-reads its scenario file; a real init
//                                   opens every device and is far dearer)
//   BM_AmdCliSample                 AmdProbe through the fake amd-smi (a shell script printing
//                                   recorded 4-GPU JSON): 2 spawns + parse per sample
//   BM_AmdSysfsSample4              AmdSysfsProbe over a generated 4-card sysfs + procfs tree
//                                   (100 processes, 8 of them on GPUs)
//
// Reproduce: build/bench/amd_sources_bench --benchmark_min_time=1s
// On a real AMD machine (ROCm installed, no fakes), compare the real sources with:
//   build/bench/amd_sources_bench --benchmark_filter=Real
// which samples the real libamd_smi.so (GPUSTREAM_BENCH_AMDSMI, default libamd_smi.so), the
// real amd-smi (GPUSTREAM_BENCH_AMD_SMI, default amd-smi) and the real /sys.
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "gpustream/probes/amd_probe.hpp"
#ifdef GPUSTREAM_HAVE_FAKES
#include "gpustream_fake_amd_paths.hpp"
#include "gpustream_fake_amd_smi_lib_paths.hpp"
#endif

namespace {

namespace fs = std::filesystem;
using namespace gpustream;

constexpr int kGpus = 4;

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << s;
}

struct Tree {
  fs::path root =
      fs::temp_directory_path() / ("gpustream-amd-sources-" + std::to_string(::getpid()));
  Tree() {
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
      const auto h = dev / "hwmon/hwmon2";
      write(h / "temp1_input", "45000\n");
      write(h / "temp1_label", "edge\n");
      write(h / "power1_average", "87000000\n");
      write(h / "fan1_input", "1450\n");
      write(root / "dev/dri" / ("card" + std::to_string(i)), "");
    }
    for (int pid = 1; pid <= 100; ++pid) {
      const auto p = root / "proc" / std::to_string(pid);
      write(p / "comm", "proc" + std::to_string(pid) + "\n");
      fs::create_directories(p / "fd");
      fs::create_directories(p / "fdinfo");
      if (pid % 12 != 0) continue;  // 8 GPU processes, 2 per card
      const int card = (pid / 12) % kGpus;
      fs::create_symlink("/dev/dri/card" + std::to_string(card), p / "fd/4");
      write(p / "fdinfo/4", "pos:\t0\ndrm-driver:\tamdgpu\ndrm-client-id:\t" + std::to_string(pid) +
                                "\ndrm-pdev:\t0000:0" + std::to_string(card + 3) +
                                ":00.0\ndrm-resident-vram:\t544428 KiB\n"
                                "drm-engine-gfx:\t39456116802 ns\n");
    }
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  SystemPaths paths() const {
    return {.sysfs_root = (root / "sys").string(),
            .procfs_root = (root / "proc").string(),
            .devfs_root = (root / "dev").string()};
  }
};

Tree& tree() {
  static Tree t;
  return t;
}

template <class P>
void run(benchmark::State& state, P& probe) {
  const auto det = probe.detect_now();
  if (!det.available) {
    state.SkipWithError(det.reason.c_str());
    return;
  }
  (void)probe.sample_now();  // seeds rates and trackers
  std::size_t devices = 0;
  for (auto _ : state) {
    auto snap = probe.sample_now();
    devices = snap.devices.size();
    benchmark::DoNotOptimize(snap);
  }
  state.counters["gpus"] = static_cast<double>(devices);
}

void sample_library(benchmark::State& state, const std::string& library, LibrarySessionMode mode) {
  std::unique_ptr<AmdSmiLibProbe> probe;
  try {
    probe = std::make_unique<AmdSmiLibProbe>(
        ProbeExecutors{}, AmdSmiLibProbeOptions{.library = library,
                                                .library_session = mode,
                                                .procfs_root = tree().paths().procfs_root});
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  run(state, *probe);
}

#ifdef GPUSTREAM_HAVE_FAKES
void BM_AmdLibrarySample(benchmark::State& state) {
  const auto scenario = tree().root / "amdsmi-scenario.txt";
  write(scenario,
        "version=26.1.0\ndevices=4\n"
        "device.0.processes=12:proc12:1073741824:0:100:0;48:proc48:1048576:0:100:0\n"
        "device.1.processes=24:proc24:1073741824:0:100:0;60:proc60:1048576:0:100:0\n"
        "device.2.processes=36:proc36:1073741824:0:100:0;72:proc72:1048576:0:100:0\n"
        "device.3.processes=84:proc84:1073741824:0:100:0;96:proc96:1048576:0:100:0\n");
  ::setenv(fakes::kFakeAmdSmiScenarioEnv, scenario.c_str(), 1);
  sample_library(state, fakes::kFakeAmdSmiLib,
                 state.range(0) == 0 ? LibrarySessionMode::persistent : LibrarySessionMode::lazy);
  state.SetLabel(state.range(0) == 0 ? "persistent" : "lazy");
}
BENCHMARK(BM_AmdLibrarySample)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_AmdCliSample(benchmark::State& state) {
  ::setenv("GPUSTREAM_FAKE_AMD_DATA", fakes::kFakeAmdData, 1);
  AmdProbe probe({}, {.tool = AmdTool::amd_smi,
                      .path = fakes::kFakeAmdSmi,
                      .procfs_root = tree().paths().procfs_root});
  run(state, probe);
}
BENCHMARK(BM_AmdCliSample)->Unit(benchmark::kMicrosecond);
#endif

void BM_AmdSysfsSample4(benchmark::State& state) {
  std::int64_t now = 0;
  AmdSysfsProbe probe({}, {.paths = tree().paths(),
                           .monotonic_clock = [&now] { return now += 1'000'000'000; },
                           .amdgpu_ids = ""});
  run(state, probe);
}
BENCHMARK(BM_AmdSysfsSample4)->Unit(benchmark::kMicrosecond);

// ---- the real sources, on a machine with AMD GPUs ------------------------------------------

void BM_RealAmdLibrary(benchmark::State& state) {
  const char* lib = std::getenv("GPUSTREAM_BENCH_AMDSMI");
  sample_library(state, lib ? lib : "libamd_smi.so",
                 state.range(0) == 0 ? LibrarySessionMode::persistent : LibrarySessionMode::lazy);
}
BENCHMARK(BM_RealAmdLibrary)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_RealAmdCli(benchmark::State& state) {
  const char* tool = std::getenv("GPUSTREAM_BENCH_AMD_SMI");
  AmdProbe probe({}, {.tool = AmdTool::amd_smi, .path = tool ? tool : "amd-smi"});
  run(state, probe);
}
BENCHMARK(BM_RealAmdCli)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_RealAmdSysfs(benchmark::State& state) {
  AmdSysfsProbe probe({}, {});
  run(state, probe);
}
BENCHMARK(BM_RealAmdSysfs)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
