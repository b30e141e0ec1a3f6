// gpustream/probes/registry.hpp — the one table of probes.
//
// Each probe is one row {name, description, factory} in probes/registry.cpp; adding a probe is
// adding its row (no self-registration). Every probe is built on every platform: one whose
// source is missing (no driver, no tool, not Linux) says so at detection, with the reason.
//
// Thread safety: everything here is read-only static data or builds new objects; call from any
// thread. Cancellation: nothing to cancel.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/config.hpp"
#include "gpustream/probe.hpp"
#include "gpustream/telemetry.hpp"

namespace gpustream {

/// Builds one probe from the configuration. May throw (a bad setting); make_probes turns that
/// into an error string.
using ProbeMaker = ProbePtr (*)(const Config& config, ProbeExecutors executors);

struct ProbeRow {
  std::string_view name;
  std::string_view description;  // one line, for `gpustream list`
  ProbeMaker factory;
};

/// Every probe, in the order make_probes builds them.
std::span<const ProbeRow> probe_rows() noexcept;
/// The row of probe `name`; nullptr for an unknown name.
const ProbeRow* find_probe_row(std::string_view name) noexcept;

/// Every probe name gpustream knows: "nvidia", "amd", "intel", "apple", "host", "simulated".
std::span<const std::string_view> known_probe_names() noexcept;
bool is_known_probe(std::string_view name) noexcept;

/// What make_probes built, and, for each name it could not build, one line saying why.
struct ProbeSet {
  std::vector<ProbePtr> probes;
  std::vector<std::string> errors;
};

/// Builds the probes named in config.probes, in that order, without duplicates; when the list is
/// empty, every probe except "simulated". "simulated" is added whenever
/// config.simulate > 0 (with that many GPUs); named explicitly with simulate == 0 it gets one
/// GPU. Errors: "unknown probe 'x' (known: ...)" or "probe 'x': <what its factory threw>".
ProbeSet make_probes(const Config& config, ProbeExecutors executors);

/// One entry per probe, for `gpustream list`.
struct ProbeDescription {
  std::string name;
  std::string description;
};
std::vector<ProbeDescription> describe_probes();

/// The registry as a Telemetry ProbeFactory: `Telemetry t(config, gpustream::probe_factory());`
ProbeFactory probe_factory();
/// The same as aligned text lines: "host       Host RAM and swap ...".
std::string describe_probes_text();

}  // namespace gpustream
