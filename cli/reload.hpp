// What SIGHUP does for `serve` and `fleet`: a registry of named reloaders (docs/operations.md,
// "Reloading"). Each part that can change a setting live adds one reloader (one line at its
// command's start); the registry re-reads the config file first and, when that fails, changes
// nothing. Restart-only settings that changed are named in the log.
//
//   ReloadRegistry reload(loader, running_config);
//   reload.add("token", {}, token_reloader(server, token_file, token));
//   reload.add("tls", {"serve.tls_cert", "serve.tls_key"}, [&](const ReloadInput& in) { ... });
//   signal_stop.run(stop, stop_early, [&] { reload.reload(); });
//
// Thread safety: add() before the first reload(); reload() on one thread at a time — SignalStop
// runs it on a thread of its own, not the io_context's (a file on a hung mount must not stall
// the server), so what a reloader touches must be safe from any thread (Server::set_token and
// reload_tls, NatsBridge's and FleetView's set_auth, the log settings are); ok_count(),
// failed_count() and metrics() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpustream/config.hpp"
#include "gpustream/logging.hpp"

namespace gpustream::cli {

/// What one reloader did.
struct ReloadStep {
  enum class Result { unchanged, changed, failed };
  Result result = Result::unchanged;
  /// changed: what changed ("log_level info -> debug"); failed: why, and that the old setting
  /// stays ("cannot read the token file '/x': ...; the old token stays").
  std::string message;

  static ReloadStep unchanged() { return {}; }
  static ReloadStep changed(std::string what) { return {Result::changed, std::move(what)}; }
  static ReloadStep failed(std::string why) { return {Result::failed, std::move(why)}; }
};

/// What a reloader gets: the config as the file says now (with the command line's flags on
/// top, as at start); empty when the service runs without a config file.
struct ReloadInput {
  std::optional<Config> config;
};

using Reloader = std::function<ReloadStep(const ReloadInput&)>;

/// The config keys whose value differs between `before` and `after`: the SDK's top-level keys
/// ("interval_seconds", "log_level") and each section's ("serve.listen", "nvidia.library").
std::vector<std::string> changed_config_keys(const Config& before, const Config& after);

class ReloadRegistry {
 public:
  /// `loader`: re-reads and checks the config file (throws ConfigError or another exception:
  /// the reload fails and nothing changes); empty: no config file. `running`: the config the
  /// service started with (what a restart-only change is measured against: it stays pending
  /// until the restart).
  ReloadRegistry(std::function<Config()> loader, std::optional<Config> running);

  /// Adds a reloader. `live_keys`: the config keys it applies without a restart ("log_level",
  /// "serve.tls_cert"); every other key that changed is said to take effect after a restart.
  void add(std::string name, std::vector<std::string> live_keys, Reloader reloader);

  /// One reload: loads the config (a failure: one line saying why; counted failed; nothing
  /// applied), then runs every reloader in the order added (one that throws counts as failed;
  /// the others still run) and says on stderr what changed, what failed and which restart-only
  /// keys differ from the running config. What a reload that applied nothing says is not said
  /// again while the next reloads say exactly the same (a SIGHUP storm: one set of lines; every
  /// reload is counted); a reload that applied something is always said.
  /// Returns true when nothing failed.
  bool reload();

  std::uint64_t ok_count() const noexcept { return ok_.load(); }
  std::uint64_t failed_count() const noexcept { return failed_.load(); }

  /// gpustream_reloads_total{result="ok"|"failed"} in the Prometheus text format.
  std::string metrics() const;

 private:
  struct Entry {
    std::string name;
    std::vector<std::string> live_keys;
    Reloader reloader;
  };
  using Line = std::pair<LogLevel, std::string>;
  bool is_live(const std::string& key) const;
  /// Says `lines` unless the previous reload said exactly these and `applied` is false (a
  /// reload that changed something is always said).
  void say_once(std::vector<Line> lines, bool applied = false);

  std::function<Config()> loader_;
  std::optional<Config> running_;
  std::vector<Entry> entries_;
  std::vector<Line> last_lines_;  // what the last reload said: not said again while it repeats
  std::atomic<std::uint64_t> ok_{0};
  std::atomic<std::uint64_t> failed_{0};
};

/// The log reloader: log_level and log_format from the reloaded config, unless the command line
/// set them (`flag_level`, `flag_format`: the flags' values, empty when not given).
/// `default_level`: the level when neither says one (the CLI's "info").
Reloader log_reloader(std::string flag_level, std::string flag_format,
                      std::string default_level = "info");

}  // namespace gpustream::cli
