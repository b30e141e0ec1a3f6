// gpustream/transport/server.hpp — `gpustream serve`: TCP (JSON lines) and HTTP/WebSocket
// (Boost.Beast) streams of snapshots, Prometheus /metrics, a JSON API and the dashboard.
//
//   boost::asio::io_context io;
//   gpustream::SnapshotChannel channel(io.get_executor());
//   gpustream::transport::ServerOptions o;            // HTTP on 127.0.0.1:9400
//   o.tcp = gpustream::transport::parse_listen_address("127.0.0.1:9401");
//   gpustream::transport::Server server(io.get_executor(), channel, o);
//   server.start();                                   // binds; throws on failure
//   io.run();                                         // ... server.stop() ends it
//
// The server subscribes to the channel once and fans every snapshot out to its clients itself:
// a snapshot is serialized once per encoding (once, plus once per distinct projection that
// clients asked for) and the same buffer is written to every client. Each client has a bounded
// send queue with one write in flight; a client whose queue stays full, or whose write stalls,
// is disconnected and counted, and the others never wait for it. See docs/protocol.md ("Wire
// messages") and docs/security.md.
//
// Thread safety: all of the server's work runs on one strand of the executor it is given, so
// the io_context may be run by one thread or several. start(), stop(), the endpoint getters and
// counters() may be called from any thread. The channel must outlive the Server.
// Cancellation: stop() closes the listeners, sends WebSocket close frames, flushes what is
// queued and closes every connection; after limits.shutdown_timeout it force-closes what is
// left. The destructor force-closes everything (it does not wait).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/probe_stats.hpp"
#include "gpustream/transport/protocol.hpp"

namespace gpustream::transport {

/// Bounds that keep one client from hurting the server or the other clients. Every bound on
/// memory is in bytes as well as in counts; docs/security.md lists them with their defaults.
struct ServerLimits {
  /// Open WebSocket connections, and (separately) open TCP connections: each streaming
  /// transport has this many slots of its own, so one cannot lock out the other.
  std::size_t max_connections = 256;
  /// Open plain HTTP connections (/metrics, the API, the dashboard, upgrades in progress). When
  /// they are all taken, the connection idle the longest (waiting for a request) is closed to
  /// make room, so /metrics and /healthz keep answering under connection pressure.
  std::size_t max_http_connections = 64;
  /// Connections from one IP address, per transport (HTTP, WebSocket, TCP).
  std::size_t max_connections_per_address = 128;
  std::size_t max_message_bytes = 64 * 1024;           // inbound line, frame or HTTP request body
  std::chrono::milliseconds handshake_timeout{10000};  // HTTP request, WS upgrade, TCP auth
  std::chrono::milliseconds idle_timeout{60000};       // idle HTTP keep-alive; WS ping/pong
  /// A TCP connection on which nothing moved either way for this long is closed (with an
  /// `error` "timeout"). A client expecting long silences sends empty lines as keep-alives.
  std::chrono::milliseconds tcp_idle_timeout{300000};
  std::chrono::milliseconds write_timeout{10000};  // one write stalled this long → disconnect
  /// A streamed response (/metrics, written chunk by chunk from the snapshots taken when the
  /// request came) must be written whole within this long: a scraper that reads just fast
  /// enough to pass write_timeout at each chunk would otherwise keep a scrape's inputs (a
  /// fleet's snapshots of that moment) alive for as long as it likes. Past it the connection
  /// closes without the last chunk (a truncated body, never a wrong one), counted in
  /// ServerCounters::slow_clients_disconnected.
  std::chrono::milliseconds stream_timeout{60000};
  std::size_t send_queue_messages = 64;  // per client: snapshots waiting to be written
  /// Per client: bytes of the messages waiting to be written or being written (hello,
  /// snapshots, events and control messages), each counted at its full size even when its
  /// buffer is shared with other clients. Also the largest snapshot message the server sends:
  /// one that cannot fit is never queued (the client gets one `error` "message_too_large").
  std::size_t send_queue_bytes = 8 * 1024 * 1024;
  /// All clients together: bytes of shared messages alive (ServerCounters::encoded_bytes_live:
  /// the encoding cache, hellos, API bodies, and what send queues still hold, each buffer
  /// once). Beyond it, a client that already has a snapshot waiting gets no new one (dropped,
  /// with a `gap`), so clients that stop reading at different points cannot pile up distinct
  /// buffers: the server holds this plus at most two messages per client (the one being
  /// written and one waiting). A client that keeps up (nothing waiting) is not affected.
  std::size_t retained_bytes = 256 * 1024 * 1024;
  std::chrono::milliseconds slow_client_timeout{5000};  // queue full this long → disconnect
  std::size_t max_subscribes_per_connection = 64;  // subscribe messages over a connection's life
  /// Non-empty messages a client may send over a connection's life (subscribe, auth, and
  /// refused ones); past it the connection gets an `error` "limit" and is closed. Empty TCP
  /// lines (keep-alives) are not counted.
  std::size_t max_client_messages = 1024;
  std::chrono::milliseconds shutdown_timeout{2000};  // stop(): force-close after this
  /// HTTP responses being written, all connections together (a body shared by several
  /// responses counts once). A response that would pass it gets 503 with Retry-After;
  /// /healthz is exempt.
  std::size_t http_response_bytes = 64 * 1024 * 1024;
  /// HTTP connections admitted beyond max_http_connections when every HTTP slot is busy,
  /// for /healthz and /metrics only (other paths: 503), so busy clients cannot take them.
  std::size_t reserved_http_connections = 8;
  /// SO_SNDBUF of each client socket; unset: the kernel's autotuning (up to net.ipv4.tcp_wmem).
  /// A small buffer bounds the kernel memory per client and detects stuck clients sooner.
  std::optional<int> socket_send_buffer;
};

/// The answer of an extra endpoint (ServerOptions::extra_routes).
struct ExtraResponse {
  unsigned status = 200;  // an HTTP status code
  std::string body;
  std::string content_type = "application/json";
};

/// Extra GET endpoints, e.g. `gpustream fleet`'s /api/v1/nodes: called with the request's path
/// and its whole target (for the query) when no built-in endpoint has that path, after the
/// Host and token checks; nullopt: 404. Runs on the server's strand: thread-safe and quick.
using ExtraRoutes =
    std::function<std::optional<ExtraResponse>(std::string_view path, std::string_view target)>;

/// The planner behind the protocol's `fit` message: every device where `bytes` of device memory
/// fit now, most free first (the server cuts the answer to the client's limit and to
/// kFitMaxReplyBytes). Runs on the server's strand: thread-safe and quick.
using FitSource = std::function<std::vector<FitEntry>(std::uint64_t bytes)>;

/// TLS on the listeners (`--tls-cert`, `--tls-key`, `--tls-client-ca`): PEM files read at
/// start() and by Server::reload_tls(). TLS 1.2 or newer only (docs/security.md, "TLS").
struct TlsFiles {
  std::string cert_file;  // the server's certificate, then its chain
  std::string key_file;   // its private key (unencrypted PEM)
  /// Mutual TLS: clients must present a certificate signed by a CA in this file; empty: no
  /// client certificate asked for.
  std::string client_ca_file;
};

/// The TLS handshake failures counted on the listeners, by reason (to_string: the `reason`
/// label of gpustream_tls_handshake_failures_total).
enum class TlsFailure : std::uint8_t {
  plaintext,           // a plaintext client (an HTTP request, a JSON line) on a TLS listener
  timeout,             // no complete handshake within limits.handshake_timeout
  client_certificate,  // mutual TLS: no client certificate, or one not signed by the CA
  protocol,            // no common TLS version or cipher, or a malformed handshake
  peer_refused,        // the client refused the server's certificate (an alert)
  closed,              // the client closed the connection during the handshake
};
inline constexpr std::size_t kTlsFailureReasons = 6;
std::string_view to_string(TlsFailure f) noexcept;

/// The names of /metrics' device series: gpustream's own (`native`, the default) or
/// dcgm-exporter's names, units and labels (`dcgm`, docs/operations.md "dcgm-exporter
/// compatibility"). The probe, host, server and event families keep their names in both.
enum class MetricsCompat : std::uint8_t { native, dcgm };

struct ServerOptions {
  /// HTTP + WebSocket listener; nullopt: none.
  std::optional<boost::asio::ip::tcp::endpoint> http{
      boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), 9400)};
  /// TCP JSON-lines listener; nullopt: none.
  std::optional<boost::asio::ip::tcp::endpoint> tcp;
  /// Bearer token every client must present; empty: no token.
  std::string token;
  /// Extra allowed browser origins, e.g. "http://gpu-box.lan:9400" ("*": any — unsafe).
  /// Each one's host is also an allowed Host.
  std::vector<std::string> allowed_origins;
  /// Extra allowed Host header names, "name" or "name:port" (e.g. for a Prometheus that
  /// scrapes by host name).
  std::vector<std::string> allowed_hosts;
  ServerLimits limits;
  /// TLS on both listeners (HTTP/WebSocket and TCP); nullopt: plaintext.
  std::optional<TlsFiles> tls;
  /// The encoding cache: snapshots (sequences) the server keeps serialized for replays and
  /// the API, and the bytes all their encodings (plain and projected) may take together. The
  /// oldest sequence is evicted first when either is exceeded.
  std::size_t encoded_cache = 256;
  std::size_t encoded_cache_bytes = 32 * 1024 * 1024;
  /// Per-process series on /metrics, at most this many samples; 0: none (PrometheusOptions).
  std::size_t metrics_processes = 0;
  /// The names of the device series on /metrics.
  MetricsCompat metrics_compat = MetricsCompat::native;
  /// GPUs that must be readable for /healthz to answer 200; fewer: 503 with how many are
  /// readable and how many are expected. 0: /healthz does not look at GPUs (healthz_gpus()).
  std::size_t expect_gpus = 0;
  /// Endpoints beyond the built-in ones (same Host/Origin/token rules and limits); empty: none.
  ExtraRoutes extra_routes;
  /// More Prometheus text appended to /metrics (e.g. `gpustream fleet`'s gpustream_fleet_*
  /// families); runs on the server's strand: thread-safe and quick. Empty: none.
  std::function<std::string()> extra_metrics;
  /// More members of /api/v1/stats's object, as JSON text (`"nats":{...}`: an agent's NATS
  /// bridge); runs on the server's strand: thread-safe and quick. Empty: none.
  std::function<std::string()> extra_stats;
  /// Why /healthz must answer 503 besides the GPUs (an agent not connected to NATS for too
  /// long): the words of the body; nullopt: healthy. Runs on the strand. Empty: none.
  std::function<std::optional<std::string>()> extra_health;
  /// Only /healthz and /metrics are answered (anything else 404, no WebSocket): `serve --health`.
  bool health_only = false;
  /// Answers `fit` messages; empty: local_fits() over the channel's latest snapshots (the
  /// machine's own devices). `gpustream fleet` sets FleetView::fit_source() (every node's).
  FitSource fit_source;
  /// The health rule's window of a `fit` (and /api/v1/fit) that does not give
  /// fatal_event_window_s: devices with a fatal event (gpustream::is_fatal) this recent are left
  /// out of the local answer. 0: no health rule by default.
  std::chrono::seconds fit_fatal_event_window = kDefaultFatalEventWindow;
};

/// The server's own counters (monotonic except the *_open gauges).
struct ServerCounters {
  std::uint64_t connections_accepted = 0;  // every accepted socket (HTTP, TCP)
  std::uint64_t connections_rejected = 0;  // refused: a connection limit (any of them)
  std::uint64_t http_open = 0;
  std::uint64_t websocket_open = 0;
  std::uint64_t tcp_open = 0;
  std::uint64_t http_requests = 0;
  std::uint64_t requests_forbidden = 0;     // bad Host or Origin (403)
  std::uint64_t requests_unauthorized = 0;  // missing or wrong token (401, TCP auth)
  std::uint64_t messages_rejected = 0;      // malformed, oversized or over a limit
  std::uint64_t slow_clients_disconnected = 0;
  std::uint64_t snapshots_received = 0;     // from the channel
  std::uint64_t serializations = 0;         // snapshot encodings made (all projections)
  std::uint64_t snapshots_sent = 0;         // snapshot messages queued to clients
  std::uint64_t snapshots_dropped = 0;      // not queued because a client's queue was full
  std::uint64_t idle_closed = 0;            // HTTP connections closed to make room, idle TCP ones
  std::uint64_t encoded_cache_bytes = 0;    // gauge: bytes held by the encoding cache
  std::uint64_t encoded_cache_entries = 0;  // gauge: encodings held (all sequences)
  std::uint64_t events_received = 0;        // GPU events from the channel (channel.events())
  std::uint64_t events_sent = 0;            // event messages queued to clients
  std::uint64_t events_dropped = 0;         // not queued because a client's queue was full
  /// Snapshots (or a hello) not queued to a client because the message alone is larger than
  /// its budget (limits.send_queue_bytes): once per client and snapshot.
  std::uint64_t messages_too_large = 0;
  std::uint64_t http_busy = 0;            // HTTP 503s: limits.http_response_bytes was in use
  std::uint64_t http_response_bytes = 0;  // gauge: bytes of HTTP responses being written
  std::uint64_t encoded_bytes_live = 0;   // gauge: shared messages alive, each counted once
  /// gauge: bytes the streamed /metrics responses hold now (their text and chunk buffers and
  /// gzip state): a fixed amount per response being written, whatever the body's size.
  std::uint64_t http_stream_bytes = 0;
  bool tls = false;                  // the listeners speak TLS (the figures below count)
  std::uint64_t tls_handshakes = 0;  // TLS handshakes completed
  /// TLS handshakes failed, by TlsFailure (index: the enum's value).
  std::array<std::uint64_t, kTlsFailureReasons> tls_handshake_failures{};
  std::uint64_t tls_reloads = 0;               // reload_tls() calls that installed new files
  std::uint64_t tls_reload_failures = 0;       // reload_tls() calls refused (old files kept)
  std::int64_t tls_certificate_not_after = 0;  // gauge: Unix time the certificate expires
};

class ServerCore;

class Server {
 public:
  /// Per-probe statistics for hello, /api/v1/stats and /metrics (e.g. Telemetry::stats).
  /// Called on the server's strand; must be thread-safe. May be empty.
  using StatsSource = std::function<std::vector<ProbeStats>()>;

  Server(boost::asio::any_io_executor ex, SnapshotChannel& channel, ServerOptions options,
         StatsSource stats = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds the listeners, subscribes to the channel, starts accepting. Throws
  /// boost::system::system_error when an address cannot be bound. Call once.
  void start();
  /// Graceful stop (see the class comment). `on_stopped` runs on the server's strand once
  /// every connection is closed (at the latest about limits.shutdown_timeout later).
  /// Idempotent; a second call's callback runs too.
  void stop(std::function<void()> on_stopped = {});

  /// The bound addresses (port 0 resolved), after start().
  std::optional<boost::asio::ip::tcp::endpoint> http_endpoint() const;
  std::optional<boost::asio::ip::tcp::endpoint> tcp_endpoint() const;

  ServerCounters counters() const;

  /// Rotates the bearer token of a server started with one (ServerOptions::token), after
  /// start(): new HTTP requests, WebSocket upgrades and TCP connections must present `token`;
  /// connections already authorized stay connected. False, and nothing changes, when the server
  /// has no token (adding one needs a restart) or `token` is empty. Any thread.
  bool set_token(std::string token);

  /// Reads the TLS files again (ServerOptions::tls, or `files` when given) and uses them for
  /// NEW connections; connections already open keep theirs. Returns an empty string when the
  /// new files are in use, else why not (unreadable file, key not matching the certificate,
  /// no TLS at start: adding TLS needs a restart) — the old certificate then stays. An expired
  /// certificate is installed with a warning in the log. Any thread.
  std::string reload_tls(const std::optional<TlsFiles>& files = std::nullopt);

 private:
  std::shared_ptr<ServerCore> core_;
};

}  // namespace gpustream::transport
