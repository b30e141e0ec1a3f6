// The one table of probes. To add a probe: a folder with its make_<name>_probe_from_config, its
// header included here, and a row below (tests/probes/conformance_test.cpp: a row there too).
#include "gpustream/probes/registry.hpp"

#include <algorithm>
#include <array>
#include <exception>
#include <iterator>

#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/apple_probe.hpp"
#include "gpustream/probes/host_probe.hpp"
#include "gpustream/probes/intel_probe.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/probes/simulated_probe.hpp"

namespace gpustream {
namespace {

constexpr ProbeFlag kNvidiaFlags[] = {
    {"--nvml-library", "library", "NVML library (default libnvidia-ml.so.1)"},
    {"--nvidia-smi", "nvidia_smi", "nvidia-smi binary for the fallback"},
};
constexpr ProbeFlag kAmdFlags[] = {
    {"--amd-smi", "amd_smi", "amd-smi binary"},
    {"--rocm-smi", "rocm_smi", "rocm-smi binary"},
    {"--amd-source", "source", "AMD source: auto, library, sysfs, cli (amd-smi), rocm-smi"},
    {"--amd-smi-library", "library", "AMD SMI library (default libamd_smi.so)"},
    {"--amdgpu-ids", "amdgpu_ids", "libdrm amdgpu.ids for AMD names (\"\": none)"},
};
constexpr ProbeFlag kIntelFlags[] = {
    {"--level-zero-library", "level_zero_library", "Level Zero loader (libze_loader.so.1)"},
};
constexpr ProbeFlag kAppleFlags[] = {
    {"--macmon", "macmon", "macmon binary"},
};

// One row per probe, in the order make_probes builds them and `gpustream list` shows them.
constexpr ProbeRow kRows[] = {
    {NvidiaProbe::kName,
     "NVIDIA GPUs through NVML (--nvml-library PATH), nvidia-smi as the fallback",
     NvidiaProbe::kName, ProbeKind::gpu, kNvidiaFlags, &make_nvidia_probe_from_config},
    {AmdSysfsProbe::kName,
     "AMD GPUs: AMD SMI library, amdgpu sysfs + DRM fdinfo, or the CLIs (--amd-source "
     "auto|library|sysfs|cli)",
     AmdSysfsProbe::kName, ProbeKind::gpu, kAmdFlags, &make_amd_probe_from_config},
    {IntelGpuProbe::kName,
     "Intel GPUs (i915/xe): sysfs, hwmon, DRM fdinfo; Level Zero Sysman when present",
     IntelGpuProbe::kName, ProbeKind::gpu, kIntelFlags, &make_intel_probe_from_config},
    {AppleSiliconProbe::kName,
     "Apple Silicon GPU through one persistent `macmon pipe` child (--macmon PATH)",
     AppleSiliconProbe::kName, ProbeKind::gpu, kAppleFlags, &make_apple_probe_from_config},
    {HostProbe::kName,
     "host RAM and swap (/proc/meminfo), RSS of this process and watched pids",
     HostProbe::kName,
     ProbeKind::host,
     {},
     &make_host_probe_from_config},
    {SimulatedProbe::kName,
     "simulated GPUs with plausible moving values (--simulate N)",
     SimulatedProbe::kName,
     ProbeKind::simulated,
     {},
     &make_simulated_probe_from_config},
};
static_assert(SimulatedProbe::kName == kSimulatedProbe,
              "Telemetry's no-GPU fallback asks the factory for kSimulatedProbe");

constexpr auto kNames = [] {
  std::array<std::string_view, std::size(kRows)> names{};
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = kRows[i].name;
  return names;
}();

}  // namespace

std::span<const ProbeRow> probe_rows() noexcept { return kRows; }

const ProbeRow* find_probe_row(std::string_view name) noexcept {
  for (const auto& row : kRows)
    if (row.name == name) return &row;
  return nullptr;
}

std::span<const std::string_view> known_probe_names() noexcept { return kNames; }

bool is_known_probe(std::string_view name) noexcept { return find_probe_row(name) != nullptr; }

std::string known_probe_list() {
  std::string out;
  for (auto name : kNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

ConfigSections config_sections() {
  ConfigSections out;
  for (const auto& row : kRows)
    if (!row.section.empty()) out.emplace_back(row.section);
  return out;
}

std::vector<std::string> default_probe_names() {
  std::vector<std::string> out;
  for (const auto& row : kRows)
    if (row.kind != ProbeKind::simulated) out.emplace_back(row.name);
  return out;
}

ProbeSet make_probes(const Config& config, ProbeExecutors executors) {
  std::vector<std::string> wanted;
  const auto add = [&](std::string_view name) {
    if (std::find(wanted.begin(), wanted.end(), name) == wanted.end()) wanted.emplace_back(name);
  };
  for (const auto& name : config.probes.empty() ? default_probe_names() : config.probes) add(name);
  if (config.simulate > 0) add(kSimulatedProbe);

  ProbeSet out;
  for (const auto& name : wanted) {
    const ProbeRow* row = find_probe_row(name);
    if (!row) {
      out.errors.push_back("unknown probe '" + name + "' (known: " + known_probe_list() + ")");
      continue;
    }
    try {
      out.probes.push_back(row->factory(config, executors));
    } catch (const std::exception& e) {
      out.errors.push_back("probe '" + name + "': " + e.what());
    }
  }
  return out;
}

std::vector<ProbeDescription> describe_probes() {
  std::vector<ProbeDescription> out;
  for (const auto& row : kRows)
    out.push_back({std::string(row.name), std::string(row.description)});
  return out;
}

std::string describe_probes_text() {
  std::size_t width = 0;
  for (auto name : kNames) width = std::max(width, name.size());
  std::string out;
  for (const auto& d : describe_probes()) {
    out += d.name;
    out.append(width + 2 - d.name.size(), ' ');
    out += d.description;
    out += '\n';
  }
  return out;
}

ProbeFactory probe_factory() {
  return
      [](const Config& config, const ProbeExecutors& executors, std::vector<std::string>& errors) {
        auto set = make_probes(config, executors);
        errors.insert(errors.end(), set.errors.begin(), set.errors.end());
        return std::move(set.probes);
      };
}

}  // namespace gpustream
