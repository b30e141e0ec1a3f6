// gpustream/config.hpp — everything a Telemetry instance can be told, with sensible defaults.
//
// A Config comes from code, from a JSON file (load_config), and from command-line flags layered
// on top. Unknown keys in a file are an error (a typo must not be silently ignored). This header
// needs only the standard library and Asio; the JSON form (config_from_json) is in
// gpustream/config_json.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/library_session.hpp"
#include "gpustream/probe.hpp"
#include "gpustream/probe_settings.hpp"

namespace gpustream {

/// A Config that cannot work: the message names the key and the allowed values.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The most simulated GPUs a Config may ask for (Config::simulate, --simulate, the simulated
/// probe's own bound).
inline constexpr int kMaxSimulatedGpus = 64;

/// The name under which a ProbeFactory builds simulated GPUs (Config::simulate). When
/// simulate_when_no_gpu finds no GPU, Telemetry asks its factory for exactly {kSimulatedProbe}
/// with simulate = 2. The registry's row of the simulated probe has this name. This is the one
/// probe name the SDK knows: it is the SDK's own fallback, not a vendor.
inline constexpr std::string_view kSimulatedProbe = "simulated";

struct Config {
  /// Probe names to run, as the probe factory knows them (the registry's: `gpustream list`).
  /// Empty: the factory's default set (the registry's: every probe but the simulated one).
  std::vector<std::string> probes;
  /// Number of simulated GPUs, 0..kMaxSimulatedGpus (0: none, unless no GPU is found and
  /// `simulate_when_no_gpu`).
  int simulate = 0;
  bool simulate_when_no_gpu = false;
  std::uint64_t seed = 1;
  SystemPaths paths;
  /// Default sampling interval; per-probe overrides in `probe_intervals`.
  std::chrono::milliseconds interval{1000};
  std::map<std::string, std::chrono::milliseconds> probe_intervals;
  std::chrono::milliseconds sample_timeout{5000};
  std::chrono::milliseconds backoff_initial{1000};
  std::chrono::milliseconds backoff_max{60000};
  /// Processes whose host RSS the host probe reports (besides this process).
  std::vector<std::int64_t> watch_pids;
  /// Snapshots kept for resume by sequence number.
  std::size_t history = 1024;
  /// ... and at most this many bytes of them (approx_bytes; the newest is always kept).
  std::size_t history_max_bytes = kDefaultHistoryMaxBytes;
  /// Named sections of settings that belong to a part outside the SDK: a probe's (e.g.
  /// probe_settings.set("nvidia", "library", "..."); the registry row says which section is
  /// whose) or the transport's ("serve"). The SDK stores them; their owners check them.
  ProbeSettings probe_settings;
  /// Level of the SDK's log lines, set when a Telemetry is constructed: "trace", "debug",
  /// "info", "warn", "error", "critical" or "off". Empty: leave it as it is (warn unless the
  /// host program set another with gpustream/logging.hpp). The CLI uses "info".
  std::string log_level;
  /// How the SDK's own stderr lines are written, set when a Telemetry is constructed: "text"
  /// (an RFC 3339 time, the level, the message) or "json" (one object per line: time, level,
  /// logger, message). Empty: leave it (text). A host's callback or sink is not affected.
  std::string log_format;
  /// How vendor libraries (NVML, Level Zero) are initialised; unset: the environment variable
  /// GPUSTREAM_LIBRARY_SESSION, else persistent. See library_session.hpp.
  std::optional<LibrarySessionMode> library_session;
  /// The planner's health rule (planner.hpp): Telemetry::fits(bytes) / best_device(bytes), and
  /// `gpustream serve`'s answers to a `fit` that gives no window, leave out devices with a fatal
  /// event this recent. 0: no health rule. At most 604800 s (a week). Config key
  /// `fatal_event_window_seconds`. Default: kDefaultFatalEventWindow (1 hour).
  std::chrono::seconds fatal_event_window{3600};
};

/// Checks every field that does not depend on which probes exist: simulate within
/// 0..kMaxSimulatedGpus, positive intervals and backoffs, a non-negative timeout, history >= 1,
/// positive pids, a known log_level and log_format (or empty). Throws ConfigError naming the key
/// and the allowed values. Probe names and probe sections are checked by the probe factory (the
/// registry knows them, not the SDK): Telemetry::start() throws ConfigError for those.
void validate_config(const Config& config);

/// The section names a config document may hold besides the SDK's own keys. Empty: any key
/// whose value is an object is taken as a section (its owner checks it when it reads it);
/// otherwise any other key is an error ("unknown key", with the list). The registry gives its
/// probes' sections (config_sections() in gpustream/probes/registry.hpp); a program adds its own
/// (the CLI adds the transport's "serve").
using ConfigSections = std::vector<std::string>;

/// Reads and parses a JSON config file (the format: config_from_json in
/// gpustream/config_json.hpp). Throws ConfigError (missing file, bad JSON, bad key).
Config load_config(const std::string& path, Config base = {}, const ConfigSections& sections = {});

}  // namespace gpustream
