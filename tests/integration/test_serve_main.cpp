// gpustream_test_serve — `gpustream serve` for the integration tests, built from the CLI's own
// sources (run_serve, the common options) until the serve subcommand is wired into the
// gpustream executable. Usage: gpustream_test_serve [common flags] [serve flags].
#include <atomic>
#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "options.hpp"
#include "serve.hpp"

namespace gpustream::cli {
std::atomic<bool> g_interrupted{false};
}  // namespace gpustream::cli

int main(int argc, char** argv) {
  using namespace gpustream::cli;
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"gpustream serve (integration-test build)"};
  CommonOptions common;
  ServeOptions serve;
  add_common_options(app, common);
  add_serve_options(app, serve);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run_serve(make_config(common), serve);
  } catch (const gpustream::ConfigError& e) {
    std::cerr << "gpustream: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "gpustream: " << e.what() << "\n";
    return kExitFailure;
  }
}
