// gpustream serve — TCP + HTTP/WebSocket streams, /metrics, the JSON API and the dashboard
// (transport/include/gpustream/transport/server.hpp, docs/protocol.md ("Wire messages"),
// docs/security.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpustream/config.hpp"
#include "gpustream/transport/server.hpp"

namespace gpustream::cli {

struct ServeOptions {
  std::string listen = "127.0.0.1:9400";  // HTTP + WebSocket; "off": none
  std::string tcp;                        // TCP JSON lines; empty: none
  std::string token_file;                 // bearer token file; empty: no token
  std::vector<std::string> allow_origins;
  std::vector<std::string> allow_hosts;
  std::size_t max_connections = 256;  // per streaming transport (WebSocket, TCP)
  std::size_t max_http_connections = 64;
  std::size_t max_connections_per_address = 128;  // per transport
  double tcp_idle_timeout_seconds = 300;
  std::size_t max_message_bytes = 64 * 1024;
  double handshake_timeout_seconds = 10;
  double idle_timeout_seconds = 60;
  double write_timeout_seconds = 10;
  std::size_t send_queue = 64;
  std::size_t max_subscribes = 64;
  std::string nats;  // NATS server URL for the bridge (gpustream.<node>.<probe>); empty: none
  std::string node;  // the node's name on the bus (--node); empty: the host name
  std::string nats_prefix = "gpustream";           // the subjects' first token(s) (a fleet shard)
  std::string nats_encoding = "compact";           // compact | json
  std::uint32_t nats_full_every = 10;              // compact: a full message every N per probe
  std::string nats_kv_bucket = "gpustream_nodes";  // "off": no key-value state
  double nats_kv_ttl_seconds = 30;
  std::size_t metrics_processes = 0;  // per-process /metrics samples at most; 0: none
};

/// Registers the serve flags on `sub` (the common flags are added separately).
void add_serve_options(CLI::App& sub, ServeOptions& o);
/// The listener, token, Host/Origin and limit flags alone (serve and fleet share them).
void add_server_options(CLI::App& sub, ServeOptions& o);
/// The server's options from those flags (and checks of the NATS ones). Throws ConfigError.
transport::ServerOptions make_server_options(const ServeOptions& o);
/// --nats: comma-separated nats://HOST:PORT or tls://HOST:PORT. Throws ConfigError.
void check_nats_url(const std::string& url);

/// gpustream fleet: the server flags plus the fleet's own (docs/fleet.md).
struct FleetCliOptions {
  ServeOptions server;
  std::string config_file;  // --config: a JSON config file whose "fleet" object is read
  std::string nats = "nats://127.0.0.1:4222";
  std::string subject_prefix = "gpustream";
  std::string kv_bucket = "gpustream_nodes";  // "off": do not read the key-value state
  double stale_seconds = 5;
  double gone_seconds = 30;
  std::size_t max_nodes = 100000;
  /// Bytes the bus decoder keeps of all (node, probe) streams together (BusLimits).
  std::size_t max_bus_state_bytes = std::size_t{512} << 20;
};
void add_fleet_options(CLI::App& sub, FleetCliOptions& o);
/// The config file's "fleet" object (docs/configuration.md): the shared server keys
/// (server_config_keys) and "nats", "subject_prefix", "kv_bucket", "stale_seconds",
/// "gone_seconds", "max_nodes" — each the flag of the same meaning, checked like it; a flag on
/// the command line wins. Throws ConfigError (bad file, unknown key, bad value).
void apply_fleet_config(const Config& config, CLI::App& sub);
/// Runs until SIGINT/SIGTERM like serve; 2 for a bad flag, 1 when NATS cannot be reached or an
/// address cannot be bound.
int run_fleet(const FleetCliOptions& o);

/// One key of a config file's section and the flag it stands for.
struct ConfigKey {
  std::string_view key;   // e.g. "max_connections"
  std::string_view flag;  // e.g. "--max-connections"
};
/// The keys of the server flags that serve and fleet share (add_server_options): listen, tcp,
/// token_file, allow_origins, allow_hosts, the limits, metrics_processes.
const std::vector<ConfigKey>& server_config_keys();
/// Applies the config file's `section_name` object to the flags of `sub` that `tables` name:
/// each value goes through its flag's parser and checks as if typed; a flag given on the command
/// line wins. Throws ConfigError naming "<section>.<key>" for an unknown key (with the known
/// ones) or a bad value. Call after `sub` has parsed.
void apply_config_section(const Config& config, CLI::App& sub, std::string_view section_name,
                          const std::vector<const std::vector<ConfigKey>*>& tables);

/// The config file's "serve" object: each key is the flag it stands for ("listen", "tcp",
/// "token_file", "allow_origins", "allow_hosts", "max_connections", "max_http_connections",
/// "max_connections_per_address", "tcp_idle_timeout_seconds", "max_message_bytes",
/// "handshake_timeout_seconds", "idle_timeout_seconds", "write_timeout_seconds", "send_queue",
/// "max_subscribes", "nats", "node", "nats_prefix", "nats_encoding", "nats_full_every",
/// "nats_kv_bucket", "nats_kv_ttl_seconds", "metrics_processes"), checked like the flag; a flag
/// given on the command line wins. Throws ConfigError for an unknown key or a bad value. Call after
/// `sub` has parsed; the values land in the ServeOptions that add_serve_options bound to `sub`.
void apply_serve_config(const Config& config, CLI::App& sub);

/// Runs until SIGINT/SIGTERM (with --listen off, no --tcp and --nats: a headless agent that only
/// publishes), then stops cleanly (close frames, flush) and returns 0. Prints
/// "listening http HOST:PORT" / "listening tcp HOST:PORT" on stdout once bound (the real
/// port when 0 was asked). Returns 2 for a bad flag value or token file, 1 when an address
/// cannot be bound.
int run_serve(Config config, const ServeOptions& o);

}  // namespace gpustream::cli
