// gpustream/probes/intel_probe.hpp — Intel GPUs (i915 and xe) from sysfs, hwmon and DRM fdinfo,
// optionally augmented by Level Zero Sysman.
//
// Devices: every <sysfs>/class/drm/cardN and renderD<M> whose device/vendor is 0x8086 and whose
// driver is i915 or xe; a card node and a render node of one PCI function are one device (keyed
// by PCI bus id). Per device: graphics clock (i915 gt_act_freq_mhz or gt/gt*/rps_act_freq_mhz;
// xe device/tile*/gt*/freq0/act_freq), energy from the hwmon named "i915"/"xe" (energy1_input in
// uJ; on xe the package counter energy2_input when the card one reads 0), power from energy
// deltas, power limit, temperature, fan, VRAM on discrete xe (tile*/vram*/). Parts without that
// hwmon (integrated) report those metrics absent `unsupported`.
//
// Engine utilization per class and per-process memory/engine use come from one walk of
// <procfs>/*/fdinfo (a gpustream::drm::ClientTracker kept between samples): i915
// `drm-engine-<class>` ns over wall time divided by capacity, xe `drm-cycles-<class>` over
// `drm-total-cycles-<class>`. The first sample of a client only seeds; a client that vanishes or
// whose counters go backwards contributes nothing (no negative values, no spikes). Memory per
// process is the sum of drm-resident-* regions (drm-total-* where no residency is printed) over
// its distinct clients, and unknown (gpu_memory_bytes unset, never 0) when a client prints no
// memory keys (i915 before its memory stats). Output processes are
// sorted by pid; their name and host RSS come from the shared proc::ProcessTable
// (<procfs>/<pid>/comm and statm).
//
// Level Zero (optional): the loader is opened at run time, devices are matched by PCI bus id and
// fill what sysfs could not (engine groups incl. compute, energy with reset guard, temperature,
// frequency, memory). Sysfs stays in charge where both have a value; the device attribute
// "metrics_source" says "sysfs" or "sysfs+level-zero". Loaders without zesInit (Debian 12's
// libze1 1.8.x) need ZES_ENABLE_SYSMAN=1 in the environment before the first zeInit: the SDK
// never sets environment variables; an embedding program must set it before starting threads.
//
// Thread safety: detect()/sample() run on the work pool, one at a time (the Scheduler
// guarantees it); last_walk_stats() may be called from any thread.
// Cancellation: a sample is bounded file reads and a capped /proc walk; nothing to cancel.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/config.hpp"
#include "gpustream/library_session.hpp"
#include "gpustream/log_once.hpp"
#include "gpustream/probes/drm_client_tracker.hpp"
#include "gpustream/probes/drm_fdinfo.hpp"
#include "gpustream/probes/process_table.hpp"

namespace gpustream {

namespace intel {

/// One Intel DRM device as found in sysfs.
struct Card {
  std::string pci_bus_id;       // "0000:03:00.0"
  std::string driver;           // "i915" or "xe"
  std::string card;             // "card1" (empty when only a render node exists)
  std::string render;           // "renderD129" (empty when only a card node exists)
  std::string device_dir;       // <sysfs>/class/drm/<node>/device
  std::string node_dir;         // <sysfs>/class/drm/<card or render>
  std::string hwmon_dir;        // the hwmon named after the driver; empty when there is none
  std::uint32_t device_id = 0;  // PCI device id (device/device)
  bool discrete = false;        // not on bus 00 (integrated parts sit at 0000:00:02.0)
};

/// The Intel cards under <sysfs_root>/class/drm, sorted by PCI bus id.
std::vector<Card> discover_cards(const std::string& sysfs_root);

/// Engine class names as the probe reports them: xe's rcs/bcs/vcs/vecs/ccs become render, copy,
/// video, video-enhance, compute; i915 names are kept.
std::string engine_name(std::string_view fdinfo_class);

}  // namespace intel

class LevelZeroAugment;
class IntelEngineAccounting;

struct IntelProbeOptions {
  SystemPaths paths;
  /// The Level Zero loader; empty disables the augment.
  std::string level_zero_library = "libze_loader.so.1";
  LibrarySessionMode session_mode = LibrarySessionMode::persistent;
  /// A process that starts using a GPU is reported within this time (config
  /// intel.process_freshness_ms); see drm::TrackerOptions::freshness.
  std::chrono::milliseconds process_freshness{5000};
  /// Every process's fd count is compared once per this period (config intel.process_fd_count_ms;
  /// 0: only after an open); see drm::TrackerOptions::count_period.
  std::chrono::milliseconds process_fd_count_period{300000};
  /// Every process is fully scanned once per this period (config intel.process_sweep_ms; 0: the
  /// tracker's default); see drm::TrackerOptions::sweep_period.
  std::chrono::milliseconds process_sweep{0};
  std::size_t max_clients = 4096;  // DRM clients tracked at most (the memory bound)
  /// Monotonic time of a sample in ns (for i915 engine-ns and power deltas). Default:
  /// steady_now_ns. Must not return 0.
  std::function<std::int64_t()> monotonic_clock;
};

class IntelGpuProbe final : public BlockingProbe {
 public:
  static constexpr std::string_view kName = "intel";

  IntelGpuProbe(ProbeExecutors executors, IntelProbeOptions options);
  ~IntelGpuProbe() override;

  std::string_view name() const noexcept override { return kName; }
  std::chrono::milliseconds min_interval() const noexcept override {
    return std::chrono::milliseconds{100};
  }

  /// What the last fdinfo sample saw (permission skips, vanished processes, scans, checks).
  drm::WalkStats last_walk_stats() const;
  /// One line about Level Zero: "not loaded: ...", "no Level Zero devices", "2 devices".
  std::string level_zero_status() const;

 protected:
  /// Available when at least one Intel card is found; else "no Intel GPU (i915/xe) under ...".
  /// The Level Zero status is logged once.
  Detection detect() override;
  GpuSnapshot sample() override;

 private:
  struct DeviceState;
  DeviceState& state_for(const std::string& pci_bus_id);

  IntelProbeOptions options_;
  std::unique_ptr<LevelZeroAugment> level_zero_;
  std::unique_ptr<IntelEngineAccounting> engines_;
  proc::ProcessTable process_table_;  // names and host RSS of the processes, kept between samples
  std::map<std::string, std::unique_ptr<DeviceState>> states_;  // by PCI bus id
  mutable std::mutex stats_mu_;
  drm::WalkStats walk_stats_;                    // guarded by stats_mu_
  std::unique_ptr<drm::ClientTracker> clients_;  // used by one sample() at a time
  LogOnce log_once_;
};

std::shared_ptr<IntelGpuProbe> make_intel_probe(ProbeExecutors executors,
                                                IntelProbeOptions options = {});

/// The "intel" section of a Config, read and checked (level_zero_library, the tracker periods),
/// with its paths and library session: the one reader the factory and the doctor use. Throws
/// std::invalid_argument for a bad setting.
IntelProbeOptions intel_options_from_config(const Config& config);
/// The registry's factory: paths from config.paths, the session mode from
/// resolve_library_session_mode(config.library_session), and from
/// config.probe_settings["intel"]: "level_zero_library" (string; "" disables Level Zero) and
/// "process_freshness_ms", "process_fd_count_ms", "process_sweep_ms" (positive numbers). Throws
/// std::invalid_argument for a setting of the wrong type.
ProbePtr make_intel_probe_from_config(const Config& config, ProbeExecutors executors);

}  // namespace gpustream
