// The protocol logic shared by the TCP and WebSocket sessions.
#include "server/stream_session.hpp"

#include <algorithm>

#include "gpustream/log.hpp"

namespace gpustream::transport {

namespace {
/// Control messages (errors, acks, gaps) a client that does not read may accumulate beyond its
/// snapshot queue before it is treated as a slow client: this many, and this many bytes.
constexpr std::size_t kControlSlack = 64;
constexpr std::size_t kControlSlackBytes = 256 * 1024;
/// max_rate_hz is in (0, 1000]: its period is clamped to [1 ms, 1 day] (a smaller rate would
/// overflow the clock's duration; once a day is the slowest rate served).
constexpr std::chrono::duration<double> kMinRatePeriod{0.001};
constexpr std::chrono::duration<double> kMaxRatePeriod{86400.0};

std::vector<std::string> missing(const std::vector<std::string>& asked,
                                 const std::vector<std::string>& known) {
  std::vector<std::string> out;
  for (const auto& a : asked)
    if (!std::binary_search(known.begin(), known.end(), a)) out.push_back(a);
  return out;
}

}  // namespace

StreamSession::StreamSession(std::shared_ptr<ServerCore> core, ConnKind kind,
                             boost::asio::ip::address peer)
    : Connection(kind, std::move(peer)), core_(std::move(core)), rate_timer_(ctx().strand) {}

StreamSession::~StreamSession() {
  if (registered_) {
    ctx().registry.remove_stream(this);
    core_->remove(this);
  }
}

void StreamSession::register_self() {
  registered_ = true;
  ctx().registry.add(this, weak_from_this());
  ctx().registry.add_stream(this, weak_from_this());
}

void StreamSession::open() {
  if (opened_ || closing_) return;
  opened_ = true;
  std::uint64_t last = 0;
  auto hello = core_->hello(&last);
  if (hello->size() > ctx().limits.send_queue_bytes) {
    // The hello lists every device; one that cannot fit the budget is never queued.
    ServerMetrics::bump(ctx().metrics.messages_too_large);
    send_error(kErrMessageTooLarge,
               "the hello (" + std::to_string(hello->size()) +
                   " bytes: every device) is larger than this connection's send budget (" +
                   std::to_string(ctx().limits.send_queue_bytes) + " bytes)",
               true);
    return;
  }
  enqueue(std::move(hello), false);
  cursor_ = last;
  last_queued_seq_ = last;
  streamed_from_ = streamed_to_ = last;
  pump();
}

bool StreamSession::accepts(const GpuSnapshot& s) const {
  if (!sub_.probes.empty() &&
      std::find(sub_.probes.begin(), sub_.probes.end(), s.probe) == sub_.probes.end())
    return false;
  if (!proj_.devices.empty())
    return std::any_of(s.devices.begin(), s.devices.end(), [&](const DeviceSample& d) {
      return std::binary_search(proj_.devices.begin(), proj_.devices.end(), d.id);
    });
  return true;
}

void StreamSession::on_live(const SnapshotPtr& s) {
  if (!opened_ || closing_ || replaying_) return;  // a replay fetches from the history itself
  if (s->sequence <= cursor_) return;              // already sent from the history
  cursor_ = s->sequence;
  if (subscribes_ == 0) streamed_to_ = s->sequence;
  if (!accepts(*s)) return;
  offer(s);
  pump();
}

void StreamSession::on_event(const EventPtr& e, const std::shared_ptr<const std::string>& message) {
  if (!opened_ || closing_) return;
  if (!sub_.probes.empty() &&
      std::find(sub_.probes.begin(), sub_.probes.end(), e->probe) == sub_.probes.end())
    return;
  if (!proj_.devices.empty() &&
      !std::binary_search(proj_.devices.begin(), proj_.devices.end(), e->device_id))
    return;
  auto& m = ctx().metrics;
  // Events share the snapshots' bound (count and bytes): a storm cannot grow the queue.
  if (queue_full(message->size())) {
    ServerMetrics::bump(m.events_dropped);
    if (!full_since_) full_since_ = Clock::now();
    return;
  }
  enqueue(message, true);
  ServerMetrics::bump(m.events_sent);
  pump();
}

void StreamSession::on_channel_gap(const Gap& g) {
  if (!opened_ || closing_ || replaying_) return;
  enqueue(gap_message(g));
  cursor_ = std::max(cursor_, g.after_sequence + g.missed);
  pump();
}

StreamSession::Clock::duration StreamSession::rate_period() const {
  const std::chrono::duration<double> p(1.0 / sub_.max_rate_hz.value_or(kMaxRateHz));
  return std::chrono::duration_cast<Clock::duration>(std::clamp(p, kMinRatePeriod, kMaxRatePeriod));
}

void StreamSession::offer(const SnapshotPtr& s) {
  if (!sub_.max_rate_hz) {
    send_snapshot(s);
    return;
  }
  // Rate limit per node and probe, newest wins: a snapshot that comes too soon waits (replacing
  // the one that waited before it) until its (node, probe)'s next slot. Snapshots still leave in
  // sequence order: while an older one of another slot waits, a newer one waits behind it.
  auto& r = rate_[{s->node, s->probe}];
  const auto now = Clock::now();
  if (now >= r.next_allowed && !oldest_pending()) {
    r.next_allowed = now + rate_period();
    send_snapshot(s);
  } else {
    r.pending = s;
    arm_rate_timer();
  }
}

StreamSession::RateState* StreamSession::oldest_pending() {
  RateState* oldest = nullptr;
  for (auto& [key, r] : rate_)
    if (r.pending && (!oldest || r.pending->sequence < oldest->pending->sequence)) oldest = &r;
  return oldest;
}

void StreamSession::arm_rate_timer() {
  if (rate_timer_armed_) return;
  // The oldest waiting snapshot goes first; everything newer waits behind it.
  const auto* oldest = oldest_pending();
  if (!oldest) return;
  rate_timer_armed_ = true;
  rate_timer_.expires_at(oldest->next_allowed);
  rate_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    self->rate_timer_armed_ = false;
    if (!ec) self->on_rate_timer();
  });
}

void StreamSession::on_rate_timer() {
  if (closing_ || replaying_) return;
  const auto now = Clock::now();
  // In sequence order, as long as the oldest waiting snapshot's slot has come.
  while (auto* r = oldest_pending()) {
    if (now < r->next_allowed) break;
    auto s = std::move(r->pending);
    r->pending.reset();
    r->next_allowed = now + rate_period();
    send_snapshot(s);
    if (closing_) return;
  }
  arm_rate_timer();
  pump();
}

bool StreamSession::queue_full(std::size_t next_bytes) const noexcept {
  // Every byte counts, the message being written included: an empty queue does not take a
  // message that does not fit (issue 27: it took any single one).
  const auto& l = ctx().limits;
  return queued_snapshots_ >= l.send_queue_messages ||
         queued_bytes_ + inflight_bytes_ + next_bytes > l.send_queue_bytes;
}

bool StreamSession::retained_full() const noexcept {
  return queued_snapshots_ > 0 && ctx().metrics.encoded_bytes_live->load(
                                      std::memory_order_relaxed) > ctx().limits.retained_bytes;
}

void StreamSession::skip_too_large(const SnapshotPtr& s) {
  ServerMetrics::bump(ctx().metrics.messages_too_large);
  if (told_too_large_) return;
  told_too_large_ = true;
  enqueue(error_message(
      kErrMessageTooLarge,
      "snapshot " + std::to_string(s->sequence) + " (probe '" + s->probe + "'" +
          (s->node.empty() ? std::string() : ", node '" + s->node + "'") +
          ") is larger than this connection's send budget (" +
          std::to_string(ctx().limits.send_queue_bytes) +
          " bytes): it is skipped, and so is every such snapshot after it (said once)"));
}

void StreamSession::send_snapshot(const SnapshotPtr& s) {
  auto& m = ctx().metrics;
  std::shared_ptr<const std::string> msg;
  if (queued_snapshots_ < ctx().limits.send_queue_messages) {
    msg = core_->encoded(s, proj_.of(*s));
    if (!msg) {
      skip_too_large(s);
      return;
    }
  }
  if (!msg || queue_full(msg->size()) || retained_full()) {
    ++dropped_pending_;
    ServerMetrics::bump(m.snapshots_dropped);
    if (!full_since_) full_since_ = Clock::now();
    return;
  }
  flush_gap();
  enqueue(std::move(msg), true);
  last_queued_seq_ = s->sequence;
  ServerMetrics::bump(m.snapshots_sent);
}

void StreamSession::flush_gap() {
  if (dropped_pending_ == 0) return;
  enqueue(
      gap_message(Gap{last_queued_seq_, dropped_pending_, std::string(kGapDroppedSlowSubscriber)}));
  dropped_pending_ = 0;
}

void StreamSession::enqueue(std::shared_ptr<const std::string> msg, bool snapshot) {
  if (closed_) return;
  const auto& l = ctx().limits;
  if (!snapshot && (queue_.size() >= l.send_queue_messages + kControlSlack ||
                    queued_bytes_ + inflight_bytes_ > l.send_queue_bytes + kControlSlackBytes)) {
    disconnect_slow("too many unsent control messages", false);
    return;
  }
  queued_bytes_ += msg->size();
  queue_.push_back({std::move(msg), snapshot});
  if (snapshot) ++queued_snapshots_;
}

void StreamSession::pump() {
  // A write the transport completes at once (a TCP socket with room for the line: the common
  // case of a live snapshot) is followed by the next one here, without a handler in between.
  for (;;) {
    fill_from_replay();
    if (writing_ || closed_ || queue_.empty()) break;
    auto q = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= q.message->size();
    inflight_bytes_ = q.message->size();
    if (q.snapshot) --queued_snapshots_;
    writing_ = true;
    write_started_ = Clock::now();
    if (!write(std::move(q.message))) return;  // write_done() pumps on
    written();
  }
  if (closing_ && !writing_ && !closed_ && queue_.empty()) {
    closed_ = true;
    close_transport(true);
  }
}

void StreamSession::fill_from_replay() {
  // The replay is paced by the client's reading: it stops when the queue is full and goes on
  // after the next write.
  while (replaying_ && !closing_) {
    if (replay_.empty()) {
      std::optional<Gap> gap;
      auto more = core_->channel().history_since(cursor_, &gap);
      if (gap) {
        enqueue(gap_message(*gap));
        cursor_ = std::max(cursor_, gap->after_sequence + gap->missed);
      }
      if (more.empty()) {
        // Caught up. Go live only once the queue is empty, so that a burst of live snapshots
        // right after the replay finds room; until then the history keeps feeding us.
        if (queued_snapshots_ == 0) replaying_ = false;
        break;
      }
      replay_.assign(more.begin(), more.end());
    }
    const SnapshotPtr& s = replay_.front();
    const bool has_it = s->sequence > streamed_from_ && s->sequence <= streamed_to_;
    if (s->sequence <= cursor_ || has_it || !accepts(*s)) {
      cursor_ = std::max(cursor_, s->sequence);
      replay_.pop_front();
      continue;
    }
    if (queued_snapshots_ >= ctx().limits.send_queue_messages) break;
    auto msg = core_->encoded(s, proj_.of(*s));
    if (!msg) {
      skip_too_large(s);
      cursor_ = std::max(cursor_, s->sequence);
      replay_.pop_front();
      continue;
    }
    if (queue_full(msg->size()) || retained_full()) break;
    cursor_ = s->sequence;
    last_queued_seq_ = s->sequence;
    replay_.pop_front();
    enqueue(std::move(msg), true);
    ServerMetrics::bump(ctx().metrics.snapshots_sent);
  }
}

void StreamSession::written() {
  writing_ = false;
  inflight_bytes_ = 0;
  last_activity_ = Clock::now();
  if (!closing_ && !queue_full(0)) {
    full_since_.reset();
    flush_gap();  // tell the client about its loss now, not with the next snapshot
  }
}

void StreamSession::write_done(const boost::system::error_code& ec) {
  if (ec) {
    writing_ = false;
    inflight_bytes_ = 0;
    transport_failed();
    return;
  }
  written();
  pump();
}

void StreamSession::check_stalled(Clock::time_point now) {
  if (closed_) return;
  const auto& l = ctx().limits;
  if (writing_ && now - write_started_ > l.write_timeout) {
    disconnect_slow("a write stalled", true);
  } else if (!closing_ && full_since_ && now - *full_since_ > l.slow_client_timeout) {
    disconnect_slow("its send queue stayed full", false);
  } else if (kind() == ConnKind::tcp && opened_ && !closing_ && !writing_ &&
             now - last_activity_ > l.tcp_idle_timeout) {
    send_error(kErrTimeout,
               "nothing sent or received for " + std::to_string(l.tcp_idle_timeout.count()) +
                   " ms (send an empty line to keep a quiet connection open)",
               true);
  }
}

void StreamSession::disconnect_slow(const char* why, bool stalled) {
  if (closed_) return;
  if (!closing_) ServerMetrics::bump(ctx().metrics.slow_clients_disconnected);
  logger()->debug("disconnecting a slow client: {}", why);
  // What is queued is dropped; the client gets an error after the message being written (so a
  // TCP line is never cut), then the close. A write that stalls is aborted.
  const bool was_closing = closing_;
  closing_ = true;
  replaying_ = false;
  replay_.clear();
  rate_.clear();
  rate_timer_.cancel();  // it holds the session: a day-long rate must not keep it alive
  queue_.clear();
  queued_snapshots_ = 0;
  queued_bytes_ = 0;
  if (stalled || was_closing) {
    closed_ = true;
    close_transport(false);
    return;
  }
  auto msg = std::make_shared<const std::string>(error_message(
      kErrSlowClient, std::string("disconnected: ") + why + " (the client reads too slowly)"));
  queued_bytes_ += msg->size();
  queue_.push_back({std::move(msg), false});
  pump();
}

void StreamSession::transport_failed() {
  closing_ = true;
  rate_timer_.cancel();
  if (closed_) return;
  closed_ = true;
  queue_.clear();
  queued_snapshots_ = 0;
  queued_bytes_ = 0;
  close_transport(false);
}

void StreamSession::shutdown(bool graceful) {
  if (!graceful) {
    transport_failed();
    return;
  }
  if (closing_) return;
  closing_ = true;
  replaying_ = false;
  replay_.clear();
  rate_.clear();
  rate_timer_.cancel();  // it holds the session: a day-long rate must not keep it alive
  pump();  // closes now when nothing is queued or in flight, else after the last write
}

void StreamSession::send_error(std::string_view code, std::string_view message, bool then_close,
                               std::string_view id) {
  if (closing_) return;
  enqueue(error_message(code, message, id));
  if (then_close)
    shutdown(true);
  else
    pump();
}

void StreamSession::handle_message(std::string_view text) {
  if (closing_) return;
  auto& m = ctx().metrics;
  const auto& l = ctx().limits;
  if (++messages_ > l.max_client_messages) {
    ServerMetrics::bump(m.messages_rejected);
    send_error(kErrLimit,
               "too many messages on this connection (limit " +
                   std::to_string(l.max_client_messages) + ")",
               true);
    return;
  }
  ClientMessage msg;
  try {
    msg = parse_client_message(text);
  } catch (const ProtocolError& e) {
    ServerMetrics::bump(m.messages_rejected);
    send_error(e.code(), e.what(), false, e.id());
    return;
  }
  if (msg.kind == ClientMessage::Kind::fit) {
    // Answered at once from the latest snapshots; the answer is a control message (bounded by
    // kFitMaxReplyBytes; a client that asks without reading is disconnected as a slow one).
    enqueue(core_->fit(msg.fit));
    pump();
    return;
  }
  if (msg.kind == ClientMessage::Kind::auth) {
    // Without --token an auth line is ignored (docs/protocol.md); it still counts against
    // max_client_messages above. With a token, a second auth is an error.
    if (!ctx().access.token_required()) return;
    ServerMetrics::bump(m.messages_rejected);
    send_error(kErrBadRequest, "already authenticated (auth is the first TCP line only)", false);
    return;
  }
  if (++subscribes_ > l.max_subscribes_per_connection) {
    ServerMetrics::bump(m.messages_rejected);
    send_error(kErrLimit,
               "too many subscribe messages on this connection (limit " +
                   std::to_string(l.max_subscribes_per_connection) + ")",
               false);
    return;
  }
  apply_subscribe(msg.subscribe);
}

void StreamSession::apply_subscribe(const SubscribeRequest& r) {
  sub_ = r;
  proj_ = Projection::make(r.devices, r.fields);
  rate_.clear();  // snapshots waiting for a rate slot are dropped with the old subscription
  if (subscribes_ > 1) streamed_to_ = streamed_from_;  // only the first subscribe skips
  Subscribed ack;
  ack.request = r;
  if (r.since) {
    // A `since` beyond our last sequence comes from before a server restart (sequences start
    // again at 1): resume from the start of what we hold.
    std::uint64_t since = *r.since;
    if (since > core_->channel().last_sequence()) since = 0;
    // Older history than hello's last_sequence: the replay starts over from there, in order
    // (including what was streamed before this subscribe).
    if (since < streamed_from_) streamed_to_ = streamed_from_;
    ack.request.since = since;
    cursor_ = since;
    last_queued_seq_ = since;
    dropped_pending_ = 0;
    full_since_.reset();
    replaying_ = true;
    replay_.clear();
  }
  ack.unknown_probes = missing(r.probes, core_->known_probes());
  ack.unknown_devices = missing(r.devices, core_->known_devices());
  enqueue(subscribed_message(ack));
  pump();
}

}  // namespace gpustream::transport
