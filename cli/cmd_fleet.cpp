// gpustream fleet — every node's snapshots from NATS behind a transport::Server (docs/fleet.md).
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>

#include <boost/asio/io_context.hpp>

#include "commands.hpp"
#include "gpustream/channel.hpp"
#include "gpustream/log.hpp"
#include "gpustream/terminal_text.hpp"
#include "gpustream/transport/address.hpp"
#include "gpustream/transport/fleet_codec.hpp"
#include "gpustream/transport/otlp.hpp"
#if defined(GPUSTREAM_HAS_NATS)
#include "gpustream/transport/fleet.hpp"
#endif
#include "gpustream/transport/server.hpp"
#include "options.hpp"
#include "serve.hpp"
#include "server_front.hpp"

namespace gpustream::cli {

namespace {

/// A CLI11 check from a function that throws ConfigError: the same words on the command line
/// and, prefixed with the key's path, from the config file.
CLI::Validator checked_by(void (*check)(const std::string&), const char* what) {
  return CLI::Validator(
      [check](std::string& v) {
        try {
          check(v);
          return std::string();
        } catch (const ConfigError& e) {
          // CLI11 names the flag itself: drop the check's own "--flag: ".
          std::string what = e.what();
          if (what.rfind("--", 0) == 0 && what.find(": ") != std::string::npos)
            what.erase(0, what.find(": ") + 2);
          return what;
        }
      },
      what);
}

void check_bucket(const std::string& v) {
  if (v != "off" && transport::node_name_error(v))
    throw ConfigError("a bucket name is 1-64 letters, digits, '_' and '-' (or 'off'), got '" + v +
                      "'");
}

void check_prefix(const std::string& v) {
  // One or more subject tokens of [A-Za-z0-9_-], separated by '.': no wildcard, no empty token.
  std::string_view rest = v;
  while (true) {
    const auto dot = rest.find('.');
    if (transport::node_name_error(rest.substr(0, dot)))
      throw ConfigError(
          "a subject prefix is tokens of letters, digits, '_' and '-' joined by "
          "'.', got '" +
          v + "'");
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
  }
}

/// fleet's own flags beyond the server options.
const std::vector<FlagRow<FleetCliOptions>>& fleet_flag_table() {
  // One row per flag (a new fleet flag is one more row here).
  static const std::vector<FlagRow<FleetCliOptions>> rows = {
      {"--config", "",
       "JSON config file whose \"fleet\" object holds these settings (keys: the flag names "
       "with '_', e.g. stale_seconds, max_nodes, token_file; docs/configuration.md); a flag "
       "given here wins",
       &FleetCliOptions::config_file, CLI::ExistingFile},
      {"--nats", "nats", "The NATS server the agents publish to (default nats://127.0.0.1:4222)",
       &FleetCliOptions::nats, checked_by(check_nats_url, "URL")},
      {"--subject-prefix", "subject_prefix",
       "First subject token(s) of the agents' subjects (default gpustream)",
       &FleetCliOptions::subject_prefix, checked_by(check_prefix, "PREFIX")},
      {"--kv-bucket", "kv_bucket",
       "The key-value bucket with each node's last state, read at start (default "
       "gpustream_nodes; 'off': none)",
       &FleetCliOptions::kv_bucket, checked_by(check_bucket, "BUCKET")},
      {"--kv-create", "kv_create",
       "Create the key-value bucket when it is missing, at start and after NATS comes back "
       "(on|off, default on); off, or when not permitted: the view says once what an admin "
       "runs (docs/fleet.md \"The bucket\")",
       &FleetCliOptions::kv_create, CLI::IsMember({"on", "off"})},
      {"--kv-storage", "kv_storage",
       "Where a bucket the view creates keeps its entries: file (default: survives a "
       "nats-server restart) or memory",
       &FleetCliOptions::kv_storage, CLI::IsMember({"file", "memory"})},
      {"--kv-replicas", "kv_replicas",
       "Replicas of a bucket the view creates (1-5, a JetStream cluster's; default 1)",
       &FleetCliOptions::kv_replicas, CLI::Range(1, 5)},
      {"--kv-ttl", "kv_ttl_seconds",
       "Seconds an entry of a bucket the view creates lives (default: --gone); the agents "
       "put their state at least every third of their own --kv-ttl",
       &FleetCliOptions::kv_ttl_seconds, CLI::Range(1.0, 31536000.0)},
      {"--kv-max-bytes", "kv_max_bytes",
       "Bytes a bucket the view creates may hold in all (default 1073741824: 1 GiB; a put "
       "beyond it is refused); each entry at most the bus message bound (1 MiB)",
       &FleetCliOptions::kv_max_bytes, CLI::Range(std::size_t{1} << 20, std::size_t{1} << 50)},
      {"--stale", "stale_seconds",
       "Seconds without a message after which a node is stale: its values are withheld "
       "(default 5)",
       &FleetCliOptions::stale_seconds, CLI::Range(0.05, 86400.0)},
      {"--gone", "gone_seconds",
       "Seconds without a message after which a node is gone (default 30: the agents' "
       "key-value time-to-live)",
       &FleetCliOptions::gone_seconds, CLI::Range(0.05, 864000.0)},
      {"--max-nodes", "max_nodes",
       "Nodes kept at most; beyond, new nodes replace gone ones or are refused (default "
       "100000)",
       &FleetCliOptions::max_nodes, CLI::Range(1, 10000000)},
      {"--max-bus-state-bytes", "max_bus_state_bytes",
       "Bytes the last full snapshots of all nodes' streams may take together in the bus "
       "decoder; beyond, the stream heard from longest ago is dropped and rebuilt from its next "
       "full message (default 536870912: 512 MiB)",
       &FleetCliOptions::max_bus_state_bytes,
       CLI::Range(std::size_t{1} << 20, std::size_t{1} << 40)},
      // Each publisher's budget (the node named by the subject; docs/security.md, "The fleet
      // view: a hostile bus"). Beyond it, its messages are refused and counted by reason.
      {"--publisher-messages-per-second", "publisher_messages_per_second",
       "Bus messages a second one node may send (default 200); beyond, refused "
       "(budget_messages)",
       &FleetCliOptions::publisher_messages_per_second, CLI::Range(0.1, 1e6)},
      {"--publisher-bytes-per-second", "publisher_bytes_per_second",
       "Inflated bytes a second one node's messages may declare (a delta: with its base; "
       "default 33554432: 32 MiB); beyond, refused before decoding (budget_bytes)",
       &FleetCliOptions::publisher_bytes_per_second,
       CLI::Range(std::size_t{1} << 16, std::size_t{1} << 40)},
      {"--publisher-cpu-ms-per-second", "publisher_cpu_ms_per_second",
       "Milliseconds of decoding CPU time a second one node may cost (default 100); a node "
       "in debt has its messages refused until it is paid back (budget_cpu)",
       &FleetCliOptions::publisher_cpu_ms_per_second, CLI::Range(1.0, 1000.0)},
      {"--publisher-burst-seconds", "publisher_burst_seconds",
       "Seconds of each rate above a node may spend at once (default 2)",
       &FleetCliOptions::publisher_burst_seconds, CLI::Range(0.1, 3600.0)},
      {"--publisher-queue-messages", "publisher_queue_messages",
       "Messages of one node waiting to be decoded (default 64); beyond, refused (queue_full)",
       &FleetCliOptions::publisher_queue_messages, CLI::Range(1, 1000000)},
      {"--publisher-queue-bytes", "publisher_queue_bytes",
       "Bytes of one node's messages waiting to be decoded (default 8388608: 8 MiB)",
       &FleetCliOptions::publisher_queue_bytes,
       CLI::Range(std::size_t{1} << 16, std::size_t{1} << 36)},
      {"--decode-queue-bytes", "decode_queue_bytes",
       "Bytes of all nodes' messages waiting to be decoded together (default 268435456: "
       "256 MiB)",
       &FleetCliOptions::decode_queue_bytes,
       CLI::Range(std::size_t{1} << 20, std::size_t{1} << 40)},
  };
  return rows;
}

}  // namespace

void apply_fleet_config(const Config& config, CLI::App& sub) {
  static const std::vector<ConfigKey> fleet_keys = config_keys_of(fleet_flag_table());
  static const std::vector<ConfigKey> auth_keys = config_keys_of(nats_auth_flag_table());
  static const std::vector<ConfigKey> otlp_keys = config_keys_of(otlp_flag_table());
  apply_config_section(config, sub, kFleetSection,
                       {&server_config_keys(), &fleet_keys, &auth_keys, &otlp_keys});
}

void add_fleet_options(CLI::App& sub, FleetCliOptions& o) {
  add_server_options(sub, o.server);
  add_flag_rows(sub, o, fleet_flag_table());
  add_flag_rows(sub, o.nats_auth, nats_auth_flag_table());
  add_flag_rows(sub, o.otlp, otlp_flag_table());
}

int run_fleet(const FleetCliOptions& o, ReloadRegistry& reload) {
#if !defined(GPUSTREAM_HAS_NATS)
  (void)o;
  (void)reload;
  std::cerr << "gpustream: this build has no NATS support (install libnats-dev)\n";
  return kExitUsage;
#else
  transport::ServerOptions so;
  transport::NatsAuth auth;
  std::optional<transport::OtlpOptions> otlp_options;
  try {
    check_nats_url(o.nats);
    auth = make_nats_auth(o.nats_auth);
    so = make_server_options(o.server);
    otlp_options = make_otlp_options(o.otlp, this_host_name());
    if (!so.http && !so.tcp) throw ConfigError("nothing to serve: --listen off and no --tcp");
    if (o.gone_seconds < o.stale_seconds)
      throw ConfigError(
          "--gone (fleet.gone_seconds) must not be shorter than --stale "
          "(fleet.stale_seconds)");
  } catch (const ConfigError& e) {
    std::cerr << "gpustream: " << terminal_safe(e.what()) << "\n";
    return kExitUsage;
  }
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  transport::FleetOptions fo;
  fo.url = o.nats;
  fo.auth = std::move(auth);
  fo.subject_prefix = o.subject_prefix;
  fo.kv_bucket = o.kv_bucket == "off" ? std::string() : o.kv_bucket;
  fo.kv_create = o.kv_create == "on";
  fo.kv_storage =
      o.kv_storage == "memory" ? transport::KvStorage::memory : transport::KvStorage::file;
  fo.kv_replicas = static_cast<int>(o.kv_replicas);
  if (o.kv_ttl_seconds > 0) fo.kv_ttl = millis_of_seconds(o.kv_ttl_seconds);
  fo.kv_max_bytes = static_cast<std::int64_t>(o.kv_max_bytes);
  fo.stale_after = millis_of_seconds(o.stale_seconds);
  fo.gone_after = millis_of_seconds(o.gone_seconds);
  fo.max_nodes = o.max_nodes;
  fo.limits.max_state_bytes = o.max_bus_state_bytes;
  fo.budget.messages_per_second = o.publisher_messages_per_second;
  fo.budget.bytes_per_second = o.publisher_bytes_per_second;
  fo.budget.cpu_per_second = std::chrono::milliseconds(
      static_cast<std::int64_t>(std::llround(o.publisher_cpu_ms_per_second)));
  fo.budget.burst = millis_of_seconds(o.publisher_burst_seconds);
  fo.budget.queue_messages = o.publisher_queue_messages;
  fo.budget.queue_bytes = o.publisher_queue_bytes;
  fo.budget.total_queue_bytes = o.decode_queue_bytes;
  if (!fo.kv_bucket.empty())
    fo.on_bucket_read = [bucket = fo.kv_bucket](std::uint64_t nodes,
                                                std::chrono::milliseconds took) {
      std::cerr << "gpustream: fleet: the key-value bucket '" + bucket + "' is read (" +
                       std::to_string(nodes) + " from the key-value bucket) in " +
                       std::to_string(took.count()) + " ms\n"
                << std::flush;
    };
  auto fleet = std::make_unique<transport::FleetView>(io.get_executor(), channel, fo);
  so.extra_routes = fleet->routes();
  so.extra_metrics = with_reload_metrics(fleet->metrics(), reload);
  so.fit_source = fleet->fit_source();
  // The OTLP push (--otlp): every node's devices, each node a resource of its own; made before
  // the server whose /metrics reads its counters, destroyed after it.
  std::unique_ptr<transport::OtlpExporter> otlp;
  if (otlp_options) {
    otlp = std::make_unique<transport::OtlpExporter>(io.get_executor(), channel, *otlp_options);
    so.extra_metrics = [exporter = otlp.get(), before = std::move(so.extra_metrics)] {
      return (before ? before() : std::string()) + transport::otlp_metrics(exporter->stats());
    };
  }
  transport::Server server(io.get_executor(), channel, so);
  try {
    fleet->start();
  } catch (const std::exception& e) {
    std::cerr << "gpustream: fleet: " << terminal_safe(e.what()) << "\n";
    return kExitFailure;
  }
  if (!start_server(server)) return kExitFailure;
  // The bucket is read in the background (a line says when it is done): listening now.
  std::cerr << "gpustream: fleet from " << transport::redact_url_credentials(o.nats)
            << (fo.kv_bucket.empty()
                    ? std::string()
                    : " (the key-value bucket '" + fo.kv_bucket + "' is read in the background)")
            << "; stale after " << o.stale_seconds << " s, gone after " << o.gone_seconds << " s\n";
  announce_listening(server, !so.token.empty(), {"fleet dashboard", "/fleet", ""});
  if (otlp) {
    otlp->start();
    std::cerr << "gpustream: " << otlp_start_line(otlp->options()) << "\n";
  }

  SignalStop signal_stop(io);
  reload.add("token", {}, token_reloader(server, o.server.token_file, so.token));
  reload.add("tls", {}, tls_reloader(server, so.tls));
  reload.add("nats", {},
             nats_auth_reloader(o.nats_auth, fo.auth,
                                [view = fleet.get()](const auto& next, std::string* error) {
                                  return view->set_auth(next, error);
                                }));
  signal_stop.run(
      [&] {
        fleet->stop();
        server.stop([&] { io.stop(); });
      },
      [&] { server.stop([&] { io.stop(); }); }, [&reload] { reload.reload(); });
  if (otlp) otlp->stop();
  fleet->stop();
  return kExitOk;
#endif
}

}  // namespace gpustream::cli

namespace gpustream::cli {

Command fleet_command() {
  return {"fleet",
          "Serve every node's GPUs from NATS (agents: serve --nats URL --node NAME): the same "
          "API, protocol, /metrics and dashboard, plus /api/v1/nodes, /api/v1/fit and /fleet",
          [](CLI::App& sub, CommandContext& context) -> CommandRun {
            auto o = std::make_shared<FleetCliOptions>();
            add_fleet_options(sub, *o);
            return [o, &sub, &context] {
              // gpustream --log-format F fleet: the flag wins over the file's log_format.
              const std::string flag_format = context.common.log_format;
              std::optional<Config> config;
              if (!o->config_file.empty()) {
                config = load_config(o->config_file, Config{}, cli_config_sections());
                apply_fleet_config(*config, sub);
                // The file's log settings (serve's are applied by make_config).
                if (!config->log_level.empty()) set_log_level(config->log_level);
                if (const auto f = log_format_from_string(config->log_format);
                    f && flag_format.empty())
                  set_log_format(*f);
              }
              // SIGHUP re-reads the config file and checks the "fleet" object on fresh flags
              // before anything is applied (reload.hpp).
              ReloadRegistry reload(config_loader(o->config_file,
                                                  [o] {
                                                    Config c = load_config(o->config_file, Config{},
                                                                           cli_config_sections());
                                                    CLI::App check;
                                                    FleetCliOptions fresh;
                                                    add_fleet_options(check, fresh);
                                                    apply_fleet_config(c, check);
                                                    return c;
                                                  }),
                                    config);
              reload.add("log", {"log_level", "log_format"},
                         log_reloader("", flag_format, "warn"));  // fleet: the SDK's level
              return run_fleet(*o, reload);
            };
          }};
}

}  // namespace gpustream::cli
