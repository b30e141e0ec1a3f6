// The one table of probes. To add a probe: a folder probes/<name>/ with its CMakeLists.txt line
// (probes/CMakeLists.txt, GPUSTREAM_PROBE_VENDORS) and its row (<name>_probe_row()), listed below.
#include "gpustream/probes/registry.hpp"

#include "registry_extra.hpp"

#include <stdlib.h>

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

namespace gpustream {

// Each vendor folder exports its row (probes/<vendor>/<vendor>_row.cpp). A vendor built with
// GPUSTREAM_PROBE_<VENDOR>=OFF has no row: nothing else changes.
#if GPUSTREAM_PROBE_NVIDIA
const ProbeRow& nvidia_probe_row() noexcept;
#endif
#if GPUSTREAM_PROBE_AMD
const ProbeRow& amd_probe_row() noexcept;
#endif
#if GPUSTREAM_PROBE_INTEL
const ProbeRow& intel_probe_row() noexcept;
#endif
#if GPUSTREAM_PROBE_APPLE
const ProbeRow& apple_probe_row() noexcept;
#endif
#if GPUSTREAM_PROBE_HOST
const ProbeRow& host_probe_row() noexcept;
#endif
#if GPUSTREAM_PROBE_SIMULATED
const ProbeRow& simulated_probe_row() noexcept;
#endif

namespace {

/// The rows, in the order make_probes builds them and `gpustream list` shows them, plus their
/// names (for known_probe_names).
struct Table {
  std::vector<ProbeRow> rows;
  std::vector<std::string_view> names;
};

Table& mutable_table() noexcept {
  static Table instance = [] {
    Table t;
    t.rows = {
#if GPUSTREAM_PROBE_NVIDIA
      nvidia_probe_row(),
#endif
#if GPUSTREAM_PROBE_AMD
      amd_probe_row(),
#endif
#if GPUSTREAM_PROBE_INTEL
      intel_probe_row(),
#endif
#if GPUSTREAM_PROBE_APPLE
      apple_probe_row(),
#endif
#if GPUSTREAM_PROBE_HOST
      host_probe_row(),
#endif
#if GPUSTREAM_PROBE_SIMULATED
      simulated_probe_row(),
#endif
    };
    for (const auto& row : t.rows) t.names.push_back(row.name);
    return t;
  }();
  return instance;
}

const Table& table() noexcept { return mutable_table(); }

/// How many rows at the end of the table an ExtraProbeRows added (tests only).
std::size_t extra_rows = 0;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

}  // namespace

ExtraProbeRows::ExtraProbeRows(std::span<const ProbeRow> rows) {
  auto& t = mutable_table();
  for (const auto& row : rows) {
    t.rows.push_back(row);
    t.names.push_back(row.name);
  }
  extra_rows += rows.size();
}

ExtraProbeRows::~ExtraProbeRows() {
  auto& t = mutable_table();
  t.rows.resize(t.rows.size() - extra_rows);
  t.names.resize(t.names.size() - extra_rows);
  extra_rows = 0;
}

std::span<const ProbeRow> probe_rows() noexcept { return table().rows; }

const ProbeRow* find_probe_row(std::string_view name) noexcept {
  for (const auto& row : table().rows)
    if (row.name == name) return &row;
  return nullptr;
}

std::span<const std::string_view> known_probe_names() noexcept { return table().names; }

bool is_known_probe(std::string_view name) noexcept { return find_probe_row(name) != nullptr; }

std::string known_probe_list() {
  std::string out;
  for (auto name : table().names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

void set_probe_environment() {
  for (const auto& row : table().rows)
    for (const auto& e : row.environment)
      // NOLINTNEXTLINE(concurrency-mt-unsafe): called before any thread exists (see the header).
      ::setenv(std::string(e.name).c_str(), std::string(e.value).c_str(), /*overwrite=*/0);
}

ConfigSections config_sections() {
  ConfigSections out;
  for (const auto& row : table().rows)
    if (!row.section.empty()) out.emplace_back(row.section);
  return out;
}

std::vector<std::string> default_probe_names() {
  std::vector<std::string> out;
  for (const auto& row : table().rows)
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
  for (const auto& row : table().rows)
    out.push_back({std::string(row.name), std::string(row.description)});
  return out;
}

std::string describe_probes_text() {
  std::size_t width = 0;
  for (auto name : table().names) width = std::max(width, name.size());
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
