// gpustream/transport/fleet.hpp — `gpustream fleet`: every node's snapshots from NATS, one view.
//
//   boost::asio::io_context io;
//   gpustream::SnapshotChannel channel(io.get_executor());
//   gpustream::transport::FleetOptions fo;             // nats://127.0.0.1:4222, stale 5 s
//   gpustream::transport::FleetView fleet(io.get_executor(), channel, fo);
//   fleet.start();                                     // the bus; the bucket in the background
//   gpustream::transport::ServerOptions so;
//   so.extra_routes = fleet.routes();                  // /api/v1/nodes, /fleet
//   so.fit_source = fleet.fit_source();                // `fit` messages and /api/v1/fit
//   gpustream::transport::Server server(io.get_executor(), channel, so);
//
// The agents (`gpustream serve --nats URL --node NAME`) publish the compact bus encoding
// (fleet_codec.hpp) on <prefix>.<node>.<probe> and keep their last full state in a JetStream
// key-value bucket. FleetView subscribes to <prefix>.> and reads the bucket in the background
// (start() returns at once; a key-value watcher; nodes appear as they are decoded), rebuilds
// each snapshot and publishes it into the channel with its `node` set: the Server then serves
// the whole fleet with its usual API, protocol, /metrics and dashboard. docs/fleet.md.
//
// The bus is hostile input (docs/security.md, "The fleet view: a hostile bus"). The publisher of
// a message is the node named by its SUBJECT, never its payload (a payload naming another node
// is refused). Each publisher has a budget (PublisherBudget: messages, inflated bytes and decode
// CPU time per second, and a bounded queue), enforced before decoding; decoding runs on one
// worker thread of the view's own, round robin over the publishers' queues (one message each a
// turn), outside the view's lock; the same worker takes the bus's messages from its NATS
// subscription between two decodes (at most kBusPullMax at a time) and queues or refuses each
// one cheaply, undecoded. What is refused is counted with a reason (FleetRefusal) and logged
// once.
//
// Staleness is explicit (NodeTable): a node not heard from for `stale_after` is `stale` — its
// snapshots are replaced by copies whose metrics are absent with reason `stale` and an error
// `node_stale`, so no old number is shown as current — and after `gone_after` (the bucket's
// time-to-live) it is `gone`: empty snapshots with an error `node_gone` are published (for the
// subscribers), then the node is dropped from the channel's latest cache (SnapshotChannel::
// forget_node), so /api/v1/snapshot no longer lists it; /api/v1/nodes still shows it as gone.
// A node is heard only when a message of it is accepted and decoded; one (node, probe) stream
// not accepted for `stale_after` while its node stays up (its messages dropped as replays or
// jumps) gets its stale copy too (error `stream_stale`).
//
// Thread safety: every public member may be called from any thread. The view's worker thread
// reads the NATS connection's socket itself (libnats's external event loop: libnats runs no
// reader or delivery thread for it), takes the messages from the subscription and decodes them;
// the staleness sweep runs on the executor given.
// Cancellation: stop() (also the destructor) unsubscribes, stops the bucket's read and the
// worker, cancels the sweep and closes the connection; it returns once no callback or thread of
// this view runs any more.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/planner.hpp"
#include "gpustream/transport/fleet_codec.hpp"
#include "gpustream/transport/nats_auth.hpp"
#include "gpustream/transport/server.hpp"

namespace gpustream::transport {

enum class NodeState : std::uint8_t { up, stale, gone };
std::string_view to_string(NodeState s) noexcept;

/// What the fleet knows of one node.
struct NodeInfo {
  std::string name;
  NodeState state = NodeState::up;
  std::string agent;                     // the agent's version, e.g. "gpustream/0.1.0"
  std::int64_t last_sample_unix_ns = 0;  // the newest snapshot's time_unix_ns
  std::int64_t last_heard_unix_ns = 0;   // when a message of it last arrived (wall clock)
  std::uint64_t messages = 0;            // messages taken from it
};

/// The staleness state machine of the fleet's nodes, with time given by the caller (tests drive
/// it). up → stale after `stale_after` without a message, → gone after `gone_after`; a message
/// brings a node back up. Bounded: at most `max_nodes`; a new node beyond that replaces the
/// gone node heard from longest ago, or is refused when none is gone. Admission, refusal and
/// each transition cost O(log n) (the nodes are indexed by state and time heard), never a scan.
/// It also keeps when each (node, probe) stream of an up node was last heard, so that a stream
/// that stops being accepted while its node stays up goes stale on its own (at most
/// `max_streams` streams; beyond, the one heard from longest ago is reported stale at once).
/// Thread safety: none (FleetView guards it).
class NodeTable {
 public:
  using Clock = std::chrono::steady_clock;
  using Stream = std::pair<std::string, std::string>;  // (node, probe)
  static constexpr std::size_t kDefaultMaxStreams = 262144;

  NodeTable(std::chrono::milliseconds stale_after, std::chrono::milliseconds gone_after,
            std::size_t max_nodes = 100000, std::size_t max_streams = kDefaultMaxStreams);

  /// A message from `node` (of its stream `probe`, when given) was accepted at `now`
  /// (`heard_unix_ns`: the same instant, wall clock). The node's state before (nullopt: new).
  /// Returns false when the table is full (the message is to be dropped). O(log n).
  bool heard(const std::string& node, std::string_view agent, std::int64_t sample_unix_ns,
             Clock::time_point now, std::int64_t heard_unix_ns,
             std::optional<NodeState>* before = nullptr, std::string_view probe = {});
  /// Whether heard() would take a message of `node` now: it is known, or there is room (a free
  /// place or a gone node to replace). O(log n); changes nothing.
  bool admits(std::string_view node) const;
  /// Moves nodes along up → stale → gone at `now`; returns those that changed, with their new
  /// state, in name order. `stale_streams` (optional) receives the streams of nodes still up
  /// that were not heard for stale_after (each reported once, until heard again), in order.
  /// O(changes · log n).
  std::vector<std::pair<std::string, NodeState>> advance(
      Clock::time_point now, std::vector<Stream>* stale_streams = nullptr);

  std::optional<NodeState> state(std::string_view node) const;
  std::int64_t last_heard_unix_ns(std::string_view node) const;  // 0: unknown node
  std::vector<NodeInfo> nodes() const;                           // in name order
  /// Each node's name and state, in name order (what /metrics needs: no copy of the rest).
  std::vector<std::pair<std::string, NodeState>> states() const;
  std::size_t size() const noexcept { return nodes_.size(); }
  /// Nodes in state `s`. O(1).
  std::size_t count(NodeState s) const noexcept { return by_state_[static_cast<int>(s)].size(); }
  /// (node, probe) streams whose freshness is kept (those of up nodes heard within stale_after).
  std::size_t streams() const noexcept { return streams_.size(); }
  std::chrono::milliseconds stale_after() const noexcept { return stale_after_; }
  std::chrono::milliseconds gone_after() const noexcept { return gone_after_; }

 private:
  struct Entry {
    NodeInfo info;
    Clock::time_point heard;
  };
  using Nodes = std::map<std::string, Entry, std::less<>>;
  using Index = std::set<std::pair<Clock::time_point, std::string_view>>;  // (heard, name)
  using StreamIndex =
      std::set<std::pair<Clock::time_point, std::pair<std::string_view, std::string_view>>>;
  void index(const Entry& e, const std::string& name);
  void unindex(const Entry& e, const std::string& name);
  void forget_streams(std::string_view node);
  void stream_heard(const std::string& node, std::string_view probe, Clock::time_point now);

  std::chrono::milliseconds stale_after_;
  std::chrono::milliseconds gone_after_;
  std::size_t max_nodes_;
  std::size_t max_streams_;
  Nodes nodes_;
  Index by_state_[3];  // per NodeState, the nodes in it by time heard (oldest first)
  std::map<Stream, Clock::time_point, std::less<>> streams_;
  StreamIndex streams_by_heard_;
  std::vector<Stream> evicted_streams_;  // pushed out by max_streams: reported stale next
};

/// The snapshot that stands for `s` while its node is stale: same devices and identity, every
/// metric absent with reason `stale` (its source kept), processes absent, host figures left out,
/// and an error `node_stale` that says since when.
/// With `stream_only`, the error is `stream_stale`: the node is up, but this (node, probe) stream
/// has had no message accepted for stale_after (its messages dropped as replays or jumps).
GpuSnapshot stale_copy(const GpuSnapshot& s, std::int64_t last_heard_unix_ns,
                       bool stream_only = false);
/// The snapshot that stands for a gone node's probe: no devices, an error `node_gone`.
GpuSnapshot gone_marker(const GpuSnapshot& s, std::int64_t last_heard_unix_ns);

/// One answer of the fleet planner: a device, its node, how fresh the figure is.
struct FleetFit {
  DeviceFit fit;
  NodeState state = NodeState::up;
  std::int64_t age_ns = 0;  // now − the figure's sample time
};
/// Devices with at least `bytes` free across the fleet, most free first: fits() over the latest
/// snapshots (a stale or gone node has no free-memory figure, so it is never a candidate).
std::vector<FleetFit> fleet_fits(const std::vector<SnapshotPtr>& latest, const NodeTable& table,
                                 std::uint64_t bytes, std::int64_t now_unix_ns);

/// The JSON documents of the fleet endpoints (docs/fleet.md): /api/v1/nodes (one summary per
/// node: state, last seen, agent, devices, utilization and memory totals) and /api/v1/fit
/// (the fits as fit_entries(), through protocol.hpp's fit_json: serve's encoder too).
std::string nodes_json(const std::vector<SnapshotPtr>& latest, const NodeTable& table,
                       std::int64_t now_unix_ns);
std::string fit_json(const std::vector<FleetFit>& fits, std::uint64_t bytes);
/// The fits as the protocol's fit_result entries (the same fields as fit_json's).
std::vector<FitEntry> fit_entries(const std::vector<FleetFit>& fits);
/// The fleet dashboard page (/fleet).
std::string_view fleet_dashboard_html() noexcept;

/// What one publisher (a node, named by the subject) may cost the fleet view. Each rate is a
/// token bucket holding `burst` of it; a message is refused (counted, logged once) when its
/// bucket lacks what it costs. Messages are counted when they arrive; inflated bytes (the
/// header's declared body, and for a delta the base it applies to) before decoding; decode CPU
/// time (the worker thread's, measured around each decode) after, so a publisher whose CPU
/// bucket is empty or in debt has its messages refused until it refills.
struct PublisherBudget {
  double messages_per_second = 200;
  std::size_t bytes_per_second = std::size_t{32} << 20;  // inflated bytes
  std::chrono::milliseconds cpu_per_second{100};         // decode CPU time
  std::chrono::milliseconds burst{2000};                 // each bucket holds this much of its rate
  std::size_t queue_messages = 64;                       // waiting to be decoded, per publisher
  std::size_t queue_bytes = std::size_t{8} << 20;        // their bytes as received
  /// All publishers' queues together (bytes as received); the bucket's read waits below half.
  std::size_t total_queue_bytes = std::size_t{256} << 20;
};

/// Why a bus message was refused (gpustream_fleet_messages_refused_total{reason}).
enum class FleetRefusal : std::uint8_t {
  bad_subject,       // not <prefix>.<node>.<probe> with valid tokens
  subject_mismatch,  // the payload names another node than the subject
  node_table_full,   // a new node while the table is full (--max-nodes) and none is gone
  budget_messages,   // the publisher's messages per second
  queue_full,        // its queue (messages or bytes) or all queues together
  too_large,         // over max_message_bytes as received or max_body_bytes declared
  budget_bytes,      // its inflated bytes per second
  budget_cpu,        // its decode CPU time per second
  malformed,         // a header, body, patch or snapshot that does not decode
  seq_stale,         // the decoder's: older than its stream's newest (a replay)
  seq_jump,          // the decoder's: a sequence jump it refuses
  waiting,           // the decoder's: a delta before its stream's full message
  inflation,         // a compressed body declared or inflating past the inflation-ratio bound
  too_many_devices,  // a snapshot over the devices or processes bound (BusLimits)
  too_many_streams,  // a new stream while the decoder keeps max_streams
  republished,       // a bus message carrying JetStream's republish headers (Nats-Stream, ...)
  key_mismatch,      // a bucket entry whose state names another node than its key
  bad_key,           // a bucket entry whose key is not a node name
};
inline constexpr std::size_t kFleetRefusalCount = 18;
std::string_view to_string(FleetRefusal r) noexcept;

/// Where the bucket's stream keeps its entries (JetStream's storage type).
enum class KvStorage : std::uint8_t { file, memory };
std::string_view to_string(KvStorage s) noexcept;

/// The view's own inbox prefix by default (FleetOptions::auth.inbox_prefix empty): the
/// permission it needs is `subscribe _INBOX_gpustream.fleet.>` (docs/fleet.md).
inline constexpr std::string_view kFleetInboxPrefix = "_INBOX_gpustream.fleet";

struct FleetOptions {
  std::string url = "nats://127.0.0.1:4222";
  /// Credentials and TLS (nats_auth.hpp); a URL's user:password@ also works. An empty
  /// inbox_prefix is kFleetInboxPrefix.
  NatsAuth auth;
  std::string subject_prefix = "gpustream";
  std::string kv_bucket = "gpustream_nodes";  // empty: do not read the key-value state
  /// The bucket when it is missing, at start and after each reconnect (a restarted nats-server
  /// whose bucket was in memory has none): created with the settings below, unless kv_create
  /// is false (then, as when creating it is not permitted, the view says once what an admin
  /// runs: docs/fleet.md "The bucket"). A bucket that exists is used as it is; a config that
  /// differs from these is named in one warning.
  bool kv_create = true;
  KvStorage kv_storage = KvStorage::file;  // file: the bucket survives a nats-server restart
  int kv_replicas = 1;                     // 1..5 (a JetStream cluster's)
  std::chrono::milliseconds kv_ttl{0};     // how long an entry lives; 0: gone_after
  /// The bucket's whole size, bytes (the stream's max_bytes; a put beyond it is refused, the
  /// agent counts a write failure), and each entry at most limits.max_message_bytes (what the
  /// view would decode): a bucket the view creates is bounded in bytes, not only in keys.
  std::int64_t kv_max_bytes = std::int64_t{1} << 30;
  /// Between two reconnection attempts after NATS is lost (libnats's reconnect wait).
  std::chrono::milliseconds reconnect_wait{1000};
  std::chrono::milliseconds stale_after{5000};
  std::chrono::milliseconds gone_after{30000};  // the bucket's time-to-live
  std::chrono::milliseconds connect_timeout{5000};
  std::size_t max_nodes = 100000;
  BusLimits limits;
  /// How the key-value state is read at start: true, in one pass (a watcher on every key that
  /// delivers each key's last value, then the end of the initial values); false, key by key
  /// (list the keys, then one get per key: a round trip each; kept for comparison,
  /// bench/fleet_kv_bench.cpp).
  bool kv_watch = true;
  PublisherBudget budget;
  /// The clocks of the budget and the staleness (tests drive them): monotonic time, and the
  /// CPU time of the thread that decodes (default: CLOCK_THREAD_CPUTIME_ID).
  std::function<std::chrono::steady_clock::time_point()> clock;
  std::function<std::chrono::nanoseconds()> cpu_clock;
  /// Called once, from one of the view's threads and with no lock held, when the bucket's read
  /// is over and every message of it decoded or refused: the nodes it gave, and how long it
  /// took from start(). (`gpustream fleet` prints it.)
  std::function<void(std::uint64_t kv_nodes, std::chrono::milliseconds took)> on_bucket_read;
};

struct FleetStats {
  std::uint64_t messages = 0;       // bus messages received
  std::uint64_t bytes = 0;          // their payload bytes
  std::uint64_t snapshots = 0;      // snapshots published into the channel
  std::uint64_t rejected = 0;       // malformed, oversized, unknown-format, mismatched messages
  std::uint64_t waiting = 0;        // deltas that came before their stream's full message
  std::uint64_t kv_nodes = 0;       // nodes read from the bucket (start, reconnects, fetches)
  bool kv_done = false;             // the bucket's read is over (its entries queued)
  std::uint64_t nodes_refused = 0;  // messages dropped because the node table was full
  std::array<std::uint64_t, kFleetRefusalCount> refused{};  // by FleetRefusal
  std::uint64_t decode_cpu_ns = 0;    // CPU time spent decoding (the worker's)
  std::uint64_t pending = 0;          // gauge: messages queued or being decoded
  std::uint64_t pending_bytes = 0;    // gauge: their bytes as received
  std::uint64_t publishers = 0;       // gauge: publishers with a budget entry
  std::uint64_t bus_streams = 0;      // gauge: (node, probe) streams the decoder keeps
  std::uint64_t bus_state_bytes = 0;  // gauge: their bytes (≤ BusLimits::max_state_bytes)
  std::uint64_t bus_evicted = 0;      // streams evicted to stay within max_state_bytes
  bool connected = false;
  std::uint64_t outages = 0;     // NATS lost (each outage once, however long)
  std::uint64_t reconnects = 0;  // NATS back after an outage
  std::uint64_t kv_created = 0;  // the bucket created by this view (at start or after one)
  std::uint64_t kv_rereads = 0;  // the bucket read again after a reconnect
  /// Node states fetched from the bucket because a delta came of a full this view missed (e.g.
  /// sent while it was reconnecting): the node shows at once, not at its next full message.
  std::uint64_t kv_base_fetches = 0;
  std::uint64_t auth_reloads = 0;          // set_auth(): a new identity taken
  std::uint64_t auth_reload_failures = 0;  // ... refused or not connecting (the old kept)
  std::uint64_t nodes_up = 0;              // gauges: the node table by state
  std::uint64_t nodes_stale = 0;
  std::uint64_t nodes_gone = 0;
};

/// Built only with libnats (GPUSTREAM_HAS_NATS).
class FleetView {
 public:
  FleetView(const boost::asio::any_io_executor& ex, SnapshotChannel& channel, FleetOptions options);
  ~FleetView();
  FleetView(const FleetView&) = delete;
  FleetView& operator=(const FleetView&) = delete;

  /// Connects (throws std::runtime_error when the server cannot be reached or the URL is bad),
  /// starts the decode worker, subscribes, starts the staleness sweep and the key-value
  /// bucket's read in the background (the bucket created first when it is missing and
  /// kv_create; no bucket or no JetStream is logged once, not an error), and returns without
  /// waiting for it. Call once.
  /// When NATS is lost, the view says so once (with NATS's words for the cause), counts the
  /// outage, and reconnects every reconnect_wait; once back, it says so, and on its bucket
  /// thread (not libnats's) creates the bucket again if it is missing and reads it again (the
  /// nodes it knows stay).
  void start();
  /// Waits until the bucket's read is over and every message of it decoded (or refused), at
  /// most `timeout`; true when so. (Tests and benchmarks: start() does not wait.)
  bool wait_for_bucket(std::chrono::milliseconds timeout);
  void stop();
  /// New NATS credentials (SIGHUP: the caller read their files; an empty inbox_prefix is
  /// kFleetInboxPrefix). Returns at once: the view's bucket thread connects with them (at most
  /// connect_timeout), moves the bus subscription to the new connection and closes the old one;
  /// when the new one cannot connect or subscribe, the old one goes on (said why, counted in
  /// FleetStats::auth_reload_failures). The nodes and the decoder's state stay. A message
  /// published during the move may be missed (at most once, as on a reconnect), never taken
  /// twice. `error` (optional) says why when refused.
  NatsAuthChange set_auth(NatsAuth auth, std::string* error = nullptr);

  std::vector<NodeInfo> nodes() const;
  FleetStats stats() const;
  /// /api/v1/nodes, /api/v1/nodes/<name> (its snapshots) and /fleet, for
  /// ServerOptions::extra_routes. The view must outlive the server.
  ExtraRoutes routes();
  /// The gpustream_fleet_* families for /metrics (ServerOptions::extra_metrics): the stats
  /// above and the channel's latest cache. The view must outlive the server.
  std::function<std::string()> metrics();
  /// fleet_fits() over every node, for ServerOptions::fit_source (the protocol's `fit` and the
  /// server's /api/v1/fit?bytes=N). The view must outlive the server; after the view is gone it
  /// answers with no device.
  FitSource fit_source();
  /// Handles one bus message as if it had arrived now: deliver(), then — when the view has no
  /// worker thread (start() was not called: tests) — process_pending().
  void on_message(std::string_view data, std::string_view subject);
  /// The delivery path only (the worker, for each bus message): checks the subject, the node
  /// table's admission and the publisher's message rate, and queues the message (or refuses it).
  /// `republished_by`: the stream named by the message's Nats-Stream header (or another of
  /// JetStream's republish headers), when it has one: such a message is refused (republished).
  void deliver(std::string_view data, std::string_view subject,
               std::string_view republished_by = {});
  /// The worker's work, on the calling thread: decodes what is queued, round robin over the
  /// publishers (one message each a turn), under their budgets; returns the messages taken.
  std::size_t process_pending();
  /// Runs the staleness sweep at `now` (the timer's path; tests use it).
  void sweep(NodeTable::Clock::time_point now);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace gpustream::transport
