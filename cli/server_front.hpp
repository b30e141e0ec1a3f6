// The front that `serve` and `fleet` share around their transport::Server: starting it, the
// "listening" lines, and the stop loop on SIGINT/SIGTERM.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

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
  /// Joins the reload thread (a reload in progress is waited for).
  ~SignalStop();
  SignalStop(const SignalStop&) = delete;
  SignalStop& operator=(const SignalStop&) = delete;

  /// Runs the io_context until it stops. The first signal says "stopping" and calls `stop`
  /// (which ends by stopping the io_context, e.g. once the server has closed its clients); a
  /// second one stops it at once. A signal that arrived before (g_interrupted) calls
  /// `stop_early` right away. Each SIGHUP calls `reload` on a thread of its own, not the
  /// io_context's: a reload reads files (the config, the token, certificates, NATS credentials),
  /// and a file on a hung mount must not stall the server, so `reload` may only do what is safe
  /// from any thread (ReloadRegistry::reload: every reloader's target is thread-safe). One
  /// reload at a time; the SIGHUPs that come while one runs make one more after it (a storm
  /// costs two reloads, none is lost). After the first stop signal no new reload starts; one in
  /// progress is waited for when run() returns.
  void run(const std::function<void()>& stop, const std::function<void()>& stop_early,
           const std::function<void()>& reload);

 private:
  /// The reload thread's loop: one `reload` per request, until stop_reloads().
  void reload_loop(const std::function<void()>& reload);
  void request_reload();
  void stop_reloads();

  boost::asio::io_context& io_;
  boost::asio::signal_set signals_;
  boost::asio::signal_set hangup_;
  std::mutex reload_mu_;
  std::condition_variable reload_cv_;
  bool reload_requested_ = false;  // guarded by reload_mu_
  bool reloads_stopped_ = false;   // guarded by reload_mu_
  std::thread reload_thread_;
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
