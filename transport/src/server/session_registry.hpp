// The session registry: every open connection (for admission and stop), the streaming ones
// (for fan-out and the stall sweep). The one owner of the connection bounds: per transport,
// per address, and which idle HTTP connection gives way when HTTP is full.
//
// Thread safety: none; used on the core's strand only.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/transport/server.hpp"
#include "server/server_metrics.hpp"

namespace gpustream::transport {

/// http_reserved: an HTTP connection admitted beyond max_http_connections, when every HTTP slot
/// was busy, that may ask for /healthz and /metrics only (limits.reserved_http_connections).
enum class ConnKind { http, websocket, tcp, http_reserved };

/// Anything the registry must be able to close.
class Connection {
 public:
  using Clock = std::chrono::steady_clock;
  Connection(ConnKind kind, boost::asio::ip::address peer) : kind_(kind), peer_(std::move(peer)) {}
  virtual ~Connection() = default;
  /// graceful: finish what is queued, then close (WebSocket close frame). Otherwise abort.
  virtual void shutdown(bool graceful) = 0;
  /// HTTP: since when the connection waits for a request (nullopt while one is handled).
  virtual std::optional<Clock::time_point> idle_since() const { return std::nullopt; }

  ConnKind kind() const noexcept { return kind_; }
  const boost::asio::ip::address& peer() const noexcept { return peer_; }

 protected:
  void set_kind(ConnKind k) noexcept { kind_ = k; }

 private:
  ConnKind kind_;
  boost::asio::ip::address peer_;
};

class StreamSession;

class SessionRegistry {
 public:
  SessionRegistry(const ServerLimits& limits, ServerMetrics& metrics);

  enum class Admission { ok, transport_full, address_full, reserved };
  /// Whether one more connection of `kind` from `peer` fits. HTTP makes room itself: when it
  /// is full, the connection idle the longest is closed (counted in idle_closed); when none
  /// is idle (every slot busy writing), it is admitted as `reserved` (ConnKind::http_reserved)
  /// while one of limits.reserved_http_connections is free (or frees an idle one).
  Admission admit(ConnKind kind, const boost::asio::ip::address& peer);

  void add(Connection* c, std::weak_ptr<Connection> w);
  /// Idempotent.
  void remove(Connection* c);
  void add_stream(StreamSession* s, std::weak_ptr<StreamSession> w);
  void remove_stream(StreamSession* s);

  void fan_out(const SnapshotPtr& s);
  void fan_out_gap(const Gap& g);
  /// A GPU event and its encoded message (one buffer shared by every client).
  void fan_out_event(const EventPtr& e, const std::shared_ptr<const std::string>& message);
  /// Lets every stream check its stall deadlines.
  void sweep(std::chrono::steady_clock::time_point now);
  void close_all(bool graceful);

  std::size_t size() const noexcept { return conns_.size(); }

 private:
  std::size_t limit(ConnKind kind) const noexcept;
  ServerMetrics::Counter& open_gauge(ConnKind kind) noexcept;
  template <class F>
  void for_each_stream(F&& f);

  const ServerLimits& limits_;
  ServerMetrics& metrics_;
  struct Entry {
    std::weak_ptr<Connection> conn;
    ConnKind kind;
    boost::asio::ip::address peer;
  };
  std::unordered_map<Connection*, Entry> conns_;
  std::map<std::pair<ConnKind, boost::asio::ip::address>, std::size_t> per_address_;
  std::size_t open_[4] = {0, 0, 0, 0};
  /// The connection of `kind` that has waited longest for a request, closed to make room.
  bool evict_idle(ConnKind kind);
  std::unordered_map<StreamSession*, std::weak_ptr<StreamSession>> streams_;
  bool broadcasting_ = false;
  std::vector<StreamSession*> removed_while_broadcasting_;
};

}  // namespace gpustream::transport
