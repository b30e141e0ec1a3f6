// The server-option table (server_options.hpp) and what is generated from it.
#include "server_options.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "gpustream/transport/address.hpp"
#include "token_file.hpp"

namespace gpustream::cli {

namespace {

using transport::ServerLimits;
using transport::ServerOptions;

}  // namespace

const std::vector<ServerOptionRow>& server_option_table() {
  // One row per option (a new limit is one more row here; docs/architecture/cli.md).
  static const std::vector<ServerOptionRow> rows = {
      {"--listen", "listen",
       "HTTP + WebSocket address HOST:PORT (default 127.0.0.1:9400; port 0: any; 'off': none)",
       &ServerFlags::listen, std::nullopt},
      {"--tcp", "tcp", "Also serve JSON lines over TCP on HOST:PORT", &ServerFlags::tcp,
       std::nullopt},
      {"--token", "token_file",
       "Require the bearer token stored in FILE (Authorization header, ?token=, or a TCP auth "
       "line)",
       &ServerFlags::token_file, CLI::ExistingFile},
      {"--tls-cert", "tls_cert",
       "Speak TLS on every listener (HTTP/WebSocket and TCP) with the certificate (and its "
       "chain) in this PEM file; needs --tls-key",
       &ServerFlags::tls_cert, std::nullopt},
      {"--tls-key", "tls_key", "The TLS certificate's private key (unencrypted PEM)",
       &ServerFlags::tls_key, std::nullopt},
      {"--tls-client-ca", "tls_client_ca",
       "Mutual TLS: require a client certificate signed by a CA in this PEM file",
       &ServerFlags::tls_client_ca, std::nullopt},
      {"--allow-origin", "allow_origins",
       "Also accept WebSocket upgrades from this browser origin, e.g. http://gpu-box.lan:9400 "
       "(repeatable; '*': any — unsafe)",
       &ServerOptions::allowed_origins, std::nullopt},
      {"--allow-host", "allow_hosts",
       "Also accept requests whose Host header is NAME or NAME:PORT (repeatable)",
       &ServerOptions::allowed_hosts, std::nullopt},
      {"--max-connections", "max_connections",
       "Open WebSocket connections at most, and TCP ones at most (each; default 256)",
       &ServerLimits::max_connections, CLI::Range(1, 100000)},
      {"--max-http-connections", "max_http_connections",
       "Open plain HTTP connections at most; when full, the longest idle one is closed "
       "(default 64)",
       &ServerLimits::max_http_connections, CLI::Range(1, 100000)},
      {"--max-connections-per-address", "max_connections_per_address",
       "Connections from one IP address, per transport (default 128)",
       &ServerLimits::max_connections_per_address, CLI::Range(1, 100000)},
      {"--tcp-idle-timeout", "tcp_idle_timeout_seconds",
       "Seconds a TCP connection may stay silent both ways before it is closed (default 300)",
       &ServerLimits::tcp_idle_timeout, CLI::Range(0.05, 86400.0)},
      {"--max-message-bytes", "max_message_bytes",
       "Largest inbound message or request body (default 65536)", &ServerLimits::max_message_bytes,
       CLI::Range(256, 16 * 1024 * 1024)},
      {"--handshake-timeout", "handshake_timeout_seconds",
       "Seconds for the first request, WebSocket upgrade or TCP auth (default 10)",
       &ServerLimits::handshake_timeout, CLI::Range(0.05, 3600.0)},
      {"--idle-timeout", "idle_timeout_seconds",
       "Seconds an HTTP keep-alive or silent WebSocket peer may idle (default 60)",
       &ServerLimits::idle_timeout, CLI::Range(0.05, 86400.0)},
      {"--write-timeout", "write_timeout_seconds",
       "Seconds a write to a client may stall before it is disconnected (default 10)",
       &ServerLimits::write_timeout, CLI::Range(0.05, 3600.0)},
      {"--stream-timeout", "stream_timeout_seconds",
       "Seconds a streamed response (/metrics) may take to be written whole before it is cut "
       "off (default 60)",
       &ServerLimits::stream_timeout, CLI::Range(0.05, 3600.0)},
      {"--send-queue", "send_queue",
       "Snapshots queued per client before it counts as slow (default 64)",
       &ServerLimits::send_queue_messages, CLI::Range(1, 100000)},
      {"--send-queue-bytes", "send_queue_bytes",
       "Bytes of messages queued per client before it counts as slow; also the largest "
       "snapshot message sent (default 8388608)",
       &ServerLimits::send_queue_bytes, CLI::Range(std::size_t{65536}, std::size_t{1} << 30)},
      {"--slow-client-timeout", "slow_client_timeout_seconds",
       "Seconds a client's send queue may stay full before it is disconnected (default 5)",
       &ServerLimits::slow_client_timeout, CLI::Range(0.05, 3600.0)},
      {"--retained-bytes", "retained_bytes",
       "Bytes of shared messages alive for all clients together; beyond, a client with a "
       "snapshot waiting gets no new one (default 268435456)",
       &ServerLimits::retained_bytes, CLI::Range(std::size_t{1} << 20, std::size_t{1} << 36)},
      {"--http-response-bytes", "http_response_bytes",
       "Bytes of HTTP responses being written, all connections together; beyond: 503 "
       "(default 67108864)",
       &ServerLimits::http_response_bytes, CLI::Range(std::size_t{1} << 20, std::size_t{1} << 36)},
      {"--max-subscribes", "max_subscribes",
       "Subscribe messages allowed per connection (default 64)",
       &ServerLimits::max_subscribes_per_connection, CLI::Range(1, 1000000)},
      {"--metrics-processes", "metrics_processes",
       "Per-process series on /metrics (GPU memory and utilization per process, with pid, "
       "process and container labels), at most N samples; 0: none (default)",
       &ServerOptions::metrics_processes, CLI::Range(0, 100000)},
      {"--metrics-compat", "metrics_compat",
       "Names of the device series on /metrics: native (gpustream_gpu_*) or dcgm "
       "(dcgm-exporter's DCGM_FI_* names, units and labels, for its dashboards); default native",
       &ServerFlags::metrics_compat, CLI::IsMember({"native", "dcgm"})},
      {"--expect-gpus", "expect_gpus",
       "GPUs that must be readable: with fewer, /healthz answers 503 saying how many are "
       "readable and expected; 0: none (default)",
       &ServerOptions::expect_gpus, CLI::Range(0, 100000)},
  };
  return rows;
}

void add_server_options(CLI::App& sub, ServerFlags& o) {
  for (const auto& row : server_option_table()) {
    const std::string flag(row.flag);
    const std::string help(row.help);
    CLI::Option* opt = std::visit(
        [&](auto member) -> CLI::Option* {
          using Member = decltype(member);
          if constexpr (std::is_same_v<Member, std::string ServerFlags::*>) {
            return sub.add_option(flag, o.*member, help);
          } else if constexpr (std::is_same_v<Member, std::chrono::milliseconds ServerLimits::*>) {
            auto& value = o.options.limits.*member;
            return sub.add_option_function<double>(
                flag, [&value](const double& seconds) { value = millis_of_seconds(seconds); },
                help);
          } else if constexpr (std::is_same_v<Member, std::size_t ServerLimits::*>) {
            return sub.add_option(flag, o.options.limits.*member, help);
          } else {
            return sub.add_option(flag, o.options.*member, help);
          }
        },
        row.target);
    if (row.check) opt->check(*row.check);
  }
}

transport::ServerOptions make_server_options(const ServerFlags& o) {
  transport::ServerOptions so = o.options;
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
  if (o.tls_cert.empty() != o.tls_key.empty())
    throw ConfigError("--tls-cert and --tls-key go together (the certificate and its key)");
  if (!o.tls_client_ca.empty() && o.tls_cert.empty())
    throw ConfigError("--tls-client-ca needs --tls-cert and --tls-key (TLS on the listeners)");
  if (!o.tls_cert.empty()) so.tls = transport::TlsFiles{o.tls_cert, o.tls_key, o.tls_client_ca};
  if (o.metrics_compat == "dcgm")
    so.metrics_compat = transport::MetricsCompat::dcgm;
  else if (o.metrics_compat != "native")  // the flag's check already says so; a caller may not
    throw ConfigError("--metrics-compat: '" + o.metrics_compat + "' is not one of: native, dcgm");
  return so;
}

const std::vector<ConfigKey>& server_config_keys() {
  static const std::vector<ConfigKey> keys = [] {
    std::vector<ConfigKey> k;
    for (const auto& row : server_option_table()) k.push_back({row.key, row.flag});
    return k;
  }();
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

}  // namespace gpustream::cli
