// gpustream serve — TCP + HTTP/WebSocket streams, /metrics, the JSON API and the dashboard
// (transport/include/gpustream/transport/server.hpp, docs/protocol.md ("Wire messages"), docs/security.md).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpustream/config.hpp"

namespace gpustream::cli {

struct ServeOptions {
  std::string listen = "127.0.0.1:9400";  // HTTP + WebSocket; "off": none
  std::string tcp;                        // TCP JSON lines; empty: none
  std::string token_file;                 // bearer token file; empty: no token
  std::vector<std::string> allow_origins;
  std::vector<std::string> allow_hosts;
  std::size_t max_connections = 256;
  std::size_t max_message_bytes = 64 * 1024;
  double handshake_timeout_seconds = 10;
  double idle_timeout_seconds = 60;
  double write_timeout_seconds = 10;
  std::size_t send_queue = 64;
  std::size_t max_subscribes = 64;
  std::string nats;  // NATS server URL for the bridge (gpustream.<host>.<probe>); empty: none
};

/// Registers the serve flags on `sub` (the common flags are added separately).
void add_serve_options(CLI::App& sub, ServeOptions& o);

/// Runs until SIGINT/SIGTERM, then stops cleanly (close frames, flush) and returns 0. Prints
/// "listening http HOST:PORT" / "listening tcp HOST:PORT" on stdout once bound (the real
/// port when 0 was asked). Returns 2 for a bad flag value or token file, 1 when an address
/// cannot be bound.
int run_serve(Config config, const ServeOptions& o);

}  // namespace gpustream::cli
