// The server's shared state: the channel subscription, hello, start and stop.
#include "server/server_core.hpp"

#include <algorithm>
#include <iterator>

#include <boost/asio/post.hpp>

#include "gpustream/log.hpp"
#include "gpustream/transport/address.hpp"
#include "gpustream/transport/protocol_event.hpp"
#include "server/http_session.hpp"
#include "server/stream_session.hpp"
#include "server/tcp_session.hpp"
#include "wire/tls_context.hpp"

namespace gpustream::transport {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// One "logged once" record for the whole process: the core's warnings are about the process's
// situation (e.g. a listener), not about one core.
LogOnce g_core_log;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

std::chrono::milliseconds sweep_period(const ServerLimits& l) {
  const auto shortest = std::min({l.write_timeout, l.slow_client_timeout, l.tcp_idle_timeout});
  return std::clamp(shortest / 4, std::chrono::milliseconds{10}, std::chrono::milliseconds{1000});
}

ServerOptions sane(ServerOptions o) {
  auto& l = o.limits;
  l.max_connections = std::max<std::size_t>(l.max_connections, 1);
  l.max_http_connections = std::max<std::size_t>(l.max_http_connections, 1);
  l.max_connections_per_address = std::max<std::size_t>(l.max_connections_per_address, 1);
  l.send_queue_messages = std::max<std::size_t>(l.send_queue_messages, 1);
  l.send_queue_bytes = std::max<std::size_t>(l.send_queue_bytes, 4096);
  l.retained_bytes = std::max<std::size_t>(l.retained_bytes, 4096);
  l.max_message_bytes = std::max<std::size_t>(l.max_message_bytes, 256);
  l.max_client_messages = std::max<std::size_t>(l.max_client_messages, 1);
  o.encoded_cache = std::max<std::size_t>(o.encoded_cache, 1);
  return o;
}

}  // namespace

ServerCore::ServerCore(const asio::any_io_executor& ex, SnapshotChannel& channel,
                       ServerOptions options, Server::StatsSource stats)
    : strand_(asio::make_strand(ex)),
      channel_(channel),
      options_(sane(std::move(options))),
      stats_(std::move(stats)),
      registry_(options_.limits, metrics_),
      cache_(options_.encoded_cache, options_.encoded_cache_bytes, options_.limits.send_queue_bytes,
             metrics_) {}

ServerCore::~ServerCore() = default;

void ServerCore::start() {
  if (started_.exchange(true))
    throw std::logic_error("gpustream::transport::Server::start called twice");
  if (options_.tls) {
    // Refused at start, before binding: an unreadable or mismatched certificate or key.
    auto made = make_server_tls_context(*options_.tls);
    for (const auto& w : made.warnings) logger()->warn("gpustream serve: TLS: {}", w);
    metrics_.tls_certificate_not_after.store(made.not_after, std::memory_order_relaxed);
    std::lock_guard lock(tls_mu_);
    tls_ = std::move(made.context);
    tls_files_ = *options_.tls;
  }
  std::weak_ptr<ServerCore> weak = weak_from_this();
  listener_ = std::make_shared<Listener>(strand_, options_.limits, registry_, metrics_,
                                         [weak](tcp::socket s, ConnKind kind) {
                                           if (auto h = weak.lock())
                                             h->on_accept(std::move(s), kind);
                                         });
  listener_->bind(options_.http, options_.tcp);
  http_bound_ = listener_->http_bound();
  tcp_bound_ = listener_->tcp_bound();
  access_ = AccessPolicy(http_bound_.value_or(tcp::endpoint{}), options_.token,
                         options_.allowed_origins, options_.allowed_hosts);
  bound_ = true;
  for (const auto* ep : {&http_bound_, &tcp_bound_})
    if (*ep && !is_loopback(ep->value().address()))
      logger()->warn("gpustream serve: listening on {} — reachable from other machines{}",
                     to_string(ep->value()), options_.token.empty() ? ", without a token" : "");

  SubscribeOptions so;
  so.policy = Backpressure::drop_oldest;
  so.capacity = 4096;
  so.executor = asio::any_io_executor(strand_);
  subscription_ = channel_.subscribe(
      std::move(so),
      [weak](const SnapshotPtr& s) {
        if (auto h = weak.lock()) h->on_snapshot(s);
      },
      [weak](const Gap& g) {
        if (auto h = weak.lock()) h->on_gap(g);
      });
  // GPU events: each one encoded once here, then queued to every streaming client.
  EventSubscribeOptions eo;
  eo.executor = asio::any_io_executor(strand_);
  event_subscription_ = channel_.events().subscribe(
      [weak](const EventPtr& e) {
        if (auto h = weak.lock()) h->on_event(e);
      },
      std::move(eo));
  // Snapshots published before the subscription are in the history, not in the fan-out: new
  // clients start after them (resume with `since` to get them).
  const auto last = channel_.last_sequence();
  auto cur = cursor_.load();
  while (cur < last && !cursor_.compare_exchange_weak(cur, last)) {}

  asio::post(strand_, [self = shared_from_this()] {
    if (self->stopping_) return;
    self->listener_->start();
    self->sweep();
  });
}

std::string ServerCore::reload_tls(const std::optional<TlsFiles>& files) {
  if (!options_.tls) return "the server was started without TLS (adding it needs a restart)";
  TlsFiles next;
  {
    std::lock_guard lock(tls_mu_);
    next = files.value_or(tls_files_);
  }
  try {
    auto made = make_server_tls_context(next);
    for (const auto& w : made.warnings) logger()->warn("gpustream serve: TLS: {}", w);
    metrics_.tls_certificate_not_after.store(made.not_after, std::memory_order_relaxed);
    std::lock_guard lock(tls_mu_);
    tls_ = std::move(made.context);  // open connections keep the old one
    tls_files_ = std::move(next);
  } catch (const std::exception& e) {
    ServerMetrics::bump(metrics_.tls_reload_failures);
    return e.what();
  }
  ServerMetrics::bump(metrics_.tls_reloads);
  return {};
}

void ServerCore::on_accept(tcp::socket s, ConnKind kind) {
  if (kind == ConnKind::tcp)
    std::make_shared<TcpSession>(shared_from_this(), std::move(s))->run();
  else
    std::make_shared<HttpSession>(shared_from_this(), std::move(s), kind)->run();
}

void ServerCore::sweep() {
  if (stopping_) return;
  if (!sweep_timer_) sweep_timer_.emplace(strand_);
  sweep_timer_->expires_after(sweep_period(options_.limits));
  sweep_timer_->async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->stopping_) return;
    self->registry_.sweep(StreamSession::Clock::now());
    self->sweep();
  });
}

void ServerCore::remove(Connection* c) {
  registry_.remove(c);
  check_stopped();
}

void ServerCore::on_snapshot(const SnapshotPtr& s) {
  ServerMetrics::bump(metrics_.snapshots_received);
  auto cur = cursor_.load(std::memory_order_relaxed);
  if (s->sequence > cur) cursor_.store(s->sequence, std::memory_order_relaxed);
  if (stopping_) return;
  registry_.fan_out(s);
}

void ServerCore::on_event(const EventPtr& e) {
  ServerMetrics::bump(metrics_.events_received);
  if (stopping_) return;
  registry_.fan_out_event(e, std::make_shared<const std::string>(event_message(*e)));
}

void ServerCore::on_gap(const Gap& g) {
  if (stopping_) return;
  logger()->debug("gpustream serve: the server fell behind the channel: {} snapshots lost",
                  g.missed);
  registry_.fan_out_gap(g);
}

std::vector<ProbeStats> ServerCore::probe_stats() const {
  if (!stats_) return {};
  try {
    return stats_();
  } catch (const std::exception& e) {
    if (g_core_log.first("stats"))
      logger()->warn("gpustream serve: stats source failed: {}", e.what());
    return {};
  }
}

std::vector<std::string> ServerCore::known_probes() const {
  std::vector<std::string> out;
  for (const auto& s : channel_.latest()) out.push_back(s->probe);
  for (const auto& ps : probe_stats()) out.push_back(ps.probe);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> ServerCore::known_devices() const {
  std::vector<std::string> out;
  for (const auto& s : channel_.latest())
    for (const auto& d : s->devices) out.push_back(d.id);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

FitAnswer ServerCore::fits(const FitRequest& r) {
  if (!options_.fit_source) {
    FitRequest with_window = r;
    if (!with_window.fatal_event_window_s)
      with_window.fatal_event_window_s = static_cast<std::uint64_t>(
          std::max<std::int64_t>(0, options_.fit_fatal_event_window.count()));
    return local_fits(channel_.latest(), channel_.events().fatal(), with_window, wall_now_ns());
  }
  FitAnswer a{options_.fit_source(r.bytes), {}};
  exclude_requested(a, r);
  return a;
}

std::string ServerCore::fit(const FitRequest& r) {
  return fit_result_message(r.id, r.bytes, fits(r), r.limit);
}

std::shared_ptr<const std::string> ServerCore::shared_body(
    std::string_view key, const std::function<std::string()>& build) {
  const auto generation = cursor();
  if (generation != shared_generation_ || shared_bodies_.size() >= kSharedBodies) {
    shared_bodies_.clear();  // the responses being written keep theirs
    shared_generation_ = generation;
  }
  for (const auto& b : shared_bodies_)
    if (b.key == key) return b.body;
  auto body = metrics_.share(build());
  shared_bodies_.push_back({std::string(key), body});
  return body;
}

bool ServerCore::begin_response(const void* id, std::size_t bytes, bool exempt) {
  if (auto it = responses_.find(id); it != responses_.end()) {
    ++it->second.writers;
    return true;
  }
  if (!exempt && response_bytes_ + bytes > options_.limits.http_response_bytes) {
    ServerMetrics::bump(metrics_.http_busy);
    return false;
  }
  responses_.emplace(id, InFlight{bytes, 1});
  response_bytes_ += bytes;
  ServerMetrics::set(metrics_.http_response_bytes, response_bytes_);
  return true;
}

void ServerCore::end_response(const void* id) {
  const auto it = responses_.find(id);
  if (it == responses_.end() || --it->second.writers > 0) return;
  response_bytes_ -= it->second.bytes;
  responses_.erase(it);
  ServerMetrics::set(metrics_.http_response_bytes, response_bytes_);
}

std::shared_ptr<const std::string> ServerCore::hello(std::uint64_t* last_sequence) {
  Hello h;
  h.last_sequence = cursor_.load(std::memory_order_relaxed);
  if (last_sequence) *last_sequence = h.last_sequence;
  const auto latest = channel_.latest();
  if (stats_) {
    for (const auto& ps : probe_stats())
      h.probes.push_back({ps.probe, std::string(to_string(ps.state)), ps.reason});
  } else {
    for (const auto& s : latest) h.probes.push_back({s->probe, "unknown", ""});
  }
  const auto same = [](const std::vector<ProbeInfo>& a, const std::vector<ProbeInfo>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const ProbeInfo& x, const ProbeInfo& y) {
                        return x.name == y.name && x.state == y.state && x.reason == y.reason;
                      });
  };
  // The devices change only with a new snapshot (a new last_sequence): a hello that lists a
  // fleet's every device is serialized once, not once per client.
  if (hello_.message && hello_.last_sequence == h.last_sequence && same(hello_.probes, h.probes))
    return hello_.message;
  h.instance = channel_.instance();
  h.history_capacity = channel_.history_capacity();
  h.devices = devices_of(latest);
  if (stats_) {
    // A freshly started server: the probes still detecting, or available with no snapshot yet,
    // have devices hello cannot list. Said, so that a client does not take 0 devices for none.
    std::vector<std::string> pending;
    for (const auto& p : h.probes) {
      const bool has_snapshot =
          std::any_of(latest.begin(), latest.end(),
                      [&](const SnapshotPtr& s) { return s && s->probe == p.name; });
      if (p.state == to_string(ProbeState::detecting) ||
          (p.state == to_string(ProbeState::available) && !has_snapshot))
        pending.push_back(p.name);
    }
    h.devices_pending = std::move(pending);
  }
  h.requests.emplace(std::begin(kClientRequests), std::end(kClientRequests));
  hello_.last_sequence = h.last_sequence;
  hello_.probes = h.probes;
  hello_.message = metrics_.share(hello_message(h));
  return hello_.message;
}

void ServerCore::stop(std::function<void()> on_stopped, bool force) {
  asio::post(strand_, [self = shared_from_this(), cb = std::move(on_stopped), force]() mutable {
    if (cb) self->on_stopped_.push_back(std::move(cb));
    if (!self->stopping_) {
      self->stopping_ = true;
      if (self->listener_) self->listener_->close();
      if (self->sweep_timer_) self->sweep_timer_->cancel();
      self->subscription_.reset();
      self->event_subscription_.reset();
      self->registry_.close_all(!force);
      self->stop_timer_.emplace(self->strand_);
      self->stop_timer_->expires_after(self->options_.limits.shutdown_timeout);
      self->stop_timer_->async_wait([weak = std::weak_ptr<ServerCore>(self)](error_code ec2) {
        auto h = weak.lock();
        if (ec2 || !h) return;
        if (h->registry_.size() > 0)
          logger()->debug("gpustream serve: {} connections did not close in time; aborting them",
                          h->registry_.size());
        h->registry_.close_all(false);
      });
    } else if (force) {
      self->registry_.close_all(false);
    }
    self->check_stopped();
  });
}

void ServerCore::check_stopped() {
  if (!stopping_ || registry_.size() > 0) return;
  if (stop_timer_) stop_timer_->cancel();
  auto callbacks = std::move(on_stopped_);
  on_stopped_.clear();
  for (auto& cb : callbacks) asio::post(strand_, std::move(cb));
}

std::optional<tcp::endpoint> ServerCore::http_endpoint() const {
  return bound_ ? http_bound_ : std::nullopt;
}
std::optional<tcp::endpoint> ServerCore::tcp_endpoint() const {
  return bound_ ? tcp_bound_ : std::nullopt;
}

}  // namespace gpustream::transport
