// FleetView: the bus's messages, per publisher under a budget, decoded on the view's worker into
// a SnapshotChannel; the staleness sweep; the view's routes and /metrics (fleet_view_impl.hpp;
// the NATS side is fleet_view_nats.cpp).
#include <time.h>

#include <limits>
#include <set>
#include <unordered_map>

#include <boost/asio/post.hpp>

#include "fleet/fleet_view_impl.hpp"
#include "gpustream/detail/deferred_wakes.hpp"
#include "gpustream/json.hpp"

namespace gpustream::transport {
namespace asio = boost::asio;

namespace {

/// The node and probe tokens of "<prefix>.<node>.<probe>"; nullopt when `subject` is not one.
std::optional<std::pair<std::string_view, std::string_view>> parse_subject(
    std::string_view subject, std::string_view prefix) {
  if (subject.size() <= prefix.size() + 1 || subject.substr(0, prefix.size()) != prefix ||
      subject[prefix.size()] != '.')
    return std::nullopt;
  const auto rest = subject.substr(prefix.size() + 1);
  const auto dot = rest.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const auto node = rest.substr(0, dot);
  const auto probe = rest.substr(dot + 1);
  if (node_name_error(node) || node_name_error(probe)) return std::nullopt;
  return std::make_pair(node, probe);
}

/// The view's reason for a decoder's refusal.
FleetRefusal refusal_of(BusRefusal r) noexcept {
  switch (r) {
    case BusRefusal::too_large:
      return FleetRefusal::too_large;
    case BusRefusal::inflation:
      return FleetRefusal::inflation;
    case BusRefusal::too_many_devices:
      return FleetRefusal::too_many_devices;
    case BusRefusal::too_many_streams:
      return FleetRefusal::too_many_streams;
    case BusRefusal::malformed:
      break;
  }
  return FleetRefusal::malformed;
}

std::chrono::nanoseconds thread_cpu_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

}  // namespace

FleetView::Impl::Impl(const asio::any_io_executor& ex, SnapshotChannel& ch, FleetOptions o)
    : strand(asio::make_strand(ex)),
      channel(ch),
      options(std::move(o)),
      clock(options.clock ? options.clock : [] { return Clock::now(); }),
      cpu_clock(options.cpu_clock ? options.cpu_clock : &thread_cpu_now),
      intake(options.budget, options.max_nodes),
      decoder(options.limits),
      table(options.stale_after, options.gone_after, options.max_nodes),
      timer(strand) {
  for (auto& r : refused) r = 0;
  for (auto& l : logged) l = false;
}

/// Subject, admission, message rate and queue: nothing is decoded here, and nothing is kept
/// of a refused message.
void FleetView::Impl::deliver(std::string_view data, std::string_view subject,
                              std::string_view republished_by) {
  if (stopping) return;
  ++messages;
  bytes += data.size();
  if (!republished_by.empty()) {
    // Not the node's own message: a stream's republish rule put it on this subject (whoever
    // could create the stream chose the subject). Refused whatever it holds.
    refuse(FleetRefusal::republished, "?", [&] {
      return fmt::format(
          "the message on '{}' was republished by the stream '{}' (JetStream's republish "
          "headers): a node's messages come from the node itself",
          subject.substr(0, 200), republished_by.substr(0, 64));
    });
    return;
  }
  const auto tokens = parse_subject(subject, options.subject_prefix);
  if (!tokens) {
    refuse(FleetRefusal::bad_subject, "?", [&] {
      return fmt::format("the subject '{}' is not {}.<node>.<probe>", subject.substr(0, 200),
                         options.subject_prefix);
    });
    return;
  }
  IntakeItem item;
  item.node = std::string(tokens->first);
  item.probe = std::string(tokens->second);
  item.heard = clock();
  item.heard_unix_ns = wall_now_ns();
  admit(data, std::move(item));
}

void FleetView::Impl::admit(std::string_view data, IntakeItem&& item) {
  if (data.size() > options.limits.max_message_bytes) {
    refuse(FleetRefusal::too_large, item.node, [&] {
      return fmt::format("{} bytes, more than the {} allowed", data.size(),
                         options.limits.max_message_bytes);
    });
    return;
  }
  {
    std::lock_guard lock(mu);
    if (!table.admits(item.node)) {
      refuse(FleetRefusal::node_table_full, item.node, "");
      return;
    }
  }
  item.data.assign(data);
  const std::string node = item.node;
  const auto now = item.kv_key ? clock() : item.heard;
  switch (intake.push(std::move(item), now)) {
    case PublisherIntake::Push::queued:
      return;
    case PublisherIntake::Push::budget_messages:
      refuse(FleetRefusal::budget_messages, node, [&] {
        return fmt::format("more than {} messages a second", options.budget.messages_per_second);
      });
      return;
    case PublisherIntake::Push::queue_full:
      if (!stopping) refuse(FleetRefusal::queue_full, node, "its queue of messages is full");
      return;
  }
}

/// The decoder streams of nodes that went gone (the sweep's list), with worker_mu held.
void FleetView::Impl::apply_forgets() {
  std::vector<std::string> forget;
  {
    std::lock_guard lock(mu);
    if (pending_forget.empty()) return;
    forget.swap(pending_forget);
    std::erase_if(forget, [&](const std::string& n) { return table.state(n) != NodeState::gone; });
  }
  for (const auto& n : forget) decoder.forget(n);
  std::lock_guard lock(mu);
  sync_decoder_stats();
}

bool FleetView::Impl::within_budget(const IntakeItem& item, std::size_t cost,
                                    Clock::time_point now) {
  if (!intake.take_bytes(item.node, cost, now)) {
    refuse(FleetRefusal::budget_bytes, item.node, [&] {
      return fmt::format("more than {} inflated bytes a second (this one: {})",
                         options.budget.bytes_per_second, cost);
    });
    return false;
  }
  if (!intake.cpu_left(item.node, now)) {
    refuse(FleetRefusal::budget_cpu, item.node, [&] {
      return fmt::format("more than {} ms of decoding CPU time a second",
                         options.budget.cpu_per_second.count());
    });
    return false;
  }
  return true;
}

/// Decodes one queued message under its publisher's budget, then updates the node table and
/// publishes: with worker_mu held, never mu while decoding.
void FleetView::Impl::process(const IntakeItem& item) {
  apply_forgets();
  const auto now = clock();
  {
    std::lock_guard lock(mu);
    if (!table.admits(item.node)) {  // filled since it was queued: no decoder state for it
      refuse(FleetRefusal::node_table_full, item.node, "");
      return;
    }
  }
  const std::string_view data = item.data;
  // The node is the subject's (or, for the bucket's entries, the key's): a payload naming
  // another is refused.
  const auto mismatch = item.kv_key ? FleetRefusal::key_mismatch : FleetRefusal::subject_mismatch;
  static constexpr std::string_view kInKey = " (a bucket entry: the node is its key's)";
  std::optional<GpuSnapshot> snap;
  std::string agent = "unknown";
  try {
    if (data.substr(0, kBusMagic.size()) == kBusMagic) {
      BusLimits header_limits = options.limits;
      header_limits.max_body_bytes = std::numeric_limits<std::size_t>::max();
      const BusHeader h = parse_bus_header(data, header_limits);
      if (h.body_bytes > options.limits.max_body_bytes) {
        refuse(FleetRefusal::too_large, item.node, [&] {
          return fmt::format("a body of {} bytes declared, more than the {} allowed", h.body_bytes,
                             options.limits.max_body_bytes);
        });
        return;
      }
      if (h.node != item.node) {
        refuse(mismatch, item.node, [&] {
          return fmt::format("its header names node '{}'{}", h.node, item.kv_key ? kInKey : "");
        });
        return;
      }
      // The declared body and, for a delta, the base it applies to (the conversion walks it).
      if (!within_budget(item, decoder.cost_bytes(h), now)) return;
      std::optional<BusDecoder::Decoded> d;
      const auto waiting_before = decoder.waiting();
      {
        CpuMeter meter(*this, item.node);
        d = decoder.decode(data);
      }
      if (d) {
        agent = d->header.agent;
        snap = std::move(d->snapshot);
      } else if (!item.kv_key && decoder.waiting() != waiting_before &&
                 decoder.state_bytes() < decoder.limits().max_state_bytes / 10 * 9) {
        // A delta of a full this view never got: fetched from the bucket. Not near the
        // decoder's bytes bound, where each full taken evicts another stream (which would then
        // fetch its own, and so on): there the streams wait for their next full, as before.
        want_base(item.node, h.probe);
      }
    } else if (!data.empty() && data.front() == '{') {  // serve --nats-encoding json
      if (!within_budget(item, data.size(), now)) return;
      {
        CpuMeter meter(*this, item.node);
        snap = snapshot_from_json_string(data);
      }
      if (snap->node.empty()) snap->node = item.node;
      if (snap->node != item.node) {
        refuse(mismatch, item.node, [&] {
          return fmt::format("its snapshot names node '{}'{}", snap->node.substr(0, 64),
                             item.kv_key ? kInKey : "");
        });
        return;
      }
    } else {
      throw BusError("not a gpustream bus message");
    }
  } catch (const BusError& e) {
    refuse(refusal_of(e.reason()), item.node, [&] { return std::string(e.what()); });
    std::lock_guard lock(mu);
    sync_decoder_stats();
    return;
  } catch (const std::exception& e) {
    refuse(FleetRefusal::malformed, item.node, [&] { return std::string(e.what()); });
    std::lock_guard lock(mu);
    sync_decoder_stats();
    return;
  }
  {
    std::lock_guard lock(mu);
    sync_decoder_stats();
    if (!snap) return;  // a replay or a delta without its full: counted by the decoder
    if (!table.heard(item.node, agent, snap->time_unix_ns, item.heard, item.heard_unix_ns, nullptr,
                     snap->probe)) {
      decoder.forget(item.node);  // not reached: only this worker adds nodes (admits above)
      sync_decoder_stats();
      refuse(FleetRefusal::node_table_full, item.node, "");
      return;
    }
    ++st.snapshots;
    if (item.kv_key && !*item.kv_key) {
      *item.kv_key = true;
      ++st.kv_nodes;
    }
  }
  // A node state from the bucket that is old: the sweep shows it stale (or gone) at once.
  if (item.kv_key && now - item.heard >= options.stale_after) post_sweep();
  // Published outside the lock (the channel calls subscribers' wake-ups).
  channel.publish(std::move(*snap));
}

/// Takes one queued message (or none); true when it took one.
bool FleetView::Impl::run_one(std::optional<IntakeItem> item) {
  if (!item) return false;
  {
    std::lock_guard lock(worker_mu);
    process(*item);
  }
  intake.finish(item->node);
  if (kv_done) {
    { std::lock_guard lock(mu); }  // a waiter is waiting or will see the new count
    idle_cv.notify_all();
    report_bucket();
  }
  return true;
}

/// Once: the bucket is read and every message of it handled.
void FleetView::Impl::report_bucket() {
  if (!kv_done || intake.pending() != 0 || kv_reported.exchange(true)) return;
  if (!options.on_bucket_read) return;
  std::uint64_t nodes = 0;
  {
    std::lock_guard lock(mu);
    nodes = st.kv_nodes;
  }
  options.on_bucket_read(nodes, std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - started));
}

/// The worker: the bus's messages taken from libnats into the intake (refused or queued), one
/// queued message decoded at a time (round robin over the publishers), the bus taken again
/// between two. With nothing queued: when messages came since the last pause, a pause of
/// kBusGather with the sockets unread (the next batch gathers in the kernel meanwhile), then a
/// read; else a wait for a socket to be readable, whose messages are decoded at once (a message
/// after a quiet spell waits for no batch). The worker is libnats's event loop (bus_loop): it
/// makes every read and write of the view's connections, and goes on doing so once stopping
/// until stop() has closed them; while it decodes a backlog, it reads the sockets every kBusGather
/// as well. The snapshots of a batch wake the channel's subscribers (the server's io thread) once,
/// when nothing is left queued or every kPublishBatch snapshots, rather than once each: they are
/// in the channel (latest(), history) as soon as each is published.
void FleetView::Impl::run_worker() {
  bus_loop.own();
  gpustream::detail::DeferredWakes wakes;
  std::size_t unwoken = 0;
  bool flowing = false;
  while (!stopping) {
    if (pull_bus(kBusPullMax) > 0) flowing = true;
    if (run_one(intake.try_pop())) {
      if (++unwoken >= kPublishBatch) {
        wakes.flush();
        unwoken = 0;
      }
      read_bus_if_due();  // a long backlog holds up no read (nor a write) past kBusGather
      continue;
    }
    wakes.flush();
    unwoken = 0;
    release_bus_messages();
    if (std::exchange(flowing, false))
      gather_bus();
    else
      flowing = wait_for_bus();
  }
  release_bus_messages();
  // Stopping: nothing more is decoded, but the sockets are served until stop() closed them (a
  // drain or a request of kv_thread may still wait for the server's reply).
  while (!loop_done) bus_loop.poll(kBusIdleWait, true);
}

void FleetView::Impl::post_sweep() {
  if (sweep_posted.exchange(true)) return;
  asio::post(strand, [self = shared_from_this()] {
    self->sweep_posted = false;
    if (!self->stopped) self->sweep(self->clock());
  });
}

void FleetView::Impl::sweep(Clock::time_point now) {
  std::vector<std::pair<std::string, NodeState>> changed;
  std::vector<NodeTable::Stream> streams;
  std::unordered_map<std::string, std::int64_t> heard_ns;
  {
    std::lock_guard lock(mu);
    changed = table.advance(now, &streams);
    for (const auto& [node, state] : changed) heard_ns[node] = table.last_heard_unix_ns(node);
    for (const auto& [node, probe] : streams) heard_ns[node] = table.last_heard_unix_ns(node);
  }
  if (changed.empty() && streams.empty()) return;
  // A node's last snapshots are its entries in the channel's latest cache (bounded in entries
  // and bytes there, stalest evicted first): a node whose entries were evicted gets no stale
  // copy or gone marker, and shows no old numbers either. (The fleet keeps no copy of its
  // own: that one was bounded only in count.)
  std::unordered_map<std::string_view, std::pair<NodeState, std::vector<SnapshotPtr>>> of_node;
  for (const auto& [node, state] : changed) of_node[node].first = state;
  std::set<std::pair<std::string_view, std::string_view>> stale_streams;
  for (const auto& [node, probe] : streams) stale_streams.emplace(node, probe);
  std::vector<GpuSnapshot> out;
  for (const auto& s : channel.latest()) {
    if (auto it = of_node.find(s->node); it != of_node.end()) {
      out.push_back(it->second.first == NodeState::stale ? stale_copy(*s, heard_ns[s->node])
                                                         : gone_marker(*s, heard_ns[s->node]));
    } else if (stale_streams.contains({s->node, s->probe})) {
      out.push_back(stale_copy(*s, heard_ns[s->node], true));
    }
  }
  std::vector<std::string> gone;
  for (const auto& [node, state] : changed)
    if (state == NodeState::gone) gone.push_back(node);
  if (!gone.empty()) {
    std::lock_guard lock(mu);  // the worker drops their decoder streams before its next one
    pending_forget.insert(pending_forget.end(), gone.begin(), gone.end());
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
void FleetView::Impl::sync_decoder_stats() {
  st.waiting = decoder.waiting();
  st.bus_streams = decoder.streams();
  st.bus_state_bytes = decoder.state_bytes();
  st.bus_evicted = decoder.evicted();
  refused[static_cast<std::size_t>(FleetRefusal::seq_stale)] = decoder.stale();
  refused[static_cast<std::size_t>(FleetRefusal::waiting)] = decoder.waiting();
  refused[static_cast<std::size_t>(FleetRefusal::seq_jump)] = decoder.jumps();
}

void FleetView::Impl::arm() {
  const auto period = std::clamp(options.stale_after / 5, std::chrono::milliseconds(20),
                                 std::chrono::milliseconds(1000));
  timer.expires_after(period);
  timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->stopped) return;
    self->sweep(self->clock());
    self->arm();
  });
}

FleetStats FleetView::Impl::st_copy() const {
  FleetStats out;
  {
    std::lock_guard lock(mu);
    out = st;
    out.nodes_up = table.count(NodeState::up);
    out.nodes_stale = table.count(NodeState::stale);
    out.nodes_gone = table.count(NodeState::gone);
  }
  out.outages = outages;
  out.reconnects = reconnects;
  out.kv_created = kv_created;
  out.kv_rereads = kv_rereads;
  out.kv_base_fetches = kv_base_fetches;
  out.auth_reloads = auth_reloads;
  out.auth_reload_failures = auth_reload_failures;
  out.messages = messages;
  out.bytes = bytes;
  for (std::size_t i = 0; i < kFleetRefusalCount; ++i) out.refused[i] = refused[i];
  out.nodes_refused = out.refused[static_cast<std::size_t>(FleetRefusal::node_table_full)];
  for (const auto r :
       {FleetRefusal::bad_subject, FleetRefusal::subject_mismatch, FleetRefusal::too_large,
        FleetRefusal::malformed, FleetRefusal::inflation, FleetRefusal::too_many_devices,
        FleetRefusal::too_many_streams, FleetRefusal::republished, FleetRefusal::key_mismatch,
        FleetRefusal::bad_key})
    out.rejected += out.refused[static_cast<std::size_t>(r)];
  out.decode_cpu_ns = decode_cpu_ns;
  out.pending = intake.pending();
  out.pending_bytes = intake.pending_bytes();
  out.publishers = intake.publishers();
  return out;
}

FleetView::FleetView(const asio::any_io_executor& ex, SnapshotChannel& channel,
                     FleetOptions options)
    : impl_(std::make_shared<Impl>(ex, channel, std::move(options))) {}

FleetView::~FleetView() { stop(); }

void FleetView::start() { impl_->start(); }

NatsAuthChange FleetView::set_auth(NatsAuth auth, std::string* error) {
  if (auto e = nats_auth_error(auth); !e.empty()) {
    if (error) *error = std::move(e);
    ++impl_->auth_reload_failures;
    return NatsAuthChange::refused;
  }
  if (auth.inbox_prefix.empty()) auth.inbox_prefix = kFleetInboxPrefix;
  std::lock_guard lock(impl_->kv_mu);
  if (!impl_->kv_thread.joinable() || impl_->stopping) {
    if (error) *error = "the fleet view is not running";
    return NatsAuthChange::refused;
  }
  if (auth == (impl_->new_auth ? *impl_->new_auth : impl_->auth)) return NatsAuthChange::unchanged;
  impl_->new_auth = std::move(auth);
  impl_->kv_cv.notify_all();
  return NatsAuthChange::reconnecting;
}
void FleetView::stop() {
  if (impl_) impl_->stop();
}

std::vector<NodeInfo> FleetView::nodes() const {
  std::lock_guard lock(impl_->mu);
  return impl_->table.nodes();
}

FleetStats FleetView::stats() const {
  auto s = impl_->st_copy();
  s.connected = impl_->connected();
  return s;
}

bool FleetView::wait_for_bucket(std::chrono::milliseconds timeout) {
  return impl_->wait_for_bucket(timeout);
}

void FleetView::on_message(std::string_view data, std::string_view subject) {
  impl_->deliver(data, subject, {});
  if (!impl_->worker.joinable()) process_pending();
}

void FleetView::deliver(std::string_view data, std::string_view subject,
                        std::string_view republished_by) {
  impl_->deliver(data, subject, republished_by);
}

std::size_t FleetView::process_pending() {
  std::size_t n = 0;
  while (impl_->run_one(impl_->intake.try_pop())) ++n;
  return n;
}

void FleetView::sweep(NodeTable::Clock::time_point now) { impl_->sweep(now); }

std::function<std::string()> FleetView::metrics() {
  std::weak_ptr<Impl> weak = impl_;
  return [weak]() -> std::string {
    auto self = weak.lock();
    if (!self) return {};
    auto st = self->st_copy();
    st.connected = self->connected();
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
    // Issue 27: what the bus's publishers were refused, and what decoding cost.
    out +=
        "# HELP gpustream_fleet_messages_refused_total Bus messages refused, by reason (the "
        "publisher's budget, its queue, the subject, the node table, the decoder).\n"
        "# TYPE gpustream_fleet_messages_refused_total counter\n";
    for (std::size_t i = 0; i < kFleetRefusalCount; ++i)
      out += fmt::format("gpustream_fleet_messages_refused_total{{reason=\"{}\"}} {}\n",
                         to_string(static_cast<FleetRefusal>(i)), st.refused[i]);
    family("gpustream_fleet_nodes_refused_total", "counter",
           "Messages of new nodes refused because the node table was full (--max-nodes).",
           st.nodes_refused);
    out += fmt::format(
        "# HELP gpustream_fleet_decode_cpu_seconds_total CPU time spent decoding bus messages.\n"
        "# TYPE gpustream_fleet_decode_cpu_seconds_total counter\n"
        "gpustream_fleet_decode_cpu_seconds_total {:.6f}\n",
        static_cast<double>(st.decode_cpu_ns) / 1e9);
    family("gpustream_fleet_pending_messages", "gauge",
           "Bus messages queued for decoding (per publisher, bounded).", st.pending);
    family("gpustream_fleet_pending_bytes", "gauge", "Their bytes as received.", st.pending_bytes);
    family("gpustream_fleet_publishers", "gauge",
           "Publishers (nodes) with a budget entry (at most --max-nodes).", st.publishers);
    // Issue 28: the connection to NATS, the bucket, and the nodes by state.
    family("gpustream_fleet_nats_connected", "gauge",
           "1 while the view is connected to NATS, 0 while it is not (reconnecting).",
           st.connected ? 1 : 0);
    family("gpustream_fleet_nats_outages_total", "counter",
           "Times the view lost NATS (each outage once, however long).", st.outages);
    family("gpustream_fleet_nats_reconnects_total", "counter",
           "Times NATS came back after an outage.", st.reconnects);
    family("gpustream_fleet_kv_created_total", "counter",
           "Times this view created the key-value bucket (at start, or after NATS lost it).",
           st.kv_created);
    out += fmt::format(
        "# HELP gpustream_fleet_nodes Nodes the view knows, by state (at most --max-nodes).\n"
        "# TYPE gpustream_fleet_nodes gauge\n"
        "gpustream_fleet_nodes{{state=\"up\"}} {}\n"
        "gpustream_fleet_nodes{{state=\"stale\"}} {}\n"
        "gpustream_fleet_nodes{{state=\"gone\"}} {}\n",
        st.nodes_up, st.nodes_stale, st.nodes_gone);
    // One series per node up (1) or stale (0); a gone node has none. At most --max-nodes lines.
    out +=
        "# HELP gpustream_fleet_node_up 1 while a node is up, 0 while it is stale (a gone node "
        "has no series).\n"
        "# TYPE gpustream_fleet_node_up gauge\n";
    std::vector<std::pair<std::string, NodeState>> states;
    {
      std::lock_guard lock(self->mu);  // the worker waits meanwhile: a copy of names only
      states = self->table.states();
    }
    for (const auto& [name, state] : states)
      if (state != NodeState::gone) {
        out += "gpustream_fleet_node_up{node=\"";
        out += name;
        out += state == NodeState::up ? "\"} 1\n" : "\"} 0\n";
      }
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
