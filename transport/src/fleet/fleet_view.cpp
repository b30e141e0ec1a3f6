// FleetView: the key-value state at start, then the bus, into a SnapshotChannel (libnats).
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include <nats/nats.h>
#include <spdlog/fmt/fmt.h>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "gpustream/json.hpp"
#include "gpustream/log.hpp"
#include "gpustream/transport/address.hpp"
#include "gpustream/transport/fleet.hpp"

namespace gpustream::transport {
namespace asio = boost::asio;

namespace {

std::string nats_error(natsStatus s) {
  const char* text = nats_GetLastError(nullptr);
  std::string out = natsStatus_GetText(s);
  if (text && *text && out != text) out += std::string(": ") + text;
  return out;
}

/// The node token of "<prefix>.<node>.<probe>" (for plain-JSON payloads without a node).
std::string node_of_subject(std::string_view subject) {
  const auto last = subject.rfind('.');
  if (last == std::string_view::npos || last == 0) return {};
  const auto before = subject.rfind('.', last - 1);
  return std::string(subject.substr(before == std::string_view::npos ? 0 : before + 1,
                                    last - (before == std::string_view::npos ? 0 : before + 1)));
}

/// Messages in one node state at most (decode_node_state's own bound).
constexpr std::size_t kMaxNodeStateMessages = 64;

}  // namespace

struct FleetView::Impl : std::enable_shared_from_this<Impl> {
  Impl(const asio::any_io_executor& ex, SnapshotChannel& ch, FleetOptions o)
      : strand(asio::make_strand(ex)),
        channel(ch),
        options(std::move(o)),
        decoder(options.limits),
        table(options.stale_after, options.gone_after, options.max_nodes),
        timer(strand) {}

  asio::strand<asio::any_io_executor> strand;
  SnapshotChannel& channel;
  FleetOptions options;
  LogOnce log_once;

  mutable std::mutex mu;  // decoder, table, stats
  BusDecoder decoder;
  NodeTable table;
  FleetStats st;

  natsConnection* nc = nullptr;
  natsSubscription* sub = nullptr;
  asio::steady_timer timer;
  bool stopped = false;

  static void on_msg(natsConnection*, natsSubscription*, natsMsg* m, void* closure) {
    auto* self = static_cast<Impl*>(closure);
    const std::string_view data(natsMsg_GetData(m),
                                static_cast<std::size_t>(natsMsg_GetDataLength(m)));
    self->handle(data, natsMsg_GetSubject(m), NodeTable::Clock::now(), wall_now_ns());
    natsMsg_Destroy(m);
  }

  /// Decodes and publishes one message; `heard` is when it arrived (or, for the key-value
  /// state, when it was written). True when it published a snapshot.
  bool handle(std::string_view data, std::string_view subject, NodeTable::Clock::time_point heard,
              std::int64_t heard_unix_ns) {
    std::optional<GpuSnapshot> snap;
    std::string agent = "unknown";
    {
      std::lock_guard lock(mu);
      ++st.messages;
      st.bytes += data.size();
      try {
        if (data.substr(0, kBusMagic.size()) == kBusMagic) {
          if (auto d = decoder.decode(data)) {
            agent = d->header.agent;
            snap = std::move(d->snapshot);
          }
          sync_decoder_stats();
        } else if (!data.empty() && data.front() == '{') {  // serve --nats-encoding json
          if (data.size() > options.limits.max_message_bytes)
            throw BusError("a JSON message over the size limit");
          snap = snapshot_from_json_string(data);
          if (snap->node.empty()) snap->node = node_of_subject(subject);
          if (node_name_error(snap->node)) throw BusError("a JSON message without a valid node");
        } else {
          throw BusError("not a gpustream bus message");
        }
      } catch (const std::exception& e) {
        ++st.rejected;
        if (log_once.first("fleet-reject"))
          logger()->warn("fleet: a message on {} was rejected: {} (counted; logged once)", subject,
                         e.what());
        return false;
      }
      if (!snap) return false;
      std::optional<NodeState> before;
      if (!table.heard(snap->node, agent, snap->time_unix_ns, heard, heard_unix_ns, &before)) {
        ++st.nodes_refused;
        if (log_once.first("fleet-full"))
          logger()->warn("fleet: more than {} nodes; messages of new nodes are dropped",
                         options.max_nodes);
        return false;
      }
      ++st.snapshots;
    }
    // Published outside the lock (the channel calls subscribers' wake-ups).
    channel.publish(std::move(*snap));
    return true;
  }

  void sweep(NodeTable::Clock::time_point now) {
    std::vector<std::pair<std::string, NodeState>> changed;
    std::unordered_map<std::string, std::int64_t> heard_ns;
    {
      std::lock_guard lock(mu);
      changed = table.advance(now);
      for (const auto& [node, state] : changed) heard_ns[node] = table.last_heard_unix_ns(node);
    }
    if (changed.empty()) return;
    // A node's last snapshots are its entries in the channel's latest cache (bounded in entries
    // and bytes there, stalest evicted first): a node whose entries were evicted gets no stale
    // copy or gone marker, and shows no old numbers either. (The fleet keeps no copy of its
    // own: that one was bounded only in count.)
    std::unordered_map<std::string_view, std::vector<SnapshotPtr>> of_node;
    for (const auto& [node, state] : changed) of_node[node];
    const auto latest = channel.latest();
    for (const auto& s : latest)
      if (auto it = of_node.find(s->node); it != of_node.end()) it->second.push_back(s);
    std::vector<GpuSnapshot> out;
    std::vector<std::string> gone;
    for (const auto& [node, state] : changed) {
      for (const auto& s : of_node[node])
        out.push_back(state == NodeState::stale ? stale_copy(*s, heard_ns[node])
                                                : gone_marker(*s, heard_ns[node]));
      if (state == NodeState::gone) gone.push_back(node);
    }
    {
      std::lock_guard lock(mu);
      for (const auto& node : gone) decoder.forget(node);
      sync_decoder_stats();
    }
    // Subscribers see the gone markers; then the node leaves the latest cache (and so
    // /api/v1/snapshot, /metrics), unless it spoke again in between.
    for (auto& s : out) channel.publish(std::move(s));
    for (const auto& node : gone) {
      std::lock_guard lock(mu);
      if (table.state(node) == NodeState::gone) channel.forget_node(node);
    }
  }

  /// With mu held.
  void sync_decoder_stats() {
    st.waiting = decoder.waiting();
    st.bus_streams = decoder.streams();
    st.bus_state_bytes = decoder.state_bytes();
    st.bus_evicted = decoder.evicted();
  }

  void arm() {
    const auto period = std::clamp(options.stale_after / 5, std::chrono::milliseconds(20),
                                   std::chrono::milliseconds(1000));
    timer.expires_after(period);
    timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->stopped) return;
      self->sweep(NodeTable::Clock::now());
      self->arm();
    });
  }

  /// One node's state from the bucket: `written_ns` is when it was put (libnats gives
  /// nanoseconds since the epoch; a coarser unit is scaled, and an unknown time counts as now).
  /// False when it is unreadable (counted, logged once) or gave no snapshot.
  bool load_node_state(std::string_view key, std::string_view value, std::int64_t written_ns,
                       NodeTable::Clock::time_point now, std::int64_t now_ns) {
    while (written_ns > 0 && written_ns < 100'000'000'000'000'000) written_ns *= 1000;
    if (written_ns <= 0 || written_ns > now_ns) written_ns = now_ns;
    const auto age = std::chrono::nanoseconds(std::max<std::int64_t>(0, now_ns - written_ns));
    try {
      // A node state is at most 64 messages of at most limits.max_message_bytes each.
      if (value.size() > kMaxNodeStateMessages * (options.limits.max_message_bytes + 32))
        throw BusError("a node state over the size limit");
      bool any = false;
      for (const auto msg : decode_node_state(value, options.limits))
        any |= handle(msg, key, now - std::chrono::duration_cast<NodeTable::Clock::duration>(age),
                      written_ns);
      return any;
    } catch (const std::exception& ex) {
      std::lock_guard lock(mu);
      ++st.rejected;
      if (log_once.first("fleet-kv"))
        logger()->warn("fleet: the state of node '{}' in the bucket is unreadable: {}", key,
                       ex.what());
      return false;
    }
  }

  /// The bucket in one pass: a watcher on every key delivers the last value of each, then a
  /// null entry that marks the end of the initial values. Bounded: at most max_nodes entries
  /// (each bounded in bytes by load_node_state); stops when nothing arrives for
  /// connect_timeout.
  std::uint64_t load_kv_watch(kvStore* kv) {
    kvWatchOptions wo;
    kvWatchOptions_Init(&wo);
    wo.IgnoreDeletes = true;  // a deleted or purged key is no node
    wo.Timeout = options.connect_timeout.count();
    kvWatcher* w = nullptr;
    natsStatus s = kvStore_WatchAll(&w, kv, &wo);
    if (s != NATS_OK) {
      logger()->warn("fleet: cannot watch the bucket '{}': {}", options.kv_bucket, nats_error(s));
      return 0;
    }
    std::uint64_t loaded = 0, seen = 0;
    const auto now = NodeTable::Clock::now();
    const auto now_ns = wall_now_ns();
    while (true) {
      kvEntry* e = nullptr;
      s = kvWatcher_Next(&e, w, options.connect_timeout.count());
      if (s != NATS_OK) {
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
      if (load_node_state(kvEntry_Key(e), value, kvEntry_Created(e), now, now_ns)) ++loaded;
      kvEntry_Destroy(e);
    }
    kvWatcher_Stop(w);
    kvWatcher_Destroy(w);
    return loaded;
  }

  /// The bucket key by key (kvStore_Keys, then one kvStore_Get per key: a round trip each).
  std::uint64_t load_kv_key_by_key(kvStore* kv) {
    kvKeysList keys{};
    kvWatchOptions wo;
    kvWatchOptions_Init(&wo);
    wo.Timeout = options.connect_timeout.count();
    const natsStatus s = kvStore_Keys(&keys, kv, &wo);
    if (s != NATS_OK) {
      if (s != NATS_NOT_FOUND)
        logger()->warn("fleet: cannot list the bucket '{}': {}", options.kv_bucket, nats_error(s));
      return 0;
    }
    std::uint64_t loaded = 0;
    const auto now = NodeTable::Clock::now();
    const auto now_ns = wall_now_ns();
    const int count = std::min<int>(
        keys.Count, static_cast<int>(std::min<std::size_t>(options.max_nodes, INT32_MAX)));
    for (int i = 0; i < count; ++i) {
      kvEntry* e = nullptr;
      if (kvStore_Get(&e, kv, keys.Keys[i]) != NATS_OK) continue;
      const std::string_view value(static_cast<const char*>(kvEntry_Value(e)),
                                   static_cast<std::size_t>(kvEntry_ValueLen(e)));
      if (load_node_state(keys.Keys[i], value, kvEntry_Created(e), now, now_ns)) ++loaded;
      kvEntry_Destroy(e);
    }
    kvKeysList_Destroy(&keys);
    return loaded;
  }

  void load_kv() {
    jsCtx* js = nullptr;
    kvStore* kv = nullptr;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = options.connect_timeout.count();
    natsStatus s = natsConnection_JetStream(&js, nc, &jo);
    if (s == NATS_OK) s = js_KeyValue(&kv, js, options.kv_bucket.c_str());
    if (s != NATS_OK) {
      logger()->warn("fleet: no key-value bucket '{}' ({}): nodes show as they publish",
                     options.kv_bucket, nats_error(s));
      if (js) jsCtx_Destroy(js);
      return;
    }
    const std::uint64_t loaded = options.kv_watch ? load_kv_watch(kv) : load_kv_key_by_key(kv);
    {
      std::lock_guard lock(mu);
      st.kv_nodes = loaded;
    }
    kvStore_Destroy(kv);
    jsCtx_Destroy(js);
    sweep(NodeTable::Clock::now());  // a node whose state is old is stale (or gone) at once
  }

  void start() {
    natsOptions* opts = nullptr;
    natsStatus s = natsOptions_Create(&opts);
    if (s == NATS_OK) s = natsOptions_SetURL(opts, options.url.c_str());
    if (s == NATS_OK) s = natsOptions_SetName(opts, "gpustream-fleet");
    if (s == NATS_OK) s = natsOptions_SetTimeout(opts, options.connect_timeout.count());
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);
    // Slow consumer protection: messages waiting for this view, bounded in count and bytes.
    if (s == NATS_OK) s = natsOptions_SetMaxPendingMsgs(opts, 65536);
    if (s == NATS_OK) s = natsConnection_Connect(&nc, opts);
    natsOptions_Destroy(opts);
    if (s != NATS_OK) {
      if (nc) natsConnection_Destroy(nc);
      nc = nullptr;
      throw std::runtime_error("cannot connect to " + redact_url_credentials(options.url) + ": " +
                               nats_error(s));
    }
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
    if (!options.kv_bucket.empty()) load_kv();
    asio::post(strand, [self = shared_from_this()] { self->arm(); });
  }

  FleetStats st_copy() const {
    std::lock_guard lock(mu);
    return st;
  }

  void stop() {
    asio::post(strand, [self = shared_from_this()] {
      self->stopped = true;
      self->timer.cancel();
    });
    if (sub) {
      // Drained: no callback runs once this returns (bounded wait).
      if (natsSubscription_Drain(sub) == NATS_OK)
        natsSubscription_WaitForDrainCompletion(sub, 2000);
      natsSubscription_Destroy(sub);
      sub = nullptr;
    }
    if (nc) {
      natsConnection_Close(nc);
      natsConnection_Destroy(nc);
      nc = nullptr;
    }
  }
};

FleetView::FleetView(const asio::any_io_executor& ex, SnapshotChannel& channel,
                     FleetOptions options)
    : impl_(std::make_shared<Impl>(ex, channel, std::move(options))) {}

FleetView::~FleetView() { stop(); }

void FleetView::start() { impl_->start(); }
void FleetView::stop() {
  if (impl_) impl_->stop();
}

std::vector<NodeInfo> FleetView::nodes() const {
  std::lock_guard lock(impl_->mu);
  return impl_->table.nodes();
}

FleetStats FleetView::stats() const {
  std::lock_guard lock(impl_->mu);
  auto s = impl_->st;
  s.connected = impl_->nc && natsConnection_Status(impl_->nc) == NATS_CONN_STATUS_CONNECTED;
  return s;
}

void FleetView::on_message(std::string_view data, std::string_view subject) {
  impl_->handle(data, subject, NodeTable::Clock::now(), wall_now_ns());
}

void FleetView::sweep(NodeTable::Clock::time_point now) { impl_->sweep(now); }

std::function<std::string()> FleetView::metrics() {
  std::weak_ptr<Impl> weak = impl_;
  return [weak]() -> std::string {
    auto self = weak.lock();
    if (!self) return {};
    const auto st = self->st_copy();
    const auto& ch = self->channel;
    std::string out;
    const auto family = [&out](std::string_view name, std::string_view type, std::string_view help,
                               std::uint64_t value) {
      out +=
          fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
    };
    family("gpustream_fleet_messages_total", "counter", "Bus messages received.", st.messages);
    family("gpustream_fleet_messages_rejected_total", "counter",
           "Bus messages rejected: malformed, oversized or of an unknown format.", st.rejected);
    family("gpustream_fleet_bus_streams", "gauge",
           "(node, probe) streams the bus decoder keeps a full snapshot of.", st.bus_streams);
    family("gpustream_fleet_bus_state_bytes", "gauge",
           "Bytes those streams hold (bounded by --max-bus-state-bytes).", st.bus_state_bytes);
    family("gpustream_fleet_bus_streams_evicted_total", "counter",
           "Streams evicted (stalest first) to stay within --max-bus-state-bytes.", st.bus_evicted);
    family("gpustream_fleet_latest_entries", "gauge",
           "(node, probe) snapshots in the latest cache.", ch.latest_size());
    family("gpustream_fleet_latest_bytes", "gauge", "Bytes of the latest cache (bounded).",
           ch.latest_bytes());
    family("gpustream_fleet_latest_evicted_total", "counter",
           "Latest-cache entries evicted (stalest first) to stay within its bounds.",
           ch.latest_evicted());
    return out;
  };
}

FitSource FleetView::fit_source() {
  std::weak_ptr<Impl> weak = impl_;
  return [weak](std::uint64_t bytes) -> std::vector<FitEntry> {
    auto self = weak.lock();
    if (!self) return {};
    const auto latest = self->channel.latest();
    std::lock_guard lock(self->mu);
    return fit_entries(fleet_fits(latest, self->table, bytes, wall_now_ns()));
  };
}

ExtraRoutes FleetView::routes() {
  std::weak_ptr<Impl> weak = impl_;
  // /api/v1/fit is the server's own route (fit_source() answers it), as in `gpustream serve`.
  return [weak](std::string_view path, std::string_view) -> std::optional<ExtraResponse> {
    auto self = weak.lock();
    if (!self) return std::nullopt;
    if (path == "/fleet" || path == "/fleet/")
      return ExtraResponse{200, std::string(fleet_dashboard_html()), "text/html; charset=utf-8"};
    if (path == "/api/v1/nodes") {
      const auto latest = self->channel.latest();
      std::lock_guard lock(self->mu);
      return ExtraResponse{200, nodes_json(latest, self->table, wall_now_ns())};
    }
    return std::nullopt;
  };
}

}  // namespace gpustream::transport
