// gpustream/channel.hpp — fan-out of immutable snapshots to in-process subscribers.
//
// SnapshotChannel numbers every published GpuSnapshot (1, 2, 3, ... without gaps), wraps it once
// in a std::shared_ptr<const GpuSnapshot>, keeps the newest per probe and a history ring, and
// hands the same object to every subscriber: no copy per subscriber.
//
// A subscriber is either a callback (Subscription, run on an executor it names) or a queue it
// pops from (SnapshotQueue). Each one has its own bounded queue and backpressure policy, so a
// slow subscriber never blocks the publisher nor delays another subscriber's queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "gpustream/events.hpp"
#include "gpustream/model.hpp"

namespace gpustream {

using SnapshotPtr = std::shared_ptr<const GpuSnapshot>;

/// Bounds of a channel's latest cache (one snapshot per (node, probe)): entries, and bytes
/// (approx_bytes of each snapshot plus its bookkeeping). A fleet of 10,000 nodes with a few
/// probes of 8 GPUs each fits in the defaults.
inline constexpr std::size_t kDefaultLatestCapacity = std::size_t{1} << 18;    // 262,144
inline constexpr std::size_t kDefaultLatestMaxBytes = std::size_t{256} << 20;  // 256 MiB

/// What happens when a subscriber falls behind (its queue holds `capacity` snapshots, or
/// `max_bytes` of them: a queue is full when either bound is reached; it always takes at least
/// one snapshot, however large).
///  - latest:      keep only the newest snapshot per probe; replaced ones count in dropped().
///                 No Gap is reported (a planner only wants the present).
///  - drop_oldest: keep the newest `capacity`; the oldest is dropped, counted in dropped(), and
///                 a Gap is delivered in its place ("dropped_slow_subscriber").
///  - lossless:    keep everything up to `capacity`; beyond it new snapshots are lost, counted
///                 exactly in lost(), and a Gap ("lossless_bound_exceeded") tells the subscriber
///                 where and how many.
enum class Backpressure { latest, drop_oldest, lossless };

std::string_view to_string(Backpressure p) noexcept;
std::optional<Backpressure> backpressure_from_string(std::string_view s) noexcept;

/// Which snapshots a subscriber receives. Each empty vector means "everything"; non-empty
/// vectors must all match.
struct SubscriptionFilter {
  std::vector<std::string> probes;   // the snapshot's probe is one of these
  std::vector<std::string> devices;  // the snapshot contains one of these device ids
  std::vector<Metric> metrics;       // some device has one of these metrics present
  bool matches(const GpuSnapshot& s) const;
  bool empty() const noexcept { return probes.empty() && devices.empty() && metrics.empty(); }
};

/// A hole in a subscriber's stream: after the snapshot numbered `after_sequence` (the last one
/// this subscriber received, or the `since` it resumed from), `missed` of its snapshots were not
/// delivered. `reason` is "dropped_slow_subscriber", "history_too_old",
/// "lossless_bound_exceeded" or (RemoteSubscriber only) "server_restarted". For
/// "history_too_old", `missed` counts channel sequence numbers no longer in the history (some of
/// which the filter might not have matched); for "server_restarted" it is 0: how many the old
/// server published after `after_sequence` is unknown.
struct Gap {
  std::uint64_t after_sequence = 0;
  std::uint64_t missed = 0;
  std::string reason;
  friend bool operator==(const Gap&, const Gap&) = default;
};

inline constexpr std::string_view kGapDroppedSlowSubscriber = "dropped_slow_subscriber";
inline constexpr std::string_view kGapHistoryTooOld = "history_too_old";
/// Only from a RemoteSubscriber: the server was restarted; sequences start again at 1.
inline constexpr std::string_view kGapServerRestarted = "server_restarted";
inline constexpr std::string_view kGapLosslessBoundExceeded = "lossless_bound_exceeded";

struct SubscribeOptions {
  SubscriptionFilter filter;
  Backpressure policy = Backpressure::drop_oldest;
  std::size_t capacity = 64;  // queue bound for this subscriber (at least 1)
  /// Byte bound of this subscriber's queue (approx_bytes of what it holds).
  std::size_t max_bytes = kDefaultSubscriberMaxBytes;
  /// Resume: first deliver the history with sequence > *since, in order, then live snapshots,
  /// with neither a gap nor a duplicate between them. A Gap("history_too_old") comes first when
  /// the history no longer reaches back to *since + 1.
  std::optional<std::uint64_t> since;
  /// Where callbacks run. Default: the channel's executor; callbacks of one subscription never
  /// run concurrently (each subscription is its own strand), whatever the executor.
  std::optional<boost::asio::any_io_executor> executor;
};

namespace detail {
class Subscriber;
class ChannelState;
}  // namespace detail

/// RAII handle of a callback subscriber. Move-only. Destroying it or calling reset()
/// unsubscribes; that is safe from any thread and from inside its own callback. Once reset()
/// returns on a thread other than the one running this subscription's callback, no callback of
/// this subscription is running or will start (reset() waits for a running one to return). So
/// do not reset a subscription while holding a lock that its callback takes.
/// The counters stay readable after reset().
class Subscription {
 public:
  Subscription() noexcept;
  Subscription(Subscription&&) noexcept;
  Subscription& operator=(Subscription&&) noexcept;
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  ~Subscription();

  void reset();
  bool active() const;
  /// latest / drop_oldest: how many snapshots were replaced or dropped.
  std::uint64_t dropped() const;
  /// lossless: how many snapshots were lost beyond the bound.
  std::uint64_t lost() const;

 private:
  friend class SnapshotChannel;
  Subscription(std::shared_ptr<detail::Subscriber>, std::weak_ptr<detail::ChannelState>);
  std::shared_ptr<detail::Subscriber> sub_;
  std::weak_ptr<detail::ChannelState> channel_;
};

/// One item of a pull-style subscriber's stream.
using QueueItem = std::variant<SnapshotPtr, Gap>;

/// Pull-style subscriber with the same policies as a callback subscription. Created by
/// SnapshotChannel::subscribe_queue. Thread-safe: any thread may pop (each item goes to one
/// popper) while the channel publishes. close() — or destroying the queue — unsubscribes,
/// discards what is queued and wakes any waiting pop_for, which then returns nothing. When the
/// channel is destroyed first, what is queued can still be popped and pops no longer wait.
class SnapshotQueue {
 public:
  ~SnapshotQueue();
  SnapshotQueue(const SnapshotQueue&) = delete;
  SnapshotQueue& operator=(const SnapshotQueue&) = delete;

  /// The next item, or nothing when the queue is empty.
  std::optional<QueueItem> try_pop();
  /// The next item, waiting up to `timeout`; nothing on timeout or when closed.
  std::optional<QueueItem> pop_for(std::chrono::steady_clock::duration timeout);
  void close();
  /// True after close() or once the channel is gone.
  bool closed() const;
  /// Snapshots waiting (a pending Gap is not counted).
  std::size_t size() const;
  /// approx_bytes of the snapshots waiting.
  std::size_t bytes() const;
  std::uint64_t dropped() const;
  std::uint64_t lost() const;

 private:
  friend class SnapshotChannel;
  SnapshotQueue(std::shared_ptr<detail::Subscriber>, std::weak_ptr<detail::ChannelState>);
  std::shared_ptr<detail::Subscriber> sub_;
  std::weak_ptr<detail::ChannelState> channel_;
};

/// The hub between probes and consumers.
///
/// Thread safety: every member may be called from any thread, concurrently. publish() never
/// waits for a subscriber and never runs user code: callbacks are posted to each subscriber's
/// executor, with at most one delivery task per subscriber in flight, draining its queue.
/// Each subscriber sees strictly increasing sequence numbers, even with concurrent publishers.
/// Cancellation: reset()/destroy a Subscription, close() a SnapshotQueue. Destroying the channel
/// unsubscribes everyone; snapshots already queued for a callback are still delivered if its
/// executor runs them. The executor must outlive pending deliveries, as usual with Asio.
class SnapshotChannel {
 public:
  /// The history keeps the newest `history_capacity` snapshots, fewer when they exceed
  /// `history_max_bytes` (approx_bytes; at least the newest one is kept). 0 capacity: none.
  /// The latest cache keeps at most `latest_capacity` (node, probe) entries (at least 1) and
  /// `latest_max_bytes` of them; beyond either, the entry published longest ago is evicted
  /// (the newest one is always kept).
  explicit SnapshotChannel(boost::asio::any_io_executor ex, std::size_t history_capacity = 1024,
                           std::size_t history_max_bytes = kDefaultHistoryMaxBytes,
                           std::size_t latest_capacity = kDefaultLatestCapacity,
                           std::size_t latest_max_bytes = kDefaultLatestMaxBytes);
  ~SnapshotChannel();
  SnapshotChannel(const SnapshotChannel&) = delete;
  SnapshotChannel& operator=(const SnapshotChannel&) = delete;

  /// Numbers `s` (sets s.sequence), stores it once and queues it for every matching subscriber.
  /// Returns the published object. One allocation (the make_shared) in the steady state.
  SnapshotPtr publish(GpuSnapshot s);

  Subscription subscribe(SubscribeOptions options,
                         std::function<void(const SnapshotPtr&)> on_snapshot,
                         std::function<void(const Gap&)> on_gap = {});
  /// Unsubscribe with SnapshotQueue::close() or by dropping the last shared_ptr.
  std::shared_ptr<SnapshotQueue> subscribe_queue(const SubscribeOptions& options);

  /// The newest snapshot of each probe (of each node: GpuSnapshot::node, for a fleet), in order
  /// of their first publication.
  std::vector<SnapshotPtr> latest() const;
  /// The newest snapshot of `probe`, or null.
  SnapshotPtr latest(std::string_view probe) const;
  /// Drops every latest entry of `node` (a fleet's node that is gone), so latest() no longer
  /// lists it; the history and subscribers' queues are untouched. Returns how many were dropped.
  std::size_t forget_node(std::string_view node);
  /// The latest cache now: entries, their bytes (as bounded), and how many were evicted so far.
  std::size_t latest_size() const;
  std::size_t latest_bytes() const;
  std::uint64_t latest_evicted() const;
  std::size_t latest_capacity() const noexcept;
  std::size_t latest_max_bytes() const noexcept;
  /// History with sequence > seq, oldest first. When the history no longer reaches seq + 1,
  /// *gap (if given) is set to Gap{seq, how many are gone, "history_too_old"}; else reset.
  std::vector<SnapshotPtr> history_since(std::uint64_t seq,
                                         std::optional<Gap>* gap = nullptr) const;
  std::uint64_t last_sequence() const;
  std::size_t subscriber_count() const;
  std::size_t history_capacity() const noexcept;
  std::size_t history_max_bytes() const noexcept;
  /// How many snapshots, and how many bytes of them, the history holds now.
  std::size_t history_size() const;
  std::size_t history_bytes() const;
  /// A random id of this channel's sequence space (16 hex digits), fixed for its lifetime. A
  /// remote client that sees it change knows the sequence numbers started again (a restarted
  /// server), even when the new ones have already passed the client's own.
  const std::string& instance() const noexcept;
  boost::asio::any_io_executor get_executor() const noexcept;

  /// The GPU events that travel next to these snapshots (gpustream/events.hpp): their own
  /// channel, sequence space and bounds, on the same executor. Servers fan them out with the
  /// snapshots (`event` messages).
  EventChannel& events() noexcept { return *events_; }
  const EventChannel& events() const noexcept { return *events_; }

 private:
  std::shared_ptr<detail::ChannelState> state_;
  std::unique_ptr<EventChannel> events_;
};

}  // namespace gpustream
