// The front that `serve` and `fleet` share around their transport::Server: starting it, the
// "listening" lines, and the stop loop on SIGINT/SIGTERM.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "gpustream/transport/server.hpp"
#include "reload.hpp"

namespace gpustream::cli {

/// Starts `server`; when an address cannot be bound, says "cannot listen: ..." on stderr and
/// returns false (the command exits with kExitFailure).
bool start_server(transport::Server& server);

/// What the stderr line after "listening http" says: "gpustream: <what> at
/// http://HOST:PORT<path>[?token=...]<tail>".
struct DashboardLine {
  std::string_view what;  // "dashboard"
  std::string_view path;  // "/"
  std::string_view tail;  // ", metrics at /metrics"
};

/// Prints "listening http HOST:PORT" (then the dashboard line on stderr) and "listening tcp
/// HOST:PORT" on stdout for the endpoints `server` bound; `with_token`: the dashboard address
/// says "?token=...".
void announce_listening(const transport::Server& server, bool with_token,
                        const DashboardLine& dashboard);

/// The stop loop: SIGINT/SIGTERM are caught while it lives (keep it until the command returns,
/// so that a late signal during the shutdown is still caught, not fatal), and SIGHUP too: it
/// never ends the service.
class SignalStop {
 public:
  explicit SignalStop(boost::asio::io_context& io);
  /// Runs the io_context until it stops. The first signal says "stopping" and calls `stop`
  /// (which ends by stopping the io_context, e.g. once the server has closed its clients); a
  /// second one stops it at once. A signal that arrived before (g_interrupted) calls
  /// `stop_early` right away. Each SIGHUP calls `reload` on the io_context's thread (a storm of
  /// them is coalesced by the signal set: one call per wake-up).
  void run(const std::function<void()>& stop, const std::function<void()>& stop_early,
           const std::function<void()>& reload);

 private:
  boost::asio::io_context& io_;
  boost::asio::signal_set signals_;
  boost::asio::signal_set hangup_;
};

/// The token's reloader for SIGHUP (reload.hpp): re-reads the token file (`token_file`, empty:
/// the server has no token; `token`: the one read from it at start) and rotates the server's
/// token — new requests and connections need the new one, connected clients stay. A file that
/// cannot be read keeps the old token and says why.
Reloader token_reloader(transport::Server& server, std::string token_file, std::string token);

/// The registry's loader for a command whose config file is `config_file` (empty: none, no
/// loader): `load` re-reads it with the command line on top and checks it as at start (throws
/// ConfigError).
std::function<Config()> config_loader(const std::string& config_file, std::function<Config()> load);

/// The TLS reloader for SIGHUP (reload.hpp): the certificate, key and client CA read again from
/// the paths of the start (a changed path takes effect after a restart); new connections use
/// them, open ones keep theirs; a pair that does not load keeps the old one (Server::reload_tls).
/// `files`: the server's (ServerOptions::tls; none: always unchanged). Files whose content is
/// the same as at the last successful load change nothing.
Reloader tls_reloader(transport::Server& server, std::optional<transport::TlsFiles> files);

/// Adds gpustream_reloads_total (the registry's metrics) to what `extra` gives /metrics.
std::function<std::string()> with_reload_metrics(std::function<std::string()> extra,
                                                 const ReloadRegistry& registry);

}  // namespace gpustream::cli
