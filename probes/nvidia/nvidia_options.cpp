// NvidiaProbeOptions from a Config (`probe_settings["nvidia"]`, paths, library_session).
#include <stdexcept>
#include <string>

#include <boost/json.hpp>

#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/probes/settings.hpp"

namespace gpustream {

NvidiaProbeOptions nvidia_options_from_config(const Config& config) {
  NvidiaProbeOptions o;
  o.paths = config.paths;
  o.library_session = config.library_session;
  constexpr std::string_view kName = "nvidia";
  const auto* section =
      settings::section(config, kName, {"library", "nvidia_smi", "use", "nvidia_smi_timeout_ms"});
  if (auto lib = settings::string_at(section, kName, "library")) o.nvml_library = std::move(*lib);
  if (auto smi = settings::string_at(section, kName, "nvidia_smi")) o.nvidia_smi = std::move(*smi);
  if (const auto use = settings::string_at(section, kName, "use")) {
    if (*use == "auto") {
      o.use = NvidiaProbeOptions::Use::automatic;
    } else if (*use == "nvml") {
      o.use = NvidiaProbeOptions::Use::nvml_only;
    } else if (*use == "nvidia-smi") {
      o.use = NvidiaProbeOptions::Use::nvidia_smi_only;
    } else {
      throw std::invalid_argument(
          "nvidia.use: expected \"auto\", \"nvml\" or \"nvidia-smi\", got \"" + *use + "\"");
    }
  }
  if (const auto ms = settings::positive_at(section, kName, "nvidia_smi_timeout_ms")) {
    if (*ms > 600000)
      throw std::invalid_argument("nvidia.nvidia_smi_timeout_ms: expected milliseconds, 1..600000");
    o.nvidia_smi_timeout = std::chrono::milliseconds{*ms};
  }
  return o;
}

ProbePtr make_nvidia_probe_from_config(const Config& config, ProbeExecutors executors) {
  return make_nvidia_probe(std::move(executors), nvidia_options_from_config(config));
}

}  // namespace gpustream
