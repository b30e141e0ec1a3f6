#include <stdexcept>

#include <boost/json.hpp>

#include "gpustream/probes/intel_probe.hpp"

namespace gpustream {

ProbePtr make_intel_probe_from_config(const Config& config, ProbeExecutors executors) {
  IntelProbeOptions options;
  options.paths = config.paths;
  options.session_mode = resolve_library_session_mode(config.library_session);
  if (const auto* section = config.probe_settings.if_contains("intel")) {
    if (!section->is_object()) throw std::invalid_argument("settings of 'intel' must be an object");
    const auto& obj = section->get_object();
    if (const auto* lib = obj.if_contains("level_zero_library")) {
      if (!lib->is_string()) throw std::invalid_argument("intel.level_zero_library must be a string");
      options.level_zero_library = std::string(lib->get_string());
    }
    if (const auto* max = obj.if_contains("max_processes")) {
      if (!max->is_int64() || max->get_int64() <= 0)
        throw std::invalid_argument("intel.max_processes must be a positive integer");
      options.max_processes = static_cast<std::size_t>(max->get_int64());
    }
  }
  return make_intel_probe(std::move(executors), std::move(options));
}

}  // namespace gpustream
