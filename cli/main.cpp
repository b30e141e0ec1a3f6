// gpustream — the command-line tool. See `gpustream --help` and docs/cli.md; the commands are
// the rows of command_table() (docs/architecture/cli.md).
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/doctor.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/terminal_text.hpp"
#include "options.hpp"
#include "say.hpp"

namespace gpustream::cli {

namespace {

// The self-pipe: the handler writes one byte and nobody reads it, so its read end stays
// readable once a signal came and every wait_interrupted_for() — now or later — returns at once.
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
int g_wake_pipe[2] = {-1, -1};

extern "C" void on_signal(int sig) {
  const int saved = errno;
  int expected = 0;
  g_interrupt_signal.compare_exchange_strong(expected, sig);
  g_interrupted.store(true);
  if (g_wake_pipe[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] const auto n = ::write(g_wake_pipe[1], &byte, 1);  // non-blocking
  }
  errno = saved;
}

}  // namespace

bool wait_interrupted_for(std::chrono::milliseconds timeout) {
  if (g_interrupted.load()) return true;
  if (g_wake_pipe[0] < 0) {  // no pipe (pipe2 failed at start): sleep in short slices
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!g_interrupted.load() && std::chrono::steady_clock::now() < end) ::poll(nullptr, 0, 50);
    return g_interrupted.load();
  }
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0 || g_interrupted.load()) break;
    pollfd p{g_wake_pipe[0], POLLIN, 0};
    // poll's timeout is an int of milliseconds: a longer wait is made of several.
    const auto slice = std::min<std::chrono::milliseconds::rep>(left.count(), 1'000'000);
    if (::poll(&p, 1, static_cast<int>(slice)) > 0) break;
  }
  return g_interrupted.load();
}

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
  if (::pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) g_wake_pipe[0] = g_wake_pipe[1] = -1;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);

  route_cerr_through_log_format();  // --log-format json: the commands' stderr lines too
  CLI::App app{"gpustream — GPU telemetry: every GPU on this machine, as a stream of snapshots"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpustream 0.1.0");
  // Global (before the command: `gpustream --log-format json fleet ...`), the same value as each
  // machine-reading command's own --log-format; a flag wins over the config file's log_format.
  app.add_option("--log-format", context.common.log_format,
                 "Log lines on stderr, for every command: text or json (one object per line)")
      ->check(CLI::IsMember({"text", "json"}));
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
    std::cerr << "gpustream: " << gpustream::terminal_safe_text(e.what())
              << "\n(run 'gpustream --help' for usage)\n";
    return kExitUsage;
  }

  if (const auto f = gpustream::log_format_from_string(context.common.log_format))
    gpustream::set_log_format(*f);
  try {
    for (const auto& [sub, run] : commands)
      if (*sub) return run();
  } catch (const gpustream::ConfigError& e) {
    // A message may quote a config file, a server's answer or a tool: terminal_safe.
    say(gpustream::terminal_safe_text(e.what()), gpustream::LogLevel::error);
    return kExitUsage;
  } catch (const std::exception& e) {
    say(gpustream::terminal_safe_text(e.what()), gpustream::LogLevel::error);
    return kExitFailure;
  }
  return kExitUsage;
}
