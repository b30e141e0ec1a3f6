// What the probes read, named once for `gpustream capture` (gpustream/probes/capture.hpp). Each
// list below follows the code that reads it: keep them together when a probe starts reading
// something new (the capture round-trip test, tests/cli/capture_test.cpp, fails otherwise).
#include "gpustream/probes/capture.hpp"

#include <algorithm>
#include <string_view>

#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/readers.hpp"
#include "gpustream/probes/sysfs.hpp"
#include "nvidia/smi_backend.hpp"

namespace gpustream::capture {
namespace {

using readers::join_path;

/// The parts, joined into one string (paths built in loops).
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

/// Most DRM nodes (card*, renderD*) examined.
constexpr std::size_t kMaxNodes = 64;
/// macmon clamps -i to at least this (probes/apple/apple_detect.cpp: the detection run).
constexpr int kMacmonDetectIntervalMs = 100;

/// Numbered entries of `rel` (relative to `root`), at most kMaxNumberedEntries of them.
std::vector<sysfs::Numbered> numbered(const std::string& root, const std::string& rel,
                                      std::string_view prefix) {
  auto out = sysfs::numbered_entries(join_path(root, rel), prefix);
  if (out.size() > kMaxNumberedEntries) out.resize(kMaxNumberedEntries);
  return out;
}

/// hwmon files: sysfs::read_temperatures, the AMD probe's read_hwmon, the Intel probe's
/// find_hwmon / read_energy / read_power_limit / fan.
void add_hwmon(std::vector<SysfsInput>& out, const std::string& hw) {
  out.push_back({concat(hw, "/name")});
  for (int i = 1; i <= sysfs::kMaxTemperatureSensors; ++i) {
    out.push_back({concat(hw, "/temp", std::to_string(i), "_input")});
    out.push_back({concat(hw, "/temp", std::to_string(i), "_label")});
  }
  for (const char* f : {"power1_average", "power1_input", "power1_cap", "power1_max",
                        "power1_rated_max", "power2_max", "power2_rated_max", "energy1_input",
                        "energy2_input", "fan1_input", "fan2_input", "fan3_input"})
    out.push_back({concat(hw, "/", f)});
  for (int i = 1; i <= 4; ++i) {
    out.push_back({concat(hw, "/freq", std::to_string(i), "_input")});
    out.push_back({concat(hw, "/freq", std::to_string(i), "_label")});
  }
}

}  // namespace

std::vector<SysfsInput> sysfs_inputs(const std::string& sysfs_root) {
  std::vector<SysfsInput> out;
  const std::string drm = "class/drm";
  auto nodes = numbered(sysfs_root, drm, "card");
  for (auto& r : numbered(sysfs_root, drm, "renderD")) nodes.push_back(std::move(r));
  if (nodes.size() > kMaxNodes) nodes.resize(kMaxNodes);
  for (const auto& [number, name] : nodes) {
    const auto node = concat(drm, "/", name);
    const auto dev = concat(node, "/device");
    out.push_back({node});
    out.push_back({dev});
    // Identity: AmdSysfsProbe::scan_cards / card_name, intel::discover_cards, sysfs::
    // pci_bus_id_of (uevent, else the device link's name) and driver_of (uevent, else the
    // driver link's name).
    for (const char* f : {"vendor", "device", "revision", "uevent", "product_name"})
      out.push_back({concat(dev, "/", f)});
    out.push_back({concat(dev, "/driver"), /*follow=*/false});
    out.push_back({concat(dev, "/power/runtime_status")});
    // AmdSysfsProbe::sample_card.
    for (const char* f :
         {"gpu_busy_percent", "mem_busy_percent", "mem_info_vram_total", "mem_info_vram_used",
          "mem_info_gtt_total", "mem_info_gtt_used", "pp_dpm_sclk", "pp_dpm_mclk", "unique_id"})
      out.push_back({concat(dev, "/", f)});
    for (const auto& hw : numbered(sysfs_root, concat(dev, "/hwmon"), "hwmon"))
      add_hwmon(out, concat(dev, "/hwmon/", hw.name));
    // Intel xe: tile<N>/gt<M>/freq0 and tile<N>/vram<M> (intel_sysfs.cpp read_clocks/read_vram).
    for (const auto& tile : numbered(sysfs_root, dev, "tile")) {
      const auto t = concat(dev, "/", tile.name);
      for (const auto& gt : numbered(sysfs_root, t, "gt")) {
        out.push_back({concat(t, "/", gt.name, "/freq0/act_freq")});
        out.push_back({concat(t, "/", gt.name, "/freq0/cur_freq")});
      }
      for (const auto& v : numbered(sysfs_root, t, "vram")) {
        out.push_back({concat(t, "/", v.name, "/total_bytes")});
        out.push_back({concat(t, "/", v.name, "/used_bytes")});
      }
    }
    // Intel i915: the node's gt/gt<N>/rps_*_freq_mhz, else gt_*_freq_mhz.
    for (const auto& gt : numbered(sysfs_root, concat(node, "/gt"), "gt")) {
      out.push_back({concat(node, "/gt/", gt.name, "/rps_act_freq_mhz")});
      out.push_back({concat(node, "/gt/", gt.name, "/rps_cur_freq_mhz")});
    }
    out.push_back({concat(node, "/gt_act_freq_mhz")});
    out.push_back({concat(node, "/gt_cur_freq_mhz")});
  }
  return out;
}

std::vector<ToolCommand> tool_commands(std::chrono::milliseconds macmon_interval) {
  std::vector<ToolCommand> out;
  const auto without_program = [](std::vector<std::string> argv) {
    argv.erase(argv.begin());
    return argv;
  };
  // AmdProbe (amd_cli_probe.cpp): static once per detection, metric and process every sample.
  for (std::vector<std::string> args :
       {std::vector<std::string>{"static", "--json"}, {"metric", "--json"}, {"process", "--json"}})
    out.push_back({"amd-smi", "amd.amd_smi", std::move(args), {}, false});
  out.push_back({"amd-smi", "amd.amd_smi", {"version"}, {}, true});
  out.push_back({"rocm-smi", "amd.rocm_smi", amd_cli::rocm_smi_args(), {}, false});
  out.push_back({"rocm-smi", "amd.rocm_smi", {"--version"}, {}, true});
  // The NVIDIA probe's nvidia-smi fallback (smi_backend.cpp): the full query, the basic one for
  // drivers that reject a field, and the compute apps.
  using namespace nvidia_detail;
  out.push_back({"nvidia-smi",
                 "nvidia.nvidia_smi",
                 without_program(smi_gpu_argv("x", kSmiGpuFields)),
                 {},
                 false});
  out.push_back({"nvidia-smi",
                 "nvidia.nvidia_smi",
                 without_program(smi_gpu_argv("x", kSmiBasicGpuFields)),
                 {},
                 false});
  out.push_back(
      {"nvidia-smi", "nvidia.nvidia_smi", without_program(smi_apps_argv("x")), {}, false});
  out.push_back({"nvidia-smi", "nvidia.nvidia_smi", {"--version"}, {}, true});
  // AppleSiliconProbe: the detection runs (with --soc-info, then without for macmon < 0.7) and
  // the persistent `macmon -i <interval> pipe` child, recorded a few samples long.
  const auto detect = std::to_string(kMacmonDetectIntervalMs);
  out.push_back(
      {"macmon", "apple.macmon", {"-i", detect, "pipe", "-s", "1", "--soc-info"}, {}, false});
  out.push_back({"macmon", "apple.macmon", {"-i", detect, "pipe", "-s", "1"}, {}, false});
  const auto every =
      std::to_string(std::max<long long>(macmon_interval.count(), kMacmonDetectIntervalMs));
  out.push_back(
      {"macmon", "apple.macmon", {"-i", every, "pipe"}, {"-i", every, "pipe", "-s", "3"}, false});
  out.push_back({"macmon", "apple.macmon", {"--version"}, {}, true});
  return out;
}

}  // namespace gpustream::capture
