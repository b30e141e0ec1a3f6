// nvml_backend.hpp — everything the NVIDIA probe does through NVML, as plain blocking calls.
//
// One NvmlBackend owns the loaded library, its function table and one LibrarySession. Devices
// are enumerated once (handles, names, UUIDs, PCI ids, memory totals); in every later session
// (lazy mode: every sample) only the handles are re-resolved by UUID. A device whose calls
// answer NVML_ERROR_GPU_IS_LOST is reported lost (metrics absent `lost`, an error in every
// snapshot) while the others keep reporting; after a backoff it is looked up again by UUID in a
// fresh NVML session (persistent mode re-initializes for that).
//
// Thread safety: every public member locks one mutex, so samples, detections and process-usage
// queries are serialized. All of them block (vendor calls): run them on the work pool.
// Cancellation: none; a hung vendor call is abandoned by the caller (see BlockingProbe).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/library_session.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probe.hpp"
#include "gpustream/probes/counter_rate.hpp"
#include "gpustream/probes/nvidia_formats.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/probes/process_table.hpp"
#include "nvidia/nvml_api.hpp"
#include "nvidia/nvml_gpm.hpp"

namespace gpustream::nvidia_detail {

using SteadyClock = std::function<std::chrono::steady_clock::time_point()>;
using HostClockReader = std::function<std::int64_t(NvidiaProbeOptions::HostClock)>;

struct NvmlOptions {
  std::string library;
  LibrarySessionMode mode = LibrarySessionMode::persistent;
  SystemPaths paths;
  std::chrono::milliseconds lost_retry_initial{1000};
  std::chrono::milliseconds lost_retry_max{60000};
  SteadyClock clock;
  HostClockReader host_clock;  // default: clock_gettime
};

/// The NVML calls whose failures are tracked per device (for log-once and error messages).
enum class Call : std::uint8_t {
  handle,
  memory,
  utilization,
  temperature,
  power,
  power_limit,
  energy,
  clock_graphics,
  clock_sm,
  clock_memory,
  fan,
  clock_reasons,
  compute_processes,
  graphics_processes,
  process_utilization,
  // MIG (nvml_mig.cpp), interconnect and health (nvml_health.cpp).
  mig_mode,
  mig_count,
  mig_handle,
  mig_ids,
  pcie_rx,
  pcie_tx,
  pcie_generation,
  pcie_generation_max,
  pcie_width,
  pcie_width_max,
  ecc_corrected_volatile,
  ecc_uncorrected_volatile,
  ecc_corrected_aggregate,
  ecc_uncorrected_aggregate,
  retired_single_bit,
  retired_double_bit,
  retired_pending,
  remapped_rows,
  nvlink_state,
  nvlink_fields,
  power_fields,  // the nvmlDeviceGetFieldValues call for power
  power_field,   // one power field's own return code (its failure logged once, apart)
  // GPM (nvml_gpm.cpp).
  gpm_support,    // nvmlGpmQueryDeviceSupport
  gpm_sample,     // nvmlGpmSampleAlloc / nvmlGpmSampleGet
  gpm_metrics,    // nvmlGpmMetricsGet
  power_samples,  // nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES) (nvml_samples.cpp)
  count_
};

/// What nvmlDeviceGetPowerUsage means on a board (nvml_power.cpp): average on Ampere and newer
/// except GA100, instant before Ampere and on GA100, nullopt when the architecture is unknown
/// (or an Ampere board's PCI device id is: 0).
std::optional<PowerKind> nvml_power_usage_kind(std::optional<unsigned> architecture,
                                               unsigned pci_device_id);

/// The host clocks a driver's sample time stamps may be on, and the one measured offset per
/// snapshot from each to the steady clock of GpuSnapshot::monotonic_ns (nvml_samples.cpp).
struct HostClocks {
  enum Clock : std::uint8_t { realtime, boottime, monotonic, count_ };
  std::int64_t steady_ns = 0;                    // when they were read (steady clock)
  std::array<std::int64_t, count_> offset_ns{};  // clock - steady, at steady_ns
  /// Reads every host clock once with `read`, bracketed by two readings of `steady` (the
  /// snapshots' clock).
  static HostClocks now(const SteadyClock& steady, const HostClockReader& read);
};

/// clock_gettime of CLOCK_REALTIME, CLOCK_BOOTTIME (CLOCK_MONOTONIC where there is none),
/// CLOCK_MONOTONIC, ns: the default of NvidiaProbeOptions::host_clock.
std::int64_t read_host_clock(NvidiaProbeOptions::HostClock c) noexcept;
/// ns of a steady time point.
inline std::int64_t steady_time_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

/// The driver's power sample ring of one device, between snapshots (nvml_samples.cpp).
struct PowerRing {
  /// At most this many samples per device and snapshot: the driver's ring holds about 120.
  /// 128 × 16 bytes (PowerSample) = 2 KiB per device and snapshot, and the same again for the
  /// reused read buffer of nvmlSample_t.
  static constexpr unsigned kMaxSamples = 128;
  unsigned long long last_seen_us = 0;  // the newest time stamp taken (lastSeenTimeStamp)
  std::int64_t last_ns = std::numeric_limits<std::int64_t>::min();  // its monotonic_ns
  std::optional<HostClocks::Clock> clock;  // the host clock the time stamps are on, once found
  bool unsupported = false;  // the driver answered NOT_SUPPORTED: not asked again this session
  std::vector<nvml::Sample> buffer;
};

/// One GPU as NVML showed it at enumeration, plus what the backend carries between samples.
struct NvmlDevice {
  // Read once, at enumeration.
  std::string uuid;
  std::string name;
  std::string pci_bus_id;
  int index = 0;
  std::optional<std::uint64_t> memory_total_bytes;
  // What power_kind of nvmlDeviceGetPowerUsage depends on (nvml_power.cpp): the architecture
  // (nvmlDeviceGetArchitecture; absent when unknown) and the PCI device id (nvmlPciInfo_t's
  // pciDeviceId: device << 16 | vendor; 0 when unknown).
  std::optional<unsigned> architecture;
  unsigned pci_device_id = 0;
  // The driver answered NOT_SUPPORTED for both power fields (a driver before R535): not asked
  // again in this session.
  bool power_fields_unsupported = false;
  // Valid while handle_generation equals the backend's session generation.
  nvml::Device handle = nullptr;
  std::uint64_t handle_generation = 0;
  // Lost-GPU state.
  bool lost = false;
  std::string lost_message;
  std::chrono::steady_clock::time_point retry_at{};
  std::chrono::milliseconds retry_delay{0};
  // Process utilization: the newest sample time stamp seen (microseconds, NVML's clock).
  unsigned long long last_seen_timestamp = 0;
  // Reused process-info buffer and the stride the driver last used.
  std::vector<std::byte> process_buffer;
  std::size_t process_capacity = 16;
  std::size_t process_stride = 0;
  std::vector<nvml::ProcessUtilizationSample> utilization_buffer;
  // Last failing return code per call (0: fine), so each distinct error is logged once.
  std::array<nvml::Return, static_cast<std::size_t>(Call::count_)> failing{};
  // MIG instances seen in the last sample (their buffers and failure memory), by UUID; their
  // handles are looked up again in every sample (nvml_mig.cpp).
  std::vector<NvmlDevice> mig_instances;
  // NVLink data counters (bytes, all active links) over the sample time (steady ns), for the
  // rates (the toolkit's counter_rate).
  rate::CounterRate nvlink_rx;
  rate::CounterRate nvlink_tx;
  // GPM support and the previous GPM sample (nvml_gpm.cpp).
  GpmState gpm;
  PowerRing power_ring;
};

/// What one sample produced; `failed` when it must count as a failed sample (every GPU lost).
struct NvmlSample {
  GpuSnapshot snapshot;
  bool failed = false;
};

class NvmlBackend {
 public:
  /// Loads `options.library` and looks NVML's functions up. Throws DynamicLibraryError:
  /// errc::library_missing ("cannot load <path>: ...") or errc::symbol_missing
  /// ("<symbol> missing from <path>").
  explicit NvmlBackend(NvmlOptions options);
  ~NvmlBackend();
  NvmlBackend(const NvmlBackend&) = delete;
  NvmlBackend& operator=(const NvmlBackend&) = delete;

  /// Enumerates the GPUs (in a fresh session when the previous one had trouble or a GPU was
  /// lost). Never throws.
  Detection detect();
  /// One snapshot of every GPU, taken at `monotonic_ns` (the snapshot's steady time: the
  /// driver's power samples after it wait for the next snapshot). Throws std::runtime_error when
  /// NVML cannot be initialized; per-device problems go to the snapshot's errors.
  NvmlSample sample(std::int64_t monotonic_ns);
  NvmlSample sample() { return sample(steady_time_ns(options_.clock())); }
  /// GPU memory of `pid` on every device, with the device's totals. Throws like sample().
  std::vector<ProcessDeviceUsage> process_usage(std::int64_t pid, std::vector<SampleError>& errors);

  LibrarySession::Stats session_stats() const;

  // -- for the event watcher (defined in nvml_events.cpp) --
  struct EventSession {
    LibrarySession::Guard guard;  // NVML stays initialized while it is held
    std::uint64_t generation = 0;
    std::vector<std::pair<std::string, nvml::Device>> devices;  // UUID, current handle
  };
  /// A session and the handles of the devices that are not lost. Throws std::runtime_error
  /// when NVML cannot be initialized.
  EventSession event_session();
  /// Successful NVML inits so far: handles and event sets of an older one are void.
  std::uint64_t generation() const noexcept { return generation_.load(); }
  LibrarySessionMode mode() const noexcept { return options_.mode; }
  const DynamicLibrary& library() const noexcept { return library_; }
  /// Runs (with the backend's lock held) before NVML is re-initialized, so that whoever holds
  /// a session releases it first. Empty: none.
  void set_reinit_hook(std::function<void()> hook);
  const std::string& library_path() const noexcept { return library_.path(); }
  const nvml::Api& api() const noexcept { return api_; }

 private:
  void new_session();
  LibrarySession::Guard acquire();
  void enumerate();
  bool retry_due() const;
  void resolve_handles(std::vector<SampleError>& errors);
  void mark_lost(NvmlDevice& dev, nvml::Return rc, const char* function);
  DeviceSample device_base(const NvmlDevice& dev) const;
  void sample_device(NvmlDevice& dev, DeviceSample& out, std::vector<SampleError>& errors);
  void fill_process_details(GpuSnapshot& snap);
  void usage_on_device(NvmlDevice& dev, std::int64_t pid, ProcessDeviceUsage& out,
                       std::vector<SampleError>& errors);
  /// Maps a failed return code to an absence; logs a new failure once; records an error for
  /// unexpected ones. GPU_IS_LOST marks the device lost.
  Absence failed(NvmlDevice& dev, Call call, nvml::Return rc, const char* function,
                 std::vector<SampleError>& errors);
  void succeeded(NvmlDevice& dev, Call call);
  /// Records the outcome of one call on `dev` (succeeded() or failed()); on failure the
  /// `metrics` it would have filled are set absent in `into` with failed()'s reason. True when
  /// the call succeeded.
  bool record(NvmlDevice& dev, nvml::Return rc, Call call, const char* function, MetricSet& into,
              std::initializer_list<Metric> metrics, std::vector<SampleError>& errors);
  /// Reads one process list into `out`; false when it could not be read (already reported).
  bool read_processes(NvmlDevice& dev, nvml::ProcessesFn* fn, Call call, const char* function,
                      std::vector<nvidia::NvmlProcessEntry>& out, std::vector<SampleError>& errors);
  /// Reads both process lists merged by pid; false when neither could be read.
  bool read_all_processes(NvmlDevice& dev, std::vector<nvidia::NvmlProcessEntry>& out,
                          std::vector<SampleError>& errors, Absence* why);
  std::string key(const NvmlDevice& dev, Call call, nvml::Return rc) const;
  /// PCIe throughput and link, NVLink throughput, ECC counters, retired pages, remapped rows
  /// (nvml_health.cpp).
  void sample_health(NvmlDevice& dev, DeviceSample& out, std::vector<SampleError>& errors);
  /// power_watts, power_average_watts and power_kind (nvml_power.cpp).
  void sample_power(NvmlDevice& dev, DeviceSample& out, std::vector<SampleError>& errors);
  /// The activity metrics from NVML GPM, over the interval since the previous sample
  /// (nvml_gpm.cpp).
  void sample_gpm(NvmlDevice& dev, DeviceSample& out, std::vector<SampleError>& errors);
  /// A MIG instance's activity: its GPU instance's samples (nvmlGpmMigSampleGet on `gpu`'s
  /// handle), once sample_gpm ran on `gpu`. `gpu_instance_id`: from nvmlDeviceGetGpuInstanceId
  /// on the instance's handle (nullopt: unknown).
  void sample_gpm_mig(NvmlDevice& gpu, NvmlDevice& inst, std::optional<unsigned> gpu_instance_id,
                      DeviceSample& out, std::vector<SampleError>& errors);
  /// The pair of `dev` (a GPU, or with `gpu` a MIG instance of it), once support is known.
  void sample_gpm_pair(NvmlDevice& dev, const NvmlDevice* gpu, unsigned gpu_instance_id,
                       DeviceSample& out, std::vector<SampleError>& errors);
  /// The activity metrics of `dev` absent `unsupported` for `reason` (its `gpm` attribute),
  /// its samples freed; logged (info) when the reason is new and `log`.
  void gpm_unsupported(NvmlDevice& dev, DeviceSample& out, std::string reason, bool log);
  /// Frees every GPU's GPM samples (before NVML is shut down).
  void release_gpm();
  /// power_samples: the driver's ring entries newer than the last seen, up to `monotonic_ns`
  /// (nvml_samples.cpp).
  void sample_power_ring(NvmlDevice& dev, DeviceSample& out, const HostClocks& clocks,
                         std::int64_t monotonic_ns, std::vector<SampleError>& errors);
  /// A ring problem of `kind` on `dev`: logged once, an error in the snapshot.
  void ring_error(NvmlDevice& dev, const std::string& kind, const std::string& message,
                  std::vector<SampleError>& errors);
  /// MIG mode of snap.devices[at] (the physical GPU `dev`); when on, appends one device per
  /// MIG instance to the snapshot (nvml_mig.cpp).
  void sample_mig(NvmlDevice& dev, std::size_t at, GpuSnapshot& snap);
  /// The MIG instances of `dev` when its MIG mode is on, for detect() (`gpustream list`).
  void detect_mig(const NvmlDevice& dev, std::vector<DeviceInfo>& out);
  /// One MIG instance's identity, memory and processes.
  DeviceSample sample_mig_instance(NvmlDevice& parent, NvmlDevice& inst, unsigned slot,
                                   std::vector<SampleError>& errors);

  NvmlOptions options_;
  DynamicLibrary library_;
  nvml::Api api_;
  std::atomic<std::uint64_t> generation_{0};  // successful inits so far
  mutable std::mutex mu_;
  std::unique_ptr<LibrarySession> session_;  // guarded by mu_ (as is everything below)
  std::vector<NvmlDevice> devices_;
  bool enumerated_ = false;
  bool troubled_ = false;  // a detect or sample had trouble: the next detect re-initializes
  std::string driver_version_;
  std::string init_failure_;                       // the last init failure logged
  std::vector<nvidia::NvmlProcessEntry> scratch_;  // reused process lists
  std::vector<nvidia::NvmlProcessEntry> scratch2_;
  proc::ProcessTable processes_;  // names and RSS, kept between samples
  LogOnce log_once_;
  std::function<void()> reinit_hook_;  // guarded by mu_
  // The nvmlGpmMetricsGet request (13 kB), allocated once, reused by every GPM computation.
  std::unique_ptr<nvml::GpmMetricsGet> gpm_request_;
};

}  // namespace gpustream::nvidia_detail
