// gpustream serve — the Telemetry's channel behind a transport::Server, until a signal.
#include <algorithm>
#include <array>
#include <charconv>
#include <csignal>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string_view>
#include <utility>
#include <variant>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "commands.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/telemetry.hpp"
#include "gpustream/transport/address.hpp"
#include "gpustream/transport/fleet_codec.hpp"
#if defined(GPUSTREAM_HAS_NATS)
#include "gpustream/transport/nats_bridge.hpp"
#endif
#include "gpustream/transport/server.hpp"
#include "options.hpp"
#include "serve.hpp"
#include "token_file.hpp"

namespace gpustream::cli {

namespace {

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

}  // namespace

// libnats accepts almost any URL and would then retry it forever: check it first.
void check_nats_url(const std::string& url) {
  for (const auto& part : split_list(url)) {
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

transport::ServerOptions make_server_options(const ServeOptions& o) {
  transport::ServerOptions so;
  try {
    if (o.listen == "off" || o.listen.empty())
      so.http.reset();
    else
      so.http = transport::parse_listen_address(o.listen);
    if (!o.tcp.empty()) so.tcp = transport::parse_listen_address(o.tcp);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
  if (!o.token_file.empty()) so.token = read_token_file(o.token_file);
  if (!o.nats.empty()) check_nats_url(o.nats);
  if (!o.node.empty())
    if (auto err = transport::node_name_error(o.node)) throw ConfigError("--node: " + *err);
  if (o.nats_encoding != "compact" && o.nats_encoding != "json")
    throw ConfigError("--nats-encoding: expected compact or json, got '" + o.nats_encoding + "'");
  if (o.nats_kv_bucket != "off" && !o.nats_kv_bucket.empty())
    if (auto err = transport::node_name_error(o.nats_kv_bucket))
      throw ConfigError("--nats-kv-bucket: a bucket name is made of letters, digits, '_' and '-'");
  so.allowed_origins = o.allow_origins;
  so.allowed_hosts = o.allow_hosts;
  auto& l = so.limits;
  l.max_connections = o.max_connections;
  l.max_http_connections = o.max_http_connections;
  l.max_connections_per_address = o.max_connections_per_address;
  l.tcp_idle_timeout = millis(o.tcp_idle_timeout_seconds);
  l.max_message_bytes = o.max_message_bytes;
  l.handshake_timeout = millis(o.handshake_timeout_seconds);
  l.idle_timeout = millis(o.idle_timeout_seconds);
  l.write_timeout = millis(o.write_timeout_seconds);
  l.send_queue_messages = o.send_queue;
  l.max_subscribes_per_connection = o.max_subscribes;
  so.metrics_processes = o.metrics_processes;
  return so;
}

void add_server_options(CLI::App& sub, ServeOptions& o) {
  sub.add_option("--listen", o.listen,
                 "HTTP + WebSocket address HOST:PORT (default 127.0.0.1:9400; port 0: any; "
                 "'off': none)");
  sub.add_option("--tcp", o.tcp, "Also serve JSON lines over TCP on HOST:PORT");
  sub.add_option("--token", o.token_file,
                 "Require the bearer token stored in FILE (Authorization header, ?token=, or "
                 "a TCP auth line)")
      ->check(CLI::ExistingFile);
  sub.add_option("--allow-origin", o.allow_origins,
                 "Also accept WebSocket upgrades from this browser origin, e.g. "
                 "http://gpu-box.lan:9400 (repeatable; '*': any — unsafe)");
  sub.add_option("--allow-host", o.allow_hosts,
                 "Also accept requests whose Host header is NAME or NAME:PORT (repeatable)");
  sub.add_option("--max-connections", o.max_connections,
                 "Open WebSocket connections at most, and TCP ones at most (each; default 256)")
      ->check(CLI::Range(1, 100000));
  sub.add_option("--max-http-connections", o.max_http_connections,
                 "Open plain HTTP connections at most; when full, the longest idle one is closed "
                 "(default 64)")
      ->check(CLI::Range(1, 100000));
  sub.add_option("--max-connections-per-address", o.max_connections_per_address,
                 "Connections from one IP address, per transport (default 128)")
      ->check(CLI::Range(1, 100000));
  sub.add_option("--tcp-idle-timeout", o.tcp_idle_timeout_seconds,
                 "Seconds a TCP connection may stay silent both ways before it is closed "
                 "(default 300)")
      ->check(CLI::Range(0.05, 86400.0));
  sub.add_option("--max-message-bytes", o.max_message_bytes,
                 "Largest inbound message or request body (default 65536)")
      ->check(CLI::Range(256, 16 * 1024 * 1024));
  sub.add_option("--handshake-timeout", o.handshake_timeout_seconds,
                 "Seconds for the first request, WebSocket upgrade or TCP auth (default 10)")
      ->check(CLI::Range(0.05, 3600.0));
  sub.add_option("--idle-timeout", o.idle_timeout_seconds,
                 "Seconds an HTTP keep-alive or silent WebSocket peer may idle (default 60)")
      ->check(CLI::Range(0.05, 86400.0));
  sub.add_option("--write-timeout", o.write_timeout_seconds,
                 "Seconds a write to a client may stall before it is disconnected (default 10)")
      ->check(CLI::Range(0.05, 3600.0));
  sub.add_option("--send-queue", o.send_queue,
                 "Snapshots queued per client before it counts as slow (default 64)")
      ->check(CLI::Range(1, 100000));
  sub.add_option("--max-subscribes", o.max_subscribes,
                 "Subscribe messages allowed per connection (default 64)")
      ->check(CLI::Range(1, 1000000));
  sub.add_option("--metrics-processes", o.metrics_processes,
                 "Per-process series on /metrics (GPU memory and utilization per process, with "
                 "pid, process and container labels), at most N samples; 0: none (default)")
      ->check(CLI::Range(0, 100000));
}

void add_serve_options(CLI::App& sub, ServeOptions& o) {
  add_server_options(sub, o);
  sub.add_option("--nats", o.nats,
                 "Also publish every snapshot to the NATS server at URL (e.g. "
                 "nats://127.0.0.1:4222) on gpustream.<node>.<probe>; with --listen off and no "
                 "--tcp, a headless fleet agent (docs/fleet.md)");
  sub.add_option("--node", o.node,
                 "This node's name on the bus: the subject's node token and the payload's "
                 "`node` (letters, digits, '_' and '-', at most 64; default: the host name)");
  sub.add_option("--nats-prefix", o.nats_prefix,
                 "The subjects' first token(s), e.g. gpustream.zone-a to shard a fleet "
                 "(default gpustream; gpustream fleet --subject-prefix)");
  sub.add_option("--nats-encoding", o.nats_encoding,
                 "compact (deflated deltas against a full snapshot every --nats-full-every "
                 "messages; default) or json (the gpustream/1 document)");
  sub.add_option("--nats-full-every", o.nats_full_every,
                 "compact: one message in N per probe is a full snapshot (default 10)")
      ->check(CLI::Range(1, 100000));
  sub.add_option("--nats-kv-bucket", o.nats_kv_bucket,
                 "compact: the JetStream key-value bucket keeping each node's last full state "
                 "(default gpustream_nodes; 'off': none)");
  sub.add_option("--nats-kv-ttl", o.nats_kv_ttl_seconds,
                 "Seconds a node's key lives in the bucket without an update, when this agent "
                 "creates the bucket (default 30)")
      ->check(CLI::Range(1.0, 86400.0));
}

// The config file's keys of the server flags serve and fleet share (add_server_options).
const std::vector<ConfigKey>& server_config_keys() {
  static const std::vector<ConfigKey> keys = {
      {"listen", "--listen"},
      {"tcp", "--tcp"},
      {"token_file", "--token"},
      {"allow_origins", "--allow-origin"},
      {"allow_hosts", "--allow-host"},
      {"max_connections", "--max-connections"},
      {"max_http_connections", "--max-http-connections"},
      {"max_connections_per_address", "--max-connections-per-address"},
      {"tcp_idle_timeout_seconds", "--tcp-idle-timeout"},
      {"max_message_bytes", "--max-message-bytes"},
      {"handshake_timeout_seconds", "--handshake-timeout"},
      {"idle_timeout_seconds", "--idle-timeout"},
      {"write_timeout_seconds", "--write-timeout"},
      {"send_queue", "--send-queue"},
      {"max_subscribes", "--max-subscribes"},
      {"metrics_processes", "--metrics-processes"},
  };
  return keys;
}

void apply_config_section(const Config& config, CLI::App& sub, std::string_view section_name,
                          const std::vector<const std::vector<ConfigKey>*>& tables) {
  const auto* section = config.probe_settings.section(section_name);
  if (!section) return;
  for (const auto& entry : *section) {
    const std::string_view key = entry.first;  // not a structured binding: the lambda uses it
    const SettingValue& value = entry.second;
    const ConfigKey* row = nullptr;
    for (const auto* t : tables)
      for (const auto& k : *t)
        if (k.key == key) row = &k;
    const std::string name = std::string(section_name) + "." + std::string(key);
    if (!row) {
      std::string known;
      for (const auto* t : tables)
        for (const auto& k : *t) {
          if (!known.empty()) known += ", ";
          known += k.key;
        }
      std::string what = "config key '" + name;
      what += "': unknown key (known: ";
      what += known;
      what += ")";
      throw ConfigError(what);
    }
    CLI::Option* opt = sub.get_option(std::string(row->flag));
    if (opt->count() > 0) continue;  // the command line wins
    // The value goes through the flag's own parser and checks, as if it had been typed.
    std::vector<std::string> texts;
    const auto text_of = [&](const auto& v) {
      if (const auto* s = std::get_if<std::string>(&v)) return *s;
      if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
      if (const auto* d = std::get_if<double>(&v)) {
        std::array<char, 64> buf{};
        const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), *d);
        return std::string(buf.data(), r.ptr);
      }
      throw ConfigError("config key '" + name + "': expected a string or a number");
    };
    if (const auto* list = value.if_list()) {
      for (const auto& e : *list) texts.push_back(text_of(e));
    } else {
      texts.push_back(text_of(value.value()));
    }
    try {
      for (auto& t : texts) opt->add_result(std::move(t));
      opt->run_callback();
    } catch (const CLI::Error& e) {
      throw ConfigError("config key '" + name + "': " + e.what());
    }
  }
}

void apply_serve_config(const Config& config, CLI::App& sub) {
  static const std::vector<ConfigKey> serve_keys = {
      {"nats", "--nats"},
      {"node", "--node"},
      {"nats_prefix", "--nats-prefix"},
      {"nats_encoding", "--nats-encoding"},
      {"nats_full_every", "--nats-full-every"},
      {"nats_kv_bucket", "--nats-kv-bucket"},
      {"nats_kv_ttl_seconds", "--nats-kv-ttl"},
  };
  apply_config_section(config, sub, kServeSection, {&server_config_keys(), &serve_keys});
}

int run_serve(Config config, const ServeOptions& o) {
  transport::ServerOptions so;
  try {
    so = make_server_options(o);
    if (!so.http && !so.tcp && o.nats.empty())
      throw ConfigError("nothing to serve: --listen off, no --tcp and no --nats");
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

  boost::asio::io_context io;
  Telemetry telemetry(std::move(config), probe_factory());  // probes on their own io thread
  std::unique_ptr<transport::Server> server;  // none for a headless agent (--listen off, --nats)
  if (so.http || so.tcp) {
    server = std::make_unique<transport::Server>(io.get_executor(), telemetry.channel(), so,
                                                 [&telemetry] { return telemetry.stats(); });
    try {
      server->start();
    } catch (const boost::system::system_error& e) {
      std::cerr << "gpustream: cannot listen: " << e.code().message() << "\n";
      return kExitFailure;
    }
    if (const auto ep = server->http_endpoint()) {
      std::cout << "listening http " << transport::to_string(*ep) << std::endl;
      std::cerr << "gpustream: dashboard at http://" << transport::to_string(*ep) << "/"
                << (so.token.empty() ? "" : "?token=...") << ", metrics at /metrics\n";
    }
    if (const auto ep = server->tcp_endpoint())
      std::cout << "listening tcp " << transport::to_string(*ep) << std::endl;
  }

#if defined(GPUSTREAM_HAS_NATS)
  std::unique_ptr<transport::NatsBridge> nats;  // connects (and reconnects) in the background
  if (!o.nats.empty()) {
    transport::NatsBridgeOptions no;
    no.url = o.nats;
    no.host = o.node;
    no.subject_prefix = o.nats_prefix;
    no.encoding =
        o.nats_encoding == "json" ? transport::BusEncoding::json : transport::BusEncoding::compact;
    no.full_every = o.nats_full_every;
    no.kv_bucket = o.nats_kv_bucket == "off" ? std::string() : o.nats_kv_bucket;
    no.kv_ttl = millis(o.nats_kv_ttl_seconds);
    nats = std::make_unique<transport::NatsBridge>(telemetry.channel(), std::move(no));
    nats->start();
    std::cerr << "gpustream: publishing to NATS " << transport::redact_url_credentials(o.nats)
              << " as " << nats->subject_wildcard() << " (node " << nats->options().host << ", "
              << o.nats_encoding << ")\n";
    std::cout << "publishing nats " << nats->subject_wildcard() << std::endl;
  }
#endif

  telemetry.start();
  for (const auto& e : telemetry.setup_errors()) std::cerr << "gpustream: " << e << "\n";

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  int caught = 0;
  const auto stop_all = [&] {
    if (server)
      server->stop([&] { io.stop(); });
    else
      io.stop();
  };
  std::function<void()> wait_signal;
  wait_signal = [&] {
    signals.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      if (++caught == 1) {
        std::cerr << "gpustream: stopping\n";
        stop_all();
        wait_signal();
      } else {
        io.stop();  // a second signal: do not wait for the clients
      }
    });
  };
  wait_signal();
  if (g_interrupted.load()) stop_all();  // a signal before the set existed
  io.run();
#if defined(GPUSTREAM_HAS_NATS)
  if (nats) nats->stop();  // publishes what is queued, flushes (bounded)
#endif
  telemetry.stop();
  return kExitOk;
}

}  // namespace gpustream::cli
