// gpustream serve — the Telemetry's channel behind a transport::Server, until a signal.
#include <functional>
#include <iostream>
#include <memory>
#include <utility>

#include <boost/asio/io_context.hpp>

#include "commands.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/split_list.hpp"
#include "gpustream/telemetry.hpp"
#include "gpustream/transport/address.hpp"
#include "gpustream/transport/fleet_codec.hpp"
#if defined(GPUSTREAM_HAS_NATS)
#include "gpustream/transport/nats_bridge.hpp"
#endif
#include "gpustream/terminal_text.hpp"
#include "gpustream/transport/otlp.hpp"
#include "gpustream/transport/prometheus.hpp"
#include "gpustream/transport/server.hpp"
#include "options.hpp"
#include "serve.hpp"
#include "server_front.hpp"

namespace gpustream::cli {

// libnats accepts almost any URL and would then retry it forever: check it first.
void check_nats_url(const std::string& url) {
  for (const auto& part : split_list(url, ListBlanks::trim)) {
    const auto scheme_end = part.find("://");
    const auto scheme =
        scheme_end == std::string::npos ? std::string() : part.substr(0, scheme_end);
    const auto rest = scheme_end == std::string::npos ? part : part.substr(scheme_end + 3);
    if ((scheme != "nats" && scheme != "tls") || rest.empty() ||
        rest.find('/') != std::string::npos)
      throw ConfigError("--nats: expected nats://HOST:PORT (or tls://), got '" +
                        transport::redact_url_credentials(part) + "'");
  }
}

namespace {

/// serve's own flags beyond the server options: the NATS bridge.
const std::vector<FlagRow<ServeOptions>>& serve_flag_table() {
  // One row per flag (a new serve flag is one more row here).
  static const std::vector<FlagRow<ServeOptions>> rows = {
      {"--nats", "nats",
       "Also publish every snapshot to the NATS server at URL (e.g. nats://127.0.0.1:4222) on "
       "gpustream.<node>.<probe>; with --listen off and no --tcp, a headless fleet agent "
       "(docs/fleet.md)",
       &ServeOptions::nats, std::nullopt},
      {"--node", "node",
       "This node's name on the bus: the subject's node token and the payload's `node` "
       "(letters, digits, '_' and '-', at most 64; default: the host name)",
       &ServeOptions::node, std::nullopt},
      {"--nats-prefix", "nats_prefix",
       "The subjects' first token(s), e.g. gpustream.zone-a to shard a fleet (default "
       "gpustream; gpustream fleet --subject-prefix)",
       &ServeOptions::nats_prefix, std::nullopt},
      {"--nats-encoding", "nats_encoding",
       "compact (deflated deltas against a full snapshot every --nats-full-every messages; "
       "default) or json (the gpustream/1 document)",
       &ServeOptions::nats_encoding, std::nullopt},
      {"--nats-full-every", "nats_full_every",
       "compact: one message in N per probe is a full snapshot (default 10)",
       &ServeOptions::nats_full_every, CLI::Range(1, 100000)},
      {"--nats-kv-bucket", "nats_kv_bucket",
       "compact: the JetStream key-value bucket keeping each node's last full state (default "
       "gpustream_nodes; 'off': none)",
       &ServeOptions::nats_kv_bucket, std::nullopt},
      {"--nats-kv-ttl", "nats_kv_ttl_seconds",
       "The bucket's time-to-live in seconds, or less: the agent rewrites its key at least "
       "every third of it (default 30; the agent never creates the bucket: gpustream fleet "
       "--kv-ttl does)",
       &ServeOptions::nats_kv_ttl_seconds, CLI::Range(1.0, 86400.0)},
      {"--nats-unhealthy-after", "nats_unhealthy_after_seconds",
       "/healthz answers 503 once the agent has not been connected to NATS for this many "
       "seconds (default 10)",
       &ServeOptions::nats_unhealthy_after_seconds, CLI::Range(0.1, 86400.0)},
      {"--health", "health",
       "A headless agent's listener at HOST:PORT answering only /healthz and /metrics (the "
       "--token rules apply to /metrics), e.g. 127.0.0.1:9101; with --listen off and no --tcp",
       &ServeOptions::health, std::nullopt},
  };
  return rows;
}

/// The bus flags' checks that CLI11 does not make (after the server options' own).
void check_bus_flags(const ServeOptions& o) {
  if (!o.nats.empty()) check_nats_url(o.nats);
  if (!o.node.empty())
    if (auto err = transport::node_name_error(o.node)) throw ConfigError("--node: " + *err);
  if (o.nats_encoding != "compact" && o.nats_encoding != "json")
    throw ConfigError("--nats-encoding: expected compact or json, got '" + o.nats_encoding + "'");
  if (o.nats_kv_bucket != "off" && !o.nats_kv_bucket.empty())
    if (auto err = transport::node_name_error(o.nats_kv_bucket))
      throw ConfigError("--nats-kv-bucket: a bucket name is made of letters, digits, '_' and '-'");
}

}  // namespace

void add_serve_options(CLI::App& sub, ServeOptions& o) {
  add_server_options(sub, o.server);
  add_flag_rows(sub, o, serve_flag_table());
  add_flag_rows(sub, o.nats_auth, nats_auth_flag_table());
  add_flag_rows(sub, o.otlp, otlp_flag_table());
  add_flag_rows(sub, o.kubelet, kubelet_flag_table());
}

void apply_serve_config(const Config& config, CLI::App& sub) {
  static const std::vector<ConfigKey> serve_keys = config_keys_of(serve_flag_table());
  static const std::vector<ConfigKey> auth_keys = config_keys_of(nats_auth_flag_table());
  static const std::vector<ConfigKey> otlp_keys = config_keys_of(otlp_flag_table());
  static const std::vector<ConfigKey> kubelet_keys = config_keys_of(kubelet_flag_table());
  apply_config_section(config, sub, kServeSection,
                       {&server_config_keys(), &serve_keys, &auth_keys, &otlp_keys, &kubelet_keys});
}

int run_serve(Config config, const ServeOptions& o, ReloadRegistry& reload) {
  transport::ServerOptions so;
  transport::NatsAuth nats_auth;
  std::optional<transport::OtlpOptions> otlp_options;
  std::unique_ptr<probes::KubeletWatcher> kubelet;  // --kubelet-socket: pods of GPUs, processes
  std::string kubelet_note;
  try {
    so = make_server_options(o.server);
    so.fit_fatal_event_window = config.fatal_event_window;  // the planner's health rule
    check_bus_flags(o);
    nats_auth = make_nats_auth(o.nats_auth);
    otlp_options = make_otlp_options(o.otlp, o.node.empty() ? this_host_name() : o.node);
    kubelet = make_kubelet_watcher(o.kubelet, kubelet_note);
    if (!so.http && !so.tcp && o.nats.empty() && !otlp_options)
      throw ConfigError("nothing to serve: --listen off, no --tcp, no --nats and no --otlp");
    if (!o.health.empty() && o.health != "off") {
      if (so.http || so.tcp)
        throw ConfigError(
            "--health is a headless agent's listener: give it with --listen off and no --tcp "
            "(the --listen listener answers /healthz and /metrics already)");
      try {
        so.http = transport::parse_listen_address(o.health);
      } catch (const std::exception& e) {
        throw ConfigError(std::string("--health: ") + e.what());
      }
      so.health_only = true;
    }
  } catch (const ConfigError& e) {
    std::cerr << "gpustream: " << e.what() << "\n";
    return kExitUsage;
  }
#if !defined(GPUSTREAM_HAS_NATS)
  if (!o.nats.empty()) {
    std::cerr << "gpustream: this build has no NATS support (install libnats-dev)\n";
    return kExitUsage;
  }
#endif

  // The probes asked for by name (--probes, the config's "probes"): one that is not sampling is
  // a failure to alert on (GpustreamProbeFailing reads gpustream_probe_requested), while the
  // default set's probes for absent vendors are not.
  if (!config.probes.empty()) {
    std::string requested =
        "# HELP gpustream_probe_requested 1 for a probe asked for by name (--probes).\n"
        "# TYPE gpustream_probe_requested gauge\n";
    for (const auto& p : config.probes)
      requested +=
          "gpustream_probe_requested{probe=\"" + transport::escape_label_value(p) + "\"} 1\n";
    so.extra_metrics = [requested] { return requested; };
  }
  so.extra_metrics = with_reload_metrics(std::move(so.extra_metrics), reload);
  boost::asio::io_context io;
  Telemetry telemetry(std::move(config), probe_factory());  // probes on their own io thread
#if defined(GPUSTREAM_HAS_NATS)
  transport::NatsAuth nats_auth_at_start;  // what SIGHUP compares the re-read files with
  // Made before the server, whose /metrics, /api/v1/stats and /healthz read its counters, and
  // destroyed after it.
  std::unique_ptr<transport::NatsBridge> nats;  // connects (and reconnects) in the background
  if (!o.nats.empty()) {
    transport::NatsBridgeOptions no;
    no.url = o.nats;
    nats_auth_at_start = nats_auth;
    no.auth = std::move(nats_auth);
    no.host = o.node;
    no.subject_prefix = o.nats_prefix;
    no.encoding =
        o.nats_encoding == "json" ? transport::BusEncoding::json : transport::BusEncoding::compact;
    no.full_every = o.nats_full_every;
    no.kv_bucket = o.nats_kv_bucket == "off" ? std::string() : o.nats_kv_bucket;
    no.kv_ttl = millis_of_seconds(o.nats_kv_ttl_seconds);
    nats = std::make_unique<transport::NatsBridge>(telemetry.channel(), std::move(no));
    const transport::NatsBridge* bridge = nats.get();
    so.extra_metrics = [bridge, probes = std::move(so.extra_metrics)] {
      return (probes ? probes() : std::string()) + transport::nats_bridge_metrics(bridge->stats());
    };
    so.extra_stats = [bridge] {
      return "\"nats\":{" + transport::nats_bridge_stats_json(bridge->stats()) + "}";
    };
    so.extra_health = [bridge, bound = millis_of_seconds(o.nats_unhealthy_after_seconds)] {
      return transport::nats_health_error(bridge->stats(), bound);
    };
  }
#endif
  // The OTLP push (--otlp): on the io_context, made before the server whose /metrics and
  // /api/v1/stats read its counters, destroyed after it.
  std::unique_ptr<transport::OtlpExporter> otlp;
  if (otlp_options) {
    otlp = std::make_unique<transport::OtlpExporter>(io.get_executor(), telemetry.channel(),
                                                     *otlp_options);
    const transport::OtlpExporter* exporter = otlp.get();
    so.extra_metrics = [exporter, before = std::move(so.extra_metrics)] {
      return (before ? before() : std::string()) + transport::otlp_metrics(exporter->stats());
    };
    so.extra_stats = [exporter, before = std::move(so.extra_stats)] {
      return (before ? before() + "," : std::string()) + "\"otlp\":{" +
             transport::otlp_stats_json(exporter->stats()) + "}";
    };
  }
  if (kubelet) {
    // The join runs on the io thread with the latest answer; the kubelet is asked on the
    // watcher's own thread.
    telemetry.set_annotator([w = kubelet.get()](GpuSnapshot& s) { w->annotate(s); });
    const probes::KubeletWatcher* watcher = kubelet.get();
    so.extra_metrics = [watcher, before = std::move(so.extra_metrics)] {
      return (before ? before() : std::string()) + kubelet_metrics(watcher->stats());
    };
    so.extra_stats = [watcher, before = std::move(so.extra_stats)] {
      return (before ? before() + "," : std::string()) + "\"kubelet\":{" +
             kubelet_stats_json(watcher->stats()) + "}";
    };
  }
  std::unique_ptr<transport::Server> server;  // none for a headless agent (--listen off, --nats)
  if (so.http || so.tcp) {
    server = std::make_unique<transport::Server>(io.get_executor(), telemetry.channel(), so,
                                                 [&telemetry] { return telemetry.stats(); });
    if (!start_server(*server)) return kExitFailure;
    announce_listening(*server, !so.token.empty(),
                       so.health_only ? DashboardLine{"health", "/healthz", ", metrics at /metrics"}
                                      : DashboardLine{"dashboard", "/", ", metrics at /metrics"});
  }

#if defined(GPUSTREAM_HAS_NATS)
  if (nats) {
    nats->start();
    std::cerr << "gpustream: publishing to NATS " << transport::redact_url_credentials(o.nats)
              << " as " << nats->subject_wildcard() << " (node " << nats->options().host << ", "
              << o.nats_encoding << ")\n";
    std::cout << "publishing nats " << nats->subject_wildcard() << std::endl;
  }
#endif

  if (otlp) {
    otlp->start();
    std::cerr << "gpustream: " << otlp_start_line(otlp->options()) << "\n";
  }
  if (!kubelet_note.empty()) std::cerr << "gpustream: " << kubelet_note << "\n";
  if (kubelet) kubelet->start();
  telemetry.start();
  for (const auto& e : telemetry.setup_errors())
    std::cerr << "gpustream: " << terminal_safe(e) << "\n";

  SignalStop signal_stop(io);
  const auto stop_all = [&] {
    if (server)
      server->stop([&] { io.stop(); });
    else
      io.stop();
  };
  // SIGHUP (reload.hpp): the config file and log settings (added by serve_command), the token,
  // the NATS credential files; each part that can change live adds its reloader here.
  if (server) reload.add("token", {}, token_reloader(*server, o.server.token_file, so.token));
  if (server) reload.add("tls", {}, tls_reloader(*server, so.tls));
#if defined(GPUSTREAM_HAS_NATS)
  if (nats)
    reload.add("nats", {},
               nats_auth_reloader(o.nats_auth, nats_auth_at_start,
                                  [bridge = nats.get()](const auto& next, std::string* error) {
                                    return bridge->set_auth(next, error);
                                  }));
#endif
  signal_stop.run(stop_all, stop_all, [&reload] { reload.reload(); });
#if defined(GPUSTREAM_HAS_NATS)
  if (nats) nats->stop();  // publishes what is queued, flushes (bounded)
#endif
  if (otlp) otlp->stop();
  telemetry.stop();
  if (kubelet) kubelet->stop();  // returns within the List deadline
  return kExitOk;
}

}  // namespace gpustream::cli

namespace gpustream::cli {

Command serve_command() {
  return {"serve",
          "Serve snapshots: HTTP + WebSocket (dashboard, /metrics, /api/v1 incl. "
          "/api/v1/fit?bytes=N), optional TCP",
          [](CLI::App& sub, CommandContext& context) -> CommandRun {
            auto o = std::make_shared<ServeOptions>();
            add_common_options(sub, context.common);
            add_serve_options(sub, *o);
            return [o, &sub, &context] {
              const auto config = make_config(context.common);
              apply_serve_config(config, sub);
              // SIGHUP re-reads the config file as at start (the command line on top) and
              // checks the "serve" object on fresh flags before anything is applied.
              ReloadRegistry reload(config_loader(context.common.config_file,
                                                  [&context] {
                                                    Config c = build_config(context.common);
                                                    CLI::App check;
                                                    ServeOptions fresh;
                                                    add_serve_options(check, fresh);
                                                    apply_serve_config(c, check);
                                                    return c;
                                                  }),
                                    config);
              reload.add("log", {"log_level", "log_format"},
                         log_reloader(context.common.log_level, context.common.log_format));
              return run_serve(config, *o, reload);
            };
          }};
}

}  // namespace gpustream::cli
