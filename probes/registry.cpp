// The one table of probes. To add a probe: include its header, write a factory below, add a row.
#include "gpustream/probes/registry.hpp"

#include <algorithm>
#include <array>
#include <iterator>
#include <exception>

#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/apple_probe.hpp"
#include "gpustream/probes/host_probe.hpp"
#include "gpustream/probes/intel_probe.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/probes/settings.hpp"
#include "gpustream/probes/simulated_probe.hpp"

namespace gpustream {
namespace {

constexpr std::string_view kSimulated = "simulated";

ProbePtr make_host(const Config& config, ProbeExecutors executors) {
  settings::section(config, "host", {});  // no settings: any key is a mistake
  HostProbeOptions options;
  options.paths = config.paths;
  options.watch_pids = config.watch_pids;
  return make_host_probe(std::move(executors), std::move(options));
}

ProbePtr make_nvidia(const Config& config, ProbeExecutors executors) {
  return make_nvidia_probe(std::move(executors), nvidia_options_from_config(config));
}

ProbePtr make_simulated(const Config& config, ProbeExecutors executors) {
  settings::section(config, "simulated", {});  // --simulate N and --seed are top-level keys
  SimulatedProbeOptions options;
  options.devices = std::max(1, config.simulate);
  options.seed = config.seed;
  return make_simulated_probe(std::move(executors), std::move(options));
}

// One row per probe, in the order make_probes builds them and `gpustream list` shows them.
constexpr ProbeRow kRows[] = {
    {"nvidia", "NVIDIA GPUs through NVML (--nvml-library PATH), nvidia-smi as the fallback",
     &make_nvidia},
    {"amd", "AMD GPUs: amdgpu sysfs + DRM fdinfo (--amd-source auto|sysfs|amd-smi|rocm-smi)",
     &make_amd_probe},
    {"intel", "Intel GPUs (i915/xe): sysfs, hwmon, DRM fdinfo; Level Zero Sysman when present",
     &make_intel_probe_from_config},
    {"apple", "Apple Silicon GPU through one persistent `macmon pipe` child (--macmon PATH)",
     &make_apple_probe_from_config},
    {"host", "host RAM and swap (/proc/meminfo), RSS of this process and watched pids", &make_host},
    {"simulated", "simulated GPUs with plausible moving values (--simulate N)", &make_simulated},
};

constexpr auto kNames = [] {
  std::array<std::string_view, std::size(kRows)> names{};
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = kRows[i].name;
  return names;
}();

std::string known_list() {
  std::string out;
  for (auto name : kNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace

std::span<const ProbeRow> probe_rows() noexcept { return kRows; }

const ProbeRow* find_probe_row(std::string_view name) noexcept {
  for (const auto& row : kRows)
    if (row.name == name) return &row;
  return nullptr;
}

std::span<const std::string_view> known_probe_names() noexcept { return kNames; }

bool is_known_probe(std::string_view name) noexcept { return find_probe_row(name) != nullptr; }

ProbeSet make_probes(const Config& config, ProbeExecutors executors) {
  std::vector<std::string> wanted;
  const auto add = [&](std::string_view name) {
    if (std::find(wanted.begin(), wanted.end(), name) == wanted.end()) wanted.emplace_back(name);
  };
  if (config.probes.empty()) {
    for (const auto& row : kRows)
      if (row.name != kSimulated) add(row.name);
  } else {
    for (const auto& name : config.probes) add(name);
  }
  if (config.simulate > 0) add(kSimulated);

  ProbeSet out;
  for (const auto& name : wanted) {
    const ProbeRow* row = find_probe_row(name);
    if (!row) {
      out.errors.push_back("unknown probe '" + name + "' (known: " + known_list() + ")");
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
  for (const auto& row : kRows) out.push_back({std::string(row.name), std::string(row.description)});
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
  return [](const Config& config, const ProbeExecutors& executors,
            std::vector<std::string>& errors) {
    auto set = make_probes(config, executors);
    errors.insert(errors.end(), set.errors.begin(), set.errors.end());
    return std::move(set.probes);
  };
}

}  // namespace gpustream
