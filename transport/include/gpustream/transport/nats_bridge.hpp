// gpustream/transport/nats_bridge.hpp — publishes every snapshot of a channel to NATS.
//
//   gpustream::transport::NatsBridgeOptions o;       // nats://127.0.0.1:4222, "gpustream"
//   gpustream::transport::NatsBridge bridge(channel, o);
//   bridge.start();                                  // never blocks on the network
//   ...                                              // gpustream.<host>.<probe> on the server
//   bridge.stop();                                   // flushes (bounded), disconnects
//
// Built only when libnats is found (GPUSTREAM_HAS_NATS is then defined by gpustream::transport).
// Each snapshot is serialized once, in the compact bus encoding (fleet_codec.hpp: deflated deltas
// against periodic full snapshots, the node named in the header; docs/fleet.md) or as the same
// document /api/v1/snapshot lists (gpustream/1 with its `node`, docs/protocol.md "NATS bridge"),
// and published on `<prefix>.<node>.<probe>`, where node and probe are sanitized to
// [A-Za-z0-9_-] (anything else becomes '_'). In the compact encoding the node's last full
// messages are also kept in a JetStream key-value bucket (kv_bucket), when it exists.
//
// Delivery is at most once. The bridge is a drop_oldest subscriber of the channel with its own
// bounded queue: the publisher never waits for NATS, and when the bridge falls behind the oldest
// snapshots are dropped and counted (stats().dropped). libnats reconnects by itself, forever,
// keeping what is published meanwhile in its reconnect buffer (bytes, bounded); what does not fit
// is lost and counted in publish_errors. A first connect that fails is logged once and retried
// in the background; it is never an exception. The log line names the cause in the server's or
// TLS's words ("Authorization Violation", "unable to get local issuer certificate"; "no server
// answers" when nothing did), learnt by one extra connect attempt without retry on the bridge's
// thread, once an outage (libnats's retrying connection keeps no TLS error). When libnats gives
// up (it closes the connection after the same authorization error twice), the bridge opens a new
// one every reconnect_wait. Credentials and TLS: `auth` (nats_auth.hpp).
//
// Thread safety: start(), stop(), stats() and the getters may be called from any thread. The
// work (serializing, publishing) runs on one thread the bridge owns; libnats runs its own.
// The channel must outlive the bridge (or at least stop()).
// Cancellation: stop() — also called by the destructor — ends the subscription, publishes what
// was already queued, flushes for at most flush_timeout while connected, then destroys the
// connection and joins the thread. It returns within about 2 x connect_timeout + flush_timeout
// (a connect attempt in progress, and the one diagnostic attempt, are not interrupted). start() and
// stop() are idempotent; a stopped bridge may be started again.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "gpustream/channel.hpp"
#include "gpustream/transport/nats_auth.hpp"

namespace gpustream::transport {

/// How a snapshot is written on the bus.
enum class BusEncoding {
  compact,  // GSB1 (fleet_codec.hpp): deflated deltas against a full snapshot every full_every
  json,     // the gpustream/1 snapshot document, as /api/v1/snapshot lists it
};

struct NatsBridgeOptions {
  std::string url = "nats://127.0.0.1:4222";  // libnats server URL(s), comma-separated
  /// Credentials and TLS (nats_auth.hpp); a URL's user:password@ also works. An empty
  /// auth.inbox_prefix becomes "_INBOX_gpustream.<host>" (options() shows it).
  NatsAuth auth;
  std::string subject_prefix = "gpustream";  // first subject token(s); sanitized per token
  /// The node name: the subject's node token and the payload's `node` (sanitized to a valid
  /// node name, fleet_codec.hpp node_name_error); empty: the host name.
  std::string host;
  BusEncoding encoding = BusEncoding::compact;
  std::uint32_t full_every = 10;  // compact: one message in this many per probe is a full one
  /// compact: the JetStream key-value bucket that keeps each node's last full messages (key: the
  /// node name), so that a consumer that starts sees every node at once; empty: none. The bridge
  /// never creates it (the fleet view or an admin does): while it is missing, each attempt is a
  /// kv_error, logged once until a put works, retried at most once a reconnect_wait; the bus
  /// messages go on. The bridge writes its key at every full message, at least every
  /// kv_ttl / 3 (kv_ttl: the bucket's time-to-live, or less), and at once after each
  /// (re)connect, when it also makes the next message of every probe a full one.
  std::string kv_bucket = "gpustream_nodes";
  std::chrono::milliseconds kv_ttl{30000};
  std::size_t queue_capacity = 256;  // snapshots waiting for the bridge (drop_oldest)
  std::chrono::milliseconds connect_timeout{2000};       // one connect attempt
  std::chrono::milliseconds reconnect_wait{1000};        // between connect attempts
  std::size_t reconnect_buffer_bytes = 8 * 1024 * 1024;  // kept while disconnected
  std::chrono::milliseconds flush_timeout{2000};         // stop(): wait for the server's ack
  std::chrono::milliseconds write_deadline{5000};        // a stalled socket write fails after this
  SubscriptionFilter filter;                             // which snapshots are published
};

/// Counters since construction (monotonic except `connected`).
struct NatsBridgeStats {
  std::uint64_t published = 0;       // snapshots libnats accepted (sent, or buffered)
  std::uint64_t dropped = 0;         // snapshots the bridge's queue dropped (it fell behind)
  std::uint64_t publish_errors = 0;  // snapshots libnats refused (e.g. reconnect buffer full)
  std::uint64_t reconnects = 0;      // reconnects, as libnats counts them
  std::uint64_t bytes = 0;           // payload bytes published (the bus cost)
  std::uint64_t kv_puts = 0;         // node states written to the key-value bucket
  std::uint64_t kv_errors = 0;       // ... failed (no bucket, no JetStream, refused, timeout)
  /// Outages: the connection lost after being up, or a first connect that did not succeed at
  /// once (each counted once however many reconnect attempts it takes).
  std::uint64_t outages = 0;
  bool connected = false;  // connected to a server now
  /// How long the bridge has not been connected (since start() when it never was); 0 when
  /// connected or not running.
  std::chrono::milliseconds disconnected_for{0};
};

/// The bridge's counters as Prometheus text (gpustream_nats_* families: connected,
/// disconnected_seconds, outages, reconnects, published, published_bytes, publish_errors,
/// dropped, kv_puts, kv_write_failures; docs/operations.md).
std::string nats_bridge_metrics(const NatsBridgeStats& s);
/// The same as the members of a JSON object (`"connected":true,...`), for /api/v1/stats.
std::string nats_bridge_stats_json(const NatsBridgeStats& s);
/// Why an agent is unhealthy: not connected to NATS for longer than `bound` (the words say how
/// long and the bound); nullopt when healthy.
std::optional<std::string> nats_health_error(const NatsBridgeStats& s,
                                             std::chrono::milliseconds bound);

/// `s` with every character outside [A-Za-z0-9_-] replaced by '_'; "_" when empty.
std::string sanitize_subject_token(std::string_view s);
/// This machine's host name (gethostname), sanitized; "unknown" when it cannot be read.
std::string default_host_token();

class NatsBridge {
 public:
  NatsBridge(SnapshotChannel& channel, NatsBridgeOptions options = {});
  ~NatsBridge();
  NatsBridge(const NatsBridge&) = delete;
  NatsBridge& operator=(const NatsBridge&) = delete;

  /// Subscribes and starts the publishing thread, which connects in the background.
  void start();
  /// See the class comment. Returns once the thread has ended.
  void stop();
  bool running() const;

  /// New credentials and TLS files (a SIGHUP reload; the caller read the secret files). Checked
  /// now: an inconsistent `auth` (nats_auth_error) is `refused`, the reason in `error`
  /// (optional) and the current credentials kept; the ones in use (or already on their way) are
  /// `unchanged`. Otherwise `reconnecting` and, on the bridge's thread: while connected, a
  /// connection with `auth` is opened (one attempt, at most about connect_timeout) and replaces the
  /// current one once it connects (what is queued is kept; the old one flushes what it holds; the
  /// next message of every probe is a full one); when it cannot connect, the current connection is
  /// kept and the refusal logged in NATS's words. While not connected, `auth` is used from the
  /// next attempt. Also taken by a later start(). options() keeps the construction's auth. An
  /// empty inbox_prefix gets the default (_INBOX_gpustream.<node>). Thread-safe.
  NatsAuthChange set_auth(NatsAuth auth, std::string* error = nullptr);

  NatsBridgeStats stats() const;
  /// "<prefix>.<host>.<probe>" for `probe`.
  std::string subject_for(std::string_view probe) const;
  /// "<prefix>.<host>.*": every subject this bridge publishes on.
  std::string subject_wildcard() const;
  const NatsBridgeOptions& options() const noexcept { return options_; }

 private:
  void run(std::shared_ptr<SnapshotQueue> queue);

  SnapshotChannel& channel_;
  NatsBridgeOptions options_;
  std::string subject_head_;  // "<prefix>.<host>."
  mutable std::mutex mu_;     // start/stop
  std::thread thread_;
  std::shared_ptr<SnapshotQueue> queue_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> published_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> publish_errors_{0};
  std::atomic<std::uint64_t> reconnects_{0};
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::uint64_t> kv_puts_{0};
  std::atomic<std::uint64_t> kv_errors_{0};
  std::mutex auth_mu_;                     // guards auth_
  std::optional<NatsAuth> auth_;           // set_auth()'s latest; none: options_.auth
  std::atomic<bool> auth_changed_{false};  // set_auth() since the thread last took auth_
  std::atomic<std::uint64_t> outages_{0};
  std::atomic<bool> connected_{false};
  /// steady_clock nanoseconds since when the bridge is not connected; 0: connected or stopped.
  std::atomic<std::int64_t> down_since_ns_{0};
};

}  // namespace gpustream::transport
