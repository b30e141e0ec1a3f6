#include "options.hpp"

#include <algorithm>
#include <cmath>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "gpustream/log.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/split_list.hpp"

namespace gpustream::cli {

void add_common_options(CLI::App& sub, CommonOptions& o, bool with_interval) {
  sub.add_option("--simulate", o.simulate, "Add N simulated GPUs")
      ->check(CLI::Range(0, kMaxSimulatedGpus));
  sub.add_flag("--simulate-if-no-gpu", o.simulate_if_no_gpu,
               "Add 2 simulated GPUs when no real GPU is found (and say so)");
  static const std::string probes_help =
      "Comma-separated probes: " + known_probe_list() + " (default: all but simulated)";
  sub.add_option("--probes", o.probes, probes_help);
  sub.add_option("--config", o.config_file, "JSON config file (see docs/configuration.md)");
  sub.add_option("--sysfs-root", o.sysfs_root, "Where /sys is mounted (default /sys)");
  sub.add_option("--procfs-root", o.procfs_root, "Where /proc is mounted (default /proc)");
  sub.add_option("--devfs-root", o.devfs_root, "Where /dev is mounted (default /dev)");
  if (with_interval)
    sub.add_option("--interval", o.interval_seconds, "Sampling interval in seconds (default 1)")
        ->check(CLI::Range(0.001, 86400.0));
  sub.add_option("--seed", o.seed, "Seed of the simulated GPUs (default 1)");
  sub.add_option("--watch-pid", o.watch_pids, "Also report the host RSS of this pid (repeatable)")
      ->check(CLI::PositiveNumber);
  for (const auto& row : probe_rows())  // each probe's own flags, from its registry row
    for (const auto& f : row.flags)
      sub.add_option(std::string(f.flag), o.probe_paths[std::string(f.flag)], std::string(f.help));
  sub.add_option("--log-level", o.log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  sub.add_option("--log-format", o.log_format,
                 "Log lines on stderr: text (an RFC 3339 time, the level, the message) or json "
                 "(one object per line); default text")
      ->check(CLI::IsMember({"text", "json"}));
}

Config make_config(const CommonOptions& o) {
  // The flag's format first: an error in the config file is then said in it too.
  if (const auto f = log_format_from_string(o.log_format)) set_log_format(*f);
  Config c = build_config(o);
  set_log_level(c.log_level);
  if (const auto f = log_format_from_string(c.log_format)) set_log_format(*f);
  return c;
}

Config build_config(const CommonOptions& o) {
  Config c;
  c.log_level = "info";  // the CLI talks to a person: info by default (the library says warn)
  if (!o.config_file.empty()) c = load_config(o.config_file, c, cli_config_sections());
  if (o.simulate) c.simulate = *o.simulate;
  if (o.simulate_if_no_gpu) c.simulate_when_no_gpu = true;
  if (!o.probes.empty()) c.probes = split_list(o.probes, ListBlanks::trim);
  for (const auto& name : c.probes)
    if (!is_known_probe(name))
      throw ConfigError("unknown probe '" + name + "' (known: " + known_probe_list() + ")");
  if (o.sysfs_root) c.paths.sysfs_root = *o.sysfs_root;
  if (o.procfs_root) c.paths.procfs_root = *o.procfs_root;
  if (o.devfs_root) c.paths.devfs_root = *o.devfs_root;
  if (o.interval_seconds)
    c.interval = std::chrono::milliseconds(std::llround(*o.interval_seconds * 1000));
  if (o.seed) c.seed = *o.seed;
  for (auto pid : o.watch_pids) c.watch_pids.push_back(pid);
  if (!o.log_level.empty()) c.log_level = o.log_level;
  for (const auto& row : probe_rows()) {
    for (const auto& f : row.flags) {
      const auto it = o.probe_paths.find(std::string(f.flag));
      if (it == o.probe_paths.end() || it->second.empty()) continue;
      c.probe_settings.set(row.section, f.key, it->second);
    }
  }
  if (!o.log_format.empty()) c.log_format = o.log_format;
  if (!log_level_from_string(c.log_level))
    throw ConfigError("unknown log level '" + c.log_level + "'");
  check_probe_settings(c);
  return c;
}

ConfigSections cli_config_sections() {
  ConfigSections sections = config_sections();
  sections.emplace_back(kServeSection);
  sections.emplace_back(kFleetSection);
  return sections;
}

void check_probe_settings(const Config& config) {
  // Each probe reads its own section when it is built (and says exactly what is wrong), and
  // building one does no I/O beyond a sysfs glance: build every probe that has a section, on
  // executors that never run, and keep only the verdict.
  Config c = config;
  c.probes.clear();
  for (const auto& row : probe_rows())
    if (!row.section.empty() && c.probe_settings.contains(row.section))
      c.probes.emplace_back(row.name);
  if (c.probes.empty()) return;
  c.simulate = 0;
  boost::asio::io_context io;
  boost::asio::thread_pool pool(1);
  std::vector<std::string> errors = make_probes(c, {io.get_executor(), pool.get_executor()}).errors;
  pool.join();
  if (errors.empty()) return;
  std::string what = errors.front();
  for (std::size_t i = 1; i < errors.size(); ++i) what += "; " + errors[i];
  throw ConfigError(what);
}

}  // namespace gpustream::cli
