// SIGHUP's reload registry (reload.hpp).
#include "reload.hpp"

#include <algorithm>

#include "gpustream/log.hpp"
#include "gpustream/terminal_text.hpp"
#include "say.hpp"

namespace gpustream::cli {
namespace {

void note_if_changed(std::vector<std::string>& out, const char* key, bool same) {
  if (!same) out.emplace_back(key);
}

}  // namespace

std::vector<std::string> changed_config_keys(const Config& a, const Config& b) {
  std::vector<std::string> out;
  note_if_changed(out, "probes", a.probes == b.probes);
  note_if_changed(out, "simulate", a.simulate == b.simulate);
  note_if_changed(out, "simulate_when_no_gpu", a.simulate_when_no_gpu == b.simulate_when_no_gpu);
  note_if_changed(out, "seed", a.seed == b.seed);
  note_if_changed(out, "sysfs_root", a.paths.sysfs_root == b.paths.sysfs_root);
  note_if_changed(out, "procfs_root", a.paths.procfs_root == b.paths.procfs_root);
  note_if_changed(out, "devfs_root", a.paths.devfs_root == b.paths.devfs_root);
  note_if_changed(out, "interval_seconds", a.interval == b.interval);
  note_if_changed(out, "probe_intervals_seconds", a.probe_intervals == b.probe_intervals);
  note_if_changed(out, "sample_timeout_seconds", a.sample_timeout == b.sample_timeout);
  note_if_changed(out, "backoff_initial_seconds", a.backoff_initial == b.backoff_initial);
  note_if_changed(out, "backoff_max_seconds", a.backoff_max == b.backoff_max);
  note_if_changed(out, "watch_pids", a.watch_pids == b.watch_pids);
  note_if_changed(out, "history", a.history == b.history);
  note_if_changed(out, "history_max_bytes", a.history_max_bytes == b.history_max_bytes);
  note_if_changed(out, "fatal_event_window_seconds", a.fatal_event_window == b.fatal_event_window);
  note_if_changed(out, "library_session", a.library_session == b.library_session);
  note_if_changed(out, "log_level", a.log_level == b.log_level);
  note_if_changed(out, "log_format", a.log_format == b.log_format);
  // Each section's keys: added, removed or with another value (sorted by name).
  std::vector<std::string> sections;
  const auto section_keys = [&sections](const ProbeSettings& x, const ProbeSettings& y) {
    for (const auto& [name, section] : x) {
      const auto* other = y.section(name);
      for (const auto& [key, value] : section) {
        std::string full = name;
        full += '.';
        full += key;
        if (std::find(sections.begin(), sections.end(), full) != sections.end()) continue;
        const SettingValue* v = nullptr;
        if (other) {
          const auto it = other->find(key);
          if (it != other->end()) v = &it->second;
        }
        if (!v || !(*v == value)) sections.push_back(full);
      }
    }
  };
  section_keys(a.probe_settings, b.probe_settings);
  section_keys(b.probe_settings, a.probe_settings);
  std::sort(sections.begin(), sections.end());
  out.insert(out.end(), sections.begin(), sections.end());
  return out;
}

ReloadRegistry::ReloadRegistry(std::function<Config()> loader, std::optional<Config> running)
    : loader_(std::move(loader)), running_(std::move(running)) {}

void ReloadRegistry::add(std::string name, std::vector<std::string> live_keys, Reloader r) {
  entries_.push_back({std::move(name), std::move(live_keys), std::move(r)});
}

bool ReloadRegistry::is_live(const std::string& key) const {
  for (const auto& e : entries_)
    if (std::find(e.live_keys.begin(), e.live_keys.end(), key) != e.live_keys.end()) return true;
  return false;
}

void ReloadRegistry::say_once(std::vector<Line> lines, bool applied) {
  // Said already: a storm of SIGHUPs with the same outcome. A reload that applied something is
  // always said (two rotations of the same file in a row are two events).
  if (!applied && lines == last_lines_) return;
  for (const auto& [level, text] : lines) say(text, level);
  last_lines_ = std::move(lines);
}

bool ReloadRegistry::reload() {
  ReloadInput in;
  if (loader_) {
    try {
      in.config = loader_();
    } catch (const std::exception& e) {
      ++failed_;
      say_once({{LogLevel::error, "SIGHUP: reload failed: " + terminal_safe(e.what()) +
                                      "; the running settings stay"}});
      return false;
    }
  }
  std::vector<Line> lines;
  bool changed = false, failed = false;
  for (const auto& e : entries_) {
    ReloadStep step;
    try {
      step = e.reloader(in);
    } catch (const std::exception& ex) {
      step = ReloadStep::failed(ex.what());
    }
    if (step.result == ReloadStep::Result::changed) {
      lines.push_back({LogLevel::info, "SIGHUP: " + e.name + ": " + terminal_safe(step.message)});
      changed = true;
    } else if (step.result == ReloadStep::Result::failed) {
      lines.push_back({LogLevel::error, "SIGHUP: " + e.name + ": " + terminal_safe(step.message)});
      failed = true;
    }
  }
  // Measured against the config the service started with: a restart-only change stays pending
  // (and is named) until the restart.
  if (in.config && running_) {
    for (const auto& key : changed_config_keys(*running_, *in.config))
      if (!is_live(key))
        lines.push_back(
            {LogLevel::info, "SIGHUP: " + key + " changed: takes effect after a restart"});
  }
  if (!changed && !failed)
    lines.push_back({LogLevel::info, std::string("SIGHUP: reloaded") +
                                         (loader_ ? " the config file" : "") +
                                         ": nothing changed that applies live"});
  say_once(std::move(lines), changed);
  if (failed) {
    ++failed_;
    return false;
  }
  ++ok_;
  return true;
}

std::string ReloadRegistry::metrics() const {
  return "# HELP gpustream_reloads_total SIGHUP reloads, by result (failed: the running settings "
         "stayed).\n"
         "# TYPE gpustream_reloads_total counter\n"
         "gpustream_reloads_total{result=\"ok\"} " +
         std::to_string(ok_count()) +
         "\n"
         "gpustream_reloads_total{result=\"failed\"} " +
         std::to_string(failed_count()) + "\n";
}

Reloader log_reloader(std::string flag_level, std::string flag_format, std::string default_level) {
  return [flag_level = std::move(flag_level), flag_format = std::move(flag_format),
          default_level = std::move(default_level)](const ReloadInput& in) {
    if (!in.config) return ReloadStep::unchanged();
    std::string what;
    std::string level = !flag_level.empty()             ? flag_level
                        : !in.config->log_level.empty() ? in.config->log_level
                                                        : default_level;
    const auto want_level = log_level_from_string(level);
    if (want_level && *want_level != log_level()) {
      what = "log_level " + std::string(to_string(log_level())) + " -> " +
             std::string(to_string(*want_level));
      set_log_level(*want_level);
    }
    const std::string format = !flag_format.empty()             ? flag_format
                               : !in.config->log_format.empty() ? in.config->log_format
                                                                : "text";
    const auto want_format = log_format_from_string(format);
    if (want_format && *want_format != log_format()) {
      if (!what.empty()) what += ", ";
      what += std::string("log_format ") + (log_format() == LogFormat::json ? "json" : "text") +
              " -> " + format;
      set_log_format(*want_format);
    }
    return what.empty() ? ReloadStep::unchanged() : ReloadStep::changed(what);
  };
}

}  // namespace gpustream::cli
