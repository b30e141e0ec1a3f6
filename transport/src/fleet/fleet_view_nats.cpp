// FleetView's NATS side: the connection, the subscription (libnats's delivery thread hands each
// message to deliver()) and the key-value bucket, read in the background through the same
// per-publisher path as the bus (fleet_view_impl.hpp).
#include <stdexcept>

#include <boost/asio/post.hpp>

#include "fleet/fleet_view_impl.hpp"
#include "fleet/nats_auth_apply.hpp"
#include "gpustream/transport/address.hpp"

namespace gpustream::transport {
namespace asio = boost::asio;

namespace {

std::string nats_error(natsStatus s) { return nats_status_text(s); }

/// Messages in one node state at most (decode_node_state's own bound).
constexpr std::size_t kMaxNodeStateMessages = 64;

}  // namespace

void FleetView::Impl::on_msg(natsConnection*, natsSubscription*, natsMsg* m, void* closure) {
  auto* self = static_cast<Impl*>(closure);
  const std::string_view data(natsMsg_GetData(m),
                              static_cast<std::size_t>(natsMsg_GetDataLength(m)));
  self->deliver(data, natsMsg_GetSubject(m));
  natsMsg_Destroy(m);
}

/// One node's state from the bucket: its messages go through the same per-publisher path as
/// the bus's (admission, budget, queue), heard when it was written (libnats gives nanoseconds
/// since the epoch; a coarser unit is scaled, and an unknown time counts as now). False when
/// it is unreadable (counted, logged once).
bool FleetView::Impl::load_node_state(std::string_view key, std::string_view value,
                                      std::int64_t written_ns, Clock::time_point now,
                                      std::int64_t now_ns) {
  while (written_ns > 0 && written_ns < 100'000'000'000'000'000) written_ns *= 1000;
  if (written_ns <= 0 || written_ns > now_ns) written_ns = now_ns;
  const auto age = std::chrono::nanoseconds(std::max<std::int64_t>(0, now_ns - written_ns));
  if (node_name_error(key)) {
    refuse(FleetRefusal::bad_subject, "?", "a bucket key that is not a node name");
    return false;
  }
  try {
    // A node state is at most 64 messages of at most limits.max_message_bytes each.
    if (value.size() > kMaxNodeStateMessages * (options.limits.max_message_bytes + 32))
      throw BusError("a node state over the size limit");
    auto mark = std::make_shared<bool>(false);
    for (const auto msg : decode_node_state(value, options.limits)) {
      if (!intake.wait_for_room()) return false;  // stopped
      IntakeItem item;
      item.node = std::string(key);
      item.heard = now - std::chrono::duration_cast<Clock::duration>(age);
      item.heard_unix_ns = written_ns;
      item.kv_key = mark;
      ++messages;
      bytes += msg.size();
      admit(msg, std::move(item));
    }
    return true;
  } catch (const std::exception& ex) {
    refuse(FleetRefusal::malformed, key,
           [&] { return fmt::format("its state in the bucket is unreadable: {}", ex.what()); });
    return false;
  }
}

/// The bucket in one pass: a watcher on every key delivers the last value of each, then a
/// null entry that marks the end of the initial values. Bounded: at most max_nodes entries
/// (each bounded in bytes by load_node_state); stops when nothing arrives for
/// connect_timeout, or at stop().
void FleetView::Impl::load_kv_watch(kvStore* kv) {
  kvWatchOptions wo;
  kvWatchOptions_Init(&wo);
  wo.IgnoreDeletes = true;  // a deleted or purged key is no node
  wo.Timeout = options.connect_timeout.count();
  kvWatcher* w = nullptr;
  natsStatus s = kvStore_WatchAll(&w, kv, &wo);
  if (s != NATS_OK) {
    if (!stopping)
      logger()->warn("fleet: cannot watch the bucket '{}': {}", options.kv_bucket, nats_error(s));
    return;
  }
  {
    std::lock_guard lock(kv_mu);
    watcher = w;
    if (stopping) kvWatcher_Stop(w);
  }
  std::uint64_t seen = 0;
  while (!stopping) {
    kvEntry* e = nullptr;
    s = kvWatcher_Next(&e, w, options.connect_timeout.count());
    if (s != NATS_OK) {
      if (!stopping)
        logger()->warn("fleet: the bucket '{}' was read only in part ({} keys): {}",
                       options.kv_bucket, seen, nats_error(s));
      break;
    }
    if (!e) break;  // the end of the initial values
    if (seen == options.max_nodes) {
      kvEntry_Destroy(e);
      logger()->warn(
          "fleet: the bucket '{}' holds more than {} nodes (--max-nodes); the rest "
          "show as they publish",
          options.kv_bucket, options.max_nodes);
      break;
    }
    ++seen;
    const std::string_view value(static_cast<const char*>(kvEntry_Value(e)),
                                 static_cast<std::size_t>(kvEntry_ValueLen(e)));
    load_node_state(kvEntry_Key(e), value, kvEntry_Created(e), clock(), wall_now_ns());
    kvEntry_Destroy(e);
  }
  std::lock_guard lock(kv_mu);
  watcher = nullptr;
  kvWatcher_Stop(w);
  kvWatcher_Destroy(w);
}

/// The bucket key by key (kvStore_Keys, then one kvStore_Get per key: a round trip each).
void FleetView::Impl::load_kv_key_by_key(kvStore* kv) {
  kvKeysList keys{};
  kvWatchOptions wo;
  kvWatchOptions_Init(&wo);
  wo.Timeout = options.connect_timeout.count();
  const natsStatus s = kvStore_Keys(&keys, kv, &wo);
  if (s != NATS_OK) {
    if (s != NATS_NOT_FOUND)
      logger()->warn("fleet: cannot list the bucket '{}': {}", options.kv_bucket, nats_error(s));
    return;
  }
  const int count = std::min<int>(
      keys.Count, static_cast<int>(std::min<std::size_t>(options.max_nodes, INT32_MAX)));
  for (int i = 0; i < count && !stopping; ++i) {
    kvEntry* e = nullptr;
    if (kvStore_Get(&e, kv, keys.Keys[i]) != NATS_OK) continue;
    const std::string_view value(static_cast<const char*>(kvEntry_Value(e)),
                                 static_cast<std::size_t>(kvEntry_ValueLen(e)));
    load_node_state(keys.Keys[i], value, kvEntry_Created(e), clock(), wall_now_ns());
    kvEntry_Destroy(e);
  }
  kvKeysList_Destroy(&keys);
}

void FleetView::Impl::load_kv() {
  jsCtx* js = nullptr;
  kvStore* kv = nullptr;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = options.connect_timeout.count();
  natsStatus s = natsConnection_JetStream(&js, nc, &jo);
  if (s == NATS_OK) s = js_KeyValue(&kv, js, options.kv_bucket.c_str());
  if (s != NATS_OK) {
    if (!stopping)
      logger()->warn("fleet: no key-value bucket '{}' ({}): nodes show as they publish",
                     options.kv_bucket, nats_error(s));
  } else if (options.kv_watch) {
    load_kv_watch(kv);
  } else {
    load_kv_key_by_key(kv);
  }
  if (kv) kvStore_Destroy(kv);
  if (js) jsCtx_Destroy(js);
}

void FleetView::Impl::finish_kv() {
  {
    std::lock_guard lock(mu);
    kv_done = true;
    st.kv_done = true;
  }
  idle_cv.notify_all();
  report_bucket();
}

bool FleetView::Impl::wait_for_bucket(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu);
  return idle_cv.wait_for(lock, timeout, [this] { return kv_done && intake.pending() == 0; });
}

void FleetView::Impl::start() {
  started = std::chrono::steady_clock::now();
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) s = natsOptions_SetURL(opts, options.url.c_str());
  if (s == NATS_OK) s = natsOptions_SetName(opts, "gpustream-fleet");
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, options.connect_timeout.count());
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);
  // Slow consumer protection: messages waiting for this view, bounded in count and bytes.
  if (s == NATS_OK) s = natsOptions_SetMaxPendingMsgs(opts, 65536);
  std::string auth_error;
  if (s == NATS_OK && apply_nats_auth(opts, options.auth, auth_error) != NATS_OK) {
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
  kv_thread = std::thread([this] {
    load_kv();
    finish_kv();
  });
}

void FleetView::Impl::stop() {
  stopping = true;
  intake.close();  // the worker ends after its message; the bucket's read stops waiting
  {
    std::lock_guard lock(kv_mu);
    if (watcher) kvWatcher_Stop(watcher);
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
  if (nc) natsConnection_Close(nc);  // a request of the bucket's read in flight fails now
  if (kv_thread.joinable()) kv_thread.join();
  if (worker.joinable()) worker.join();
  if (nc) {
    natsConnection_Destroy(nc);
    nc = nullptr;
  }
}

}  // namespace gpustream::transport
