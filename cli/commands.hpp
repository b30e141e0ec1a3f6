// The subcommands of the gpustream tool. Each returns a process exit code (see options.hpp).
#pragma once

#include <atomic>
#include <map>
#include <string>

#include "gpustream/config.hpp"
#include "gpustream/probe.hpp"

namespace gpustream::cli {

/// Set by SIGINT/SIGTERM; long-running commands poll it (a signal handler sets it, hence a
/// global that is not const).
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
extern std::atomic<bool> g_interrupted;

struct ListOptions {
  bool json = false;
};
struct SnapshotOptions {
  bool json = false;
  double timeout_seconds = 10.0;
};
struct WatchOptions {
  bool json = false;
  long count = 0;  // 0: until interrupted
  double duration_seconds = 0;
  std::string output_file;  // record: JSON lines into this file
  std::string connect;      // watch --connect tcp://HOST:PORT | ws://HOST:PORT/ws
  std::string token_file;   // bearer token for --connect
  std::string container;    // watch --container ID: only that container's processes
};
struct DoctorOptions {
  bool json = false;
  double tool_timeout_seconds = 3.0;  // each vendor tool's version run
  /// The environment variables the doctor reads, as they were when the program started (main
  /// sets ZES_ENABLE_SYSMAN for itself).
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
