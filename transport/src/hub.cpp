// The server's shared state: listeners, fan-out, the encoding cache, stop.
#include "hub.hpp"

#include <algorithm>

#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "gpustream/log.hpp"
#include "gpustream/transport/address.hpp"
#include "http_session.hpp"
#include "stream_session.hpp"
#include "tcp_session.hpp"

namespace gpustream::transport {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {

LogOnce g_log_once;

tcp::acceptor bind(const Strand& strand, const tcp::endpoint& ep) {
  tcp::acceptor a(strand);
  a.open(ep.protocol());
  a.set_option(asio::socket_base::reuse_address(true));
  if (ep.address().is_v6()) a.set_option(asio::ip::v6_only(true));
  a.bind(ep);
  a.listen(asio::socket_base::max_listen_connections);
  return a;
}

/// Best effort, never blocks: tell a refused client why, then close.
void refuse(tcp::socket& s, std::string_view message) {
  error_code ec;
  s.non_blocking(true, ec);
  s.write_some(asio::buffer(message.data(), message.size()), ec);
  s.shutdown(tcp::socket::shutdown_both, ec);
  s.close(ec);
}

std::chrono::milliseconds sweep_period(const ServerLimits& l) {
  const auto shortest = std::min(l.write_timeout, l.slow_client_timeout);
  return std::clamp(shortest / 4, std::chrono::milliseconds{10}, std::chrono::milliseconds{1000});
}

}  // namespace

Hub::Hub(asio::any_io_executor ex, SnapshotChannel& channel, ServerOptions options,
         Server::StatsSource stats)
    : strand_(asio::make_strand(std::move(ex))),
      channel_(channel),
      options_(std::move(options)),
      stats_(std::move(stats)) {
  auto& l = options_.limits;
  l.max_connections = std::max<std::size_t>(l.max_connections, 1);
  l.send_queue_messages = std::max<std::size_t>(l.send_queue_messages, 1);
  l.max_message_bytes = std::max<std::size_t>(l.max_message_bytes, 256);
  options_.encoded_cache = std::max<std::size_t>(options_.encoded_cache, 1);
}

Hub::~Hub() = default;

void Hub::start() {
  if (started_.exchange(true))
    throw std::logic_error("gpustream::transport::Server::start called twice");
  if (options_.http) {
    http_acceptor_.emplace(bind(strand_, *options_.http));
    http_bound_ = http_acceptor_->local_endpoint();
    access_ = AccessPolicy(*http_bound_, options_.token, options_.allowed_origins,
                           options_.allowed_hosts);
  } else {
    access_ = AccessPolicy(tcp::endpoint{}, options_.token, options_.allowed_origins,
                           options_.allowed_hosts);
  }
  if (options_.tcp) {
    tcp_acceptor_.emplace(bind(strand_, *options_.tcp));
    tcp_bound_ = tcp_acceptor_->local_endpoint();
  }
  bound_ = true;
  for (const auto* ep : {&http_bound_, &tcp_bound_})
    if (*ep && !is_loopback(ep->value().address()))
      logger()->warn("gpustream serve: listening on {} — reachable from other machines{}",
                     to_string(ep->value()), options_.token.empty() ? ", without a token" : "");

  SubscribeOptions so;
  so.policy = Backpressure::drop_oldest;
  so.capacity = 4096;
  so.executor = asio::any_io_executor(strand_);
  std::weak_ptr<Hub> weak = weak_from_this();
  subscription_ = channel_.subscribe(
      std::move(so),
      [weak](const SnapshotPtr& s) {
        if (auto h = weak.lock()) h->on_snapshot(s);
      },
      [weak](const Gap& g) {
        if (auto h = weak.lock()) h->on_gap(g);
      });
  // Snapshots published before the subscription are in the history, not in the fan-out: new
  // clients start after them (resume with `since` to get them).
  const auto last = channel_.last_sequence();
  auto cur = cursor_.load();
  while (cur < last && !cursor_.compare_exchange_weak(cur, last)) {
  }

  asio::post(strand_, [self = shared_from_this()] {
    if (self->stopping_) return;
    self->accept_http();
    self->accept_tcp();
    self->sweep();
  });
}

void Hub::accept_http() {
  if (!http_acceptor_ || stopping_) return;
  http_acceptor_->async_accept(strand_, [self = shared_from_this()](error_code ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted || self->stopping_) return;
    if (ec) {
      self->accept_failed(ec, true);
      return;
    }
    if (self->admit(s, ConnKind::http)) std::make_shared<HttpSession>(self, std::move(s))->run();
    self->accept_http();
  });
}

void Hub::accept_tcp() {
  if (!tcp_acceptor_ || stopping_) return;
  tcp_acceptor_->async_accept(strand_, [self = shared_from_this()](error_code ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted || self->stopping_) return;
    if (ec) {
      self->accept_failed(ec, false);
      return;
    }
    if (self->admit(s, ConnKind::tcp)) std::make_shared<TcpSession>(self, std::move(s))->run();
    self->accept_tcp();
  });
}

void Hub::accept_failed(const error_code& ec, bool http) {
  // Out of file descriptors and the like: say it once, retry a little later (no busy loop).
  if (g_log_once.first("accept:" + ec.message()))
    logger()->warn("gpustream serve: accept failed: {} (retrying)", ec.message());
  auto t = std::make_shared<asio::steady_timer>(strand_, std::chrono::milliseconds{100});
  t->async_wait([self = shared_from_this(), t, http](error_code) {
    if (http)
      self->accept_http();
    else
      self->accept_tcp();
  });
}

bool Hub::admit(tcp::socket& s, ConnKind kind) {
  counters_.connections_accepted.fetch_add(1, std::memory_order_relaxed);
  if (conns_.size() < options_.limits.max_connections) {
    error_code ec;
    s.set_option(tcp::no_delay(true), ec);
    if (const auto b = options_.limits.socket_send_buffer)
      s.set_option(asio::socket_base::send_buffer_size(*b), ec);
    return true;
  }
  counters_.connections_rejected.fetch_add(1, std::memory_order_relaxed);
  static const std::string kTcp = error_message(kErrLimit, "too many connections");
  static constexpr std::string_view kHttp =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n"
      "Connection: close\r\n\r\ntoo many connections\n";
  refuse(s, kind == ConnKind::tcp ? std::string_view(kTcp) : kHttp);
  return false;
}

void Hub::sweep() {
  if (stopping_) return;
  if (!sweep_timer_) sweep_timer_.emplace(strand_);
  sweep_timer_->expires_after(sweep_period(options_.limits));
  sweep_timer_->async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->stopping_) return;
    const auto now = StreamSession::Clock::now();
    std::vector<std::shared_ptr<StreamSession>> live;
    live.reserve(self->streams_.size());
    for (auto& [p, w] : self->streams_)
      if (auto s = w.lock()) live.push_back(std::move(s));
    for (auto& s : live) s->check_stalled(now);
    self->sweep();
  });
}

void Hub::add(Connection* c, std::weak_ptr<Connection> w, ConnKind kind) {
  conns_.emplace(c, std::move(w));
  counter_for(kind).fetch_add(1, std::memory_order_relaxed);
}

void Hub::remove(Connection* c, ConnKind kind) {
  if (conns_.erase(c) == 0) return;
  counter_for(kind).fetch_sub(1, std::memory_order_relaxed);
  check_stopped();
}

void Hub::add_stream(StreamSession* s, std::weak_ptr<StreamSession> w) {
  streams_.emplace(s, std::move(w));
}

void Hub::remove_stream(StreamSession* s) {
  if (broadcasting_)
    removed_while_broadcasting_.push_back(s);
  else
    streams_.erase(s);
}

std::atomic<std::uint64_t>& Hub::counter_for(ConnKind kind) noexcept {
  switch (kind) {
    case ConnKind::http:
      return counters_.http_open;
    case ConnKind::websocket:
      return counters_.websocket_open;
    case ConnKind::tcp:
      break;
  }
  return counters_.tcp_open;
}

void Hub::on_snapshot(const SnapshotPtr& s) {
  counters_.snapshots_received.fetch_add(1, std::memory_order_relaxed);
  auto cur = cursor_.load(std::memory_order_relaxed);
  if (s->sequence > cur) cursor_.store(s->sequence, std::memory_order_relaxed);
  if (stopping_) return;
  broadcasting_ = true;
  for (auto& [p, w] : streams_)
    if (auto session = w.lock()) session->on_live(s);
  broadcasting_ = false;
  for (auto* p : removed_while_broadcasting_) streams_.erase(p);
  removed_while_broadcasting_.clear();
}

void Hub::on_gap(const Gap& g) {
  if (stopping_) return;
  logger()->debug("gpustream serve: the server fell behind the channel: {} snapshots lost",
                  g.missed);
  broadcasting_ = true;
  for (auto& [p, w] : streams_)
    if (auto session = w.lock()) session->on_channel_gap(g);
  broadcasting_ = false;
  for (auto* p : removed_while_broadcasting_) streams_.erase(p);
  removed_while_broadcasting_.clear();
}

std::shared_ptr<const std::string> Hub::encoded(const SnapshotPtr& s, const Projection& p) {
  auto& entry = cache_[s->sequence];
  for (const auto& [key, msg] : entry.by_key)
    if (key == p.key) return msg;
  auto msg = std::make_shared<const std::string>(encode_snapshot_message(*s, p));
  counters_.serializations.fetch_add(1, std::memory_order_relaxed);
  entry.by_key.emplace_back(p.key, msg);
  while (cache_.size() > options_.encoded_cache) cache_.erase(cache_.begin());
  return msg;
}

std::vector<ProbeStats> Hub::probe_stats() const {
  if (!stats_) return {};
  try {
    return stats_();
  } catch (const std::exception& e) {
    if (g_log_once.first("stats"))
      logger()->warn("gpustream serve: stats source failed: {}", e.what());
    return {};
  }
}

std::string Hub::hello(std::uint64_t* last_sequence) {
  Hello h;
  h.instance = channel_.instance();
  h.last_sequence = cursor_.load(std::memory_order_relaxed);
  h.history_capacity = channel_.history_capacity();
  const auto latest = channel_.latest();
  if (stats_) {
    for (const auto& ps : probe_stats())
      h.probes.push_back({ps.probe, std::string(to_string(ps.state)), ps.reason});
  } else {
    for (const auto& s : latest) h.probes.push_back({s->probe, "unknown", ""});
  }
  h.devices = devices_of(latest);
  if (last_sequence) *last_sequence = h.last_sequence;
  return hello_message(h);
}

void Hub::stop(std::function<void()> on_stopped, bool force) {
  asio::post(strand_, [self = shared_from_this(), cb = std::move(on_stopped), force]() mutable {
    if (cb) self->on_stopped_.push_back(std::move(cb));
    if (!self->stopping_) {
      self->stopping_ = true;
      error_code ec;
      if (self->http_acceptor_) self->http_acceptor_->close(ec);
      if (self->tcp_acceptor_) self->tcp_acceptor_->close(ec);
      if (self->sweep_timer_) self->sweep_timer_->cancel();
      self->subscription_.reset();
      self->close_all(!force);
      self->stop_timer_.emplace(self->strand_);
      self->stop_timer_->expires_after(self->options_.limits.shutdown_timeout);
      self->stop_timer_->async_wait([weak = std::weak_ptr<Hub>(self)](error_code ec2) {
        auto h = weak.lock();
        if (ec2 || !h) return;
        if (!h->conns_.empty())
          logger()->debug("gpustream serve: {} connections did not close in time; aborting them",
                          h->conns_.size());
        h->close_all(false);
      });
    } else if (force) {
      self->close_all(false);
    }
    self->check_stopped();
  });
}

void Hub::close_all(bool graceful) {
  std::vector<std::shared_ptr<Connection>> all;
  all.reserve(conns_.size());
  for (auto& [p, w] : conns_)
    if (auto c = w.lock()) all.push_back(std::move(c));
  for (auto& c : all) c->shutdown(graceful);
}

void Hub::check_stopped() {
  if (!stopping_ || !conns_.empty()) return;
  if (stop_timer_) stop_timer_->cancel();
  auto callbacks = std::move(on_stopped_);
  on_stopped_.clear();
  for (auto& cb : callbacks) asio::post(strand_, std::move(cb));
}

std::optional<tcp::endpoint> Hub::http_endpoint() const {
  return bound_ ? http_bound_ : std::nullopt;
}
std::optional<tcp::endpoint> Hub::tcp_endpoint() const {
  return bound_ ? tcp_bound_ : std::nullopt;
}

ServerCounters Hub::counters() const {
  const auto& c = counters_;
  const auto r = [](const std::atomic<std::uint64_t>& a) {
    return a.load(std::memory_order_relaxed);
  };
  ServerCounters out;
  out.connections_accepted = r(c.connections_accepted);
  out.connections_rejected = r(c.connections_rejected);
  out.http_open = r(c.http_open);
  out.websocket_open = r(c.websocket_open);
  out.tcp_open = r(c.tcp_open);
  out.http_requests = r(c.http_requests);
  out.requests_forbidden = r(c.requests_forbidden);
  out.requests_unauthorized = r(c.requests_unauthorized);
  out.messages_rejected = r(c.messages_rejected);
  out.slow_clients_disconnected = r(c.slow_clients_disconnected);
  out.snapshots_received = r(c.snapshots_received);
  out.serializations = r(c.serializations);
  out.snapshots_sent = r(c.snapshots_sent);
  out.snapshots_dropped = r(c.snapshots_dropped);
  return out;
}

}  // namespace gpustream::transport
