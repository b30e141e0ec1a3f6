// gpustream/config.hpp — everything a Telemetry instance can be told, with sensible defaults.
//
// A Config comes from code, from a JSON file (load_config), and from command-line flags layered
// on top. Unknown keys in a file are an error (a typo must not be silently ignored).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "gpustream/library_session.hpp"
#include "gpustream/probe.hpp"

namespace gpustream {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Config {
  /// Probe names to run ("nvidia", "amd", "intel", "apple", "host", "simulated").
  /// Empty: every probe whose source is detected, plus "host".
  std::vector<std::string> probes;
  /// Number of simulated GPUs (0: none, unless no GPU is found and `simulate_when_no_gpu`).
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
  /// Per-probe sections for probe-specific settings, e.g. {"nvidia": {"library": "..."}}.
  boost::json::object probe_settings;
  std::string log_level = "info";
  /// How vendor libraries (NVML, Level Zero) are initialised; unset: the environment variable
  /// GPUSTREAM_LIBRARY_SESSION, else persistent. See library_session.hpp.
  std::optional<LibrarySessionMode> library_session;
};

/// Parses a JSON config document. Throws ConfigError naming the bad key.
Config config_from_json(const boost::json::value& v, Config base = {});
/// Reads and parses a JSON config file. Throws ConfigError (missing file, bad JSON, bad key).
Config load_config(const std::string& path, Config base = {});

}  // namespace gpustream
