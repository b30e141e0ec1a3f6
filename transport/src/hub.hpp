// The server's shared state: listeners, the one channel subscription, the encoding cache, the
// registry of connections, the counters. Everything but the counters lives on `strand`.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "access.hpp"
#include "encoder.hpp"
#include "gpustream/transport/protocol.hpp"
#include "gpustream/transport/server.hpp"

namespace gpustream::transport {

using Strand = boost::asio::strand<boost::asio::any_io_executor>;
using tcp = boost::asio::ip::tcp;

enum class ConnKind { http, websocket, tcp };

/// Anything the hub must be able to close on stop().
class Connection {
 public:
  virtual ~Connection() = default;
  /// graceful: finish what is queued, then close (WebSocket close frame). Otherwise abort.
  virtual void shutdown(bool graceful) = 0;
};

class StreamSession;

struct AtomicCounters {
  std::atomic<std::uint64_t> connections_accepted{0}, connections_rejected{0}, http_open{0},
      websocket_open{0}, tcp_open{0}, http_requests{0}, requests_forbidden{0},
      requests_unauthorized{0}, messages_rejected{0}, slow_clients_disconnected{0},
      snapshots_received{0}, serializations{0}, snapshots_sent{0}, snapshots_dropped{0};
};

class Hub : public std::enable_shared_from_this<Hub> {
 public:
  Hub(boost::asio::any_io_executor ex, SnapshotChannel& channel, ServerOptions options,
      Server::StatsSource stats);
  ~Hub();

  // --- Server's API (any thread) ---
  void start();
  void stop(std::function<void()> on_stopped, bool force);
  std::optional<tcp::endpoint> http_endpoint() const;
  std::optional<tcp::endpoint> tcp_endpoint() const;
  ServerCounters counters() const;

  // --- for sessions (on the strand) ---
  const Strand& strand() const noexcept { return strand_; }
  const ServerOptions& options() const noexcept { return options_; }
  const ServerLimits& limits() const noexcept { return options_.limits; }
  const AccessPolicy& access() const noexcept { return access_; }
  SnapshotChannel& channel() noexcept { return channel_; }
  AtomicCounters& stats_counters() noexcept { return counters_; }
  bool stopping() const noexcept { return stopping_; }

  void add(Connection* c, std::weak_ptr<Connection> w, ConnKind kind);
  void remove(Connection* c, ConnKind kind);
  void add_stream(StreamSession* s, std::weak_ptr<StreamSession> w);
  void remove_stream(StreamSession* s);

  /// The hello message, and the sequence a new client starts after.
  std::string hello(std::uint64_t* last_sequence);
  /// The snapshot message of `s` under `p`, serialized at most once per (sequence, projection)
  /// while it stays in the cache.
  std::shared_ptr<const std::string> encoded(const SnapshotPtr& s, const Projection& p);
  std::vector<ProbeStats> probe_stats() const;
  /// Highest sequence the hub has fanned out (or found in the channel at start).
  std::uint64_t cursor() const noexcept { return cursor_.load(std::memory_order_relaxed); }

 private:
  void accept_http();
  void accept_tcp();
  void accept_failed(const boost::system::error_code& ec, bool http);
  bool admit(tcp::socket& s, ConnKind kind);
  void sweep();
  void on_snapshot(const SnapshotPtr& s);
  void on_gap(const Gap& g);
  void close_all(bool graceful);
  void check_stopped();
  std::atomic<std::uint64_t>& counter_for(ConnKind kind) noexcept;

  Strand strand_;
  SnapshotChannel& channel_;
  ServerOptions options_;
  Server::StatsSource stats_;
  AccessPolicy access_;
  AtomicCounters counters_;

  std::optional<tcp::acceptor> http_acceptor_;
  std::optional<tcp::acceptor> tcp_acceptor_;
  std::optional<tcp::endpoint> http_bound_, tcp_bound_;  // written in start(), read-only after
  std::atomic<bool> started_{false};
  std::atomic<bool> bound_{false};
  Subscription subscription_;

  std::unordered_map<Connection*, std::weak_ptr<Connection>> conns_;
  std::unordered_map<StreamSession*, std::weak_ptr<StreamSession>> streams_;
  bool broadcasting_ = false;
  std::vector<StreamSession*> removed_while_broadcasting_;

  struct Encoded {
    std::vector<std::pair<std::string, std::shared_ptr<const std::string>>> by_key;
  };
  std::map<std::uint64_t, Encoded> cache_;
  std::atomic<std::uint64_t> cursor_{0};
  std::optional<boost::asio::steady_timer> sweep_timer_;

  bool stopping_ = false;
  std::vector<std::function<void()>> on_stopped_;
  std::optional<boost::asio::steady_timer> stop_timer_;
};

}  // namespace gpustream::transport
