// gpustream/probes/nvidia_probe.hpp — NVIDIA GPUs through NVML, loaded at run time, with
// `nvidia-smi` as the fallback; and a one-call answer to "how much GPU memory does this process
// hold right now, and how much RAM?".
//
// NVML path: libnvidia-ml.so.1 is opened with dlopen (never linked); functions are looked up
// newest first (nvmlInit_v2 -> nvmlInit, nvmlDeviceGetMemoryInfo_v2 -> v1,
// ...RunningProcesses_v3 -> _v2 -> v1). A missing required function makes NVML unusable
// ("NVML unusable: <symbol> missing from <file>"); a missing optional one leaves its metric
// absent (unsupported). Init/shutdown go through a LibrarySession: persistent by default; lazy
// (config `library_session`, or GPUSTREAM_LIBRARY_SESSION=lazy) initializes NVML for each sample
// and shuts it down after, re-resolving the devices by UUID. Names, UUIDs, PCI ids and memory
// totals are read once, at enumeration. Per device: memory used/total, utilization (GPU and
// memory), temperature, power (W), power limit (W), energy counter (J, EnergyKind::counter),
// clocks (graphics, SM, memory; MHz), fan (%), clock event reasons by name, and the processes
// (compute and graphics merged by pid) with their GPU memory, GPU utilization (SM %) and, from
// <procfs_root>/<pid>/{comm,statm}, name and host RSS. NVML_ERROR_NOT_SUPPORTED -> absent
// `unsupported`; NO_PERMISSION -> absent `no_permission`; GPU_IS_LOST -> that device is reported
// lost (absent `lost`, an error "gpu_lost" in every snapshot) while the others keep reporting,
// and it is looked up again after a backoff. Each distinct failure is logged once.
//
// Fallback: when NVML cannot be loaded or initialized and `nvidia-smi` runs, each sample runs it
// twice (`--query-gpu=... --format=csv,noheader,nounits` for all GPUs, then
// `--query-compute-apps=...`), with a timeout after which the child is killed. Values carry
// Source::nvidia_smi and processes are marked per_process_exact = false. Every sample runs the
// tool; min_interval() rises to `nvidia_smi_min_interval` once the fallback is chosen, and the
// Scheduler (which reads min_interval() again after each detection) keeps samples that far apart.
//
// Thread safety: driven by one Scheduler (one operation in flight); process_usage() and the
// accessors may be called from any thread. Vendor calls never run on the io thread: NVML on the
// work executor, nvidia-smi through async_run.
// Cancellation: cancel() kills a running nvidia-smi (the sample completes with
// operation_aborted); an NVML call cannot be interrupted and is left to finish on the work pool.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/config.hpp"
#include "gpustream/library_session.hpp"
#include "gpustream/probe.hpp"

namespace gpustream {

/// Which source the probe uses.
enum class NvidiaBackend : std::uint8_t { none, nvml, nvidia_smi };
std::string_view to_string(NvidiaBackend backend) noexcept;

struct NvidiaProbeOptions {
  /// Which sources may be used: NVML, else nvidia-smi (automatic), or only one of them.
  enum class Use : std::uint8_t { automatic, nvml_only, nvidia_smi_only };

  /// Config `nvidia.library`, flag --nvml-library.
  std::string nvml_library = "libnvidia-ml.so.1";
  /// Config `nvidia.nvidia_smi`, flag --nvidia-smi (a path, or a name searched in PATH).
  std::string nvidia_smi = "nvidia-smi";
  /// Config `nvidia.use`: "auto", "nvml" or "nvidia-smi".
  Use use = Use::automatic;
  /// Unset: GPUSTREAM_LIBRARY_SESSION, else persistent.
  std::optional<LibrarySessionMode> library_session;
  SystemPaths paths;
  /// A run of nvidia-smi that takes longer is killed (it can take seconds without persistence
  /// mode). Config `nvidia.nvidia_smi_timeout_ms`.
  std::chrono::milliseconds nvidia_smi_timeout{4000};
  /// min_interval() while nvidia-smi is the source (at least 1 s).
  std::chrono::milliseconds nvidia_smi_min_interval{1000};
  /// A lost GPU is looked up again after this delay, doubling up to lost_retry_max.
  std::chrono::milliseconds lost_retry_initial{1000};
  std::chrono::milliseconds lost_retry_max{60000};
  /// Steady clock of the snapshots' monotonic_ns, the lost-GPU retries, the GPM sample pair and
  /// the process-name refresh (tests drive it). Default: steady_clock. (sample_duration_ns is
  /// always measured on the real steady clock.)
  std::function<std::chrono::steady_clock::time_point()> clock;
  /// A host clock the driver's power sample ring may stamp its entries with (nvml.h names none).
  enum class HostClock : std::uint8_t { realtime, boottime, monotonic };
  /// Reads a host clock, ns since its epoch. The ring's time stamps are put on `clock` through
  /// one reading of each per snapshot, taken between two readings of `clock`; tests drive it
  /// together with `clock`. Default: clock_gettime (CLOCK_REALTIME, CLOCK_BOOTTIME,
  /// CLOCK_MONOTONIC).
  std::function<std::int64_t(HostClock)> host_clock;
  /// GPU events (NVML only, persistent library session): the event thread waits at most this
  /// long in one nvmlEventSetWait_v2 call, so it stops within about this long.
  std::chrono::milliseconds event_wait_timeout{250};
};

/// The options from a Config: `probe_settings["nvidia"]` keys library, nvidia_smi, use,
/// nvidia_smi_timeout_ms; plus paths and library_session. Throws std::invalid_argument naming
/// an unknown key or a bad value.
NvidiaProbeOptions nvidia_options_from_config(const Config& config);

/// One device, seen from one process.
struct ProcessDeviceUsage {
  std::string device_id;  // GPU UUID (else PCI bus id)
  int index = 0;
  std::string name;
  /// GPU memory the process holds on this device. 0 is a real answer when `exact` (NVML listed
  /// the device's processes and this one is not among them); absent when unknown.
  std::optional<std::uint64_t> gpu_memory_bytes;
  /// True when the figure is NVML's own per-process accounting.
  bool exact = false;
  std::optional<std::uint64_t> device_memory_used_bytes;
  std::optional<std::uint64_t> device_memory_total_bytes;
  Source source = Source::none;
};

/// "Can this model still fit?": this process's RAM and its GPU memory on each device, now.
struct ProcessGpuUsage {
  std::int64_t pid = 0;  // as the GPU driver sees it (<procfs_root>/self), else getpid()
  std::optional<std::uint64_t> host_rss_bytes;
  std::vector<ProcessDeviceUsage> devices;
  /// The backend that answered: none when neither NVML nor nvidia-smi did (see `errors`).
  NvidiaBackend backend = NvidiaBackend::none;
  std::vector<SampleError> errors;  // what could not be answered, and why
};

class NvidiaProbe final : public Probe {
 public:
  static constexpr std::string_view kName = "nvidia";
  /// NVML's utilization counters refresh every 1/6 s.
  static constexpr std::chrono::milliseconds kNvmlMinInterval{166};

  /// Cheap: nothing is loaded or run until async_detect/async_sample/process_usage.
  NvidiaProbe(ProbeExecutors executors, NvidiaProbeOptions options);
  ~NvidiaProbe() override;

  std::string_view name() const noexcept override { return kName; }
  /// kNvmlMinInterval, or nvidia_smi_min_interval once the fallback is in use (or when it is the
  /// only source allowed).
  std::chrono::milliseconds min_interval() const noexcept override;
  /// Tries NVML (unless nvidia_smi_only), then nvidia-smi (unless nvml_only). Unavailable
  /// reasons name both: "NVML: cannot load ...; nvidia-smi: not found (nvidia-smi)".
  void async_detect(DetectHandler handler) override;
  /// Samples with the backend chosen by the last detection (detects first if there was none).
  void async_sample(SampleHandler handler) override;
  void cancel() noexcept override;
  /// Events (Xid, ECC, clock-event, power-source) through NVML, on a thread of the probe's own
  /// started once NVML is detected; see docs/probes.md ("NVIDIA events").
  void start_events(EventSink sink) override;
  void stop_events() noexcept override;

  /// The source in use (none before a successful detection).
  NvidiaBackend backend() const noexcept;
  /// This process's host RSS and GPU memory per device, now. Blocking (vendor calls or a run of
  /// nvidia-smi): call it from your own thread, never from the io thread. Thread-safe.
  ProcessGpuUsage process_usage();
  /// Init/shutdown counters of the NVML session (nullopt before NVML was loaded).
  std::optional<LibrarySession::Stats> library_session_stats() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

std::shared_ptr<NvidiaProbe> make_nvidia_probe(ProbeExecutors executors,
                                               NvidiaProbeOptions options = {});

/// The "nvidia" registry row: make_nvidia_probe with nvidia_options_from_config(config).
ProbePtr make_nvidia_probe_from_config(const Config& config, ProbeExecutors executors);

/// The one-call form: loads NVML (else runs nvidia-smi), answers for this process, and releases
/// everything again. Blocking; thread-safe. Never throws: problems are in `errors`.
ProcessGpuUsage query_process_gpu_usage(NvidiaProbeOptions options = {});

}  // namespace gpustream
