// The "nvidia" row of the probe table (probes/registry.cpp lists it): its flags, its settings
// reader, its doctor checks and what `gpustream capture` records for it.
#include <boost/json.hpp>

#include "gpustream/probes/capture.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/probes/readers.hpp"
#include "gpustream/probes/registry.hpp"
#include "nvidia/nvml_record.hpp"
#include "nvidia/smi_backend.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream {
namespace doctor::detail {
void check_nvidia(const Context& c);
}
namespace {

constexpr ProbeFlag kFlags[] = {
    {"--nvml-library", "library", "NVML library (default libnvidia-ml.so.1)"},
    {"--nvidia-smi", "nvidia_smi", "nvidia-smi binary for the fallback"},
};

void read_settings(const Config& config) { (void)nvidia_options_from_config(config); }

/// The pids of nvidia-smi's compute apps ("uuid, pid, memory, name": the second cell).
std::vector<std::int64_t> compute_app_pids(std::string_view text) {
  std::vector<std::int64_t> pids;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const auto c1 = line.find(',');
    if (c1 == std::string_view::npos) continue;
    const auto c2 = line.find(',', c1 + 1);
    if (auto pid = readers::parse_int(readers::trim(line.substr(c1 + 1, c2 - c1 - 1))))
      pids.push_back(*pid);
  }
  return pids;
}

/// One pass of the probe's NVML calls, as a scenario of the fake NVML (nvml/scenario.txt).
capture::Recorded record_scenario(const std::string& library) {
  const auto r = capture::record_nvml(library);
  capture::Recorded out;
  out.manifest = {{"library", library},
                  {"loaded", r.loaded},
                  {"initialized", r.initialized},
                  {"devices", r.devices}};
  if (!r.driver_version.empty()) out.manifest["driver_version"] = r.driver_version;
  boost::json::array notes;
  for (const auto& n : r.notes) notes.emplace_back(n);
  out.manifest["notes"] = std::move(notes);
  if (!r.loaded)
    out.findings.push_back(r.notes.empty() ? "NVML not loaded" : r.notes.front());
  else if (!r.initialized)
    out.findings.push_back(r.notes.empty() ? "NVML init failed" : r.notes.front());
  out.files.emplace_back("nvml/scenario.txt", r.scenario);
  out.manifest["scenario"] = "nvml/scenario.txt";
  out.pids = r.pids;
  return out;
}

void capture_sources(capture::Sources& s, const Config& config) {
  const auto options = nvidia_options_from_config(config);
  // The nvidia-smi fallback (smi_backend.cpp): the full query, the smaller ones for drivers
  // that reject a field (power.draw before R535, without compute_cap, basic), and the compute
  // apps.
  using namespace nvidia_detail;
  const auto without_program = [](std::vector<std::string> argv) {
    argv.erase(argv.begin());
    return argv;
  };
  const std::string tool = "nvidia-smi";
  const std::string setting = "nvidia.nvidia_smi";
  s.tools.push_back({tool, setting, without_program(smi_gpu_argv("x", kSmiGpuFields))});
  s.tools.push_back({tool, setting, without_program(smi_gpu_argv("x", kSmiPowerDrawGpuFields))});
  s.tools.push_back(
      {tool, setting, without_program(smi_gpu_argv("x", kSmiPowerDrawNoCapGpuFields))});
  s.tools.push_back({tool, setting, without_program(smi_gpu_argv("x", kSmiBasicGpuFields))});
  capture::ToolCommand apps{tool, setting, without_program(smi_apps_argv("x"))};
  apps.pids = &compute_app_pids;
  s.tools.push_back(std::move(apps));
  s.tools.push_back({tool, setting, {"--version"}, {}, true});
  s.recordings.push_back(
      {"nvml", [library = options.nvml_library] { return record_scenario(library); }});
  s.replay_flags.push_back({"--nvidia-smi", "tools/nvidia-smi"});
  s.replay_flags.push_back({"--nvml-library", "nvml/libnvidia-ml.so.1"});
  // The fake NVML reads its scenario at every nvmlInit.
  s.replay_env.push_back({"GPUSTREAM_FAKE_NVML_SCENARIO", "nvml/scenario.txt"});
  s.pci_vendors.emplace_back(0x10de, "nvidia");
}

}  // namespace

const ProbeRow& nvidia_probe_row() noexcept {
  static constexpr ProbeRow kRow{
      NvidiaProbe::kName,
      "NVIDIA GPUs through NVML (--nvml-library PATH), nvidia-smi as the fallback",
      NvidiaProbe::kName,
      ProbeKind::gpu,
      kFlags,
      &make_nvidia_probe_from_config,
      &read_settings,
      &doctor::detail::check_nvidia,
      &capture_sources};
  return kRow;
}

}  // namespace gpustream
