// The "apple" row of the probe table (probes/registry.cpp lists it): its flags, its settings
// reader, its doctor checks and what `gpustream capture` records for it.
#include <algorithm>

#include "gpustream/probes/apple_probe.hpp"
#include "gpustream/probes/capture.hpp"
#include "gpustream/probes/registry.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream {
namespace doctor::detail {
void check_apple(const Context& c);
}
namespace {

constexpr ProbeFlag kFlags[] = {
    {"--macmon", "macmon", "macmon binary"},
};

/// macmon clamps -i to at least this (apple_detect.cpp: the detection run).
constexpr int kMacmonDetectIntervalMs = 100;

void read_settings(const Config& config) { (void)apple_probe_options(config); }

void capture_sources(capture::Sources& s, const Config& config) {
  const auto interval = apple_probe_options(config).interval;
  // The detection runs (with --soc-info, then without for macmon < 0.7) and the persistent
  // `macmon -i <interval> pipe` child, recorded a few samples long.
  const auto detect = std::to_string(kMacmonDetectIntervalMs);
  s.tools.push_back({"macmon", "apple.macmon", {"-i", detect, "pipe", "-s", "1", "--soc-info"}});
  s.tools.push_back({"macmon", "apple.macmon", {"-i", detect, "pipe", "-s", "1"}});
  const auto every = std::to_string(std::max<long long>(interval.count(), kMacmonDetectIntervalMs));
  s.tools.push_back({"macmon",
                     "apple.macmon",
                     {"-i", every, "pipe"},
                     {"-i", every, "pipe", "-s", "3"},
                     false,
                     interval});
  s.tools.push_back({"macmon", "apple.macmon", {"--version"}, {}, true});
  s.replay_flags.push_back({"--macmon", "tools/macmon"});
}

}  // namespace

const ProbeRow& apple_probe_row() noexcept {
  static constexpr ProbeRow kRow{
      AppleSiliconProbe::kName,
      "Apple Silicon GPU through one persistent `macmon pipe` child (--macmon PATH)",
      AppleSiliconProbe::kName,
      ProbeKind::gpu,
      kFlags,
      &make_apple_probe_from_config,
      &read_settings,
      &doctor::detail::check_apple,
      &capture_sources};
  return kRow;
}

}  // namespace gpustream
