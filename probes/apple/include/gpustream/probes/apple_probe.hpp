// gpustream/probes/apple_probe.hpp — the Apple Silicon GPU, read through one persistent
// `macmon pipe` child (https://github.com/vladkens/macmon).
//
// macmon prints one JSON object per line, every interval. The probe starts `macmon -i <ms> pipe`
// once, on the first sample, and keeps it running: each line it prints replaces the latest
// sample, and async_sample() answers at once with the latest one. It never starts macmon per
// sample. Detection runs `macmon -i 100 pipe -s 1 --soc-info` once for the chip name and core
// counts (macmon before v0.7 has no --soc-info: the probe then runs it without).
//
// Every macmon schema generation is parsed (keys in any order, unknown keys ignored):
//   v0.4–v0.6  `ecpu_usage`/`pcpu_usage`/`gpu_usage` as [freq_mhz, ratio] pairs (+`timestamp`
//              from v0.6)
//   v0.7       adds `cpu_usage_pct` (a 0–1 ratio, despite its name)
//   v0.8.0     flat `*_freq_mhz`, `*_usage_ratio`, `*_active_ratio`, `fans`, per-core arrays
//   v0.8.1+    `*_usage_ratio` renamed `*_scaled_ratio`; the v0.7 names printed as aliases
// How the figures map to the model, and which zeros are not trusted, is in docs/probes.md
// ("Apple Silicon").
//
// Supervision: the child is restarted with exponential backoff when it exits or crashes; a line
// longer than max_line_bytes or that is not a macmon JSON object is skipped, logged once and
// reported in the next snapshot's errors; no line for 3 intervals makes the metrics absent
// `stale` until lines come again; a child that stays silent for `silence_restart` is restarted.
// stop() (and the destructor) terminate the child: SIGTERM to its process group, then SIGKILL.
//
// Thread safety: the public member functions may be called from any thread. The child and the
// probe's state live on a strand of the io executor; handlers run on the io executor.
// Cancellation: cancel() completes a sample that is waiting for macmon's first line with
// operation_aborted; it does not stop the child. The io_context must outlive the probe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/config.hpp"
#include "gpustream/probe.hpp"

namespace gpustream {

#if defined(__APPLE__)
inline constexpr bool kIsMacOS = true;
#else
inline constexpr bool kIsMacOS = false;
#endif

// -- The macmon line format ------------------------------------------------------------------

/// Which generation of macmon printed a line.
enum class MacmonSchema : std::uint8_t {
  unknown,
  pairs,          // v0.4–v0.6: [freq_mhz, ratio] pairs
  pairs_cpu_pct,  // v0.7: pairs and cpu_usage_pct
  usage_ratio,    // v0.8.0: flat *_freq_mhz / *_usage_ratio / *_active_ratio
  scaled_ratio,   // v0.8.1+: flat *_scaled_ratio (and the v0.7 names as aliases)
};
/// "v0.4-v0.6", "v0.7", "v0.8.0", "v0.8.1+", "unknown".
std::string_view to_string(MacmonSchema schema) noexcept;

/// One processor (GPU, efficiency or performance CPU cluster, all CPUs), as macmon printed it.
struct MacmonCluster {
  std::optional<double> freq_mhz;      // averaged over active time; 0 when it was never active
  std::optional<double> scaled_ratio;  // 0–1, active time weighted by frequency / max frequency
  std::optional<double> active_ratio;  // 0–1, share of the interval it was active (v0.8+)
};

struct MacmonFan {
  std::string name;
  std::optional<double> rpm;
  std::optional<double> max_rpm;  // null in macmon when the SMC does not say
};

/// What `macmon pipe --soc-info` says about the machine (v0.7+).
struct MacmonSocInfo {
  std::string chip_name;  // "Apple M3 Pro"
  std::string mac_model;  // "Mac15,7"
  std::optional<int> memory_gb;
  std::optional<int> ecpu_cores;
  std::optional<int> pcpu_cores;
  std::optional<int> gpu_cores;
  friend bool operator==(const MacmonSocInfo&, const MacmonSocInfo&) = default;
};

/// One `macmon pipe` line, every field as printed (a field the line lacks stays empty; a zero is
/// kept as zero here: the rules about untrusted zeros apply when mapping to the model).
struct MacmonSample {
  MacmonSchema schema = MacmonSchema::unknown;
  std::optional<std::int64_t> timestamp_unix_ns;  // v0.6+
  MacmonCluster gpu;
  MacmonCluster ecpu;
  MacmonCluster pcpu;
  MacmonCluster cpu;  // both clusters together (no frequency)
  std::optional<double> cpu_temp_celsius;
  std::optional<double> gpu_temp_celsius;
  std::optional<std::uint64_t> ram_total_bytes;
  std::optional<std::uint64_t> ram_used_bytes;
  std::optional<std::uint64_t> swap_total_bytes;
  std::optional<std::uint64_t> swap_used_bytes;
  std::optional<double> cpu_power_watts;
  std::optional<double> gpu_power_watts;
  std::optional<double> ane_power_watts;
  std::optional<double> all_power_watts;  // CPU + GPU + ANE
  std::optional<double> sys_power_watts;  // whole machine; 0 when the Mac does not report it
  std::optional<double> ram_power_watts;
  std::optional<double> gpu_ram_power_watts;
  std::vector<MacmonFan> fans;
  std::optional<MacmonSocInfo> soc;  // with --soc-info
  /// Known keys whose value had the wrong type (ignored), e.g. "gpu_power".
  std::vector<std::string> invalid_fields;
};

/// Parses one line of `macmon pipe`. Throws JsonError when the line is not JSON, not an object,
/// or has none of macmon's fields.
MacmonSample parse_macmon_line(std::string_view line);

/// "2025-02-24T20:38:15.427569+00:00" (any number of fraction digits, `Z` or an offset) as
/// nanoseconds since the Unix epoch; nullopt when malformed.
std::optional<std::int64_t> parse_rfc3339_ns(std::string_view text) noexcept;

/// The id of the SoC's GPU (there is one per Mac).
inline constexpr std::string_view kAppleGpuId = "apple-gpu-0";

/// The GPU as detection reports it: "<chip name> GPU", or "Apple Silicon GPU".
DeviceInfo apple_device_info(const std::optional<MacmonSocInfo>& soc);

/// Sets `snap.devices` to the one GPU and `snap.host` from a sample (docs/probes.md has the rules).
/// Leaves the snapshot's identity and times alone.
void fill_apple_snapshot(GpuSnapshot& snap, const MacmonSample& sample,
                         const std::optional<MacmonSocInfo>& soc);

// -- The probe --------------------------------------------------------------------------------

struct AppleProbeOptions {
  /// The macmon binary. Empty: `macmon` from PATH, but only when `search_path` is set.
  std::string macmon;
  /// Look for `macmon` in PATH when no path is given (default: on macOS only; elsewhere detect()
  /// says that this is not macOS).
  bool search_path = kIsMacOS;
  /// macmon's interval (`-i`); also the probe's min_interval(). macmon itself enforces >= 100 ms.
  std::chrono::milliseconds interval{1000};
  /// Variables set for macmon on top of this process's environment.
  std::map<std::string, std::string> env;
  /// A longer line is skipped (and reported).
  std::size_t max_line_bytes = 64 * 1024;
  /// Restart delay after macmon exits: doubles per consecutive failure, up to restart_max.
  std::chrono::milliseconds restart_initial{1000};
  std::chrono::milliseconds restart_max{60000};
  /// stop(): SIGTERM, then SIGKILL after this long.
  std::chrono::milliseconds stop_grace{2000};
  /// A child that printed nothing for this long is restarted. Zero: never. Default: 10 intervals.
  std::optional<std::chrono::milliseconds> silence_restart;
  /// How long detection's one-shot macmon run may take.
  std::chrono::milliseconds detect_timeout{10000};
  /// How long a sample taken before macmon's first line waits for it (then: not_yet_seeded).
  /// Default: one interval + 1 s, at most 4 s.
  std::optional<std::chrono::milliseconds> first_line_wait;
  /// Clocks, in ns (steady; Unix wall). Default: steady_now_ns / wall_now_ns. Staleness and the
  /// silence restart are judged on `monotonic_clock`, so tests can drive them.
  std::function<std::int64_t()> monotonic_clock;
  std::function<std::int64_t()> wall_clock;
  /// Called on the probe's strand after each accepted line (e.g. to sample at once). Must not
  /// block; exceptions are caught and logged.
  std::function<void()> on_line;
};

/// Counters for `gpustream list`, tests and benchmarks.
struct AppleProbeStatus {
  bool running = false;
  std::optional<int> pid;
  std::size_t starts = 0;  // children started so far
  std::uint64_t lines_accepted = 0;
  std::uint64_t lines_rejected = 0;  // not JSON, not macmon's, cut off or too long
  std::string last_problem;          // the latest error message, empty when none yet
};

class AppleSiliconProbe final : public Probe {
 public:
  static constexpr std::string_view kName = "apple";

  AppleSiliconProbe(ProbeExecutors executors, AppleProbeOptions options);
  /// Terminates the child (in the background, on the strand).
  ~AppleSiliconProbe() override;
  AppleSiliconProbe(const AppleSiliconProbe&) = delete;
  AppleSiliconProbe& operator=(const AppleSiliconProbe&) = delete;

  std::string_view name() const noexcept override { return kName; }
  /// macmon's interval: sampling faster only repeats the same line.
  std::chrono::milliseconds min_interval() const noexcept override;

  /// Without a macmon path off macOS: unavailable, "not macOS". Otherwise runs macmon once with
  /// --soc-info; unavailable (with the reason) when it cannot be run or prints no macmon line.
  void async_detect(DetectHandler handler) override;
  /// The latest line as a snapshot, at once (starting the child on first use). Before the first
  /// line: waits up to first_line_wait, then metrics absent `not_yet_seeded`. No line for 3
  /// intervals: absent `stale`. The error code is set (errc::tool_failed) only when there is no
  /// fresh data and macmon is not running (it failed to start, or exited and is restarting).
  void async_sample(SampleHandler handler) override;
  void cancel() noexcept override;

  /// Terminates the child and cancels its restarts. A later async_sample starts a new one.
  void stop();
  AppleProbeStatus status() const;
  /// The SoC as the last successful detection saw it.
  std::optional<MacmonSocInfo> soc_info() const;

  class Core;

 private:
  ProbeExecutors executors_;
  std::shared_ptr<Core> core_;
};

std::shared_ptr<AppleSiliconProbe> make_apple_probe(ProbeExecutors executors,
                                                    AppleProbeOptions options = {});

/// Options from a Config: the interval of "apple" (at least 100 ms, macmon's floor) and the
/// settings object config.probe_settings["apple"] = {"macmon": "PATH"}. Throws
/// std::invalid_argument naming a bad or unknown setting.
AppleProbeOptions apple_probe_options(const Config& config);
/// The registry's factory: make_apple_probe(executors, apple_probe_options(config)).
ProbePtr make_apple_probe_from_config(const Config& config, ProbeExecutors executors);

}  // namespace gpustream
