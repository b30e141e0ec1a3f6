// gpustream serve — TCP + HTTP/WebSocket streams, /metrics, the JSON API and the dashboard
// (transport/include/gpustream/transport/server.hpp, docs/protocol.md ("Wire messages"),
// docs/security.md) — and gpustream fleet (docs/fleet.md), which shares its server flags
// (server_options.hpp) and its front (server_front.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpustream/config.hpp"
#include "kubelet_options.hpp"
#include "nats_auth_options.hpp"
#include "otlp_options.hpp"
#include "reload.hpp"
#include "server_options.hpp"

namespace gpustream::cli {

struct ServeOptions {
  ServerFlags server;  // the listener, token, Host/Origin and limit flags (server_options.hpp)
  std::string nats;    // NATS server URL for the bridge (gpustream.<node>.<probe>); empty: none
  std::string node;    // the node's name on the bus (--node); empty: the host name
  std::string nats_prefix = "gpustream";           // the subjects' first token(s) (a fleet shard)
  std::string nats_encoding = "compact";           // compact | json
  std::uint32_t nats_full_every = 10;              // compact: a full message every N per probe
  std::string nats_kv_bucket = "gpustream_nodes";  // "off": no key-value state
  double nats_kv_ttl_seconds = 30;
  /// /healthz answers 503 once NATS has been disconnected this long (--nats-unhealthy-after).
  double nats_unhealthy_after_seconds = 10;
  /// --health ADDR: a headless agent's listener answering only /healthz and /metrics.
  std::string health;
  NatsAuthFlags nats_auth;  // --nats-creds, --nats-user ... (nats_auth_options.hpp)
  OtlpFlags otlp;           // --otlp, --otlp-header ... (otlp_options.hpp)
  KubeletFlags kubelet;     // --kubelet-socket, --kubelet-refresh (kubelet_options.hpp)
};

/// Registers the serve flags on `sub`: the server options, then the bus flags (the common
/// flags are added separately).
void add_serve_options(CLI::App& sub, ServeOptions& o);
/// --nats: comma-separated nats://HOST:PORT or tls://HOST:PORT. Throws ConfigError.
void check_nats_url(const std::string& url);

/// gpustream fleet: the server flags plus the fleet's own (docs/fleet.md).
struct FleetCliOptions {
  ServerFlags server;
  std::string config_file;  // --config: a JSON config file whose "fleet" object is read
  std::string nats = "nats://127.0.0.1:4222";
  NatsAuthFlags nats_auth;  // --nats-creds, --nats-user ... (nats_auth_options.hpp)
  std::string subject_prefix = "gpustream";
  std::string kv_bucket = "gpustream_nodes";  // "off": do not read the key-value state
  std::string kv_create = "on";               // on|off: create the bucket when it is missing
  std::string kv_storage = "file";            // file|memory
  std::uint32_t kv_replicas = 1;
  double kv_ttl_seconds = 0;  // 0: gone_seconds
  std::size_t kv_max_bytes = std::size_t{1} << 30;
  double stale_seconds = 5;
  double gone_seconds = 30;
  std::size_t max_nodes = 100000;
  /// Bytes the bus decoder keeps of all (node, probe) streams together (BusLimits).
  std::size_t max_bus_state_bytes = std::size_t{512} << 20;
  /// Each publisher's budget (transport::PublisherBudget) and the decode queues' bound.
  double publisher_messages_per_second = 200;
  std::size_t publisher_bytes_per_second = std::size_t{32} << 20;
  double publisher_cpu_ms_per_second = 100;
  double publisher_burst_seconds = 2;
  std::size_t publisher_queue_messages = 64;
  std::size_t publisher_queue_bytes = std::size_t{8} << 20;
  std::size_t decode_queue_bytes = std::size_t{256} << 20;
  OtlpFlags otlp;  // --otlp, --otlp-header ... (otlp_options.hpp): every node's devices
};
void add_fleet_options(CLI::App& sub, FleetCliOptions& o);
/// The config file's "fleet" object (docs/configuration.md): the shared server keys
/// (server_config_keys) and "nats", "subject_prefix", "kv_bucket", "kv_create", "kv_storage",
/// "kv_replicas", "kv_ttl_seconds", "kv_max_bytes", "stale_seconds",
/// "gone_seconds", "max_nodes", "max_bus_state_bytes", the publisher budget's
/// "publisher_messages_per_second", "publisher_bytes_per_second", "publisher_cpu_ms_per_second",
/// "publisher_burst_seconds", "publisher_queue_messages", "publisher_queue_bytes" and
/// "decode_queue_bytes", the credential keys (nats_auth_flag_table), the OTLP keys
/// (otlp_flag_table) — each the flag of the same meaning,
/// checked like it; a flag on the command line wins. Throws ConfigError (bad file, unknown key,
/// bad value).
void apply_fleet_config(const Config& config, CLI::App& sub);
/// Runs until SIGINT/SIGTERM like serve; 2 for a bad flag, 1 when NATS cannot be reached or an
/// address cannot be bound.
int run_fleet(const FleetCliOptions& o, ReloadRegistry& reload);

/// The config file's "serve" object: the shared server keys (server_config_keys) and "nats",
/// "node", "nats_prefix", "nats_encoding", "nats_full_every", "nats_kv_bucket",
/// "nats_kv_ttl_seconds" and the credential keys (nats_auth_flag_table: "nats_creds",
/// "nats_user", "nats_password_file" ...) and the OTLP keys (otlp_flag_table: "otlp",
/// "otlp_headers", "otlp_interval_seconds" ...), each checked like its flag; a flag given on the
/// command line wins. Throws ConfigError for an unknown key or a bad value. Call after `sub` has
/// parsed; the values land in the ServeOptions that add_serve_options bound to `sub`.
void apply_serve_config(const Config& config, CLI::App& sub);

/// Runs until SIGINT/SIGTERM (with --listen off, no --tcp and --nats: a headless agent that only
/// publishes), then stops cleanly (close frames, flush) and returns 0. Prints
/// "listening http HOST:PORT" / "listening tcp HOST:PORT" on stdout once bound (the real
/// port when 0 was asked). Returns 2 for a bad flag value or token file, 1 when an address
/// cannot be bound.
/// `reload`: what SIGHUP does (reload.hpp); run_serve adds the token's reloader and the
/// registry's counters to /metrics.
int run_serve(Config config, const ServeOptions& o, ReloadRegistry& reload);

}  // namespace gpustream::cli
