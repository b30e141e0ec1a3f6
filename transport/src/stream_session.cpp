// The protocol logic shared by the TCP and WebSocket sessions.
#include "stream_session.hpp"

#include <algorithm>

#include "gpustream/log.hpp"

namespace gpustream::transport {

namespace {
/// Control messages (errors, acks, gaps) a client that does not read may accumulate beyond its
/// snapshot queue before it is treated as a slow client.
constexpr std::size_t kControlSlack = 64;
}  // namespace

StreamSession::StreamSession(std::shared_ptr<Hub> hub, ConnKind kind)
    : hub_(std::move(hub)), kind_(kind), rate_timer_(hub_->strand()) {}

StreamSession::~StreamSession() {
  if (registered_) {
    hub_->remove_stream(this);
    hub_->remove(this, kind_);
  }
}

void StreamSession::register_self() {
  registered_ = true;
  hub_->add(this, weak_from_this(), kind_);
  hub_->add_stream(this, weak_from_this());
}

void StreamSession::open() {
  if (opened_ || closing_) return;
  opened_ = true;
  std::uint64_t last = 0;
  enqueue(hub_->hello(&last));
  cursor_ = last;
  last_queued_seq_ = last;
  pump();
}

bool StreamSession::accepts(const GpuSnapshot& s) const {
  if (!sub_.probes.empty() &&
      std::find(sub_.probes.begin(), sub_.probes.end(), s.probe) == sub_.probes.end())
    return false;
  if (!proj_.devices.empty()) {
    const bool any = std::any_of(s.devices.begin(), s.devices.end(), [&](const DeviceSample& d) {
      return std::binary_search(proj_.devices.begin(), proj_.devices.end(), d.id);
    });
    if (!any) return false;
  }
  return true;
}

void StreamSession::on_live(const SnapshotPtr& s) {
  if (!opened_ || closing_ || replaying_) return;  // a replay fetches from the history itself
  if (s->sequence <= cursor_) return;              // already sent from the history
  cursor_ = s->sequence;
  if (!accepts(*s)) return;
  offer(s);
  pump();
}

void StreamSession::on_channel_gap(const Gap& g) {
  if (!opened_ || closing_ || replaying_) return;
  enqueue(gap_message(g));
  cursor_ = std::max(cursor_, g.after_sequence + g.missed);
  pump();
}

void StreamSession::offer(const SnapshotPtr& s) {
  if (!sub_.max_rate_hz) {
    send_snapshot(s);
    return;
  }
  // Rate limit per probe, newest wins: a snapshot that comes too soon waits (replacing the one
  // that waited before it) until the probe's next slot.
  auto& r = rate_[s->probe];
  const auto now = Clock::now();
  if (!r.pending && now >= r.next_allowed) {
    r.next_allowed = now + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(1.0 / *sub_.max_rate_hz));
    send_snapshot(s);
  } else {
    r.pending = s;
    arm_rate_timer();
  }
}

void StreamSession::arm_rate_timer() {
  if (rate_timer_armed_) return;
  std::optional<Clock::time_point> due;
  for (const auto& [probe, r] : rate_)
    if (r.pending && (!due || r.next_allowed < *due)) due = r.next_allowed;
  if (!due) return;
  rate_timer_armed_ = true;
  rate_timer_.expires_at(*due);
  rate_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    self->rate_timer_armed_ = false;
    if (!ec) self->on_rate_timer();
  });
}

void StreamSession::on_rate_timer() {
  if (closing_ || replaying_) return;
  const auto now = Clock::now();
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(1.0 / sub_.max_rate_hz.value_or(kMaxRateHz)));
  std::vector<SnapshotPtr> due;
  for (auto& [probe, r] : rate_) {
    if (r.pending && now >= r.next_allowed) {
      due.push_back(std::move(r.pending));
      r.pending.reset();
      r.next_allowed = now + period;
    }
  }
  std::sort(due.begin(), due.end(),
            [](const SnapshotPtr& a, const SnapshotPtr& b) { return a->sequence < b->sequence; });
  for (const auto& s : due) send_snapshot(s);
  arm_rate_timer();
  pump();
}

void StreamSession::send_snapshot(const SnapshotPtr& s) {
  auto& c = hub_->stats_counters();
  if (queued_snapshots_ >= hub_->limits().send_queue_messages) {
    ++dropped_pending_;
    c.snapshots_dropped.fetch_add(1, std::memory_order_relaxed);
    if (!full_since_) full_since_ = Clock::now();
    return;
  }
  flush_gap();
  enqueue(hub_->encoded(s, proj_), true);
  last_queued_seq_ = s->sequence;
  c.snapshots_sent.fetch_add(1, std::memory_order_relaxed);
}

void StreamSession::flush_gap() {
  if (dropped_pending_ == 0) return;
  enqueue(
      gap_message(Gap{last_queued_seq_, dropped_pending_, std::string(kGapDroppedSlowSubscriber)}));
  dropped_pending_ = 0;
}

void StreamSession::enqueue(std::shared_ptr<const std::string> msg, bool snapshot) {
  if (closed_) return;
  if (!snapshot && queue_.size() >= hub_->limits().send_queue_messages + kControlSlack) {
    disconnect_slow("too many unsent control messages");
    return;
  }
  queue_.emplace_back(std::move(msg), snapshot);
  if (snapshot) ++queued_snapshots_;
}

void StreamSession::pump() {
  const auto limit = hub_->limits().send_queue_messages;
  while (replaying_ && !closing_ && queued_snapshots_ < limit) {
    if (replay_.empty()) {
      std::optional<Gap> gap;
      auto more = hub_->channel().history_since(cursor_, &gap);
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
    SnapshotPtr s = std::move(replay_.front());
    replay_.pop_front();
    if (s->sequence <= cursor_) continue;
    cursor_ = s->sequence;
    if (accepts(*s)) send_snapshot(s);
  }
  if (!writing_ && !closed_ && !queue_.empty()) {
    auto [msg, snapshot] = std::move(queue_.front());
    queue_.pop_front();
    if (snapshot) --queued_snapshots_;
    writing_ = true;
    write_started_ = Clock::now();
    write(std::move(msg));
  } else if (closing_ && !writing_ && !closed_ && queue_.empty()) {
    closed_ = true;
    close_transport(true);
  }
}

void StreamSession::write_done(const boost::system::error_code& ec) {
  writing_ = false;
  if (ec) {
    transport_failed();
    return;
  }
  if (queued_snapshots_ < hub_->limits().send_queue_messages) {
    full_since_.reset();
    flush_gap();  // tell the client about its loss now, not with the next snapshot
  }
  pump();
}

void StreamSession::check_stalled(Clock::time_point now) {
  if (closed_) return;
  const auto& l = hub_->limits();
  if (writing_ && now - write_started_ > l.write_timeout) {
    disconnect_slow("a write stalled");
  } else if (full_since_ && now - *full_since_ > l.slow_client_timeout) {
    disconnect_slow("its send queue stayed full");
  }
}

void StreamSession::disconnect_slow(const char* why) {
  if (closed_) return;
  hub_->stats_counters().slow_clients_disconnected.fetch_add(1, std::memory_order_relaxed);
  logger()->debug("disconnecting a slow client: {}", why);
  closing_ = true;
  closed_ = true;
  queue_.clear();
  queued_snapshots_ = 0;
  close_transport(false);
}

void StreamSession::transport_failed() {
  closing_ = true;
  if (closed_) return;
  closed_ = true;
  queue_.clear();
  queued_snapshots_ = 0;
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
  pump();  // closes now when nothing is queued or in flight, else after the last write
}

void StreamSession::send_error(std::string_view code, std::string_view message, bool then_close) {
  if (closing_) return;
  enqueue(error_message(code, message));
  if (then_close)
    shutdown(true);
  else
    pump();
}

void StreamSession::handle_message(std::string_view text) {
  if (closing_) return;
  auto& c = hub_->stats_counters();
  ClientMessage m;
  try {
    m = parse_client_message(text);
  } catch (const ProtocolError& e) {
    c.messages_rejected.fetch_add(1, std::memory_order_relaxed);
    send_error(e.code(), e.what(), false);
    return;
  }
  if (m.kind == ClientMessage::Kind::auth) return;  // already authorized (or no token)
  if (++subscribes_ > hub_->limits().max_subscribes_per_connection) {
    c.messages_rejected.fetch_add(1, std::memory_order_relaxed);
    send_error(kErrLimit,
               "too many subscribe messages on this connection (limit " +
                   std::to_string(hub_->limits().max_subscribes_per_connection) + ")",
               false);
    return;
  }
  apply_subscribe(m.subscribe);
}

void StreamSession::apply_subscribe(const SubscribeRequest& r) {
  sub_ = r;
  proj_ = Projection::make(r.devices, r.fields);
  rate_.clear();  // snapshots waiting for a rate slot are dropped with the old subscription
  std::optional<std::uint64_t> since = r.since;
  if (since) {
    // A `since` beyond our last sequence comes from before a server restart (sequences start
    // again at 1): resume from the start of what we hold.
    if (*since > hub_->channel().last_sequence()) since = 0;
    cursor_ = *since;
    last_queued_seq_ = *since;
    dropped_pending_ = 0;
    replaying_ = true;
    replay_.clear();
  }
  enqueue(subscribed_message(r, since));
  pump();
}

}  // namespace gpustream::transport
