// gpustream/probes/doctor.hpp — `gpustream doctor`: for each probe, what it looks for on this
// machine, what it found, what blocks it, and the exact fix.
//
// Each probe's checks are its registry row's `doctor` column (toolkit/doctor_checks.hpp has what
// they share); run() loops over the rows. Read-only and fast: bounded file reads
// (machine_view.hpp), one version run per tool (with a timeout), one init/shutdown of each
// vendor library; no sampling.
//
// Each Finding is {probe, check, status, detail, fix}. Status: `ok` (works), `info` (a fact,
// nothing to do), `warn` (degraded or to know: nothing here stops a GPU from being read fully),
// `blocker` (a GPU, or part of what gpustream reads of it, cannot be read until the fix is
// applied). Report::fully_readable() is "no blocker": the CLI's exit code 0, else 1.
//
// Thread safety: run is reentrant apart from the vendor libraries' own process-wide init (do not
// run it beside a probe using such a library with another path; see each vendor's checks).
// Cancellation: none; every step is bounded (tools and library calls by `tool_timeout`).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/config.hpp"

namespace gpustream::doctor {

enum class Status : std::uint8_t { ok, info, warn, blocker };
std::string_view to_string(Status s) noexcept;

struct Finding {
  std::string probe;  // the registry row's name
  std::string check;  // "render_node_access", ... (stable names, docs/operations.md)
  Status status = Status::info;
  std::string detail;  // what was looked for and found
  std::string fix;     // a command or config line; "" when there is nothing to do
};

struct Report {
  std::vector<std::string> probes;  // the probes examined, in registry order
  std::vector<Finding> findings;    // grouped by probe, in that order
  /// Vendor calls that did not answer within Options::tool_timeout and were left running on
  /// their own thread (a vendor library's call cannot be interrupted). Each becomes ready when its
  /// call returns; a program that goes on after the report may wait on them.
  std::vector<std::shared_future<void>> pending;
  /// GPUs the probes' detection found (`gpustream doctor` fills it; unset: not looked for) and
  /// how many must be found (--expect-gpus; 0: none).
  std::optional<std::size_t> gpus_readable;
  std::size_t gpus_expected = 0;
  bool fully_readable() const noexcept;
  /// False when fewer GPUs were found than expected.
  bool enough_gpus() const noexcept;
  std::size_t count(Status s) const noexcept;
};

/// Where to look, as the probes take it (config paths, probe settings, CLI flags).
struct Options {
  /// The probes' sections (Config::probe_settings): each probe's checks read theirs with the
  /// probe's own reader, so the doctor looks where the probe would.
  SystemPaths paths;
  /// "/" of the machine (for /.dockerenv and /run/.containerenv).
  std::string root_dir = "/";
  std::vector<std::string> probes;  // empty: every probe gpustream knows
  ProbeSettings probe_settings;
  int simulate = 0;
  /// Each tool's version run is killed after this long; a vendor library's init, version and
  /// count calls are waited for this long.
  std::chrono::milliseconds tool_timeout{3000};
  /// The environment as the program had it when it started (every row's environment column,
  /// container, KUBERNETES_SERVICE_HOST). Unset: the current environment.
  std::function<std::optional<std::string>(std::string_view)> getenv;

  /// A Config with these paths, probes, simulate and probe settings: what the probes' own
  /// settings readers take.
  Config config() const;
};

/// The options for `config`: paths, probes, simulate and the probes' sections. Throws
/// std::invalid_argument for a bad setting of a probe it will examine, like the probe factories
/// (each row's read_settings).
Options options_from_config(const Config& config);

/// The environment variables the doctor looks at (container, KUBERNETES_SERVICE_HOST and every
/// probe row's environment column), read now (call it first thing in main, before anything sets
/// them, such as set_probe_environment()).
std::map<std::string, std::string> environment_snapshot();

Report run(const Options& options);

/// {"schema": "gpustream-doctor/1", "fully_readable": bool, "blockers": n, "warnings": n,
///  "probes": [{"probe", "status"}], "findings": [{"probe","check","status","detail","fix"}]}
std::string to_json(const Report& report);
/// Human-readable, grouped per probe.
std::string to_text(const Report& report);

}  // namespace gpustream::doctor
