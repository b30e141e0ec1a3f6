// NvidiaProbeOptions from a Config (`probe_settings["nvidia"]`, paths, library_session).
#include <stdexcept>
#include <string>

#include <boost/json.hpp>

#include "gpustream/probes/nvidia_probe.hpp"

namespace gpustream {
namespace {

[[noreturn]] void bad(std::string_view key, const std::string& why) {
  throw std::invalid_argument("nvidia." + std::string(key) + ": " + why);
}

std::string text(const boost::json::value& v, std::string_view key) {
  if (!v.is_string() || v.get_string().empty()) bad(key, "expected a non-empty string");
  return std::string(v.get_string());
}

}  // namespace

NvidiaProbeOptions nvidia_options_from_config(const Config& config) {
  NvidiaProbeOptions o;
  o.paths = config.paths;
  o.library_session = config.library_session;
  const auto it = config.probe_settings.find("nvidia");
  if (it == config.probe_settings.end()) return o;
  if (!it->value().is_object()) bad("", "expected an object of settings");
  for (const auto& [key, value] : it->value().get_object()) {
    if (key == "library") {
      o.nvml_library = text(value, key);
    } else if (key == "nvidia_smi") {
      o.nvidia_smi = text(value, key);
    } else if (key == "use") {
      const auto use = text(value, key);
      if (use == "auto") {
        o.use = NvidiaProbeOptions::Use::automatic;
      } else if (use == "nvml") {
        o.use = NvidiaProbeOptions::Use::nvml_only;
      } else if (use == "nvidia-smi") {
        o.use = NvidiaProbeOptions::Use::nvidia_smi_only;
      } else {
        bad(key, "expected \"auto\", \"nvml\" or \"nvidia-smi\", got \"" + use + "\"");
      }
    } else if (key == "nvidia_smi_timeout_ms") {
      const auto ms = value.is_int64() ? value.get_int64() : -1;
      if (ms < 1 || ms > 600000) bad(key, "expected milliseconds, 1..600000");
      o.nvidia_smi_timeout = std::chrono::milliseconds{ms};
    } else {
      bad(key, "unknown setting (known: library, nvidia_smi, use, nvidia_smi_timeout_ms)");
    }
  }
  return o;
}

}  // namespace gpustream
