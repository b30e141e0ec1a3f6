// What one NVIDIA snapshot costs: 8 fake GPUs and 100 processes (pid k on GPU k % 8), in CPU
// time per snapshot, for
//   (a) BM_NvidiaProbe   NvidiaProbe over the fake libnvidia-ml.so.1 (persistent session):
//                        every metric, both process lists, process utilization, and each
//                        process's RSS and name from <procfs_root>/<pid>/statm and comm (plain
//                        files in a temp tree; statm re-read through a kept descriptor, names
//                        cached);
//   (b) BM_NvidiaSmi     spawning the fake nvidia-smi twice per sample (--query-gpu for all GPUs,
//                        --query-compute-apps) and parsing its CSV. The fake only prints recorded
//                        text, so this is a lower bound on what the real tool costs (which also
//                        loads and initializes NVML in every run);
//   (c) BM_NvmlFloor     a plain loop making the same fake NVML calls into plain structs: the
//                        least any NVML-based sampler can do;
//   (c') (c) plus BM_ProcReadsByHand, the same per-sample statm reads done by hand (one pread
//                        per process): the least a sampler that also reports the processes'
//                        names and RSS can do.
//   BM_NvidiaProbePowerFields  (a) on a driver that has NVML_FI_DEV_POWER_INSTANT/_AVERAGE
//                        (R535+): per GPU one nvmlDeviceGetFieldValues call (two fields) in
//                        place of nvmlDeviceGetPowerUsage; main() prints its ratio to (a), the
//                        extra cost per sample of power as the driver means it;
//   BM_NvidiaProbeGpm    (a) with NVML GPM on every GPU (Hopper; the fake's GPM counters run at
//                        fixed rates): per GPU one nvmlGpmSampleGet and one nvmlGpmMetricsGet
//                        (eight metrics) per sample; (a) itself runs with GPM unsupported
//                        (device.<i>.gpm=0: asked once per GPU, then never). Both move the
//                        probe's clock and the fake's time on by 200 ms per sample (GPM wants
//                        100 ms between the samples of a pair). main() prints the ratio to (a):
//                        the extra cost per sample of the activity metrics;
//   BM_NvidiaProbePowerRing  (a) on a driver whose power sample ring (nvmlDeviceGetSamples,
//                        NVML_TOTAL_POWER_SAMPLES) takes a reading every 5 µs of wall time: per
//                        GPU two calls (count, then the entries newer than the last seen, at
//                        most 120) and their conversion to the snapshot's clock; counter
//                        `ring_samples` is the readings per GPU and snapshot. (a) itself has no
//                        ring (the driver answers NOT_SUPPORTED, asked once); main() prints the
//                        ratio, the extra cost per sample of every driver reading;
//   BM_RealProcfs        the kernel's side on a real procfs, 100 reads of this process's entry:
//                        /0 open + read + close of status (the probe's old way), /1 pread of a
//                        kept statm descriptor (its way now).
// CPU time is the whole process (all threads: the probe samples on its work pool) plus, for (b),
// the reaped children: counter `cpu_us` per snapshot. The argument is the CPU each fake NVML call
// burns (ns): 0 measures pure overhead; a few microseconds per call is closer to a real driver
// (each NVML call is an ioctl). main() prints the ratios (b)/(a), (a)/(c), (a)/(c') at the end.
//
// Run: build-*/bench/nvidia_bench   (needs the fakes: a build with GPUSTREAM_BUILD_TESTS=ON)
#include <benchmark/benchmark.h>

#include <cstdio>

#if !GPUSTREAM_HAVE_FAKES
int main() {
  std::fprintf(stderr, "nvidia_bench: built without the test fakes; nothing to run\n");
  return 0;
}
#else

#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/probes/nvidia_formats.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/subprocess.hpp"
#include "gpustream_fake_nvidia_smi_paths.hpp"
#include "gpustream_fake_nvml_paths.hpp"
#include "nvidia/smi_backend.hpp"

namespace {

using namespace gpustream;
namespace fs = std::filesystem;

constexpr int kGpus = 8;
constexpr int kProcesses = 100;

std::string uuid_of(int gpu) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%08d-bench-4000-8000-%012d", gpu, gpu);
  return buf;
}
unsigned pid_of(int k) { return 200000 + static_cast<unsigned>(k); }

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// The temporary world: scenario, /proc tree, nvidia-smi outputs.
struct World {
  World() {
    char tmpl[] = "/tmp/gpustream-nvidia-bench-XXXXXX";
    root = ::mkdtemp(tmpl);
    for (int k = 0; k < kProcesses; ++k) {
      const auto dir = root / "proc" / std::to_string(pid_of(k));
      write(dir / "comm", "worker" + std::to_string(k) + "\n");
      write(dir / "statm", "2250000 " + std::to_string(25000 + k) + " 4000 500 0 300000 0\n");
    }
    std::string gpu_csv, apps_csv;
    for (int g = 0; g < kGpus; ++g) {
      char line[512];
      std::snprintf(line, sizeof line,
                    "%d, %s, NVIDIA H100 80GB HBM3, 00000000:%02X:00.0, 81559, %d, %d, %d, %d, "
                    "%.2f, %.2f, 700.00, 1755, 1755, 2619, [N/A], 0x0000000000000000\n",
                    g, uuid_of(g).c_str(), 0x18 + g, 1000 + g, 50 + g, 20 + g, 40 + g, 300.0 + g,
                    290.0 + g);
      gpu_csv += line;
    }
    for (int k = 0; k < kProcesses; ++k)
      apps_csv += uuid_of(k % kGpus) + ", " + std::to_string(pid_of(k)) + ", " +
                  std::to_string((k + 1) * 64) + ", /usr/bin/python3\n";
    write(root / "smi" / "query-gpu.csv", gpu_csv);
    write(root / "smi" / "query-compute-apps.csv", apps_csv);
    ::setenv(fakes::kFakeNvidiaSmiDirEnv, (root / "smi").c_str(), 1);
    ::setenv(fakes::kFakeNvmlScenarioEnv, (root / "scenario.txt").c_str(), 1);
  }
  ~World() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  /// The fake NVML reads this at its next nvmlInit.
  /// power_fields: the driver answers NVML_FI_DEV_POWER_INSTANT/_AVERAGE (else NOT_SUPPORTED).
  /// gpm: the GPUs have GPM (else device.<i>.gpm=0: unsupported, asked once).
  /// ring_step_us: the driver's power sample ring takes a reading every so many µs (0: the
  /// driver has no ring, nvmlDeviceGetSamples answers NOT_SUPPORTED).
  void scenario(long call_cost_ns, bool power_fields = false, bool gpm = false,
                int ring_step_us = 0) const {
    std::string s = "devices=" + std::to_string(kGpus) + "\nprocess_stride=32\n" +
                    "call_cost_ns=" + std::to_string(call_cost_ns) + "\n";
    if (ring_step_us == 0) s += "fail.nvmlDeviceGetSamples=NOT_SUPPORTED\n";
    for (int g = 0; g < kGpus; ++g) {
      std::string compute, util;
      for (int k = g; k < kProcesses; k += kGpus) {
        compute += std::to_string(pid_of(k)) + ":" + std::to_string((k + 1ull) << 26) + ",";
        util += std::to_string(pid_of(k)) + ":" + std::to_string(k % 100) + ":5,";
      }
      const auto dev = "device." + std::to_string(g) + ".";
      s += dev + "uuid=" + uuid_of(g) + "\n" + dev + "compute=" + compute + "\n" + dev +
           "process_util=" + util + "\n" + dev + "architecture=9\n";
      if (gpm) {
        for (int id : {1, 2, 3, 5, 10, 11, 12, 13})
          s += dev + "gpm." + std::to_string(id) + "=" + std::to_string(10 + id + g) + "\n";
      } else {
        s += dev + "gpm=0\n";
      }
      if (power_fields)
        s += dev + "power_instant_mw=" + std::to_string(300000 + g) + "\n" + dev +
             "power_average_mw=" + std::to_string(290000 + g) + "\n";
      if (ring_step_us > 0)
        s += dev + "power_mw=" + std::to_string(250000 + g) + "\n" + dev +
             "power_samples_live=" + std::to_string(ring_step_us) + "\n";
    }
    write(root / "scenario.txt", s);
  }
  fs::path root;
};

World& world() {
  static World w;
  return w;
}

/// Process CPU (all threads) plus the CPU of reaped children, in ns.
struct CpuClock {
  static std::int64_t self_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
  }
  static std::int64_t children_ns() {
    rusage ru{};
    ::getrusage(RUSAGE_CHILDREN, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
  }
  CpuClock() : self(self_ns()), children(children_ns()) {}
  void report(benchmark::State& state) const {
    const double n = static_cast<double>(state.iterations());
    const auto child = static_cast<double>(children_ns() - children);
    state.counters["cpu_us"] = (static_cast<double>(self_ns() - self) + child) / n / 1000.0;
    if (child > 0) state.counters["child_cpu_us"] = child / n / 1000.0;
  }
  std::int64_t self, children;
};

std::size_t process_count(const GpuSnapshot& s) {
  std::size_t n = 0;
  for (const auto& d : s.devices) n += d.processes.size();
  return n;
}

void run_probe(benchmark::State& state, bool power_fields, bool gpm = false, int ring_step_us = 0) {
  world().scenario(state.range(0), power_fields, gpm, ring_step_us);
  // The probe's clock and the fake's time move on by 200 ms per sample, in every variant.
  static auto fake = DynamicLibrary::load(fakes::kFakeNvml);
  static auto* set_time_ns = fake.required<void(long long)>("gpustreamFakeNvmlSetTimeNs");
  auto offset_ms = std::make_shared<std::atomic<long long>>(0);
  boost::asio::io_context io;
  boost::asio::thread_pool pool(1);
  NvidiaProbeOptions o;
  o.nvml_library = fakes::kFakeNvml;
  o.use = NvidiaProbeOptions::Use::nvml_only;
  o.library_session = LibrarySessionMode::persistent;
  o.paths.procfs_root = (world().root / "proc").string();
  o.clock = [offset_ms] {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(offset_ms->load());
  };
  auto probe = make_nvidia_probe({io.get_executor(), pool.get_executor()}, o);
  auto guard = boost::asio::make_work_guard(io);
  GpuSnapshot last;
  const auto sample = [&] {
    *offset_ms += 200;
    set_time_ns(*offset_ms * 1000000);
    bool done = false;
    probe->async_sample([&](boost::system::error_code, GpuSnapshot s) {
      last = std::move(s);
      done = true;
    });
    while (!done) io.run_one();
  };
  sample();  // detects, enumerates, warms the buffers (and seeds GPM)
  sample();
  if (last.devices.size() != kGpus || process_count(last) != kProcesses ||
      !last.devices[0].processes[0].host_rss_bytes || last.devices[0].processes[0].name.empty() ||
      !last.errors.empty()) {
    state.SkipWithError("the probe did not see 8 GPUs and 100 processes");
    return;
  }
  if (last.devices[0].metrics[Metric::sm_activity_percent].has_value() != gpm) {
    state.SkipWithError(gpm ? "no GPM activity" : "GPM activity in the plain run");
    return;
  }
  const auto kind = last.devices[0].power_kind;
  if (kind != (power_fields ? PowerKind::instant : PowerKind::average)) {
    state.SkipWithError("power did not come from the expected NVML call");
    return;
  }
  if (ring_step_us > 0 && last.devices[0].power_samples.empty()) {
    state.SkipWithError("the driver's power sample ring gave nothing");
    return;
  }
  std::size_t ring_samples = 0;
  CpuClock cpu;
  for (auto _ : state) {
    sample();
    for (const auto& d : last.devices) ring_samples += d.power_samples.size();
    benchmark::DoNotOptimize(last);
  }
  cpu.report(state);
  if (ring_step_us > 0)
    state.counters["ring_samples"] =
        static_cast<double>(ring_samples) / static_cast<double>(state.iterations()) / kGpus;
  guard.reset();
  pool.join();
}

void BM_NvidiaProbe(benchmark::State& state) { run_probe(state, false); }
void BM_NvidiaProbePowerFields(benchmark::State& state) { run_probe(state, true); }
void BM_NvidiaProbeGpm(benchmark::State& state) { run_probe(state, false, true); }
void BM_NvidiaProbePowerRing(benchmark::State& state) { run_probe(state, false, false, 5); }

// The probe's own query (nvidia/smi_backend.hpp), so that the tool prints (and we parse) the same
// columns.
constexpr auto& kGpuFields = gpustream::nvidia_detail::kSmiGpuFields;
constexpr auto& kAppFields = gpustream::nvidia_detail::kSmiAppFields;

void BM_NvidiaSmi(benchmark::State& state) {
  std::string gpu_query = "--query-gpu=";
  for (auto f : kGpuFields) gpu_query += std::string(f) + ",";
  gpu_query.pop_back();
  RunOptions gpu_run, apps_run;
  gpu_run.argv = {fakes::kFakeNvidiaSmi, gpu_query, "--format=csv,noheader,nounits"};
  apps_run.argv = {fakes::kFakeNvidiaSmi,
                   "--query-compute-apps=gpu_uuid,pid,used_gpu_memory,process_name",
                   "--format=csv,noheader,nounits"};
  std::size_t devices = 0, apps = 0;
  CpuClock cpu;
  for (auto _ : state) {
    auto a = run(gpu_run);
    auto b = run(apps_run);
    auto gpus = nvidia::smi_devices_from_csv(a.output, kGpuFields);
    auto procs = nvidia::smi_compute_apps_from_csv(b.output, kAppFields);
    for (const auto& p : procs)  // attribute each process to its GPU, as the probe does
      for (auto& d : gpus)
        if (d.id == p.gpu_uuid) d.processes.push_back({p.pid, p.process_name, p.used_memory_bytes});
    devices = gpus.size();
    apps = procs.size();
    benchmark::DoNotOptimize(gpus);
  }
  cpu.report(state);
  if (devices != kGpus || apps != kProcesses) state.SkipWithError("nvidia-smi output not parsed");
}

void BM_NvmlFloor(benchmark::State& state) {
  world().scenario(state.range(0));
  auto lib = DynamicLibrary::load(fakes::kFakeNvml);
  using Dev = void*;
  struct Memory2 {
    unsigned version;
    unsigned long long total, reserved, free, used;
  };
  struct Temp {
    unsigned version, sensor;
    int value;
  };
  struct Util {
    unsigned gpu, memory;
  };
  struct Sample {
    unsigned pid;
    unsigned long long ts;
    unsigned sm, mem, enc, dec;
  };
  auto* init = lib.required<int()>("nvmlInit_v2");
  auto* shutdown = lib.required<int()>("nvmlShutdown");
  auto* by_index = lib.required<int(unsigned, Dev*)>("nvmlDeviceGetHandleByIndex_v2");
  auto* memory = lib.required<int(Dev, Memory2*)>("nvmlDeviceGetMemoryInfo_v2");
  auto* util = lib.required<int(Dev, Util*)>("nvmlDeviceGetUtilizationRates");
  auto* temp = lib.required<int(Dev, Temp*)>("nvmlDeviceGetTemperatureV");
  auto* power = lib.required<int(Dev, unsigned*)>("nvmlDeviceGetPowerUsage");
  auto* limit = lib.required<int(Dev, unsigned*)>("nvmlDeviceGetEnforcedPowerLimit");
  auto* energy = lib.required<int(Dev, unsigned long long*)>("nvmlDeviceGetTotalEnergyConsumption");
  auto* clock = lib.required<int(Dev, unsigned, unsigned*)>("nvmlDeviceGetClockInfo");
  auto* fan = lib.required<int(Dev, unsigned*)>("nvmlDeviceGetFanSpeed");
  auto* reasons =
      lib.required<int(Dev, unsigned long long*)>("nvmlDeviceGetCurrentClocksEventReasons");
  auto* compute =
      lib.required<int(Dev, unsigned*, void*)>("nvmlDeviceGetComputeRunningProcesses_v3");
  auto* graphics =
      lib.required<int(Dev, unsigned*, void*)>("nvmlDeviceGetGraphicsRunningProcesses_v3");
  auto* proc_util = lib.required<int(Dev, Sample*, unsigned*, unsigned long long)>(
      "nvmlDeviceGetProcessUtilization");
  if (init() != 0) return state.SkipWithError("nvmlInit_v2 failed");
  Dev devs[kGpus];
  for (unsigned i = 0; i < kGpus; ++i) by_index(i, &devs[i]);
  struct Out {
    Memory2 mem;
    Util util;
    Temp temp;
    unsigned power, limit, clocks[3], fan;
    unsigned long long energy, reasons, last_seen = 0;
    unsigned char procs[64 * 32];
    Sample samples[64];
    unsigned nprocs, nsamples;
  };
  std::vector<Out> out(kGpus);
  CpuClock cpu;
  for (auto _ : state) {
    for (int i = 0; i < kGpus; ++i) {
      auto& o = out[i];
      const Dev h = devs[i];
      o.mem.version = sizeof(Memory2) | (2u << 24);
      memory(h, &o.mem);
      util(h, &o.util);
      o.temp = {sizeof(Temp) | (1u << 24), 0, 0};
      temp(h, &o.temp);
      power(h, &o.power);
      limit(h, &o.limit);
      energy(h, &o.energy);
      for (unsigned c = 0; c < 3; ++c) clock(h, c, &o.clocks[c]);
      fan(h, &o.fan);
      reasons(h, &o.reasons);
      o.nprocs = 64;
      compute(h, &o.nprocs, o.procs);
      unsigned n = 64;
      graphics(h, &n, o.procs + o.nprocs * 32);
      o.nsamples = 64;
      proc_util(h, o.samples, &o.nsamples, o.last_seen);
      for (unsigned k = 0; k < o.nsamples; ++k)
        o.last_seen = std::max(o.last_seen, o.samples[k].ts);
    }
    benchmark::DoNotOptimize(out.data());
  }
  cpu.report(state);
  shutdown();
}

/// Parses statm's second number (resident pages); 0 when unparsable.
unsigned long long resident_pages(const char* buf) {
  char* end = nullptr;
  std::strtoull(buf, &end, 10);
  return std::strtoull(end, nullptr, 10);
}

/// 100 descriptors open on `path`, re-read with pread at offset 0 (the probe's way): sum of the
/// resident pages, or -1 when a read failed.
struct KeptFds {
  explicit KeptFds(const std::vector<std::string>& paths) {
    for (const auto& p : paths) fds.push_back(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  }
  ~KeptFds() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  long long read_all() const {
    long long sum = 0;
    for (int fd : fds) {
      char buf[256];
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      if (n <= 0) return -1;
      buf[n] = '\0';
      sum += static_cast<long long>(resident_pages(buf));
    }
    return sum;
  }
  std::vector<int> fds;
};

// The per-sample /proc work of the probe done by hand, on the same tree: one pread per process
// on a kept statm descriptor, one number parsed (names are cached). Added to (c) it gives (c'),
// the floor of a sampler that also reports process names and RSS.
void BM_ProcReadsByHand(benchmark::State& state) {
  const std::string proc = (world().root / "proc").string();
  std::vector<std::string> paths;
  for (int k = 0; k < kProcesses; ++k)
    paths.push_back(proc + "/" + std::to_string(pid_of(k)) + "/statm");
  const KeptFds kept(paths);
  std::int64_t proc_ns = 0;
  long long sum = 0;
  for (auto _ : state) {
    timespec t0{}, t1{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    sum = kept.read_all();
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    proc_ns += (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
    benchmark::DoNotOptimize(sum);
  }
  if (sum <= 0) state.SkipWithError("statm reads failed");
  state.counters["proc_cpu_us"] = static_cast<double>(proc_ns) / state.iterations() / 1000.0;
}

// The kernel's side on a real procfs (the tree above is plain files): 100 reads of this
// process's own entry, (0) the old way — open, read and close /proc/<pid>/status — or (1) the
// probe's way — pread on a kept /proc/<pid>/statm descriptor.
void BM_RealProcfs(benchmark::State& state) {
  const std::string dir = "/proc/" + std::to_string(::getpid());
  const std::vector<std::string> statm(kProcesses, dir + "/statm");
  const std::string status = dir + "/status";
  const KeptFds kept(statm);
  long long sum = 0;
  for (auto _ : state) {
    if (state.range(0) == 1) {
      sum = kept.read_all();
    } else {
      sum = 0;
      for (int k = 0; k < kProcesses; ++k) {
        char buf[4096];
        const int fd = ::open(status.c_str(), O_RDONLY | O_CLOEXEC);
        const ssize_t n = fd < 0 ? -1 : ::read(fd, buf, sizeof buf - 1);
        if (fd >= 0) ::close(fd);
        if (n <= 0) break;
        buf[n] = '\0';
        if (const char* rss = std::strstr(buf, "VmRSS:")) sum += std::strtoll(rss + 6, nullptr, 10);
      }
    }
    benchmark::DoNotOptimize(sum);
  }
  if (sum <= 0) state.SkipWithError("/proc reads failed");
}

// GPUSTREAM_BENCH_ITERATIONS=N runs each benchmark exactly N times (no calibration runs), so
// that `strace -c -f` totals of two values of N give the system calls per snapshot.
void register_benchmarks() {
  const char* fixed = std::getenv("GPUSTREAM_BENCH_ITERATIONS");
  const auto add = [fixed](const char* name, void (*fn)(benchmark::State&)) {
    auto* b = benchmark::RegisterBenchmark(name, fn)->Unit(benchmark::kMicrosecond);
    b->MeasureProcessCPUTime();
    if (fixed) b->Iterations(std::atoll(fixed));
    return b;
  };
  add("BM_NvidiaProbe", BM_NvidiaProbe)->Arg(0)->Arg(2000);
  add("BM_NvidiaProbePowerFields", BM_NvidiaProbePowerFields)->Arg(0)->Arg(2000);
  add("BM_NvidiaProbeGpm", BM_NvidiaProbeGpm)->Arg(0)->Arg(2000);
  add("BM_NvidiaProbePowerRing", BM_NvidiaProbePowerRing)->Arg(0)->Arg(2000);
  add("BM_NvidiaSmi", BM_NvidiaSmi);
  add("BM_NvmlFloor", BM_NvmlFloor)->Arg(0)->Arg(2000);
  add("BM_ProcReadsByHand", BM_ProcReadsByHand);
  add("BM_RealProcfs", BM_RealProcfs)->Arg(0)->Arg(1);
}

// Collects `cpu_us` per benchmark (the median when repetitions are asked for).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      if (r.error_occurred) continue;
      const bool plain = r.run_type == Run::RT_Iteration;
      if (!plain && r.aggregate_name != "median") continue;
      auto name = r.run_name.function_name;
      if (!r.run_name.args.empty()) name += "/" + r.run_name.args;
      if (plain && medians_.count(name)) continue;
      for (const char* counter : {"cpu_us", "proc_cpu_us", "ring_samples"})
        if (auto it = r.counters.find(counter); it != r.counters.end())
          (plain ? cpu_ : medians_)[name + ":" + counter] = it->second.value;
    }
  }
  /// `counter` of benchmark `name`: the median of repetitions, else the single run; 0 if none.
  double value(const std::string& name, const char* counter = "cpu_us") const {
    const auto key = name + ":" + counter;
    if (auto it = medians_.find(key); it != medians_.end()) return it->second;
    auto it = cpu_.find(key);
    return it == cpu_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, double> cpu_, medians_;
};

}  // namespace

int main(int argc, char** argv) {
  world();
  register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  const double smi = reporter.value("BM_NvidiaSmi");
  // The /proc reads alone, timed inside BM_ProcReadsByHand.
  const double proc = reporter.value("BM_ProcReadsByHand", "proc_cpu_us");
  for (const char* cost : {"0", "2000"}) {
    const double probe = reporter.value(std::string("BM_NvidiaProbe/") + cost);
    const double floor = reporter.value(std::string("BM_NvmlFloor/") + cost);
    if (probe <= 0) continue;
    std::printf(
        "NVML call cost %s ns: (a) probe %.1f us, (b) nvidia-smi %.1f us, (c) floor "
        "%.1f us, (c') floor + /proc reads %.1f us per snapshot; (b)/(a) = %.1fx, "
        "(a)/(c) = %.2fx, (a)/(c') = %.2fx\n",
        cost, probe, smi, floor, floor + proc, smi / probe, floor > 0 ? probe / floor : 0.0,
        floor > 0 ? probe / (floor + proc) : 0.0);
    const double fields = reporter.value(std::string("BM_NvidiaProbePowerFields/") + cost);
    if (fields > 0)
      std::printf(
          "NVML call cost %s ns: power fields (nvmlDeviceGetFieldValues) %.1f us vs plain "
          "(nvmlDeviceGetPowerUsage) %.1f us per snapshot: ratio %.3f\n",
          cost, fields, probe, fields / probe);
    const double gpm = reporter.value(std::string("BM_NvidiaProbeGpm/") + cost);
    if (gpm > 0)
      std::printf(
          "NVML call cost %s ns: GPM activity (nvmlGpmSampleGet + nvmlGpmMetricsGet per GPU) "
          "%.1f us vs plain %.1f us per snapshot: ratio %.3f\n",
          cost, gpm, probe, gpm / probe);
    const double ring = reporter.value(std::string("BM_NvidiaProbePowerRing/") + cost);
    if (ring > 0)
      std::printf(
          "NVML call cost %s ns: power sample ring (nvmlDeviceGetSamples, %.0f readings per GPU) "
          "%.1f us vs no ring %.1f us per snapshot: ratio %.3f\n",
          cost, reporter.value(std::string("BM_NvidiaProbePowerRing/") + cost, "ring_samples"),
          ring, probe, ring / probe);
  }
  return 0;
}

#endif  // GPUSTREAM_HAVE_FAKES
