// The NATS bridge: one thread pops the channel's snapshots, serializes each once and publishes
// it with libnats, which owns the socket, the reconnects and the reconnect buffer.
#include "gpustream/transport/nats_bridge.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <optional>
#include <utility>
#include <variant>

#include <nats/nats.h>

#include "fleet/nats_auth_apply.hpp"
#include "gpustream/json.hpp"
#include "gpustream/log.hpp"
#include "gpustream/transport/address.hpp"
#include "gpustream/transport/fleet_codec.hpp"
#include "gpustream/transport/protocol.hpp"

namespace gpustream::transport {

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(100);  // status refresh while idle

bool subject_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

/// Each dot-separated token of `prefix` sanitized; "gpustream" when empty.
std::string sanitize_prefix(std::string_view prefix) {
  if (prefix.empty()) return "gpustream";
  std::string out;
  std::size_t start = 0;
  while (true) {
    const auto dot = prefix.find('.', start);
    out += sanitize_subject_token(prefix.substr(start, dot - start));
    if (dot == std::string_view::npos) break;
    out += '.';
    start = dot + 1;
  }
  return out;
}

int clamp_int(std::int64_t v) { return static_cast<int>(std::min<std::int64_t>(v, INT_MAX)); }

std::string last_error(natsStatus s) { return nats_status_text(s); }

/// Required for an asynchronous retried first connect; the worker polls the status instead.
void on_connected(natsConnection*, void*) {}

/// Why the node's state cannot be written, in words an operator can act on (logged once an
/// outage of the bucket). `binding`: the bucket's STREAM.INFO failed, else the put.
std::string kv_failure_text(natsStatus s, const NatsBridgeOptions& o, bool binding) {
  const std::string bucket = "'" + o.kv_bucket + "'";
  if (s == NATS_NOT_FOUND || (s == NATS_NO_RESPONDERS && !binding))
    return "the key-value bucket " + bucket +
           " does not exist; an agent never creates it: the fleet view (gpustream fleet "
           "creates it unless --kv-create off) or an admin does (docs/fleet.md, \"On the bus\")";
  if (s == NATS_NO_RESPONDERS)
    return "no JetStream answers (does the server run with JetStream, -js?)";
  if (s == NATS_TIMEOUT)
    return "no answer within " + std::to_string(o.connect_timeout.count()) +
           " ms (is a permission missing? an agent needs publish $KV." + o.kv_bucket + "." +
           o.host + " and $JS.API.STREAM.INFO.KV_" + o.kv_bucket + ", subscribe " +
           o.auth.inbox_prefix + ".>: docs/security.md)";
  return (binding ? "cannot bind the key-value bucket " + bucket + ": "
                  : "cannot write the key-value bucket " + bucket + ": ") +
         last_error(s);
}

/// Owns the libnats connection of one run of the worker thread.
class NatsConnection {
 public:
  explicit NatsConnection(NatsBridgeOptions o) : options_(std::move(o)) {}
  ~NatsConnection() { close(); }
  NatsConnection(const NatsConnection&) = delete;
  NatsConnection& operator=(const NatsConnection&) = delete;

  /// Creates the connection; it then (re)connects by itself. False when libnats refused the
  /// options or the URL (`error` says why); a server that is not there yet is not an error.
  bool open(std::string& error, bool& pending) {
    pending = false;
    natsOptions* opts = make_options(true, error);
    if (!opts) return false;
    natsStatus s = natsConnection_Connect(&nc_, opts);
    if (s == NATS_NOT_YET_CONNECTED) {  // not connected yet: libnats keeps trying
      pending = true;
      s = NATS_OK;
    }
    natsOptions_Destroy(opts);
    if (s != NATS_OK) {
      error = last_error(s);
      if (nc_) natsConnection_Destroy(nc_);
      nc_ = nullptr;
      return false;
    }
    natsStatistics_Create(&stats_);
    return true;
  }

  /// Connects now, on the calling thread (at most about connect_timeout), and then reconnects by
  /// itself like open()'s. False with `error` (the server's or TLS's words; "no server answers")
  /// when it cannot connect now.
  bool open_now(std::string& error) {
    natsOptions* opts = make_options(true, error, /*retry_first=*/false);
    if (!opts) return false;
    const natsStatus s = natsConnection_Connect(&nc_, opts);
    natsOptions_Destroy(opts);
    if (s != NATS_OK) {
      error = s == NATS_NO_SERVER ? std::string("no server answers") : last_error(s);
      if (nc_) natsConnection_Destroy(nc_);
      nc_ = nullptr;
      return false;
    }
    natsStatistics_Create(&stats_);
    return true;
  }

  /// Why connecting fails now, in the server's or TLS's own words ("Authorization Violation",
  /// "unable to get local issuer certificate"): one attempt with the same options and no retry,
  /// on the calling thread (at most about connect_timeout). The retrying connection cannot say
  /// it: libnats keeps a TLS error only in the thread that made the attempt. Empty when nothing
  /// answered (the server is down or unreachable) or the attempt succeeded.
  std::string diagnose() const {
    std::string error;
    natsOptions* opts = make_options(false, error);
    if (!opts) return error;
    natsConnection* probe = nullptr;
    const natsStatus s = natsConnection_Connect(&probe, opts);
    if (s != NATS_OK && s != NATS_NO_SERVER) error = last_error(s);
    if (probe) natsConnection_Destroy(probe);
    natsOptions_Destroy(opts);
    return error;
  }

  /// Why the connection was lost, in libnats's words ("End of file", "Connection reset by
  /// peer", a TLS error); empty when it kept none.
  std::string last_connection_error() const {
    const char* text = nullptr;
    if (!nc_ || natsConnection_GetLastError(nc_, &text) == NATS_OK || !text) return {};
    return text;
  }

  bool is_open() const { return nc_ != nullptr; }
  /// libnats gave up (it closes after the same authorization error twice): open() again.
  bool closed() const { return nc_ && natsConnection_Status(nc_) == NATS_CONN_STATUS_CLOSED; }
  bool connected() const { return nc_ && natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED; }

  std::uint64_t reconnects() const {
    std::uint64_t n = 0;
    if (nc_ && stats_ && natsConnection_GetStats(nc_, stats_) == NATS_OK)
      natsStatistics_GetCounts(stats_, nullptr, nullptr, nullptr, nullptr, &n);
    return n;
  }

  natsStatus publish(const std::string& subject, const std::string& body) {
    return natsConnection_Publish(nc_, subject.c_str(), body.data(), static_cast<int>(body.size()));
  }

  /// Binds the options' bucket: one STREAM.INFO request ($JS.API.STREAM.INFO.KV_<bucket>),
  /// waiting at most connect_timeout. Never creates it (an agent must not hold the right to
  /// create streams: docs/security.md "NATS permissions"). NATS_NOT_FOUND when it does not exist.
  natsStatus kv_bind() {
    if (kv_) return NATS_OK;
    if (!js_) {
      jsOptions jo;
      jsOptions_Init(&jo);
      jo.Wait = options_.connect_timeout.count();
      const natsStatus s = natsConnection_JetStream(&js_, nc_, &jo);
      if (s != NATS_OK) return s;
    }
    const natsStatus s = js_KeyValue(&kv_, js_, options_.kv_bucket.c_str());
    if (s != NATS_OK) kv_ = nullptr;
    return s;
  }
  bool kv_bound() const { return kv_ != nullptr; }
  /// Forgets the binding (the bucket went away): the next put binds again.
  void kv_unbind() {
    if (kv_) kvStore_Destroy(kv_);
    kv_ = nullptr;
  }

  /// Writes `value` under `key` in the bound bucket. NATS_OK or the error (the caller logs it).
  natsStatus kv_put(const std::string& key, const std::string& value) {
    std::uint64_t rev = 0;
    return kvStore_Put(&rev, kv_, key.c_str(), value.data(), static_cast<int>(value.size()));
  }

  void close() {
    if (kv_) kvStore_Destroy(kv_);
    kv_ = nullptr;
    if (js_) jsCtx_Destroy(js_);
    js_ = nullptr;
    if (nc_) {
      if (connected()) natsConnection_FlushTimeout(nc_, options_.flush_timeout.count());
      natsConnection_Destroy(nc_);
      nc_ = nullptr;
    }
    if (stats_) natsStatistics_Destroy(stats_);
    stats_ = nullptr;
  }

 private:
  /// The connection's options (to destroy), or null with `error` set. `retry`: a first connect
  /// that fails is retried in the background (the bridge's connection) rather than returned.
  natsOptions* make_options(bool retry, std::string& error, bool retry_first = true) const {
    natsOptions* opts = nullptr;
    natsStatus s = natsOptions_Create(&opts);
    if (s == NATS_OK) s = natsOptions_SetURL(opts, options_.url.c_str());
    if (s == NATS_OK) s = natsOptions_SetName(opts, "gpustream-nats-bridge");
    if (s == NATS_OK) s = natsOptions_SetTimeout(opts, options_.connect_timeout.count());
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, retry ? -1 : 0);
    if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, options_.reconnect_wait.count());
    if (s == NATS_OK)
      s = natsOptions_SetReconnectBufSize(
          opts, clamp_int(static_cast<std::int64_t>(options_.reconnect_buffer_bytes)));
    if (s == NATS_OK && options_.write_deadline.count() > 0)
      s = natsOptions_SetWriteDeadline(opts, options_.write_deadline.count());
    if (s == NATS_OK && retry && retry_first)
      s = natsOptions_SetRetryOnFailedConnect(opts, true, on_connected, nullptr);
    if (s != NATS_OK) {
      error = last_error(s);
    } else if (apply_nats_auth(opts, options_.auth, error) == NATS_OK) {
      return opts;
    }
    natsOptions_Destroy(opts);
    return nullptr;
  }

  NatsBridgeOptions options_;  // a copy: set_auth() gives the next connection other credentials
  natsConnection* nc_ = nullptr;
  natsStatistics* stats_ = nullptr;
  jsCtx* js_ = nullptr;
  kvStore* kv_ = nullptr;
};

}  // namespace

std::string sanitize_subject_token(std::string_view s) {
  if (s.empty()) return "_";
  std::string out(s);
  for (auto& c : out)
    if (!subject_char(c)) c = '_';
  return out;
}

std::string default_host_token() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown";
  return sanitize_subject_token(name);
}

NatsBridge::NatsBridge(SnapshotChannel& channel, NatsBridgeOptions options)
    : channel_(channel), options_(std::move(options)) {
  if (options_.queue_capacity == 0) options_.queue_capacity = 1;
  options_.host = options_.host.empty() ? default_node_name()
                                        : sanitize_subject_token(options_.host).substr(0, 64);
  if (options_.kv_ttl.count() < 1000) options_.kv_ttl = std::chrono::milliseconds(1000);
  options_.subject_prefix = sanitize_prefix(options_.subject_prefix);
  // Replies (JetStream's) to this node's own inbox: its permission is `subscribe
  // _INBOX_gpustream.<node>.>`, and it reads no other client's replies.
  if (options_.auth.inbox_prefix.empty())
    options_.auth.inbox_prefix = std::string(kDefaultInboxRoot) + "." + options_.host;
  subject_head_ = options_.subject_prefix + "." + options_.host + ".";
}

NatsBridge::~NatsBridge() { stop(); }

void NatsBridge::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  SubscribeOptions so;
  so.filter = options_.filter;
  so.policy = Backpressure::drop_oldest;
  so.capacity = options_.queue_capacity;
  queue_ = channel_.subscribe_queue(so);
  stopping_ = false;
  if (!connected_.load())
    down_since_ns_ = std::chrono::steady_clock::now().time_since_epoch().count();
  thread_ = std::thread([this, q = queue_] { run(q); });
}

void NatsBridge::stop() {
  std::lock_guard lock(mu_);
  if (!thread_.joinable()) return;
  stopping_ = true;
  thread_.join();
  queue_->close();
  queue_.reset();
}

bool NatsBridge::running() const {
  std::lock_guard lock(mu_);
  return thread_.joinable();
}

NatsBridgeStats NatsBridge::stats() const {
  NatsBridgeStats s;
  s.published = published_.load();
  s.dropped = dropped_.load();
  s.publish_errors = publish_errors_.load();
  s.reconnects = reconnects_.load();
  s.bytes = bytes_.load();
  s.kv_puts = kv_puts_.load();
  s.kv_errors = kv_errors_.load();
  s.connected = connected_.load();
  s.outages = outages_.load();
  if (const auto since = down_since_ns_.load(); since != 0 && !s.connected) {
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    s.disconnected_for = std::chrono::duration_cast<std::chrono::milliseconds>(
        now - std::chrono::nanoseconds(since));
  }
  return s;
}

std::string nats_bridge_metrics(const NatsBridgeStats& s) {
  std::string out;
  const auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + std::to_string(value) + "\n";
  };
  family("gpustream_nats_connected", "gauge", "1 when the NATS bridge is connected to a server.",
         s.connected ? 1 : 0);
  family("gpustream_nats_disconnected_seconds", "gauge",
         "Seconds the NATS bridge has not been connected (0 when connected).",
         static_cast<double>(s.disconnected_for.count()) / 1000.0);
  family("gpustream_nats_outages_total", "counter",
         "NATS outages: the connection lost, or a first connect that failed.", s.outages);
  family("gpustream_nats_reconnects_total", "counter",
         "Reconnects to NATS, as libnats counts them.", s.reconnects);
  family("gpustream_nats_published_total", "counter", "Snapshots handed to NATS.", s.published);
  family("gpustream_nats_published_bytes_total", "counter", "Payload bytes published on NATS.",
         s.bytes);
  family("gpustream_nats_publish_errors_total", "counter",
         "Snapshots NATS refused (not connected, the reconnect buffer full, encoding).",
         s.publish_errors);
  family("gpustream_nats_dropped_total", "counter",
         "Snapshots the NATS bridge's queue dropped (it fell behind).", s.dropped);
  family("gpustream_nats_kv_puts_total", "counter", "Node states written to the key-value bucket.",
         s.kv_puts);
  family("gpustream_nats_kv_write_failures_total", "counter",
         "Failed writes of the node state (no bucket, no JetStream, refused, timeout).",
         s.kv_errors);
  return out;
}

std::string nats_bridge_stats_json(const NatsBridgeStats& s) {
  const auto n = [](std::uint64_t v) { return std::to_string(v); };
  return std::string("\"connected\":") + (s.connected ? "true" : "false") +
         ",\"disconnected_ms\":" + std::to_string(s.disconnected_for.count()) +
         ",\"outages\":" + n(s.outages) + ",\"reconnects\":" + n(s.reconnects) +
         ",\"published\":" + n(s.published) + ",\"published_bytes\":" + n(s.bytes) +
         ",\"publish_errors\":" + n(s.publish_errors) + ",\"dropped\":" + n(s.dropped) +
         ",\"kv_puts\":" + n(s.kv_puts) + ",\"kv_write_failures\":" + n(s.kv_errors);
}

std::optional<std::string> nats_health_error(const NatsBridgeStats& s,
                                             std::chrono::milliseconds bound) {
  if (s.connected || s.disconnected_for <= bound) return std::nullopt;
  const auto secs = [](std::chrono::milliseconds d) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.3f s", static_cast<double>(d.count()) / 1000.0);
    return std::string(text);
  };
  return "NATS disconnected for " + secs(s.disconnected_for) + " (more than " + secs(bound) + ")";
}

NatsAuthChange NatsBridge::set_auth(NatsAuth auth, std::string* error) {
  if (auto err = nats_auth_error(auth); !err.empty()) {
    if (error) *error = std::move(err);
    return NatsAuthChange::refused;
  }
  const std::string default_inbox = std::string(kDefaultInboxRoot) + "." + options_.host;
  if (auth.inbox_prefix.empty()) auth.inbox_prefix = default_inbox;
  std::lock_guard lock(auth_mu_);
  NatsAuth in_use = auth_ ? *auth_ : options_.auth;
  if (in_use.inbox_prefix.empty()) in_use.inbox_prefix = default_inbox;
  if (in_use == auth) return NatsAuthChange::unchanged;
  auth_ = std::move(auth);
  auth_changed_ = true;  // the running thread (or the next start()) takes it
  return NatsAuthChange::reconnecting;
}

std::string NatsBridge::subject_for(std::string_view probe) const {
  return subject_head_ + sanitize_subject_token(probe);
}

std::string NatsBridge::subject_wildcard() const { return subject_head_ + "*"; }

void NatsBridge::run(std::shared_ptr<SnapshotQueue> queue) {
  static LogOnce log_once;  // process-wide: one bridge per URL is the norm
  auto log = logger();
  const std::string url = redact_url_credentials(options_.url);  // for logs: no credentials
  NatsBridgeOptions live = options_;  // the connection's options: set_auth() changes the auth
  {
    std::lock_guard lock(auth_mu_);
    if (auth_) live.auth = *auth_;
    auth_changed_ = false;
  }
  auto conn = std::make_unique<NatsConnection>(live);
  auto next_open = std::chrono::steady_clock::now();
  bool was_connected = false;
  bool ever_connected = false;
  bool in_outage = false;  // counted in outages_ since the last time it was connected
  const auto outage = [&] {
    if (in_outage) return;
    in_outage = true;
    ++outages_;
  };
  std::uint64_t base_reconnects = reconnects_.load();
  std::string body;
  BusEncoder encoder(options_.host, std::string(kServerName), {.full_every = options_.full_every});
  const bool compact = options_.encoding == BusEncoding::compact;
  const bool use_kv = compact && !options_.kv_bucket.empty();
  auto next_kv = std::chrono::steady_clock::now();
  bool kv_due = false;  // a full message was published (or a reconnect made one due) since the put
  // After a failed bind or put: the next attempt, at most one a reconnect_wait (a failing bucket
  // costs at most one STREAM.INFO request, waiting at most connect_timeout, per reconnect_wait).
  auto kv_retry_at = std::chrono::steady_clock::now();
  bool kv_failing = false;                           // since the last failure, no put succeeded
  std::size_t drain_left = options_.queue_capacity;  // after stop(): what was queued, at most

  // Publishes one item; exceptions stay here (the thread must not die).
  auto handle = [&](QueueItem& item) {
    if (const auto* gap = std::get_if<Gap>(&item)) {
      dropped_ += gap->missed;
      return;
    }
    const auto& snap = std::get<SnapshotPtr>(item);
    if (!snap) return;
    if (!conn->is_open()) {
      ++publish_errors_;
      return;
    }
    body.clear();
    try {
      if (compact) {
        body = encoder.encode(*snap);
        kv_due = kv_due || encoder.last_was_full();
      } else if (snap->node == options_.host) {
        append_json(body, *snap);
      } else {
        GpuSnapshot named = *snap;
        named.node = options_.host;
        append_json(body, named);
      }
    } catch (const std::exception& e) {
      ++publish_errors_;
      if (log_once.first("nats-encode")) log->error("NATS: cannot encode a snapshot: {}", e.what());
      return;
    }
    const std::string subject = subject_for(snap->probe);
    const natsStatus s = conn->publish(subject, body);
    if (s == NATS_OK) {
      ++published_;
      bytes_ += body.size();
      return;
    }
    ++publish_errors_;
    if (log_once.first("nats-publish " + url))
      log->warn("NATS: publish on {} failed: {} (counted in publish_errors; logged once)", subject,
                last_error(s));
  };

  while (true) {
    const bool stopping = stopping_.load();
    const auto now = std::chrono::steady_clock::now();
    if (auth_changed_.exchange(false) && !stopping) {  // set_auth(): new credentials
      NatsBridgeOptions next = live;
      {
        std::lock_guard lock(auth_mu_);
        next.auth = *auth_;
      }
      if (!conn->connected()) {  // nothing to keep: the new credentials from the next attempt
        base_reconnects += conn->reconnects();
        conn = std::make_unique<NatsConnection>(next);
        live = std::move(next);
        next_open = now;
        log_once.clear("nats-connect " + url);
        log->info("NATS: new credentials for {}: used from the next connect attempt", url);
      } else {
        auto fresh = std::make_unique<NatsConnection>(next);
        std::string error;
        if (fresh->open_now(error)) {
          base_reconnects += conn->reconnects();
          conn = std::move(fresh);  // the old one flushes what it holds, then closes
          live = std::move(next);
          encoder.force_full();  // the same rule as a reconnect
          kv_due = true;
          kv_retry_at = now;
          log->info("NATS: connected to {} with the new credentials (the old connection closed)",
                    url);
        } else {
          log->warn(
              "NATS: the new credentials do not connect to {} ({}); keeping the connection made "
              "with the old ones",
              url, error);
        }
      }
    }
    if (!conn->is_open() && !stopping && now >= next_open) {
      std::string error;
      bool pending = false;
      if (!conn->open(error, pending)) {
        outage();
        next_open = now + options_.reconnect_wait;
        if (log_once.first("nats-connect " + url))
          log->error("NATS: cannot use {}: {}; retrying every {} ms", url, error,
                     options_.reconnect_wait.count());
      } else if (pending) {
        outage();
      }
      if (pending && log_once.first("nats-connect " + url)) {
        const std::string cause = conn->diagnose();  // once an outage: a refusal is not silence
        log->warn(
            "NATS: cannot connect to {} ({}); retrying in the background every {} ms, keeping "
            "up to {} bytes meanwhile",
            url, cause.empty() ? std::string("no server answers") : cause,
            options_.reconnect_wait.count(), options_.reconnect_buffer_bytes);
      }
    }
    if (conn->closed() && !stopping) {  // libnats gave up (an authorization error twice)
      conn->close();
      next_open = now + options_.reconnect_wait;
    }
    const bool connected = conn->connected();
    if (connected != was_connected) {
      if (connected) {
        log->info("NATS: {} {}", ever_connected ? "reconnected to" : "connected to", url);
        // A consumer that lost its state (a fleet view restarted, a bucket lost with the
        // server) gets it at once: a full message per probe next, and the state put now.
        encoder.force_full();
        kv_due = true;
        kv_retry_at = now;
        log_once.clear("nats-connect " + url);
        log_once.clear("nats-disconnected " + url);
        log_once.clear("nats-publish " + url);
        ever_connected = true;
        in_outage = false;
        down_since_ns_ = 0;
      } else {
        outage();
        down_since_ns_ = now.time_since_epoch().count();
        if (conn->is_open() && log_once.first("nats-disconnected " + url)) {
          const std::string cause = conn->last_connection_error();
          log->warn(
              "NATS: lost the connection to {} ({}); reconnecting every {} ms (keeping up to {} "
              "bytes)",
              url, cause.empty() ? std::string("the connection ended") : cause,
              options_.reconnect_wait.count(), options_.reconnect_buffer_bytes);
        }
      }
      was_connected = connected;
      connected_ = connected;
    }
    reconnects_ = base_reconnects + conn->reconnects();

    std::optional<QueueItem> item;
    try {
      if (stopping) {
        if (drain_left == 0 || !(item = queue->try_pop())) break;
        --drain_left;
      } else {
        item = queue->pop_for(kPollInterval);
      }
      if (item) handle(*item);
      // The node's state in the bucket: at each full message, and at least every ttl / 3; after
      // a failure, once a reconnect_wait (not while stopping: stop() must not wait for it).
      const auto t = std::chrono::steady_clock::now();
      if (use_kv && connected && !encoder.last_fulls().empty() && (kv_due || t >= next_kv) &&
          t >= kv_retry_at && !(stopping && kv_failing)) {
        const bool binding = !conn->kv_bound();
        natsStatus ks = conn->kv_bind();
        if (ks == NATS_OK)
          ks = conn->kv_put(options_.host, encode_node_state(encoder.last_fulls()));
        const auto done = std::chrono::steady_clock::now();
        if (ks == NATS_OK) {
          kv_due = false;
          next_kv = done + options_.kv_ttl / 3;
          ++kv_puts_;
          if (kv_failing)
            log->info("NATS: the node state is in the key-value bucket '{}' on {} again",
                      options_.kv_bucket, url);
          kv_failing = false;
          log_once.clear("nats-kv " + url);
        } else {
          ++kv_errors_;
          kv_failing = true;
          kv_retry_at = done + options_.reconnect_wait;
          // The bucket may have gone (a server restarted with it in memory): bind again.
          if (ks == NATS_NO_RESPONDERS || ks == NATS_NOT_FOUND) conn->kv_unbind();
          if (log_once.first("nats-kv " + url))
            log->warn(
                "NATS: cannot keep the node state in the key-value bucket on {}: {}; publishing "
                "goes on, retrying every {} ms (counted in kv_errors; logged once until it "
                "works)",
                url, kv_failure_text(ks, options_, binding), options_.reconnect_wait.count());
        }
      }
    } catch (const std::exception& e) {
      ++publish_errors_;
      if (log_once.first("nats-internal")) log->error("NATS bridge: {}", e.what());
    }
  }
  conn->close();  // flushes (bounded) while connected, then destroys
  connected_ = false;
  down_since_ns_ = 0;
}

}  // namespace gpustream::transport
