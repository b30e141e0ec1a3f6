// FleetView's NATS side: the connection, the subscription (libnats's delivery thread hands each
// message to deliver()) and the key-value bucket, read in the background through the same
// per-publisher path as the bus (fleet_view_impl.hpp).
#include <algorithm>
#include <stdexcept>

#include <boost/asio/post.hpp>

#include "fleet/fleet_view_impl.hpp"
#include "fleet/nats_auth_apply.hpp"
#include "gpustream/transport/address.hpp"

namespace gpustream::transport {
namespace asio = boost::asio;

namespace {

std::string nats_error(natsStatus s) { return nats_status_text(s); }

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The stream that republished `m` (JetStream's republish headers), or empty: its own message.
std::string_view republished_by(natsMsg* m) {
  const char* v = nullptr;
  if (natsMsgHeader_Get(m, "Nats-Stream", &v) == NATS_OK && v) return *v ? v : "?";
  for (const char* h : {"Nats-Subject", "Nats-Sequence", "Nats-Last-Sequence"})
    if (natsMsgHeader_Get(m, h, &v) == NATS_OK) return "?";
  return {};
}

/// libnats's words for why the connection `nc` last failed.
std::string last_error(natsConnection* nc) {
  const char* text = nullptr;
  const natsStatus s = natsConnection_GetLastError(nc, &text);
  std::string out = natsStatus_GetText(s);
  if (text && *text && out != text) out += std::string(": ") + text;
  if (s == NATS_OK && (!text || !*text)) out = "the server closed the connection";
  return out;
}

}  // namespace

void FleetView::Impl::on_msg(natsConnection*, natsSubscription*, natsMsg* m, void* closure) {
  auto* self = static_cast<Impl*>(closure);
  const std::string_view data(natsMsg_GetData(m),
                              static_cast<std::size_t>(natsMsg_GetDataLength(m)));
  self->deliver(data, natsMsg_GetSubject(m), republished_by(m));
  natsMsg_Destroy(m);
}

/// NATS lost: said once per outage (however many reconnection attempts fail), counted.
void FleetView::Impl::on_disconnected(natsConnection* nc, void* closure) {
  auto* self = static_cast<Impl*>(closure);
  if (self->stopping || self->in_outage.exchange(true)) return;
  self->lost_at_ns = steady_ns();
  const auto n = ++self->outages;
  logger()->warn(
      "fleet: lost NATS at {}: {}; reconnecting every {} ms, nodes are kept (outage {}, "
      "gpustream_fleet_nats_outages_total; said once per outage)",
      redact_url_credentials(self->options.url), last_error(nc),
      self->options.reconnect_wait.count(), n);
}

/// NATS back: said once, and the bucket seen to again on kv_thread (not on libnats's thread).
void FleetView::Impl::on_reconnected(natsConnection*, void* closure) {
  auto* self = static_cast<Impl*>(closure);
  if (self->stopping) return;
  ++self->reconnects;
  if (self->in_outage.exchange(false)) {
    const double took = static_cast<double>(steady_ns() - self->lost_at_ns) / 1e9;
    logger()->warn("fleet: NATS is back at {} after {:.1f} s (outage {}){}",
                   redact_url_credentials(self->options.url), took, self->outages.load(),
                   self->options.kv_bucket.empty() ? std::string()
                                                   : "; seeing to the key-value bucket '" +
                                                         self->options.kv_bucket + "' again");
  }
  std::lock_guard lock(self->kv_mu);
  self->kv_again = true;
  self->kv_cv.notify_all();
}

void FleetView::Impl::on_closed(natsConnection* nc, void* closure) {
  auto* self = static_cast<Impl*>(closure);
  if (!self->stopping)
    logger()->error("fleet: the connection to NATS at {} is closed for good: {}",
                    redact_url_credentials(self->options.url), last_error(nc));
  std::lock_guard lock(self->closed_mu);
  self->closed = true;
  self->closed_cv.notify_all();
}

/// libnats's asynchronous errors (a permission refused, a slow consumer): each kind said once.
void FleetView::Impl::on_error(natsConnection* nc, natsSubscription*, natsStatus err,
                               void* closure) {
  auto* self = static_cast<Impl*>(closure);
  {
    std::lock_guard lock(self->errors_mu);
    if (std::find(self->errors_logged.begin(), self->errors_logged.end(), static_cast<int>(err)) !=
        self->errors_logged.end())
      return;
    self->errors_logged.push_back(static_cast<int>(err));
  }
  logger()->warn("fleet: NATS at {} reports: {} (said once per kind)",
                 redact_url_credentials(self->options.url),
                 err == NATS_SLOW_CONSUMER ? std::string("slow consumer: messages were dropped")
                                           : last_error(nc));
}

bool FleetView::Impl::connected() const {
  return nc && natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED;
}

void FleetView::Impl::start() {
  started = std::chrono::steady_clock::now();
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) s = natsOptions_SetURL(opts, options.url.c_str());
  if (s == NATS_OK) s = natsOptions_SetName(opts, "gpustream-fleet");
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, options.connect_timeout.count());
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, options.reconnect_wait.count());
  if (s == NATS_OK) s = natsOptions_SetDisconnectedCB(opts, &Impl::on_disconnected, this);
  if (s == NATS_OK) s = natsOptions_SetReconnectedCB(opts, &Impl::on_reconnected, this);
  if (s == NATS_OK) s = natsOptions_SetClosedCB(opts, &Impl::on_closed, this);
  if (s == NATS_OK) s = natsOptions_SetErrorHandler(opts, &Impl::on_error, this);
  // Slow consumer protection: messages waiting for this view, bounded in count and bytes.
  if (s == NATS_OK) s = natsOptions_SetMaxPendingMsgs(opts, 65536);
  std::string auth_error;
  NatsAuth auth = options.auth;
  if (auth.inbox_prefix.empty()) auth.inbox_prefix = kFleetInboxPrefix;
  if (s == NATS_OK && apply_nats_auth(opts, auth, auth_error) != NATS_OK) {
    natsOptions_Destroy(opts);
    throw std::runtime_error("cannot use " + redact_url_credentials(options.url) + ": " +
                             auth_error);
  }
  if (s == NATS_OK) s = natsConnection_Connect(&nc, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    if (nc) natsConnection_Destroy(nc);
    nc = nullptr;
    throw std::runtime_error("cannot connect to " + redact_url_credentials(options.url) + ": " +
                             nats_error(s));
  }
  worker = std::thread([this] { run_worker(); });
  // Subscribe first, then read the bucket: a message in between is not lost (the decoder
  // ignores what is older than it has).
  const std::string subject = options.subject_prefix + ".>";
  s = natsConnection_Subscribe(&sub, nc, subject.c_str(), &Impl::on_msg, this);
  if (s == NATS_OK)
    s = natsSubscription_SetPendingLimits(
        sub, 65536,
        static_cast<int>(std::min<std::size_t>(options.limits.max_message_bytes * 64, 1 << 30)));
  if (s != NATS_OK)
    throw std::runtime_error("cannot subscribe to " + subject + ": " + nats_error(s));
  asio::post(strand, [self = shared_from_this()] { self->arm(); });
  if (options.kv_bucket.empty()) {
    finish_kv();
    return;
  }
  // In the background: the server listens at once, nodes appear as they are decoded.
  kv_thread = std::thread([this] { run_bucket(); });
}

void FleetView::Impl::stop() {
  stopping = true;
  intake.close();  // the worker ends after its message; the bucket's read stops waiting
  {
    std::lock_guard lock(kv_mu);
    if (watcher) kvWatcher_Stop(watcher);
    kv_cv.notify_all();
  }
  asio::post(strand, [self = shared_from_this()] {
    self->stopped = true;
    self->timer.cancel();
  });
  if (sub) {
    // Drained: no callback runs once this returns (bounded wait).
    if (natsSubscription_Drain(sub) == NATS_OK) natsSubscription_WaitForDrainCompletion(sub, 2000);
    natsSubscription_Destroy(sub);
    sub = nullptr;
  }
  if (nc) {
    natsConnection_Close(nc);  // a request of the bucket's read in flight fails now
    // libnats runs its callbacks (lost, closed) on its own thread, after Close returns: none
    // may run once this view is gone (bounded wait).
    std::unique_lock lock(closed_mu);
    closed_cv.wait_for(lock, std::chrono::seconds(2), [this] { return closed; });
  }
  if (kv_thread.joinable()) kv_thread.join();
  if (worker.joinable()) worker.join();
  if (nc) {
    natsConnection_Destroy(nc);
    nc = nullptr;
  }
}

}  // namespace gpustream::transport
