// The subcommands of the gpustream tool. Each returns a process exit code (see options.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/config.hpp"
#include "gpustream/probe.hpp"
#include "options.hpp"

namespace gpustream::cli {

/// What the commands share: the common flags' values (add_common_options) and the environment
/// variables as they were when the program started (main then sets the probe rows' environment for
/// itself).
struct CommandContext {
  CommonOptions common;
  std::map<std::string, std::string> environment;
};

/// Runs a parsed command; returns the process exit code. May throw ConfigError (exit code 2)
/// or another std::exception (exit code 1).
using CommandRun = std::function<int()>;

/// One row of the command table: `gpustream NAME` with its help line; `setup` adds the
/// command's flags to its CLI11 subcommand (bound to state the returned function owns) and
/// returns what runs it once parsed.
struct Command {
  std::string_view name;
  std::string_view help;
  CommandRun (*setup)(CLI::App& sub, CommandContext& context);
};

/// The commands, in the order of `gpustream --help`: each comes from its cmd_*.cpp.
const std::vector<Command>& command_table();

Command list_command();
Command snapshot_command();
Command capture_command();
Command watch_command();
Command record_command();
Command serve_command();
Command doctor_command();
Command fleet_command();
Command replay_command();

/// Set by SIGINT/SIGTERM; long-running commands poll it (a signal handler sets it, hence a
/// global that is not const).
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
extern std::atomic<bool> g_interrupted;
/// The first signal that set g_interrupted (SIGINT, SIGTERM); 0 while none came.
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
extern std::atomic<int> g_interrupt_signal;

/// Waits until `timeout` has passed or SIGINT/SIGTERM came (at once if one already did: the
/// handler writes to a pipe this polls). Returns whether the program was interrupted.
bool wait_interrupted_for(std::chrono::milliseconds timeout);

struct ListOptions {
  bool json = false;
};
struct SnapshotOptions {
  bool json = false;
  double timeout_seconds = 10.0;
  std::string kubelet_socket;  // --kubelet-socket: "" the default socket when there, or off
};
struct WatchOptions {
  bool json = false;
  std::string kubelet_socket;  // --kubelet-socket (local probes only): as serve's
  long count = 0;              // 0: until interrupted
  double duration_seconds = 0;
  std::string output_file;  // record: JSON lines into this file
  std::string connect;      // watch --connect tcp:// | tls://HOST:PORT, ws:// | wss://HOST:PORT/ws
  std::string token_file;   // bearer token for --connect
  std::string ca_file;      // --connect over TLS: the CA of the server's certificate
  std::string cert_file;    // --connect, mutual TLS: this client's certificate
  std::string key_file;     // and its key
  std::string container;    // watch --container ID: only that container's processes
};
struct DoctorOptions {
  bool json = false;
  double tool_timeout_seconds = 3.0;  // each vendor tool's version run
  /// Fewer GPUs found than this: exit 1 (--expect-gpus; 0: not checked).
  std::size_t expect_gpus = 0;
  bool expect_gpus_given = false;  // on the command line (else serve.expect_gpus of --config)
  /// The environment variables the doctor reads, as they were when the program started (main
  /// then sets the probe rows' environment for itself).
  std::map<std::string, std::string> environment;
};
struct ReplayOptions {
  std::string file;
  bool json = false;
  bool realtime = false;
};

int run_list(const Config& config, const ListOptions& o);
int run_snapshot(Config config, const SnapshotOptions& o);
int run_watch(Config config, const WatchOptions& o);
int run_replay(const ReplayOptions& o);
/// Exit code 0 when nothing blocks reading every GPU found, 1 when something does.
int run_doctor(const Config& config, const DoctorOptions& o);

/// Detects every probe the config names (or all known probes); used by list and by
/// --simulate-if-no-gpu. Each entry: probe name, detection (or the reason it could not be built).
struct ProbeReport {
  std::string name;
  Detection detection;
  std::string note;  // which source the probe chose, and why (SourceNote); empty when none
};
std::vector<ProbeReport> detect_probes(const Config& config, std::chrono::milliseconds timeout);

}  // namespace gpustream::cli
