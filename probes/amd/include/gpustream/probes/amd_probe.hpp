// gpustream/probes/amd_probe.hpp — AMD GPUs through the amdgpu sysfs files and DRM fdinfo.
//
// AmdSysfsProbe reads cards under <sysfs>/class/drm whose device/vendor is 0x1002 (named by
// device/product_name, else by libdrm's amdgpu.ids from device/device and device/revision, else
// "AMD GPU 0x<device id>"): busy
// percentages, VRAM/GTT, hwmon temperatures (m°C), power (µW), fan, clocks, and the current
// pp_dpm_sclk/mclk level. It runs no subprocess. A device whose power/runtime_status is
// "suspended" is reported suspended and none of its other files is read (reading them would wake
// it). pcie_bw is never read (the driver sleeps 1 s in it). Per process it reads
// <procfs>/<pid>/fdinfo through a gpustream::drm::ClientTracker kept between samples (cost in
// proportion to the GPU clients; see drm_client_tracker.hpp), sums memory across distinct clients
// of one (pid, device) and turns drm-engine-* busy nanoseconds into percentages between
// consecutive samples (the first sample only seeds them; see EngineBusyTracker). Each process's
// name and host RSS come from the shared proc::ProcessTable (<procfs>/<pid>/comm and statm).
//
// Device ids are "amd:<PCI bus id>" (e.g. "amd:0000:03:00.0"), so every AMD source names the
// same GPU the same way.
//
// Thread safety: the probe may be sampled from any work-pool thread; the engine-time state is
// guarded by a mutex. Cancellation: each sample is a bounded file scan; nothing to cancel.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/config.hpp"
#include "gpustream/library_session.hpp"
#include "gpustream/log_once.hpp"
#include "gpustream/probes/engine_busy.hpp"
#include "gpustream/probes/process_table.hpp"
#include "gpustream/probes/readers.hpp"
#include "gpustream/probes/settings.hpp"

namespace gpustream {

namespace drm {
class ClientTracker;
}

/// "amd:" + PCI bus id, lower-cased: the id every AMD source gives one GPU.
std::string amd_device_id(std::string_view pci_bus_id);

/// The current level of a pp_dpm_sclk/pp_dpm_mclk file ("1: 1800Mhz *") in MHz.
std::optional<double> parse_dpm_current_mhz(std::string_view text) noexcept;

/// Per-engine utilization of one counter source (or of a whole process): engine name ("gfx",
/// "enc", "compute", ...) -> percent, nullopt while not yet seeded.
using EngineUsage = std::map<std::string, std::optional<double>>;

/// Turns cumulative engine busy-time counters (ns) into utilization percentages between two
/// consecutive samples: (busy now - busy before) / (sample time now - sample time before).
/// A counter is named by a key: (pid, device id, DRM client id; 0 when the source has none).
/// An engine has a value only when the same key and engine were seen in the previous sample
/// and the counter did not go backwards; otherwise (first sample, new client, restarted process
/// or reused pid) it is nullopt and this sample's value becomes the new baseline. Keys not seen
/// in a sample are forgotten (processes that exited).
/// Values are not capped here; set_engine_usage() caps them.
/// Thread safety: none; the owner serialises calls (the probes hold their mutex).
class EngineBusyTracker {
 public:
  using Key = std::tuple<std::int64_t, std::string, std::uint64_t>;

  /// Starts a sample taken at `monotonic_ns` (steady clock, ns); the previous sample's counters
  /// become the baseline and older ones are dropped.
  void begin(std::int64_t monotonic_ns);
  /// Records the counters of `key` in the current sample and returns its percentages.
  EngineUsage update(const Key& key, const std::map<std::string, std::uint64_t>& busy_ns);
  /// Keys seen in the current sample (for tests: vanished processes are forgotten).
  std::size_t tracked() const noexcept;

 private:
  std::int64_t now_ns_ = 0;
  std::set<Key> seen_;  // keys of the current sample
  /// One busy-ns counter per (key, engine), over the sample time (the toolkit's engine_busy).
  engine::BusyRates<Key> rates_;
};

/// Adds one counter's percentages into a process's total; an engine stays nullopt once any of
/// its counters is (one unseeded client makes the sum unknown).
void add_engine_usage(EngineUsage& total, const EngineUsage& part);

/// Writes `usage` into p.engines (each capped at 100 %: the kernel sums the rings of one engine
/// class into one counter, and a CLI reads it at an unknown moment of a multi-second run, so a
/// ratio can exceed 100 without meaning more) and p.gpu_utilization_percent from "gfx" when it
/// has a value. Unseeded engines are Reading::missing(Absence::not_yet_seeded, source).
void set_engine_usage(ProcessSample& p, const EngineUsage& usage, Source source);

/// Marketing names by (PCI device id, revision), from libdrm's amdgpu.ids (Debian
/// libdrm-common): lines "device_id,\trevision_id,\tproduct_name" in hex ("744C,\tC8,\tAMD
/// Radeon RX 7900 XTX"), '#' comments and a version line. A name is found only for an exact
/// (device, revision) pair, as libdrm's amdgpu_get_marketing_name does.
struct AmdgpuIds {
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::string> names;
  std::optional<std::string> find(std::uint32_t device, std::uint32_t revision) const;
};

/// Where Debian's libdrm-common installs the table.
inline constexpr const char* kDefaultAmdgpuIdsPath = "/usr/share/libdrm/amdgpu.ids";
/// The largest amdgpu.ids read (the 2024 table is ~30 KiB); a larger file is not read.
inline constexpr std::size_t kMaxAmdgpuIdsBytes = std::size_t{512} << 10;

/// Lines that are not "hex, hex, name" are skipped.
AmdgpuIds parse_amdgpu_ids(std::string_view text);
/// Reads and parses `path` (at most kMaxAmdgpuIdsBytes; EFBIG beyond).
readers::Result<AmdgpuIds> load_amdgpu_ids(const std::string& path);

struct AmdSysfsProbeOptions {
  SystemPaths paths;
  bool processes = true;  // read /proc fdinfo for per-process usage
  /// A process that starts using a GPU is reported within this time (config
  /// amd.process_freshness_ms); see drm::TrackerOptions::freshness.
  std::chrono::milliseconds process_freshness{5000};
  /// Every process's fd count is compared once per this period (config amd.process_fd_count_ms;
  /// 0: only after an open); see drm::TrackerOptions::count_period.
  std::chrono::milliseconds process_fd_count_period{300000};
  /// Every process is fully scanned once per this period (config amd.process_sweep_ms; 0: the
  /// tracker's default); see drm::TrackerOptions::sweep_period.
  std::chrono::milliseconds process_sweep{0};
  std::size_t max_clients = 4096;  // DRM clients tracked at most (the memory bound)
  /// Monotonic time of a sample in ns (engine deltas, the tracker's round robins). Default:
  /// steady_now_ns. For benchmarks and tests that drive time.
  std::function<std::int64_t()> monotonic_clock;
  /// Names of cards without device/product_name (consumer boards); "" disables the lookup.
  /// A missing file is fine (the name is then "AMD GPU 0x<device id>").
  std::string amdgpu_ids = kDefaultAmdgpuIdsPath;
};

class AmdSysfsProbe final : public BlockingProbe {
 public:
  static constexpr std::string_view kName = "amd";

  AmdSysfsProbe(ProbeExecutors executors, AmdSysfsProbeOptions options);
  ~AmdSysfsProbe() override;

  std::string_view name() const noexcept override { return kName; }

 protected:
  Detection detect() override;
  GpuSnapshot sample() override;

 private:
  struct Card {
    std::string dir;  // <sysfs>/class/drm/cardN
    DeviceInfo info;
  };
  std::vector<Card> scan_cards();
  /// The name of the card at `device_dir`: product_name, else amdgpu.ids (loaded into `ids` at
  /// the first card that needs it), else "AMD GPU 0x<device id>".
  std::string card_name(const std::string& device_dir, std::optional<AmdgpuIds>& ids);
  DeviceSample sample_card(const Card& card, std::vector<SampleError>& errors);
  /// graphics_activity_percent and dram_activity_percent from the card's gpu_metrics table.
  void read_activity(const std::string& device_dir, DeviceSample& d,
                     std::vector<SampleError>& errors);
  void add_processes(std::vector<DeviceSample>& devices, GpuSnapshot& snap);

  AmdSysfsProbeOptions options_;
  std::mutex mutex_;
  std::vector<Card> cards_;           // from the last detect(); guarded by mutex_
  EngineBusyTracker engines_;         // fdinfo drm-engine-* counters; guarded by mutex_
  proc::ProcessTable process_table_;  // names and host RSS of the processes, kept between samples
  LogOnce log_once_;  // an unreadable amdgpu.ids, each refused gpu_metrics table: logged once
  std::unique_ptr<drm::ClientTracker> clients_;  // made at the first sample; guarded by mutex_
};

std::shared_ptr<AmdSysfsProbe> make_amd_sysfs_probe(ProbeExecutors executors,
                                                    AmdSysfsProbeOptions options = {});

/// True when at least one readable amdgpu card exists under `paths.sysfs_root`.
bool amd_sysfs_available(const SystemPaths& paths);

/// The "amd" section of a Config, read and checked once: the one reader the factory, the doctor
/// and the capture use. Throws std::invalid_argument for an unknown key, a wrong type or an
/// unknown source.
struct AmdSettings {
  std::string source = "auto";         // as written: auto, library, sysfs, cli, amd-smi or rocm-smi
  std::optional<std::string> library;  // amd.library (the AMD SMI library)
  std::optional<std::string> amd_smi;  // amd.amd_smi
  std::optional<std::string> rocm_smi;    // amd.rocm_smi
  std::optional<std::string> amdgpu_ids;  // amd.amdgpu_ids ("": no lookup)
  settings::TrackerPeriods tracker;
};
AmdSettings amd_settings(const Config& config);

/// The "amd" registry row: picks the source from config.probe_settings["amd"]["source"]
/// ("auto" | "library" | "sysfs" | "cli" | "amd-smi" | "rocm-smi"; default "auto"; "cli" is
/// amd-smi). auto prefers the AMD SMI library when it loads and finds GPUs, then sysfs, then the
/// amd-smi CLI; the choice and why the others were passed over are logged once and shown by
/// `gpustream list` (SourceNote). Throws std::invalid_argument for an unknown source.
ProbePtr make_amd_probe_from_config(const Config& config, ProbeExecutors executors);

// ---------------------------------------------------------------------------------------------
// AmdSmiLibProbe: the AMD SMI library (libamd_smi.so) loaded at run time; see
// probes/amd/amd_smi_backend.hpp for the library session, the host guard and the layouts.
// Per device: gfx/umc/mm activity (utilization, memory utilization, engines "gfx", "umc",
// "mm"), VRAM and GTT used/total, power (current socket power, else the average: power_kind
// says which), power average, power limit (26.x), energy counter (J, EnergyKind::counter; its
// resolution in attributes["energy_resolution_uj"]), temperature (edge, else the hotspot/junction,
// attributes["temperature_sensor"] saying which; junction and memory also as the sysfs path's
// attributes temperature_junction_celsius / temperature_mem_celsius), graphics/memory clocks,
// fan (% of 255, rpm), and the processes with their VRAM and gfx/enc engine percentages
// between samples. What the library answers NOT_SUPPORTED is absent `unsupported`; NO_PERM
// `no_permission`; other failures `tool_failed` with an error. Throttle reasons come from
// amdsmi_gpu_metrics_t, of which only the head that every known release shares is read
// (indep_throttle_status bits → names, else "throttled"); absent with a reason otherwise.
//
// Thread safety: one sample at a time per probe (the scheduler's contract); the backend locks.
// Cancellation: a vendor call cannot be interrupted.

struct AmdSmiLibProbeOptions {
  std::string library = "libamd_smi.so";  // config amd.library, flag --amd-smi-library
  /// Unset: GPUSTREAM_LIBRARY_SESSION, else persistent.
  std::optional<LibrarySessionMode> library_session;
  std::string procfs_root = "/proc";
  bool processes = true;
  std::function<std::int64_t()> clock;  // sample time (steady ns); empty: steady_now_ns
};

namespace amd_lib_detail {
class AmdSmiBackend;
}

class AmdSmiLibProbe final : public BlockingProbe {
 public:
  static constexpr std::string_view kName = "amd";
  /// Throws DynamicLibraryError when the library cannot be loaded or lacks a required function.
  AmdSmiLibProbe(ProbeExecutors executors, AmdSmiLibProbeOptions options);
  ~AmdSmiLibProbe() override;

  std::string_view name() const noexcept override { return kName; }
  std::chrono::milliseconds min_interval() const noexcept override {
    return std::chrono::milliseconds{100};
  }
  /// "libamd_smi.so 26.1.0 (struct layout v26), lazy session".
  std::string describe() const;
  LibrarySession::Stats library_session_stats() const;

 protected:
  Detection detect() override;
  GpuSnapshot sample() override;

 private:
  std::unique_ptr<amd_lib_detail::AmdSmiBackend> backend_;
};

std::shared_ptr<AmdSmiLibProbe> make_amd_smi_lib_probe(ProbeExecutors executors,
                                                       AmdSmiLibProbeOptions options = {});

// ---------------------------------------------------------------------------------------------
// AmdProbe: the amd-smi / rocm-smi command-line tools.
//
// amd-smi: `static --json` once per detection (names, bus ids, VRAM totals), `metric --json`
// each sample, `process --json` when processes are wanted; all GPUs in one invocation. Every
// schema generation is read: bare numbers (ROCm 6.0), {"value","unit"} objects (6.1+), the
// {"gpu_data":[...]} wrapper (amd-smi >= 26), process_list/process_info (6.2+), "N/A" anywhere,
// text before the JSON, and "MB" that means MiB. rocm-smi --json: every value a string, renamed
// keys, "(1700Mhz)" values, keys ending in ':', warning lines, and empty output with exit 0
// (driver not loaded), which is an error. Memory activity is "GPU Memory Read/Write Activity
// (%)" (ROCm 6.2+) or "GPU memory use (%)" (before); 6.2's "GPU Memory Allocated (VRAM%)" is
// the share of VRAM allocated, not activity, and is not read.
//
// Per process, amd-smi's usage.<engine> busy times (cumulative ns) become engine percentages
// between consecutive samples of the same (pid, device), timed by the snapshot's monotonic_ns
// (options.clock); the first sample of a process only seeds (Absence::not_yet_seeded).
//
// The tools take 0.5-3 s per call: min_interval() is at least 2 s, each run has a timeout that
// kills the child's process group, and runs happen on the work pool, never on the io thread.
// Failures throw amd_cli::ToolError whose message never changes between runs of one kind of
// failure, so the Scheduler's log-once logs a tool that fails every tick once; the particulars
// (stderr, byte offsets) are logged at debug level, once, until a sample succeeds.
// Thread safety: like every BlockingProbe, one sample at a time per probe (the scheduler's
// contract); state is guarded by a mutex. Cancellation: a run ends at its timeout.

namespace amd_cli {

/// What the parsers and AmdProbe's tool runs throw. what() says which kind of failure it was in
/// words that do not change from one run to the next (no byte offsets, pids, excerpts or stderr
/// text), so the Scheduler, which logs each distinct error message once, logs a failure that
/// repeats every tick once. detail() has the particulars of this run.
class ToolError : public std::runtime_error {
 public:
  ToolError(const std::string& summary, std::string detail)
      : std::runtime_error(summary), detail_(std::move(detail)) {}
  const std::string& detail() const noexcept { return detail_; }

 private:
  std::string detail_;
};

/// One GPU as a CLI describes it. Parsers throw ToolError for output that is not the JSON they
/// expect.
struct StaticInfo {
  int index = 0;
  std::string bus_id;
  std::string uuid;
  std::string name;
  std::optional<double> vram_total_bytes;
};

std::vector<StaticInfo> parse_amd_smi_static(std::string_view text);
/// What `power.throttle_status` says of a GPU: "THROTTLED"/"UNTHROTTLED" (amd-smi 6.x),
/// or anything else ("N/A", a type it does not print): unknown.
enum class ThrottleStatus { throttled, unthrottled, unknown };
/// gpu index -> metrics. `throttle`, when given, receives each GPU's throttle status where
/// amd-smi printed the key at all (an older amd-smi without it leaves the GPU out).
std::map<int, MetricSet> parse_amd_smi_metric(std::string_view text,
                                              std::map<int, ThrottleStatus>* throttle = nullptr);
/// One process of `amd-smi process --json`.
struct ProcessUsage {
  ProcessSample process;  // pid, name, VRAM; engines are left to the probe
  /// usage.<engine> ("gfx", "enc"): cumulative busy time in ns since the process opened the
  /// device (amd-smi copies fdinfo's drm-engine-<engine>). {"value","unit":"ns"} from ROCm 6.2,
  /// a bare number (ns) in 6.0/6.1; "N/A" or an unknown unit leaves the engine out.
  std::map<std::string, std::uint64_t> engine_busy_ns;
};

/// gpu index -> processes.
std::map<int, std::vector<ProcessUsage>> parse_amd_smi_process(std::string_view text);
/// One DeviceSample per "cardN" key (index N), ids from the PCI bus when reported.
std::vector<DeviceSample> parse_rocm_smi(std::string_view text);
/// The rocm-smi arguments that print name, use, memory, VRAM, temperature, power, clocks,
/// unique id and bus.
std::vector<std::string> rocm_smi_args();

}  // namespace amd_cli

enum class AmdTool { amd_smi, rocm_smi };

struct AmdProbeOptions {
  AmdTool tool = AmdTool::amd_smi;
  std::string path;  // empty: "amd-smi" / "rocm-smi" from PATH
  std::chrono::milliseconds timeout{10000};
  std::chrono::milliseconds min_interval{2000};  // raised to 2 s when lower
  bool processes = true;
  /// Where the processes' names (when the tool gives none) and host RSS are read.
  std::string procfs_root = "/proc";
  /// The sample time (steady clock, ns) stamped on each snapshot and used for the per-process
  /// engine percentages; empty: steady_now_ns. Tests inject one.
  std::function<std::int64_t()> clock;
};

class AmdProbe final : public BlockingProbe {
 public:
  static constexpr std::string_view kName = "amd";

  AmdProbe(ProbeExecutors executors, AmdProbeOptions options);

  std::string_view name() const noexcept override { return kName; }
  std::chrono::milliseconds min_interval() const noexcept override;

 protected:
  Detection detect() override;
  GpuSnapshot sample() override;

 private:
  std::string run_tool(const std::vector<std::string>& args) const;  // throws ToolError
  /// Logs a failure's particulars at debug level, once until a clean sample.
  void note_failure(const amd_cli::ToolError& e);
  std::vector<ProcessSample> processes_of(const DeviceSample& device,
                                          std::vector<amd_cli::ProcessUsage>& found);

  AmdProbeOptions options_;
  std::mutex mutex_;
  std::vector<amd_cli::StaticInfo> static_;  // amd-smi: from the last detect(); guarded
  EngineBusyTracker engines_;                // amd-smi process usage; guarded by mutex_
  proc::ProcessTable process_table_;         // host RSS of the processes amd-smi lists
  LogOnce detail_log_;
};

std::shared_ptr<AmdProbe> make_amd_cli_probe(ProbeExecutors executors, AmdProbeOptions options);

}  // namespace gpustream
