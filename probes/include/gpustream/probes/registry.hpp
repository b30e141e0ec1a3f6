// gpustream/probes/registry.hpp — the one table of probes.
//
// Each probe is one folder probes/<name>/ that exports one row {name, description, config
// section, kind, flags, factory, settings reader, doctor checks, capture sources}; the table in
// probes/registry.cpp lists the rows (no self-registration). The SDK knows no probe names (it asks
// each probe its kind()); the CLI builds its probe flags and lists from these rows, and `doctor`,
// `capture` and the replay of a capture loop over them. Every probe is built on every platform:
// one whose source is missing (no driver, no tool, not Linux) says so at detection, with the
// reason. A probe left out of the build (GPUSTREAM_PROBE_<NAME>=OFF) has no row.
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

namespace doctor {
struct CheckContext;
}
namespace capture {
struct Sources;
}

/// Builds one probe from the configuration. May throw (a bad setting); make_probes turns that
/// into an error string. Every probe folder has one, named make_<name>_probe_from_config.
using ProbeMaker = ProbePtr (*)(const Config& config, ProbeExecutors executors);

/// A command-line flag that sets one key of the row's config section to a string
/// (`--nvml-library PATH` sets nvidia.library). The CLI adds one option per flag of every row.
struct ProbeFlag {
  std::string_view flag;  // "--nvml-library"
  std::string_view key;   // "library"
  std::string_view help;  // one line for --help
};

/// An environment variable the probe's vendor library reads once, early, that must be in the
/// process's environment before any thread starts (setenv is not thread-safe). A program that
/// wants it calls set_probe_environment() first thing in main(); `doctor` reports it as the
/// program had it when it started.
struct ProbeEnvironment {
  std::string_view name;   // "ZES_ENABLE_SYSMAN"
  std::string_view value;  // "1"
  std::string_view why;    // one line, for the reader of the row
};

/// Reads the row's config section as its probe does (the one reader, also used by its doctor
/// checks and capture sources); throws std::invalid_argument naming "<section>.<key>" for a bad
/// setting.
using ProbeSettingsReader = void (*)(const Config& config);
/// Adds the probe's `gpustream doctor` findings (probes/toolkit/doctor_checks.hpp).
using ProbeDoctorChecks = void (*)(const doctor::CheckContext& context);
/// Adds what `gpustream capture` records for the probe and how a replay points the probe at the
/// recording (probes/toolkit/include/gpustream/probes/capture.hpp).
using ProbeCaptureSources = void (*)(capture::Sources& sources, const Config& config);

/// Everything the SDK, the CLI, `doctor` and `capture` need to know about a probe; nothing
/// outside this table and the probe's own folder names a probe.
struct ProbeRow {
  std::string_view name;
  std::string_view description;  // one line, for `gpustream list`
  std::string_view section;      // its settings' section in a Config ("" none); see config.hpp
  ProbeKind kind;                // what its probe's kind() answers
  std::span<const ProbeFlag> flags;
  ProbeMaker factory;
  ProbeSettingsReader read_settings = nullptr;         // null: no settings to check
  ProbeDoctorChecks doctor = nullptr;                  // null: "no check for this probe"
  ProbeCaptureSources capture = nullptr;               // null: nothing to record
  std::span<const ProbeEnvironment> environment = {};  // set before threads start
};

/// Every probe, in the order make_probes builds them.
std::span<const ProbeRow> probe_rows() noexcept;
/// The row of probe `name`; nullptr for an unknown name.
const ProbeRow* find_probe_row(std::string_view name) noexcept;

/// Every probe name gpustream knows, in row order ("nvidia", "amd", ...).
std::span<const std::string_view> known_probe_names() noexcept;
bool is_known_probe(std::string_view name) noexcept;
/// The names joined with ", ", for messages and --help.
std::string known_probe_list();

/// Sets every row's environment variable that is not already set (a value the user gave wins),
/// in row order. Call it first thing in main(), before any thread exists, and after taking
/// doctor::environment_snapshot() (which reports the environment as the program started). The
/// SDK never calls it: a program embedding the SDK decides.
void set_probe_environment();

/// The config sections of every row that has one: pass them (plus a program's own, such as the
/// transport's "serve") to load_config to make a misspelt section an error.
ConfigSections config_sections();

/// The probes make_probes builds for an empty Config::probes: every row but the simulated kind.
std::vector<std::string> default_probe_names();

/// What make_probes built, and, for each name it could not build, one line saying why.
struct ProbeSet {
  std::vector<ProbePtr> probes;
  std::vector<std::string> errors;
};

/// Builds the probes named in config.probes, in that order, without duplicates; when the list is
/// empty, default_probe_names(). kSimulatedProbe is added whenever
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
