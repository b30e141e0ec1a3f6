// gpustream — the command-line tool. See `gpustream --help` and docs/cli.md; the commands are
// the rows of command_table() (docs/architecture/cli.md).
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "gpustream/probes/doctor.hpp"
#include "gpustream/probes/registry.hpp"
#include "options.hpp"

namespace gpustream::cli {

// Set by the SIGINT/SIGTERM handler, read by every command's loop: a signal handler can reach
// nothing but a global.
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
std::atomic<bool> g_interrupted{false};

namespace {
extern "C" void on_signal(int) { g_interrupted.store(true); }
}  // namespace

const std::vector<Command>& command_table() {
  static const std::vector<Command> commands = {
      list_command(),  snapshot_command(), capture_command(), watch_command(),  record_command(),
      serve_command(), doctor_command(),   fleet_command(),   replay_command(),
  };
  return commands;
}

}  // namespace gpustream::cli

int main(int argc, char** argv) {
  using namespace gpustream::cli;
  CommandContext context;
  context.environment = gpustream::doctor::environment_snapshot();  // before the rows' setenv
  // The variables a probe's vendor library reads once (each row's environment column), set
  // before any thread exists; a value the user gave is kept.
  gpustream::set_probe_environment();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"gpustream — GPU telemetry: every GPU on this machine, as a stream of snapshots"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpustream 0.1.0");
  std::vector<std::pair<CLI::App*, CommandRun>> commands;
  for (const auto& c : command_table()) {
    auto* sub = app.add_subcommand(std::string(c.name), std::string(c.help));
    commands.emplace_back(sub, c.setup(*sub, context));
  }

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
    for (const auto& [sub, run] : commands)
      if (*sub) return run();
  } catch (const gpustream::ConfigError& e) {
    std::cerr << "gpustream: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "gpustream: " << e.what() << "\n";
    return kExitFailure;
  }
  return kExitUsage;
}
