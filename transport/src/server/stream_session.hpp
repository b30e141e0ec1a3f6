// The protocol logic every streaming connection shares (TCP lines, WebSocket frames): hello,
// subscribe (filters, projection, rate limit, resume from the history), the bounded send queue
// with one write in flight, gaps, slow-client detection, graceful close.
//
// Per-client bounds, each owned here: the send queue (limits.send_queue_messages snapshots and
// limits.send_queue_bytes bytes — the hello and the message being written included, each
// message at its full size even when its buffer is shared — plus a small slack for control
// messages; a message larger than the whole budget is never queued), the messages a
// client may send (limits.max_client_messages, of which limits.max_subscribes_per_connection
// subscribes), and the subscription itself (bounded by the message size).
//
// A transport derives from it and implements write() and close_transport(). Everything runs
// on the core's strand.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include "server/server_core.hpp"
#include "wire/encoder.hpp"

namespace gpustream::transport {

class StreamSession : public Connection, public std::enable_shared_from_this<StreamSession> {
 public:
  using Clock = std::chrono::steady_clock;

  StreamSession(std::shared_ptr<ServerCore> core, ConnKind kind, boost::asio::ip::address peer);
  ~StreamSession() override;

  /// A snapshot fanned out by the core.
  void on_live(const SnapshotPtr& s);
  /// A GPU event fanned out by the core, with its encoded message. Sent when the client's
  /// subscription selects its probe and device; dropped (counted) when the queue is full.
  void on_event(const EventPtr& e, const std::shared_ptr<const std::string>& message);
  /// The core's own channel subscription lost snapshots.
  void on_channel_gap(const Gap& g);
  void shutdown(bool graceful) override;
  /// Called periodically by the core: disconnects a client whose write is stalled or whose
  /// queue stayed full too long, and (TCP) one that stayed idle too long.
  void check_stalled(Clock::time_point now);

 protected:
  /// Write `msg` (TCP: all of it; WebSocket: without its trailing '\n'). True: all of it was
  /// written before returning (write_done is not called). False: the write goes on
  /// asynchronously and must call write_done(ec) exactly once, never from inside write().
  virtual bool write(std::shared_ptr<const std::string> msg) = 0;
  /// graceful: the queue is flushed; send a close frame / FIN and close. Else abort now.
  virtual void close_transport(bool graceful) = 0;

  /// Registers with the core; call once the object is owned by a shared_ptr.
  void register_self();
  /// Sends hello; the client receives live snapshots from then on.
  void open();
  /// One inbound message (a line or a text frame); counted against the message budget.
  void handle_message(std::string_view text);
  void write_done(const boost::system::error_code& ec);
  /// Queues an error message; with then_close, closes once it is flushed.
  /// `id`: the refused request's id (a fit's), echoed in the error.
  void send_error(std::string_view code, std::string_view message, bool then_close,
                  std::string_view id = {});
  /// The transport failed (read or write error): close without flushing.
  void transport_failed();
  /// Something arrived from the client (for the TCP idle timeout).
  void touched() { last_activity_ = Clock::now(); }

  ServerCore& core() noexcept { return *core_; }
  const SessionContext& ctx() const noexcept { return core_->context(); }
  bool closing() const noexcept { return closing_; }
  bool closed() const noexcept { return closed_; }

 private:
  struct RateState {
    Clock::time_point next_allowed{};
    SnapshotPtr pending;
  };
  struct Queued {
    std::shared_ptr<const std::string> message;
    bool snapshot;
  };

  bool accepts(const GpuSnapshot& s) const;
  void apply_subscribe(const SubscribeRequest& r);
  void offer(const SnapshotPtr& s);  // rate limit, then send
  void send_snapshot(const SnapshotPtr& s);
  /// `s` is larger than the whole budget: skipped, counted, the client told once.
  void skip_too_large(const SnapshotPtr& s);
  bool queue_full(std::size_t next_bytes) const noexcept;
  /// The server holds more than limits.retained_bytes of shared messages and this client
  /// already has a snapshot waiting: it takes no new one.
  bool retained_full() const noexcept;
  void flush_gap();
  void enqueue(std::shared_ptr<const std::string> msg, bool snapshot);
  void enqueue(std::string msg) {
    enqueue(std::make_shared<const std::string>(std::move(msg)), false);
  }
  void pump();
  /// Moves history snapshots into the queue while a replay runs and the queue has room.
  void fill_from_replay();
  /// The message being written is written: its bytes leave the budget.
  void written();
  void arm_rate_timer();
  /// The rate slot whose waiting snapshot is the oldest (lowest sequence), or null.
  RateState* oldest_pending();
  void on_rate_timer();
  Clock::duration rate_period() const;
  void disconnect_slow(const char* why, bool stalled);

  std::shared_ptr<ServerCore> core_;
  bool registered_ = false;

  std::deque<Queued> queue_;
  std::size_t queued_snapshots_ = 0;
  std::size_t queued_bytes_ = 0;
  std::size_t inflight_bytes_ = 0;  // the message being written (counted in the budget too)
  bool told_too_large_ = false;     // the `message_too_large` error is sent once
  bool writing_ = false;
  Clock::time_point write_started_{};
  Clock::time_point last_activity_ = Clock::now();
  std::optional<Clock::time_point> full_since_;
  std::uint64_t dropped_pending_ = 0;  // snapshots dropped since the last queued one
  std::uint64_t last_queued_seq_ = 0;

  bool opened_ = false;
  bool closing_ = false;  // no new messages; close once flushed
  bool closed_ = false;   // close_transport called

  SubscribeRequest sub_;
  Projection proj_;
  std::size_t subscribes_ = 0;
  std::size_t messages_ = 0;
  std::uint64_t cursor_ = 0;  // highest sequence considered (sent, filtered or rate-dropped)
  // Sequences streamed live, unfiltered, between hello and the first subscribe: a replay
  // requested by that subscribe skips them (the client has them already).
  std::uint64_t streamed_from_ = 0, streamed_to_ = 0;
  bool replaying_ = false;
  std::deque<SnapshotPtr> replay_;

  /// Rate slots keyed by (node, probe): a fleet's nodes share probe names, and one slot per
  /// probe let one node's snapshots take every slot (issue 27).
  std::map<std::pair<std::string, std::string>, RateState> rate_;
  boost::asio::steady_timer rate_timer_;
  bool rate_timer_armed_ = false;
};

}  // namespace gpustream::transport
