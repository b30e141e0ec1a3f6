// The server-option table: one row per flag that `serve` and `fleet` share (the listener, the
// token, Host/Origin, every ServerLimits bound, metrics_processes, metrics_compat). A row is the
// flag, its config-file key, its help and the member of transport::ServerOptions / ServerLimits it
// sets; the flags, the config keys (server_config_keys) and the server's options are generated from
// it. docs/architecture/cli.md says how to add a limit.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpustream/config.hpp"
#include "gpustream/transport/server.hpp"

namespace gpustream::cli {

/// The values of the shared server flags: the addresses and the token file as given (parsed by
/// make_server_options), everything else set directly in `options` by its flag.
struct ServerFlags {
  std::string listen = "127.0.0.1:9400";  // HTTP + WebSocket; "off": none
  std::string tcp;                        // TCP JSON lines; empty: none
  std::string token_file;                 // bearer token file; empty: no token
  std::string tls_cert;                   // TLS certificate (PEM); empty: plaintext
  std::string tls_key;                    // its private key (PEM)
  std::string tls_client_ca;              // mutual TLS: the clients' CA (PEM); empty: none
  std::string metrics_compat = "native";  // /metrics' device names: "native" or "dcgm"
  transport::ServerOptions options;       // limits, allowed origins and hosts, metrics_processes
};

/// Where a row's value lands. A std::chrono::milliseconds member is given in seconds (a double
/// flag, converted by truncation to whole milliseconds).
using ServerOptionTarget =
    std::variant<std::string ServerFlags::*, std::vector<std::string> transport::ServerOptions::*,
                 std::size_t transport::ServerOptions::*, std::size_t transport::ServerLimits::*,
                 std::chrono::milliseconds transport::ServerLimits::*>;

/// One server option: its flag, its config-file key, its help (which states the default) and
/// the member it sets; the default is that member's in a default ServerFlags. `check` (a range,
/// an existing file) runs on the flag and on the config value alike.
struct ServerOptionRow {
  std::string_view flag;  // e.g. "--max-connections"
  std::string_view key;   // e.g. "max_connections"
  std::string_view help;
  ServerOptionTarget target;
  std::optional<CLI::Validator> check;
};

/// Seconds given on a flag as whole milliseconds (truncated), as every timeout flag converts.
inline std::chrono::milliseconds millis_of_seconds(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

/// The rows, in the order of the help text.
const std::vector<ServerOptionRow>& server_option_table();

/// Registers one flag per row on `sub`, bound to `o`.
void add_server_options(CLI::App& sub, ServerFlags& o);

/// The server's options from those flags: the addresses parsed, the token file read. Throws
/// ConfigError.
transport::ServerOptions make_server_options(const ServerFlags& o);

/// One key of a config file's section and the flag it stands for.
struct ConfigKey {
  std::string_view key;   // e.g. "max_connections"
  std::string_view flag;  // e.g. "--max-connections"
};
/// The keys of the server flags (one per row of server_option_table()).
const std::vector<ConfigKey>& server_config_keys();
/// Applies the config file's `section_name` object to the flags of `sub` that `tables` name:
/// each value goes through its flag's parser and checks as if typed; a flag given on the command
/// line wins. Throws ConfigError naming "<section>.<key>" for an unknown key (with the known
/// ones) or a bad value. Call after `sub` has parsed.
void apply_config_section(const Config& config, CLI::App& sub, std::string_view section_name,
                          const std::vector<const std::vector<ConfigKey>*>& tables);

/// A command's own flags that are not server options (serve's bus flags, fleet's): flag, config
/// key (empty: none), help, the member of `Opts` it sets and its check.
template <class Opts>
struct FlagRow {
  std::string_view flag;
  std::string_view key;
  std::string_view help;
  std::variant<std::string Opts::*, std::uint32_t Opts::*, std::size_t Opts::*, double Opts::*,
               std::vector<std::string> Opts::*>
      target;
  std::optional<CLI::Validator> check;
};

/// Registers one flag per row on `sub`, bound to `o`.
template <class Opts>
void add_flag_rows(CLI::App& sub, Opts& o, const std::vector<FlagRow<Opts>>& rows) {
  for (const auto& row : rows) {
    CLI::Option* opt = std::visit(
        [&](auto member) {
          return sub.add_option(std::string(row.flag), o.*member, std::string(row.help));
        },
        row.target);
    if (row.check) opt->check(*row.check);
  }
}

/// The config keys of the rows that have one.
template <class Opts>
std::vector<ConfigKey> config_keys_of(const std::vector<FlagRow<Opts>>& rows) {
  std::vector<ConfigKey> keys;
  for (const auto& row : rows)
    if (!row.key.empty()) keys.push_back({row.key, row.flag});
  return keys;
}

}  // namespace gpustream::cli
