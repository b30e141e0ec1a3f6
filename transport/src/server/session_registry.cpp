// The session registry: admission bounds, fan-out, the stall sweep, close.
#include "server/session_registry.hpp"

#include "server/stream_session.hpp"

namespace gpustream::transport {

SessionRegistry::SessionRegistry(const ServerLimits& limits, ServerMetrics& metrics)
    : limits_(limits), metrics_(metrics) {}

std::size_t SessionRegistry::limit(ConnKind kind) const noexcept {
  switch (kind) {
    case ConnKind::http:
      return limits_.max_http_connections;
    case ConnKind::http_reserved:
      return limits_.reserved_http_connections;
    case ConnKind::websocket:
    case ConnKind::tcp:
      break;
  }
  return limits_.max_connections;
}

ServerMetrics::Counter& SessionRegistry::open_gauge(ConnKind kind) noexcept {
  switch (kind) {
    case ConnKind::http:
    case ConnKind::http_reserved:
      return metrics_.http_open;
    case ConnKind::websocket:
      return metrics_.websocket_open;
    case ConnKind::tcp:
      break;
  }
  return metrics_.tcp_open;
}

SessionRegistry::Admission SessionRegistry::admit(ConnKind kind,
                                                  const boost::asio::ip::address& peer) {
  const auto it = per_address_.find({kind, peer});
  if (it != per_address_.end() && it->second >= limits_.max_connections_per_address)
    return Admission::address_full;
  if (open_[static_cast<int>(kind)] < limit(kind)) return Admission::ok;
  if (kind != ConnKind::http) return Admission::transport_full;
  // HTTP is full: the connection that has waited longest for a request gives way.
  if (evict_idle(ConnKind::http)) return Admission::ok;
  // Every slot is busy (slow readers of big responses): a reserved slot, for /healthz and
  // /metrics only, so busy clients cannot lock them out (issue 27).
  if (open_[static_cast<int>(ConnKind::http_reserved)] < limit(ConnKind::http_reserved) ||
      evict_idle(ConnKind::http_reserved))
    return Admission::reserved;
  return Admission::transport_full;
}

bool SessionRegistry::evict_idle(ConnKind kind) {
  Connection* oldest = nullptr;
  Connection::Clock::time_point oldest_since{};
  for (const auto& [p, e] : conns_) {
    if (e.kind != kind) continue;
    const auto since = p->idle_since();
    if (since && (!oldest || *since < oldest_since)) {
      oldest = p;
      oldest_since = *since;
    }
  }
  if (!oldest) return false;
  auto victim = conns_.at(oldest).conn.lock();
  remove(oldest);
  ServerMetrics::bump(metrics_.idle_closed);
  if (victim) victim->shutdown(false);
  return true;
}

void SessionRegistry::add(Connection* c, std::weak_ptr<Connection> w) {
  const auto kind = c->kind();
  if (!conns_.emplace(c, Entry{std::move(w), kind, c->peer()}).second) return;
  ++per_address_[{kind, c->peer()}];
  ++open_[static_cast<int>(kind)];
  ServerMetrics::bump(open_gauge(kind));
}

void SessionRegistry::remove(Connection* c) {
  const auto it = conns_.find(c);
  if (it == conns_.end()) return;
  const auto kind = it->second.kind;
  const auto key = std::make_pair(kind, it->second.peer);
  if (auto a = per_address_.find(key); a != per_address_.end() && --a->second == 0)
    per_address_.erase(a);
  --open_[static_cast<int>(kind)];
  open_gauge(kind).fetch_sub(1, std::memory_order_relaxed);
  conns_.erase(it);
}

void SessionRegistry::add_stream(StreamSession* s, std::weak_ptr<StreamSession> w) {
  streams_.emplace(s, std::move(w));
}

void SessionRegistry::remove_stream(StreamSession* s) {
  if (broadcasting_)
    removed_while_broadcasting_.push_back(s);
  else
    streams_.erase(s);
}

template <class F>
void SessionRegistry::for_each_stream(F&& f) {
  broadcasting_ = true;
  for (auto& [p, w] : streams_)
    if (auto session = w.lock()) f(*session);
  broadcasting_ = false;
  for (auto* p : removed_while_broadcasting_) streams_.erase(p);
  removed_while_broadcasting_.clear();
}

void SessionRegistry::fan_out(const SnapshotPtr& s) {
  for_each_stream([&](StreamSession& session) { session.on_live(s); });
}

void SessionRegistry::fan_out_event(const EventPtr& e,
                                    const std::shared_ptr<const std::string>& message) {
  for_each_stream([&](StreamSession& session) { session.on_event(e, message); });
}

void SessionRegistry::fan_out_gap(const Gap& g) {
  for_each_stream([&](StreamSession& session) { session.on_channel_gap(g); });
}

void SessionRegistry::sweep(std::chrono::steady_clock::time_point now) {
  std::vector<std::shared_ptr<StreamSession>> live;
  live.reserve(streams_.size());
  for (auto& [p, w] : streams_)
    if (auto s = w.lock()) live.push_back(std::move(s));
  for (auto& s : live) s->check_stalled(now);
}

void SessionRegistry::close_all(bool graceful) {
  std::vector<std::shared_ptr<Connection>> all;
  all.reserve(conns_.size());
  for (auto& [p, e] : conns_)
    if (auto c = e.conn.lock()) all.push_back(std::move(c));
  for (auto& c : all) c->shutdown(graceful);
}

}  // namespace gpustream::transport
