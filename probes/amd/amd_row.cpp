// The "amd" row of the probe table (probes/registry.cpp lists it): its flags, its settings
// reader, its doctor checks and what `gpustream capture` records for it.
#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/capture.hpp"
#include "gpustream/probes/registry.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream {
namespace doctor::detail {
void check_amd(const Context& c);
}
namespace {

using capture::concat;

constexpr ProbeFlag kFlags[] = {
    {"--amd-smi", "amd_smi", "amd-smi binary"},
    {"--rocm-smi", "rocm_smi", "rocm-smi binary"},
    {"--amd-source", "source", "AMD source: auto, library, sysfs, cli (amd-smi), rocm-smi"},
    {"--amd-smi-library", "library", "AMD SMI library (default libamd_smi.so)"},
    {"--amdgpu-ids", "amdgpu_ids", "libdrm amdgpu.ids for AMD names (\"\": none)"},
};

void read_settings(const Config& config) { (void)amd_settings(config); }

/// The pids of amd-smi's process list.
std::vector<std::int64_t> process_pids(std::string_view output) {
  std::vector<std::int64_t> pids;
  try {
    for (const auto& [gpu, list] : amd_cli::parse_amd_smi_process(output))
      for (const auto& p : list) pids.push_back(p.process.pid);
  } catch (const std::exception&) {
    // Not parseable: the replay shows the same parse error, with or without these files.
  }
  return pids;
}

/// AmdSysfsProbe::sample_card's files of one node.
void node_inputs(std::vector<capture::SysfsInput>& out, const std::string& /*sysfs_root*/,
                 const std::string& /*node*/, const std::string& device) {
  for (const char* f : {"gpu_busy_percent", "mem_busy_percent", "mem_info_vram_total",
                        "mem_info_vram_used", "mem_info_gtt_total", "mem_info_gtt_used",
                        "pp_dpm_sclk", "pp_dpm_mclk", "unique_id", "gpu_metrics"})
    out.push_back({concat(device, "/", f)});
}

void capture_sources(capture::Sources& s, const Config& config) {
  const auto settings = amd_settings(config);
  s.node_inputs.emplace_back(&node_inputs);
  // AmdProbe (amd_cli_probe.cpp): static once per detection, metric and process every sample.
  s.tools.push_back({"amd-smi", "amd.amd_smi", {"static", "--json"}});
  s.tools.push_back({"amd-smi", "amd.amd_smi", {"metric", "--json"}});
  capture::ToolCommand process{"amd-smi", "amd.amd_smi", {"process", "--json"}};
  process.pids = &process_pids;
  s.tools.push_back(std::move(process));
  s.tools.push_back({"amd-smi", "amd.amd_smi", {"version"}, {}, true});
  s.tools.push_back({"rocm-smi", "amd.rocm_smi", amd_cli::rocm_smi_args()});
  s.tools.push_back({"rocm-smi", "amd.rocm_smi", {"--version"}, {}, true});
  s.files.push_back(
      {"amdgpu_ids", settings.amdgpu_ids.value_or(kDefaultAmdgpuIdsPath), "share/amdgpu.ids"});
  s.replay_flags.push_back({"--amd-smi", "tools/amd-smi"});
  s.replay_flags.push_back({"--rocm-smi", "tools/rocm-smi"});
  s.replay_flags.push_back({"--amdgpu-ids", "share/amdgpu.ids"});
  s.pci_vendors.emplace_back(0x1002, "amd");
}

}  // namespace

const ProbeRow& amd_probe_row() noexcept {
  static constexpr ProbeRow kRow{
      AmdSysfsProbe::kName,
      "AMD GPUs: AMD SMI library, amdgpu sysfs + DRM fdinfo, or the CLIs (--amd-source "
      "auto|library|sysfs|cli)",
      AmdSysfsProbe::kName,
      ProbeKind::gpu,
      kFlags,
      &make_amd_probe_from_config,
      &read_settings,
      &doctor::detail::check_amd,
      &capture_sources};
  return kRow;
}

}  // namespace gpustream
