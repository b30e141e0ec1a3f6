// gpustream fleet — every node's snapshots from NATS behind a transport::Server (docs/fleet.md).
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "commands.hpp"
#include "gpustream/channel.hpp"
#include "gpustream/transport/address.hpp"
#include "gpustream/transport/fleet_codec.hpp"
#if defined(GPUSTREAM_HAS_NATS)
#include "gpustream/transport/fleet.hpp"
#endif
#include "gpustream/transport/server.hpp"
#include "options.hpp"
#include "serve.hpp"

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

// The config file's keys of fleet's own flags; the server keys are server_config_keys().
const std::vector<ConfigKey>& fleet_config_keys() {
  // One row per key (a new fleet flag is one more row here).
  static const std::vector<ConfigKey> keys = {
      {"nats", "--nats"},                                // the agents' NATS server(s)
      {"subject_prefix", "--subject-prefix"},            // their subjects' first token(s)
      {"kv_bucket", "--kv-bucket"},                      // the key-value state read at start
      {"stale_seconds", "--stale"},                      // up -> stale
      {"gone_seconds", "--gone"},                        // stale -> gone
      {"max_nodes", "--max-nodes"},                      // the node table's bound
      {"max_bus_state_bytes", "--max-bus-state-bytes"},  // the bus decoder's bytes
  };
  return keys;
}

}  // namespace

void apply_fleet_config(const Config& config, CLI::App& sub) {
  apply_config_section(config, sub, kFleetSection, {&server_config_keys(), &fleet_config_keys()});
}

void add_fleet_options(CLI::App& sub, FleetCliOptions& o) {
  add_server_options(sub, o.server);
  sub.add_option(
         "--config", o.config_file,
         "JSON config file whose \"fleet\" object holds these settings (keys: the flag "
         "names with '_', e.g. stale_seconds, max_nodes, token_file; docs/configuration.md); "
         "a flag given here wins")
      ->check(CLI::ExistingFile);
  sub.add_option("--nats", o.nats,
                 "The NATS server the agents publish to (default nats://127.0.0.1:4222)")
      ->check(checked_by(check_nats_url, "URL"));
  sub.add_option("--subject-prefix", o.subject_prefix,
                 "First subject token(s) of the agents' subjects (default gpustream)")
      ->check(checked_by(check_prefix, "PREFIX"));
  sub.add_option("--kv-bucket", o.kv_bucket,
                 "The key-value bucket with each node's last state, read at start "
                 "(default gpustream_nodes; 'off': none)")
      ->check(checked_by(check_bucket, "BUCKET"));
  sub.add_option("--stale", o.stale_seconds,
                 "Seconds without a message after which a node is stale: its values are "
                 "withheld (default 5)")
      ->check(CLI::Range(0.05, 86400.0));
  sub.add_option("--gone", o.gone_seconds,
                 "Seconds without a message after which a node is gone (default 30: the "
                 "agents' key-value time-to-live)")
      ->check(CLI::Range(0.05, 864000.0));
  sub.add_option("--max-nodes", o.max_nodes,
                 "Nodes kept at most; beyond, new nodes replace gone ones or are refused "
                 "(default 100000)")
      ->check(CLI::Range(1, 10000000));
  sub.add_option("--max-bus-state-bytes", o.max_bus_state_bytes,
                 "Bytes the last full snapshots of all nodes' streams may take together in the "
                 "bus decoder; beyond, the stream heard from longest ago is dropped and rebuilt "
                 "from its next full message (default 536870912: 512 MiB)")
      ->check(CLI::Range(std::size_t{1} << 20, std::size_t{1} << 40));
}

int run_fleet(const FleetCliOptions& o) {
#if !defined(GPUSTREAM_HAS_NATS)
  (void)o;
  std::cerr << "gpustream: this build has no NATS support (install libnats-dev)\n";
  return kExitUsage;
#else
  transport::ServerOptions so;
  try {
    check_nats_url(o.nats);
    so = make_server_options(o.server);
    if (!so.http && !so.tcp) throw ConfigError("nothing to serve: --listen off and no --tcp");
    if (o.gone_seconds < o.stale_seconds)
      throw ConfigError(
          "--gone (fleet.gone_seconds) must not be shorter than --stale "
          "(fleet.stale_seconds)");
  } catch (const ConfigError& e) {
    std::cerr << "gpustream: " << e.what() << "\n";
    return kExitUsage;
  }
  const auto ms = [](double s) {
    return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000.0));
  };

  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  transport::FleetOptions fo;
  fo.url = o.nats;
  fo.subject_prefix = o.subject_prefix;
  fo.kv_bucket = o.kv_bucket == "off" ? std::string() : o.kv_bucket;
  fo.stale_after = ms(o.stale_seconds);
  fo.gone_after = ms(o.gone_seconds);
  fo.max_nodes = o.max_nodes;
  fo.limits.max_state_bytes = o.max_bus_state_bytes;
  auto fleet = std::make_unique<transport::FleetView>(io.get_executor(), channel, fo);
  so.extra_routes = fleet->routes();
  so.extra_metrics = fleet->metrics();
  so.fit_source = fleet->fit_source();
  transport::Server server(io.get_executor(), channel, so);
  try {
    fleet->start();
  } catch (const std::exception& e) {
    std::cerr << "gpustream: fleet: " << e.what() << "\n";
    return kExitFailure;
  }
  try {
    server.start();
  } catch (const boost::system::system_error& e) {
    std::cerr << "gpustream: cannot listen: " << e.code().message() << "\n";
    return kExitFailure;
  }
  const auto st = fleet->stats();
  std::cerr << "gpustream: fleet of " << fleet->nodes().size() << " nodes from "
            << transport::redact_url_credentials(o.nats) << " (" << st.kv_nodes
            << " from the key-value bucket); stale after " << o.stale_seconds << " s, gone after "
            << o.gone_seconds << " s\n";
  if (const auto ep = server.http_endpoint()) {
    std::cout << "listening http " << transport::to_string(*ep) << std::endl;
    std::cerr << "gpustream: fleet dashboard at http://" << transport::to_string(*ep) << "/fleet"
              << (so.token.empty() ? "" : "?token=...") << "\n";
  }
  if (const auto ep = server.tcp_endpoint())
    std::cout << "listening tcp " << transport::to_string(*ep) << std::endl;

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  int caught = 0;
  std::function<void()> wait_signal;
  wait_signal = [&] {
    signals.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      if (++caught == 1) {
        std::cerr << "gpustream: stopping\n";
        fleet->stop();
        server.stop([&] { io.stop(); });
        wait_signal();
      } else {
        io.stop();
      }
    });
  };
  wait_signal();
  if (g_interrupted.load()) server.stop([&] { io.stop(); });
  io.run();
  fleet->stop();
  return kExitOk;
#endif
}

}  // namespace gpustream::cli
