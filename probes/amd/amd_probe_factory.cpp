// The "amd" registry row: chooses between the sysfs/fdinfo path and the CLIs.
#include <stdexcept>
#include <string>

#include <boost/json.hpp>

#include "gpustream/probes/amd_probe.hpp"

namespace gpustream {
namespace {

std::string setting(const Config& config, std::string_view key, std::string fallback) {
  const auto* amd = config.probe_settings.if_contains("amd");
  if (!amd || !amd->is_object()) return fallback;
  const auto* v = amd->as_object().if_contains(key);
  if (!v || !v->is_string()) return fallback;
  return std::string(v->as_string());
}

}  // namespace

ProbePtr make_amd_probe(const Config& config, ProbeExecutors executors) {
  auto source = setting(config, "source", "auto");
  if (source != "auto" && source != "sysfs" && source != "amd-smi" && source != "rocm-smi")
    throw std::invalid_argument("unknown amd source '" + source +
                                "' (use auto, sysfs, amd-smi or rocm-smi)");
  // auto: the sysfs path when amdgpu devices are readable, else amd-smi.
  if (source == "auto") source = amd_sysfs_available(config.paths) ? "sysfs" : "amd-smi";
  if (source == "sysfs") {
    AmdSysfsProbeOptions options;
    options.paths = config.paths;
    return make_amd_sysfs_probe(std::move(executors), std::move(options));
  }
  AmdProbeOptions options;
  options.tool = source == "amd-smi" ? AmdTool::amd_smi : AmdTool::rocm_smi;
  options.path = setting(config, source == "amd-smi" ? "amd_smi" : "rocm_smi", "");
  return make_amd_cli_probe(std::move(executors), std::move(options));
}

}  // namespace gpustream
