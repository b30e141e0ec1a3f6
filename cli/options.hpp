// Command-line options shared by every subcommand, and their translation into a Config.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpustream/config.hpp"

namespace gpustream::cli {

/// Exit codes: 0 success, 1 runtime failure, 2 usage error (bad flag, bad config file).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct CommonOptions {
  std::optional<int> simulate;
  bool simulate_if_no_gpu = false;
  std::string probes;  // comma-separated
  std::string config_file;
  std::optional<std::string> sysfs_root;
  std::optional<std::string> procfs_root;
  std::optional<std::string> devfs_root;
  std::optional<double> interval_seconds;
  std::optional<std::uint64_t> seed;
  std::vector<std::int64_t> watch_pids;
  std::string log_level;
  std::string log_format;  // "text" | "json"; empty: the config file's, else text
  /// Probe-specific paths: flag -> (config section, key), e.g. --nvml-library -> nvidia.library.
  std::map<std::string, std::string> probe_paths;
};

/// The config file's section of `gpustream serve`'s own settings (see serve.hpp).
inline constexpr std::string_view kServeSection = "serve";
/// The config file's section of `gpustream fleet`'s settings (see serve.hpp).
inline constexpr std::string_view kFleetSection = "fleet";

/// The sections a config file may hold: every probe's (from the registry), kServeSection and
/// kFleetSection.
ConfigSections cli_config_sections();

/// Adds the common flags to a subcommand.
void add_common_options(CLI::App& sub, CommonOptions& o, bool with_interval = true);

/// Builds the Config: the config file first, then the flags that were given; sets the log level
/// and format it says. Throws ConfigError with a message for the user.
Config make_config(const CommonOptions& o);

/// make_config without its effect on the process (the log level and format are not set): what
/// a SIGHUP reload checks before it applies anything. Throws ConfigError.
Config build_config(const CommonOptions& o);

/// Throws ConfigError when a probe's section of the config (file or path flags) has a misspelt
/// key or a bad value: a usage error (exit code 2), found before anything starts.
void check_probe_settings(const Config& config);

}  // namespace gpustream::cli
