// gpustream/transport/fleet.hpp — `gpustream fleet`: every node's snapshots from NATS, one view.
//
//   boost::asio::io_context io;
//   gpustream::SnapshotChannel channel(io.get_executor());
//   gpustream::transport::FleetOptions fo;             // nats://127.0.0.1:4222, stale 5 s
//   gpustream::transport::FleetView fleet(io.get_executor(), channel, fo);
//   fleet.start();                                     // the key-value state, then the bus
//   gpustream::transport::ServerOptions so;
//   so.extra_routes = fleet.routes();                  // /api/v1/nodes, /fleet
//   so.fit_source = fleet.fit_source();                // `fit` messages and /api/v1/fit
//   gpustream::transport::Server server(io.get_executor(), channel, so);
//
// The agents (`gpustream serve --nats URL --node NAME`) publish the compact bus encoding
// (fleet_codec.hpp) on <prefix>.<node>.<probe> and keep their last full state in a JetStream
// key-value bucket. FleetView reads the bucket once when it starts, in one pass (a key-value
// watcher; every node shows at once),
// then subscribes to <prefix>.>, rebuilds each snapshot and publishes it into the channel with
// its `node` set: the Server then serves the whole fleet with its usual API, protocol, /metrics
// and dashboard. docs/fleet.md.
//
// Staleness is explicit (NodeTable): a node not heard from for `stale_after` is `stale` — its
// snapshots are replaced by copies whose metrics are absent with reason `stale` and an error
// `node_stale`, so no old number is shown as current — and after `gone_after` (the bucket's
// time-to-live) it is `gone`: empty snapshots with an error `node_gone` are published (for the
// subscribers), then the node is dropped from the channel's latest cache (SnapshotChannel::
// forget_node), so /api/v1/snapshot no longer lists it; /api/v1/nodes still shows it as gone.
//
// Thread safety: every public member may be called from any thread. Messages are handled on
// libnats's delivery thread; the staleness sweep runs on the executor given.
// Cancellation: stop() (also the destructor) unsubscribes, cancels the sweep and closes the
// connection; it returns once no callback of this view runs any more.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/planner.hpp"
#include "gpustream/transport/fleet_codec.hpp"
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
/// gone node heard from longest ago, or is refused when none is gone.
/// Thread safety: none (FleetView guards it).
class NodeTable {
 public:
  using Clock = std::chrono::steady_clock;
  NodeTable(std::chrono::milliseconds stale_after, std::chrono::milliseconds gone_after,
            std::size_t max_nodes = 100000);

  /// A message from `node` arrived at `now` (`heard_unix_ns`: the same instant, wall clock). The
  /// node's state before (nullopt: new). Returns false when the table is full (the message is
  /// to be dropped).
  bool heard(const std::string& node, std::string_view agent, std::int64_t sample_unix_ns,
             Clock::time_point now, std::int64_t heard_unix_ns,
             std::optional<NodeState>* before = nullptr);
  /// Moves nodes along up → stale → gone at `now`; returns those that changed, with their new
  /// state, in name order.
  std::vector<std::pair<std::string, NodeState>> advance(Clock::time_point now);

  std::optional<NodeState> state(std::string_view node) const;
  std::int64_t last_heard_unix_ns(std::string_view node) const;  // 0: unknown node
  std::vector<NodeInfo> nodes() const;                           // in name order
  std::size_t size() const noexcept { return nodes_.size(); }
  std::chrono::milliseconds stale_after() const noexcept { return stale_after_; }
  std::chrono::milliseconds gone_after() const noexcept { return gone_after_; }

 private:
  struct Entry {
    NodeInfo info;
    Clock::time_point heard;
  };
  std::chrono::milliseconds stale_after_;
  std::chrono::milliseconds gone_after_;
  std::size_t max_nodes_;
  std::map<std::string, Entry, std::less<>> nodes_;
};

/// The snapshot that stands for `s` while its node is stale: same devices and identity, every
/// metric absent with reason `stale` (its source kept), processes absent, host figures left out,
/// and an error `node_stale` that says since when.
GpuSnapshot stale_copy(const GpuSnapshot& s, std::int64_t last_heard_unix_ns);
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

struct FleetOptions {
  std::string url = "nats://127.0.0.1:4222";
  std::string subject_prefix = "gpustream";
  std::string kv_bucket = "gpustream_nodes";  // empty: do not read the key-value state
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
};

struct FleetStats {
  std::uint64_t messages = 0;         // bus messages received
  std::uint64_t bytes = 0;            // their payload bytes
  std::uint64_t snapshots = 0;        // snapshots published into the channel
  std::uint64_t rejected = 0;         // malformed, oversized, unknown-format messages
  std::uint64_t waiting = 0;          // deltas that came before their stream's full message
  std::uint64_t kv_nodes = 0;         // nodes read from the key-value bucket at start
  std::uint64_t nodes_refused = 0;    // messages dropped because the node table was full
  std::uint64_t bus_streams = 0;      // gauge: (node, probe) streams the decoder keeps
  std::uint64_t bus_state_bytes = 0;  // gauge: their bytes (≤ BusLimits::max_state_bytes)
  std::uint64_t bus_evicted = 0;      // streams evicted to stay within max_state_bytes
  bool connected = false;
};

/// Built only with libnats (GPUSTREAM_HAS_NATS).
class FleetView {
 public:
  FleetView(const boost::asio::any_io_executor& ex, SnapshotChannel& channel, FleetOptions options);
  ~FleetView();
  FleetView(const FleetView&) = delete;
  FleetView& operator=(const FleetView&) = delete;

  /// Connects (throws std::runtime_error when the server cannot be reached or the URL is bad),
  /// reads the key-value bucket (a missing bucket or no JetStream is logged once, not an error),
  /// subscribes and starts the staleness sweep. Call once.
  void start();
  void stop();

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
  /// Handles one bus message as if it had arrived now (the subscription's path; tests use it).
  void on_message(std::string_view data, std::string_view subject);
  /// Runs the staleness sweep at `now` (the timer's path; tests use it).
  void sweep(NodeTable::Clock::time_point now);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace gpustream::transport
