// gpustream/transport/remote_subscriber.hpp — the C++ client of `gpustream serve`: snapshots
// from a remote server over TCP (JSON lines) or WebSocket, with reconnect and resume.
//
//   boost::asio::io_context io;
//   gpustream::RemoteSubscriberOptions o;
//   o.url = "ws://127.0.0.1:9400/ws";               // or "tcp://127.0.0.1:9401"
//   gpustream::RemoteSubscriber sub(io.get_executor(), o);
//   sub.on_snapshot([](const gpustream::SnapshotPtr& s) { ... });
//   sub.start();
//   io.run();                                        // ... sub.stop() ends it
//
// After each `hello` the client sends a `subscribe` with its filters and `since` = the last
// sequence it delivered (on the first connection: options.since, else the server's current
// sequence, i.e. live from now). The server replays what it still holds after that sequence,
// then streams live. Snapshots that arrive before the server acknowledged the subscribe come
// unfiltered. When resuming exactly from hello's last_sequence the server does not send them
// again: the client applies its probes, devices and fields to them itself (not max_rate_hz);
// when resuming from further back, the replay sends them again in order and they are skipped. Every
// snapshot whose sequence is not above the last delivered one is dropped, so callbacks see strictly
// increasing sequences with no duplicate *within one server instance* (hello's `instance`; a
// restart is the exception, below). A hole the server cannot fill (its history no longer
// reaches back) is reported through on_gap, never hidden. When the connection drops, the client
// reconnects with exponential backoff (with jitter) and resumes the same way, so a server restart
// or a dropped connection loses nothing that is still in the server's history ring.
//
// What a server restart does to sequences: a server restarted with a fresh channel numbers from
// 1 again, so after a restart on_snapshot sees sequences start again low (at 1, or wherever
// the new server's history begins) — the one time they go down. Its hello carries a new
// `instance` (RemoteHello::instance): the client then reports a Gap{last delivered, 0,
// "server_restarted"} first (what the old server published after that is unknown and lost) and
// subscribes with `since` 0, delivering the new server's history from its start; sequences go on
// increasing from there. A consumer that keys by sequence keys by (instance, sequence), or
// starts over on a `server_restarted` gap. (An older server without `instance` answers a `since`
// beyond its own last sequence with `since` 0, and the client follows; that cannot catch a new
// server that has already passed the client's since, and no gap is reported then.)
//
// The order of callbacks on each connection: on_status(connecting); on_hello (the subscribe is
// sent right after it returns); then, as they come, on_snapshot / on_event (snapshots the
// server streamed before it acknowledged the subscribe, already filtered); on_status(connected)
// once the subscribe is acknowledged; then on_snapshot, on_gap, on_event and fit answers in the
// order the server sent them. fit() may be called from on_hello: it is sent right after the
// subscribe (before on_status(connected)). A freshly started server may not know all its
// devices yet: RemoteHello::devices_pending then names the probes whose devices are not in
// hello.devices (still detecting, or no snapshot yet); their devices come with their first
// snapshots (on_snapshot), and a fit answers from what the server knows at the time.
//
// Thread safety: callbacks run one at a time on a strand of the executor given to the
// constructor; set them before start(). start(), stop(), status() and counters() may be called
// from any thread, also from inside a callback. Cancellation: stop() closes the connection and
// cancels the retry timer; once it returns no callback is running (unless stop() was called
// from inside that callback) and none starts later. on_status is not called for `stopped`.
// The destructor calls stop(); destroy the subscriber before its io_context. Pending
// operations finish on the io_context with operation_aborted; they keep the internal state
// alive, not the RemoteSubscriber object.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/events.hpp"
#include "gpustream/model.hpp"
#include "gpustream/transport/protocol.hpp"

namespace gpustream {

struct RemoteSubscriberOptions {
  /// "tcp://HOST:PORT" or "ws://HOST:PORT[/PATH]" (PATH defaults to "/ws"); over TLS
  /// "tls://HOST:PORT" or "wss://HOST[:PORT][/PATH]" (port 443 by default). A `?token=...` in
  /// a ws URL is sent as is; prefer `token`. Over TLS the server's certificate must be signed
  /// by a trusted CA (tls_ca_file, else the system's) and name HOST (a DNS name or an IP
  /// address among its subject alternative names); HOST is also sent as SNI.
  std::string url;
  /// TLS: the PEM file of the CA(s) that signed the server's certificate; empty: the system's
  /// trusted CAs (/etc/ssl/certs).
  std::string tls_ca_file;
  /// TLS, mutual: this client's certificate and key (PEM), for a server started with
  /// --tls-client-ca; both or neither.
  std::string tls_cert_file;
  std::string tls_key_file;
  /// Bearer token of the server (`gpustream serve --token FILE`); empty: none.
  std::string token;
  /// Filters (empty: everything); see the `subscribe` message in docs/protocol.md
  /// ("Wire messages").
  std::vector<std::string> probes;
  std::vector<std::string> devices;
  std::vector<Metric> fields;
  std::optional<double> max_rate_hz;
  /// First connection only: replay the server's history after this sequence (0: all of it).
  /// Default: live from the moment of connection.
  std::optional<std::uint64_t> since;
  /// Delay before the first reconnect attempt; doubles on each failure up to reconnect_max.
  std::chrono::milliseconds reconnect_initial{200};
  std::chrono::milliseconds reconnect_max{5000};
  /// Resolving, connecting and the handshake (WebSocket upgrade, TCP hello) must end within this.
  std::chrono::milliseconds connect_timeout{5000};
  /// WebSocket: the connection is dropped after this long without any frame (pings are sent
  /// at half of it). Zero: never. TCP has no pings: a silent TCP peer is detected by TCP
  /// keep-alive only (the server may legitimately send nothing while no snapshot matches).
  std::chrono::milliseconds idle_timeout{30000};
  /// Largest message accepted (a line or a frame).
  std::size_t max_message_bytes = 16 * 1024 * 1024;
};

/// The server's hello (the protocol's one Hello type).
using RemoteHello = transport::Hello;

/// The answer to RemoteSubscriber::fit: the result, or why there is none.
struct RemoteFitAnswer {
  std::optional<transport::FitResult> result;
  std::string error;  // set when result is not: "not connected", the server's error, ...
};

/// Where the connection is.
struct RemoteStatus {
  enum class State {
    idle,          // not started
    connecting,    // resolving, connecting, handshaking
    connected,     // hello received, subscribed
    disconnected,  // lost or refused; a retry is scheduled (retry_in)
    stopped,       // stop() was called
  };
  State state = State::idle;
  /// Why it is disconnected ("connection refused", "server error unauthorized: ...").
  std::string reason;
  /// Failed attempts since the last successful connection.
  unsigned attempts = 0;
  /// Disconnected: how long until the next attempt.
  std::chrono::milliseconds retry_in{0};
};

std::string_view to_string(RemoteStatus::State s) noexcept;

struct RemoteCounters {
  std::uint64_t connections = 0;    // successful connections (hello received)
  std::uint64_t snapshots = 0;      // delivered to on_snapshot
  std::uint64_t duplicates = 0;     // dropped: sequence not above the last delivered
  std::uint64_t gaps = 0;           // gap messages delivered
  std::uint64_t decode_errors = 0;  // messages that were not valid protocol JSON
  std::uint64_t events = 0;         // event messages received (and wanted)
  std::uint64_t last_sequence = 0;  // of the last delivered snapshot (0: none yet)
};

class RemoteSubscriber {
 public:
  /// Throws std::invalid_argument (message for the user) when options.url cannot be used, or
  /// a TLS file (CA, client certificate or key) cannot be read.
  RemoteSubscriber(boost::asio::any_io_executor ex, RemoteSubscriberOptions options);
  ~RemoteSubscriber();
  RemoteSubscriber(const RemoteSubscriber&) = delete;
  RemoteSubscriber& operator=(const RemoteSubscriber&) = delete;

  /// Every snapshot, in increasing sequence order, each at most once.
  void on_snapshot(std::function<void(const SnapshotPtr&)> cb);
  /// A hole the server reported (history_too_old, dropped_slow_subscriber, ...).
  void on_gap(std::function<void(const Gap&)> cb);
  /// Each change of state.
  void on_status(std::function<void(const RemoteStatus&)> cb);
  /// Each hello (once per connection), before the subscribe is sent. fit() may be called from
  /// it. RemoteHello::devices_pending says whether hello.devices is complete.
  void on_hello(std::function<void(const RemoteHello&)> cb);
  /// Each GPU event (`event` message: Xid, ECC, ...), live as the server sends it, with the
  /// server's own event `sequence` (a hole in it: events dropped for this client). Events are
  /// not replayed on reconnect: those sent while disconnected are not seen.
  void on_event(std::function<void(const EventPtr&)> cb);

  /// Asks the server where `bytes` of device memory fit now (the protocol's `fit` message):
  /// `gpustream serve` answers with its own devices, `gpustream fleet` with every node's, most
  /// free first, at most `limit` (1..transport::kFitMaxLimit) of them. `handler` runs once, on
  /// the subscriber's strand like the other callbacks: with the result, or with an error when
  /// not connected, when the server's hello lists its requests without `fit` (at once, nothing
  /// is sent: "... does not support fit: its hello lists the requests [subscribe]"), when the
  /// connection drops first, when the server refuses the request (a server whose hello has no
  /// list and that does not know `fit` says "unknown message type 'fit'"), or past 64 queries
  /// in flight. Any thread. After stop() the handler is not called.
  void fit(std::uint64_t bytes, std::function<void(RemoteFitAnswer)> handler,
           std::size_t limit = transport::kFitDefaultLimit);
  /// The same under the planner's options (gpustream/planner.hpp): the server leaves out
  /// options.exclude (at most transport::kFitMaxExclude ids, kFitMaxExcludeBytes together) and,
  /// `gpustream serve`, devices with a fatal event in its events within
  /// options.fatal_event_window (clamped to 0..kMaxFatalEventWindow); the answer's
  /// FitResult::excluded lists them with the reason. (The fit() above lets the server apply
  /// the default window.) `gpustream fleet` has no events: only exclusions apply there.
  void fit(std::uint64_t bytes, const FitOptions& options,
           std::function<void(RemoteFitAnswer)> handler,
           std::size_t limit = transport::kFitDefaultLimit);

  /// Starts connecting. Idempotent; a stopped subscriber does not start again.
  void start();
  /// Closes the connection and stops reconnecting (see the class comment). Idempotent.
  void stop();

  RemoteStatus status() const;
  RemoteCounters counters() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

/// Checks a URL the way RemoteSubscriber does. Throws std::invalid_argument.
void validate_remote_url(std::string_view url);

}  // namespace gpustream
