// The "amd" registry row: chooses between the sysfs/fdinfo path and the CLIs.
#include <stdexcept>
#include <string>

#include <boost/json.hpp>

#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/settings.hpp"

namespace gpustream {

ProbePtr make_amd_probe_from_config(const Config& config, ProbeExecutors executors) {
  const auto* section =
      settings::section(config, "amd",
                        {"source", "amd_smi", "rocm_smi", "amdgpu_ids", "process_freshness_ms",
                         "process_fd_count_ms", "process_sweep_ms"});
  auto source = settings::string_at(section, "amd", "source").value_or("auto");
  // Checked whichever source is chosen: a bad value is an error even where it does not apply.
  const auto freshness_ms = settings::positive_at(section, "amd", "process_freshness_ms");
  const auto fd_count_ms = settings::positive_at(section, "amd", "process_fd_count_ms");
  const auto sweep_ms = settings::positive_at(section, "amd", "process_sweep_ms");
  const auto amd_smi = settings::string_at(section, "amd", "amd_smi");
  const auto rocm_smi = settings::string_at(section, "amd", "rocm_smi");
  const auto amdgpu_ids =
      settings::string_at(section, "amd", "amdgpu_ids", settings::Empty::allowed);
  if (source != "auto" && source != "sysfs" && source != "amd-smi" && source != "rocm-smi")
    throw std::invalid_argument("unknown amd source '" + source +
                                "' (use auto, sysfs, amd-smi or rocm-smi)");
  // auto: the sysfs path when amdgpu devices are readable, else amd-smi.
  if (source == "auto") source = amd_sysfs_available(config.paths) ? "sysfs" : "amd-smi";
  if (source == "sysfs") {
    AmdSysfsProbeOptions options;
    options.paths = config.paths;
    if (amdgpu_ids) options.amdgpu_ids = *amdgpu_ids;  // "": no lookup
    if (freshness_ms) options.process_freshness = std::chrono::milliseconds(*freshness_ms);
    if (fd_count_ms) options.process_fd_count_period = std::chrono::milliseconds(*fd_count_ms);
    if (sweep_ms) options.process_sweep = std::chrono::milliseconds(*sweep_ms);
    return make_amd_sysfs_probe(std::move(executors), std::move(options));
  }
  AmdProbeOptions options;
  options.tool = source == "amd-smi" ? AmdTool::amd_smi : AmdTool::rocm_smi;
  options.procfs_root = config.paths.procfs_root;
  options.path = (source == "amd-smi" ? amd_smi : rocm_smi).value_or("");
  return make_amd_cli_probe(std::move(executors), std::move(options));
}

}  // namespace gpustream
