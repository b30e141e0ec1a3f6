// FleetView's NATS side: the connection (its socket read and written by the view's worker:
// libnats's external event loop, fleet/nats_event_loop.hpp), the subscription (synchronous: the
// worker takes each message from it and hands it to deliver()) and the key-value bucket, read in
// the background through the same per-publisher path as the bus (fleet_view_impl.hpp).
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

void FleetView::Impl::take_bus_message(natsMsg* m) {
  const auto size = static_cast<std::size_t>(natsMsg_GetDataLength(m));
  deliver(std::string_view(natsMsg_GetData(m), size), natsMsg_GetSubject(m), republished_by(m));
  // Destroyed in batches: natsMsg_Destroy hands each message to libnats's garbage collector
  // thread and wakes it when it is idle. A batch wakes it once when it runs on another core; on
  // a busy core it preempts each destroy at once and sleeps again before the next, so there it
  // is still about a wake-up a message (benchmarks.md, "The view's threads (session 16)").
  bus_spent.push_back(m);
  bus_spent_bytes += size;
  if (bus_spent.size() >= kBusSpentMax || bus_spent_bytes >= kBusSpentMaxBytes)
    release_bus_messages();
}

/// The messages delivered since the last call, to libnats's garbage collector at once.
void FleetView::Impl::release_bus_messages() {
  for (natsMsg* m : bus_spent) natsMsg_Destroy(m);
  bus_spent.clear();
  bus_spent_bytes = 0;
}

/// The messages libnats holds for the subscription, at most `at_most`, each to deliver(); never
/// waits. Returns how many were taken.
std::size_t FleetView::Impl::pull_bus(std::size_t at_most) {
  std::size_t taken = 0;
  while (taken < at_most) {
    natsMsg* m = nullptr;
    {
      std::lock_guard lock(bus_mu);
      int msgs = 0;
      int msg_bytes = 0;
      // Asked first: NextMsg records an error text (formatted) each time it finds nothing.
      if (!sub || natsSubscription_GetPending(sub, &msgs, &msg_bytes) != NATS_OK || msgs <= 0 ||
          natsSubscription_NextMsg(&m, sub, 0) != NATS_OK)
        break;
    }
    take_bus_message(m);
    ++taken;
  }
  return taken;
}

/// Nothing queued and nothing came lately: waits for a socket to be readable (at most
/// kBusIdleWait: the intake is looked at again after it, for the bucket's entries) and reads it
/// (libnats parses what came into the subscription's queue, for pull_bus()). True when it read.
bool FleetView::Impl::wait_for_bus() {
  if (stopping) return false;
  const bool read = bus_loop.poll(kBusIdleWait, true) > 0;
  last_read = std::chrono::steady_clock::now();
  return read;
}

/// Decoding a backlog: the sockets read (and written) when kBusGather has passed since the last
/// read, without waiting, so that what arrives meanwhile is not left in the kernel for longer
/// than a pause would leave it.
void FleetView::Impl::read_bus_if_due() {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_read < kBusGather) return;
  bus_loop.poll(std::chrono::milliseconds(0), true);
  last_read = now;
}

/// Messages came lately: leaves the sockets unread for kBusGather (or until stopping; writes
/// libnats asks for meanwhile are made), then reads what gathered: a steady flow of messages
/// costs the worker a wake-up and a read per batch, not per message.
void FleetView::Impl::gather_bus() {
  const auto until = std::chrono::steady_clock::now() + kBusGather;
  for (auto now = std::chrono::steady_clock::now(); now < until && !stopping;
       now = std::chrono::steady_clock::now())
    bus_loop.poll(std::chrono::ceil<std::chrono::milliseconds>(until - now), false);
  if (!stopping) bus_loop.poll(std::chrono::milliseconds(0), true);
  last_read = std::chrono::steady_clock::now();
}

/// NATS lost: said once per outage (however many reconnection attempts fail), counted.
void FleetView::Impl::on_disconnected(natsConnection* c, void* closure) {
  auto* self = static_cast<Impl*>(closure);
  if (c != self->nc.load()) return;  // one being replaced, or not yet current
  self->is_connected = false;
  if (self->stopping || self->in_outage.exchange(true)) return;
  self->lost_at_ns = steady_ns();
  const auto n = ++self->outages;
  logger()->warn(
      "fleet: lost NATS at {}: {}; reconnecting every {} ms, nodes are kept (outage {}, "
      "gpustream_fleet_nats_outages_total; said once per outage)",
      redact_url_credentials(self->options.url), last_error(c),
      self->options.reconnect_wait.count(), n);
}

/// NATS back: said once, and the bucket seen to again on kv_thread (not on libnats's thread).
void FleetView::Impl::on_reconnected(natsConnection* c, void* closure) {
  auto* self = static_cast<Impl*>(closure);
  if (c != self->nc.load() || self->stopping) return;
  self->is_connected = true;
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

void FleetView::Impl::on_closed(natsConnection* c, void* closure) {
  auto* self = static_cast<Impl*>(closure);
  if (c == self->nc.load()) {
    self->is_connected = false;
    if (!self->stopping)
      logger()->error("fleet: the connection to NATS at {} is closed for good: {}",
                      redact_url_credentials(self->options.url), last_error(c));
  }
  std::lock_guard lock(self->closed_mu);
  self->closed_conns.push_back(c);
  self->closed_cv.notify_all();
}

/// libnats's asynchronous errors (a permission refused, a slow consumer): each kind said once.
void FleetView::Impl::on_error(natsConnection* c, natsSubscription*, natsStatus err,
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
                                           : last_error(c));
}

bool FleetView::Impl::connected() const { return is_connected; }

/// A connection with identity `a` (its inbox prefix filled), the view's callbacks on it.
natsStatus FleetView::Impl::connect(const NatsAuth& a, natsConnection** out, std::string& error) {
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
  // Its socket read and written by the worker: no reader thread (fleet/nats_event_loop.hpp).
  if (s == NATS_OK) s = bus_loop.use_for(opts);
  // Slow consumer protection: messages waiting for this view, bounded in count and bytes.
  if (s == NATS_OK) s = natsOptions_SetMaxPendingMsgs(opts, 65536);
  if (s == NATS_OK && apply_nats_auth(opts, a, error) != NATS_OK) {
    natsOptions_Destroy(opts);
    error = "cannot use " + redact_url_credentials(options.url) + ": " + error;
    return NATS_INVALID_ARG;
  }
  *out = nullptr;
  if (s == NATS_OK) s = natsConnection_Connect(out, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    if (*out) natsConnection_Destroy(*out);
    *out = nullptr;
    error = "cannot connect to " + redact_url_credentials(options.url) + ": " + nats_error(s);
  }
  return s;
}

/// The bus on `c`, synchronous (the worker reads the socket and takes its messages: pull_bus()),
/// bounded in messages and bytes waiting.
natsStatus FleetView::Impl::subscribe(natsConnection* c, natsSubscription** out) {
  const std::string subject = options.subject_prefix + ".>";
  natsStatus s = natsConnection_SubscribeSync(out, c, subject.c_str());
  if (s == NATS_OK)
    s = natsSubscription_SetPendingLimits(
        *out, 65536,
        static_cast<int>(std::min<std::size_t>(options.limits.max_message_bytes * 64, 1 << 30)));
  return s;
}

/// Closes `c` and destroys it once libnats has run its last callback for it (bounded wait).
void FleetView::Impl::close_and_destroy(natsConnection* c) {
  if (!c) return;
  natsConnection_Close(c);  // a request in flight on it fails now
  {
    std::unique_lock lock(closed_mu);
    closed_cv.wait_for(lock, std::chrono::seconds(2), [&] {
      return std::find(closed_conns.begin(), closed_conns.end(), c) != closed_conns.end();
    });
    std::erase(closed_conns, c);
  }
  natsConnection_Destroy(c);
}

/// A new identity (set_auth()), on kv_thread: a connection with it first; the current one is
/// replaced only once the new one is up and subscribed, else kept (said why, counted).
void FleetView::Impl::change_identity(const NatsAuth& a) {
  natsConnection* fresh = nullptr;
  std::string error;
  if (connect(a, &fresh, error) != NATS_OK) {
    ++auth_reload_failures;
    if (!stopping)
      logger()->warn(
          "fleet: the new NATS credentials were not taken: {}; the current connection goes on",
          error);
    return;
  }
  natsSubscription* old_sub = nullptr;
  natsConnection* old = nullptr;
  {
    std::lock_guard lock(conn_mu);
    if (stopping) {
      close_and_destroy(fresh);
      return;
    }
    // The bus moves to the new connection: the old subscription drained first (a message
    // published meanwhile may be missed, never taken twice). The worker reads both connections
    // and takes what the old one holds meanwhile (bus_mu is not held here while it drains).
    natsSubscription* current = nullptr;
    {
      std::lock_guard bus_lock(bus_mu);
      current = sub;
    }
    if (current && natsSubscription_Drain(current) == NATS_OK)
      natsSubscription_WaitForDrainCompletion(current, 2000);
    {
      std::lock_guard bus_lock(bus_mu);  // the worker is between two of its calls
      old_sub = std::exchange(sub, nullptr);
    }
    natsSubscription* fresh_sub = nullptr;
    const natsStatus s = subscribe(fresh, &fresh_sub);
    if (s != NATS_OK) {
      if (fresh_sub) natsSubscription_Destroy(fresh_sub);
      natsSubscription* again = nullptr;
      if (subscribe(nc, &again) == NATS_OK) {  // back on the current connection
        std::lock_guard bus_lock(bus_mu);
        sub = again;
      }
      ++auth_reload_failures;
      logger()->warn(
          "fleet: the new NATS credentials were not taken: cannot subscribe to {}.>: {}; the "
          "current connection goes on",
          options.subject_prefix, nats_error(s));
      old = fresh;  // closed below
    } else {
      {
        std::lock_guard bus_lock(bus_mu);
        sub = fresh_sub;
      }
      old = nc.exchange(fresh);
      is_connected = natsConnection_Status(fresh) == NATS_CONN_STATUS_CONNECTED;
      ++auth_reloads;
      {
        std::lock_guard kv_lock(kv_mu);
        auth = a;
      }
      if (in_outage.exchange(false)) ++reconnects;
      logger()->warn(
          "fleet: connected to NATS at {} with the new credentials; the previous connection is "
          "closed",
          redact_url_credentials(options.url));
    }
  }
  if (old_sub) natsSubscription_Destroy(old_sub);
  close_and_destroy(old);
}

void FleetView::Impl::start() {
  started = std::chrono::steady_clock::now();
  auth = options.auth;
  if (auth.inbox_prefix.empty()) auth.inbox_prefix = kFleetInboxPrefix;
  natsConnection* c = nullptr;
  std::string error;
  if (connect(auth, &c, error) != NATS_OK) throw std::runtime_error(error);
  nc = c;
  is_connected = true;
  // Subscribe first, then read the bucket: a message in between is not lost (the decoder
  // ignores what is older than it has).
  natsSubscription* s_bus = nullptr;
  const natsStatus s = subscribe(c, &s_bus);
  if (s != NATS_OK) {
    if (s_bus) natsSubscription_Destroy(s_bus);
    throw std::runtime_error("cannot subscribe to " + options.subject_prefix +
                             ".>: " + nats_error(s));
  }
  {
    std::lock_guard lock(bus_mu);
    sub = s_bus;
  }
  worker = std::thread([this] { run_worker(); });
  asio::post(strand, [self = shared_from_this()] { self->arm(); });
  // In the background: the server listens at once, nodes appear as they are decoded. The same
  // thread sees to the bucket again after each reconnect, and takes a new identity.
  kv_thread = std::thread([this] { run_bucket(); });
}

void FleetView::Impl::stop() {
  stopping = true;
  intake.close();  // the worker stops decoding after its message; the bucket's read stops waiting
  bus_loop.wake();
  {
    std::lock_guard lock(kv_mu);
    if (watcher) kvWatcher_Stop(watcher);
    kv_cv.notify_all();
  }
  asio::post(strand, [self = shared_from_this()] {
    self->stopped = true;
    self->timer.cancel();
  });
  natsConnection* c = nullptr;
  {
    std::lock_guard lock(conn_mu);
    c = nc;
    // A request of the bucket's read in flight fails now (the worker reads the socket until
    // this, for its reply); the subscription is destroyed once the worker has ended, below;
    // libnats runs its callbacks (lost, closed) on its own thread after Close returns: none may
    // run once this view is gone. Close detaches the socket from the worker's loop once the
    // worker is out of its read.
    if (c) natsConnection_Close(c);
  }
  if (c) {
    std::unique_lock lock(closed_mu);
    closed_cv.wait_for(lock, std::chrono::seconds(2), [&] {
      return std::find(closed_conns.begin(), closed_conns.end(), c) != closed_conns.end();
    });
  }
  if (kv_thread.joinable()) kv_thread.join();  // a new identity's connection made and closed
  loop_done = true;
  bus_loop.wake();
  if (worker.joinable()) worker.join();
  natsSubscription* s = nullptr;
  {
    std::lock_guard lock(bus_mu);
    s = std::exchange(sub, nullptr);
  }
  if (s) natsSubscription_Destroy(s);
  if (c) {
    natsConnection_Destroy(c);
    nc = nullptr;
  }
}

}  // namespace gpustream::transport
