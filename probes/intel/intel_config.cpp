// IntelProbeOptions from a Config (`probe_settings["intel"]`, paths, library_session).
#include <stdexcept>

#include <boost/json.hpp>

#include "gpustream/probes/intel_probe.hpp"
#include "gpustream/probes/settings.hpp"

namespace gpustream {

IntelProbeOptions intel_options_from_config(const Config& config) {
  IntelProbeOptions options;
  options.paths = config.paths;
  options.session_mode = resolve_library_session_mode(config.library_session);
  const auto* section = settings::section(
      config, "intel",
      {"level_zero_library", "process_freshness_ms", "process_fd_count_ms", "process_sweep_ms"});
  if (auto lib = settings::string_at(section, "intel", "level_zero_library",
                                     settings::Empty::allowed))  // "": no Level Zero
    options.level_zero_library = std::move(*lib);
  settings::tracker_periods_at(section, "intel")
      .apply(options.process_freshness, options.process_fd_count_period, options.process_sweep);
  return options;
}

ProbePtr make_intel_probe_from_config(const Config& config, ProbeExecutors executors) {
  return make_intel_probe(std::move(executors), intel_options_from_config(config));
}

}  // namespace gpustream
