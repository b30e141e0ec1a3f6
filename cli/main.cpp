// gpustream — the command-line tool. See `gpustream --help` and docs/cli.md.
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>

#include "capture.hpp"
#include "commands.hpp"
#include "gpustream/probes/doctor.hpp"
#include "options.hpp"
#include "serve.hpp"

namespace gpustream::cli {

// Set by the SIGINT/SIGTERM handler, read by every command's loop: a signal handler can reach
// nothing but a global.
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
std::atomic<bool> g_interrupted{false};

namespace {
extern "C" void on_signal(int) { g_interrupted.store(true); }
}  // namespace

}  // namespace gpustream::cli

int main(int argc, char** argv) {
  using namespace gpustream::cli;
  DoctorOptions doctor_o;
  doctor_o.environment = gpustream::doctor::environment_snapshot();  // before setenv below
  // Level Zero loaders without zesInit (Debian 12's libze1 1.8.x) enable Sysman only through
  // this variable, which zeInit reads; it must be set before any thread exists.
  // NOLINTNEXTLINE(concurrency-mt-unsafe): no other thread exists yet.
  ::setenv("ZES_ENABLE_SYSMAN", "1", /*overwrite=*/0);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"gpustream — GPU telemetry: every GPU on this machine, as a stream of snapshots"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpustream 0.1.0");

  CommonOptions common;
  ListOptions list_o;
  SnapshotOptions snap_o;
  WatchOptions watch_o;
  WatchOptions record_o;
  ReplayOptions replay_o;
  ServeOptions serve_o;
  CaptureOptions capture_o;
  std::string replay_capture;
  double capture_tool_timeout = 15.0;
  FleetCliOptions fleet_o;

  auto* list = app.add_subcommand("list", "Each probe: available or not and why; its devices");
  add_common_options(*list, common, false);
  list->add_flag("--json", list_o.json, "JSON output");

  auto* snapshot =
      app.add_subcommand("snapshot", "One snapshot of every available probe, then exit");
  add_common_options(*snapshot, common);
  snapshot->add_flag("--json", snap_o.json, "One JSON document {schema, snapshots:[...]}");
  snapshot
      ->add_option("--timeout", snap_o.timeout_seconds,
                   "Seconds to wait for each probe's first sample (default 10)")
      ->check(CLI::Range(0.1, 600.0));
  snapshot
      ->add_option("--replay-capture", replay_capture,
                   "Read a bundle made by `gpustream capture` instead of this machine: its sysfs, "
                   "procfs, tool replays, and its NVML recording through the fake "
                   "libnvidia-ml.so.1 (give --nvml-library PATH, or copy it to DIR/nvml/)")
      ->check(CLI::ExistingDirectory);

  auto* capture = app.add_subcommand(
      "capture",
      "Write a support bundle to DIR: the sysfs files, DRM fdinfo, /proc/meminfo, vendor tool "
      "outputs and NVML answers the probes read, to replay offline with `snapshot "
      "--replay-capture DIR`. Not captured: command lines, environments, other /proc files, "
      "the host name. See docs/operations.md (Sending a capture)");
  add_common_options(*capture, common);
  capture->add_option("dir", capture_o.dir, "A new (or empty) folder")->required();
  capture
      ->add_option("--max-file-bytes", capture_o.max_file_bytes,
                   "Larger files and tool outputs are left out (default 1 MiB)")
      ->check(CLI::Range(std::uint64_t{1024}, std::uint64_t{1} << 32));
  capture
      ->add_option("--max-bytes", capture_o.max_total_bytes,
                   "Cap of the whole bundle (default 64 MiB)")
      ->check(CLI::Range(std::uint64_t{4096}, std::uint64_t{1} << 36));
  capture
      ->add_option("--tool-timeout", capture_tool_timeout,
                   "Each tool run is killed after this many seconds (default 15)")
      ->check(CLI::Range(0.1, 600.0));
  capture
      ->add_option("--max-processes", capture_o.max_processes,
                   "DRM client processes captured at most (default 1024)")
      ->check(CLI::PositiveNumber);

  auto* watch = app.add_subcommand("watch",
                                   "A live table of every GPU (or JSON lines); GPU events (Xid, "
                                   "ECC, ...) on stderr, also with --connect");
  add_common_options(*watch, common);
  watch->add_flag("--json", watch_o.json, "One snapshot per line, JSON");
  watch->add_option("--count", watch_o.count, "Stop after N snapshots")->check(CLI::PositiveNumber);
  watch->add_option("--duration", watch_o.duration_seconds, "Stop after this many seconds")
      ->check(CLI::PositiveNumber);
  watch->add_option("--connect", watch_o.connect,
                    "Watch a running `gpustream serve`: tcp://HOST:PORT or ws://HOST:PORT/ws "
                    "(reconnects and resumes by sequence)");
  watch->add_option("--token-file", watch_o.token_file, "Bearer token for --connect");
  watch
      ->add_option("--container", watch_o.container,
                   "Only the processes of this container (a prefix of its id, at least 4 "
                   "characters, or a Kubernetes pod UID) and the GPUs they use")
      ->check([](const std::string& v) {
        return v.size() >= 4 ? std::string{} : std::string("give at least 4 characters of the id");
      });

  auto* record = app.add_subcommand("record", "Record snapshots to FILE (JSON lines)");
  add_common_options(*record, common);
  record->add_option("file", record_o.output_file, "Output file")->required();
  record->add_option("--count", record_o.count, "Stop after N snapshots")
      ->check(CLI::PositiveNumber);
  record->add_option("--duration", record_o.duration_seconds, "Stop after this many seconds")
      ->check(CLI::PositiveNumber);

  auto* serve = app.add_subcommand(
      "serve",
      "Serve snapshots: HTTP + WebSocket (dashboard, /metrics, /api/v1 incl. /api/v1/fit?bytes=N), "
      "optional TCP");
  add_common_options(*serve, common);
  add_serve_options(*serve, serve_o);

  auto* doctor = app.add_subcommand(
      "doctor", "For each probe: what it looked for and found, what blocks it, and the exact fix");
  add_common_options(*doctor, common, false);
  doctor->add_flag(
      "--json", doctor_o.json,
      "One JSON document {schema: \"gpustream-doctor/1\", fully_readable, blockers, "
      "warnings, probes:[{probe,status}], findings:[{probe,check,status,detail,fix}]}");
  doctor
      ->add_option("--tool-timeout", doctor_o.tool_timeout_seconds,
                   "Seconds each vendor tool's version run may take before it is killed, and "
                   "NVML's and the AMD SMI library's calls are waited for (default 3)")
      ->check(CLI::Range(0.05, 60.0));
  doctor->footer(
      "Statuses: ok, info, warn (degraded or worth knowing), blocker (a GPU, or part of what "
      "gpustream reads of it, cannot be read until the fix is applied).\n"
      "Exit code: 0 when no finding is a blocker (every GPU found can be read fully), 1 when "
      "one is, 2 for a usage error. Read-only: nothing is changed, nothing is sampled. See "
      "docs/operations.md, \"Diagnosing a machine: gpustream doctor\".");
  auto* fleet = app.add_subcommand(
      "fleet",
      "Serve every node's GPUs from NATS (agents: serve --nats URL --node NAME): the same API, "
      "protocol, /metrics and dashboard, plus /api/v1/nodes, /api/v1/fit and /fleet");
  add_fleet_options(*fleet, fleet_o);

  auto* replay = app.add_subcommand("replay", "Print a recording made by `gpustream record`");
  replay->add_option("file", replay_o.file, "Recording (JSON lines)")
      ->required()
      ->check(CLI::ExistingFile);
  replay->add_flag("--json", replay_o.json, "JSON lines instead of a table");
  replay->add_flag("--realtime", replay_o.realtime, "Pace the output like the recording");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "gpustream: " << e.what() << "\n(run 'gpustream --help' for usage)\n";
    return kExitUsage;
  }

  try {
    if (*replay) return run_replay(replay_o);
    // The doctor's report says everything; the libraries' info lines would only interleave.
    if (*doctor && common.log_level.empty()) common.log_level = "warn";
    if (*snapshot && !replay_capture.empty()) prepare_replay_capture(common, replay_capture);
    if (*fleet) {
      if (!fleet_o.config_file.empty())
        apply_fleet_config(
            gpustream::load_config(fleet_o.config_file, gpustream::Config{}, cli_config_sections()),
            *fleet);
      return run_fleet(fleet_o);
    }
    const auto config = make_config(common);
    if (*list) return run_list(config, list_o);
    if (*doctor) return run_doctor(config, doctor_o);
    if (*snapshot) return run_snapshot(config, snap_o);
    if (*capture) {
      capture_o.tool_timeout = std::chrono::milliseconds(std::llround(capture_tool_timeout * 1000));
      return run_capture(config, capture_o);
    }
    if (*watch) return run_watch(config, watch_o);
    if (*record) return run_watch(config, record_o);
    if (*serve) {
      apply_serve_config(config, *serve);
      return run_serve(config, serve_o);
    }
  } catch (const gpustream::ConfigError& e) {
    std::cerr << "gpustream: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "gpustream: " << e.what() << "\n";
    return kExitFailure;
  }
  return kExitUsage;
}
