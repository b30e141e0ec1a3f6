// The "intel" row of the probe table (probes/registry.cpp lists it): its flags, its settings
// reader, its doctor checks and what `gpustream capture` records for it.
#include "gpustream/probes/capture.hpp"
#include "gpustream/probes/intel_probe.hpp"
#include "gpustream/probes/registry.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream {
namespace doctor::detail {
void check_intel(const Context& c);
}
namespace {

using capture::concat;
using capture::numbered;

constexpr ProbeFlag kFlags[] = {
    {"--level-zero-library", "level_zero_library", "Level Zero loader (libze_loader.so.1)"},
};

constexpr ProbeEnvironment kEnvironment[] = {
    {"ZES_ENABLE_SYSMAN", "1",
     "Level Zero loaders without zesInit (Debian 12's libze1 1.8.x) enable Sysman only through "
     "this variable, which zeInit reads"},
};

void read_settings(const Config& config) { (void)intel_options_from_config(config); }

/// The clock and memory files of one node (intel_sysfs.cpp read_clocks/read_vram).
void node_inputs(std::vector<capture::SysfsInput>& out, const std::string& sysfs_root,
                 const std::string& node, const std::string& device) {
  // xe: tile<N>/gt<M>/freq0 and tile<N>/vram<M>.
  for (const auto& tile : numbered(sysfs_root, device, "tile")) {
    const auto t = concat(device, "/", tile.name);
    for (const auto& gt : numbered(sysfs_root, t, "gt")) {
      out.push_back({concat(t, "/", gt.name, "/freq0/act_freq")});
      out.push_back({concat(t, "/", gt.name, "/freq0/cur_freq")});
    }
    for (const auto& v : numbered(sysfs_root, t, "vram")) {
      out.push_back({concat(t, "/", v.name, "/total_bytes")});
      out.push_back({concat(t, "/", v.name, "/used_bytes")});
    }
  }
  // i915: the node's gt/gt<N>/rps_*_freq_mhz, else gt_*_freq_mhz.
  for (const auto& gt : numbered(sysfs_root, concat(node, "/gt"), "gt")) {
    out.push_back({concat(node, "/gt/", gt.name, "/rps_act_freq_mhz")});
    out.push_back({concat(node, "/gt/", gt.name, "/rps_cur_freq_mhz")});
  }
  out.push_back({concat(node, "/gt_act_freq_mhz")});
  out.push_back({concat(node, "/gt_cur_freq_mhz")});
}

void capture_sources(capture::Sources& s, const Config& /*config*/) {
  s.node_inputs.emplace_back(&node_inputs);
  // Level Zero is not recorded: a replay points the probe at a loader that is not there.
  s.replay_flags.push_back({"--level-zero-library", "level-zero/not-captured/libze_loader.so.1"});
  s.pci_vendors.emplace_back(0x8086, "intel");
}

}  // namespace

const ProbeRow& intel_probe_row() noexcept {
  static constexpr ProbeRow kRow{
      IntelGpuProbe::kName,
      "Intel GPUs (i915/xe): sysfs, hwmon, DRM fdinfo; Level Zero Sysman when present",
      IntelGpuProbe::kName,
      ProbeKind::gpu,
      kFlags,
      &make_intel_probe_from_config,
      &read_settings,
      &doctor::detail::check_intel,
      &capture_sources,
      kEnvironment};
  return kRow;
}

}  // namespace gpustream
