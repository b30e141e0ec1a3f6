// ServerCore: the server's shared state, wiring the parts together (docs/architecture/
// transport.md, the server room). (It was named Hub, which python/'s Hub also is.)
//   listener.*          binding, accepting, admission (refusals)
//   session_registry.*  open connections, fan-out of each snapshot, the stall sweep, close
//   encoding_cache.*    snapshot messages serialized once per selection, bounded in bytes
//   server_metrics.hpp  the counters
// The core itself holds the one channel subscription, hello, and stop. Everything but the
// counters lives on `strand`.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "gpustream/transport/protocol.hpp"
#include "gpustream/transport/server.hpp"
#include "server/access.hpp"
#include "server/encoding_cache.hpp"
#include "server/listener.hpp"
#include "server/server_metrics.hpp"
#include "server/session_registry.hpp"

namespace gpustream::transport {

/// What a session reaches on the server besides the server-wide requests (hello, fit, the
/// known probes and devices, the channel): its strand, its bounds, the counters, the registry
/// of connections and the access rules. References into the ServerCore that owns them (a
/// session keeps the core alive).
struct SessionContext {
  const Strand& strand;
  const ServerLimits& limits;
  ServerMetrics& metrics;
  SessionRegistry& registry;
  const AccessPolicy& access;
};

class ServerCore : public std::enable_shared_from_this<ServerCore> {
 public:
  ServerCore(const boost::asio::any_io_executor& ex, SnapshotChannel& channel,
             ServerOptions options, Server::StatsSource stats);
  ~ServerCore();

  // --- Server's API (any thread) ---
  void start();
  void stop(std::function<void()> on_stopped, bool force);
  std::optional<tcp::endpoint> http_endpoint() const;
  /// Server::set_token (the policy swaps the token atomically: any thread).
  bool set_token(std::string token) { return access_.set_token(std::move(token)); }
  std::optional<tcp::endpoint> tcp_endpoint() const;
  ServerCounters counters() const {
    auto c = metrics_.snapshot();
    c.tls = options_.tls.has_value();
    return c;
  }
  /// Server::reload_tls.
  std::string reload_tls(const std::optional<TlsFiles>& files);

  // --- for sessions (any thread) ---
  /// The TLS context new connections use; null: plaintext listeners.
  std::shared_ptr<boost::asio::ssl::context> tls_context() const {
    std::lock_guard lock(tls_mu_);
    return tls_;
  }

  // --- for sessions (on the strand) ---
  /// The strand, bounds, counters, connections and access rules.
  const SessionContext& context() const noexcept { return context_; }
  const ServerOptions& options() const noexcept { return options_; }
  SnapshotChannel& channel() noexcept { return channel_; }
  bool stopping() const noexcept { return stopping_; }

  /// A connection closed: forget it (and finish stop() when it was the last).
  void remove(Connection* c);

  /// The hello message, and the sequence a new client starts after. One buffer shared by every
  /// client that connects while the sequence and the probes' states stay the same.
  std::shared_ptr<const std::string> hello(std::uint64_t* last_sequence);
  /// The snapshot message of `s` under `sel` (see EncodingCache).
  std::shared_ptr<const std::string> encoded(const SnapshotPtr& s, const Selection& sel) {
    return cache_.get(s, sel);
  }
  std::vector<ProbeStats> probe_stats() const;
  /// Probe names and device ids the server knows now (latest snapshots and statistics).
  std::vector<std::string> known_probes() const;
  std::vector<std::string> known_devices() const;
  /// Every device where `r.bytes` fit now, most free first, less what the request excludes:
  /// ServerOptions::fit_source under the request's exclusions (a fleet: no events, no health
  /// rule), else local_fits() over the channel's latest snapshots and its fatal events. The
  /// `fit` message and /api/v1/fit.
  FitAnswer fits(const FitRequest& r);
  /// The fit_result message answering `r` (fits(), cut to the request's limit).
  std::string fit(const FitRequest& r);
  /// The body of a big, identical answer (/api/v1/snapshot, /api/v1/devices) named `key` (its
  /// path and what in its query changes it): built once per generation (the latest sequence)
  /// and shared by every response that sends it. At most kSharedBodies keys are kept.
  std::shared_ptr<const std::string> shared_body(std::string_view key,
                                                 const std::function<std::string()>& build);
  /// An HTTP response body starts being written: `id` names its buffer (a shared body counts
  /// once however many responses send it). False, counting nothing, when it would pass
  /// limits.http_response_bytes and is not `exempt`.
  bool begin_response(const void* id, std::size_t bytes, bool exempt);
  /// The response begun with `id` is written (or abandoned).
  void end_response(const void* id);
  /// Highest sequence the core has fanned out (or found in the channel at start).
  std::uint64_t cursor() const noexcept { return cursor_.load(std::memory_order_relaxed); }

 private:
  void on_accept(tcp::socket s, ConnKind kind);
  void sweep();
  void on_snapshot(const SnapshotPtr& s);
  void on_gap(const Gap& g);
  void on_event(const EventPtr& e);
  void check_stopped();

  Strand strand_;
  SnapshotChannel& channel_;
  ServerOptions options_;
  Server::StatsSource stats_;
  AccessPolicy access_;
  ServerMetrics metrics_;
  SessionRegistry registry_;
  SessionContext context_{strand_, options_.limits, metrics_, registry_, access_};
  EncodingCache cache_;
  std::shared_ptr<Listener> listener_;
  static constexpr std::size_t kSharedBodies = 8;
  struct SharedBody {
    std::string key;
    std::shared_ptr<const std::string> body;
  };
  std::uint64_t shared_generation_ = 0;
  std::vector<SharedBody> shared_bodies_;
  struct InFlight {
    std::size_t bytes;
    std::size_t writers;
  };
  std::map<const void*, InFlight> responses_;
  std::size_t response_bytes_ = 0;
  struct HelloCache {
    std::uint64_t last_sequence = 0;
    std::vector<ProbeInfo> probes;
    std::shared_ptr<const std::string> message;
  } hello_;

  mutable std::mutex tls_mu_;  // guards tls_ and tls_files_ (reload_tls from any thread)
  std::shared_ptr<boost::asio::ssl::context> tls_;
  TlsFiles tls_files_;

  std::optional<tcp::endpoint> http_bound_, tcp_bound_;  // written in start(), read-only after
  std::atomic<bool> started_{false};
  std::atomic<bool> bound_{false};
  Subscription subscription_;
  EventSubscription event_subscription_;
  std::atomic<std::uint64_t> cursor_{0};
  std::optional<boost::asio::steady_timer> sweep_timer_;

  bool stopping_ = false;
  std::vector<std::function<void()>> on_stopped_;
  std::optional<boost::asio::steady_timer> stop_timer_;
};

}  // namespace gpustream::transport
