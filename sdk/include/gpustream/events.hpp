// gpustream/events.hpp — GPU events (Xid errors, ECC errors, clock-event changes, power-source
// changes): what a probe reports between samples, when the vendor tells it something happened.
//
// Events are not snapshots: they happen at an instant, they are not sampled, and a lost one is
// not made up for by the next. They travel on their own channel, next to the snapshots:
//
//   gpustream::Telemetry t(cfg, gpustream::probe_factory());
//   auto sub = t.events().subscribe([](const gpustream::EventPtr& e) {
//     if (e->kind == gpustream::EventKind::xid) page_someone(e->device_id, *e->data);
//   });
//   t.start();
//
// EventChannel numbers every event (1, 2, 3, ... without gaps, its own sequence space), keeps
// the newest few (recent()) and per-device totals (totals(), for Prometheus counters), and hands
// the same immutable GpuEvent to every subscriber. Everything is bounded in count and in bytes,
// so an event storm cannot grow memory: a subscriber that falls behind loses its oldest queued
// events (counted in EventSubscription::dropped() and EventCounters::dropped); a subscriber
// sees a hole in `sequence` where events were dropped.
//
// A subscriber either gets callbacks (subscribe) or pops from a queue of its own
// (subscribe_queue: an EventQueue, for a consumer with a thread of its own, such as the Python
// module's iterator); both have the same bounded queue.
//
// Thread safety: every member may be called from any thread. publish() never waits for a
// subscriber and never runs user code (callbacks are posted, one delivery task per subscriber
// in flight). Cancellation: reset()/destroy the EventSubscription, close()/destroy the
// EventQueue.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

namespace gpustream {

/// What happened. The wire names are to_string()'s.
enum class EventKind : std::uint8_t {
  xid,             // an Xid critical error; data: the Xid number
  ecc_single_bit,  // a corrected (single-bit) ECC error
  ecc_double_bit,  // an uncorrected (double-bit) ECC error
  clock_event,     // the clocks-event (throttle) reasons changed; data: the new reasons mask
  power_source,    // the power source changed (AC / battery)
  pstate,          // the performance state changed
  other,           // a vendor event of another type; data: the vendor's event type bits
};

inline constexpr std::size_t kEventKindCount = 7;

std::string_view to_string(EventKind k) noexcept;
std::optional<EventKind> event_kind_from_string(std::string_view s) noexcept;

/// One event. Immutable once published (shared by every subscriber).
struct GpuEvent {
  std::uint64_t sequence = 0;     // set by EventChannel::publish: 1, 2, 3, ...
  std::int64_t time_unix_ns = 0;  // when the probe received it (wall clock, ns since the epoch)
  std::string probe;              // "nvidia"
  std::string device_id;          // the device's id, as in snapshots (NVIDIA: the UUID)
  EventKind kind = EventKind::other;
  /// Kind-specific value: the Xid number (xid), the clocks-event reasons bit mask
  /// (clock_event), the vendor's event type bits (other). Absent when the vendor gives none.
  std::optional<std::uint64_t> data;
  friend bool operator==(const GpuEvent&, const GpuEvent&) = default;
};

using EventPtr = std::shared_ptr<const GpuEvent>;

/// Xid numbers after which a GPU is not fit for new work until it is reset or the node rebooted:
/// the errors of NVIDIA's Xid catalog whose documented resolution is a GPU reset or a reboot —
/// 48 (double-bit ECC error), 61 and 62 (internal micro-controller breakpoint, halt), 64 (ECC
/// page retirement or row remapping recording failure), 74 (NVLink error), 79 (the GPU has
/// fallen off the bus), 92 (high single-bit ECC error rate), 94 and 95 (contained, uncontained
/// ECC error), 119 and 120 (GSP RPC timeout, GSP error), 140 (unrecovered ECC error). Sorted.
inline constexpr std::uint64_t kFatalXids[] = {48, 61, 62, 64, 74, 79, 92, 94, 95, 119, 120, 140};

/// True for an event after which the device should get no new work (the planner's health rule,
/// gpustream/planner.hpp): an `xid` whose number is in kFatalXids, or an `ecc_double_bit`
/// (an uncorrected ECC error). Clock, power-source and pstate changes, corrected ECC errors,
/// other Xids (most are an application's fault: 13, 31, 43, 45) and vendor events are not.
bool is_fatal(const GpuEvent& e) noexcept;

/// Approximate memory an event takes (the struct and its strings), for the byte bounds.
std::size_t event_bytes(const GpuEvent& e) noexcept;

/// Bounds of an EventChannel, each in count and in bytes.
struct EventLimits {
  std::size_t recent = 256;               // events kept for recent()
  std::size_t recent_bytes = 256 * 1024;  //
  std::size_t queue = 1024;               // per subscriber: events waiting for delivery
  std::size_t queue_bytes = 1024 * 1024;  //
  std::size_t xid_labels = 64;            // distinct Xid numbers counted per device; more
                                          // are counted under xid "other"
  std::size_t devices = 1024;             // devices with totals; more: device "other".
                                          // Also the devices whose last fatal event is
                                          // kept (fatal()); more: the oldest is forgotten
};

/// Channel-wide counters (monotonic).
struct EventCounters {
  std::uint64_t published = 0;
  std::uint64_t dropped = 0;  // queued for a subscriber but discarded (it fell behind)
};

/// Totals since the channel was created, for Prometheus counters.
struct EventTotals {
  /// (device id, kind) → events.
  std::map<std::pair<std::string, EventKind>, std::uint64_t> by_kind;
  /// (device id, Xid number as text, or "other") → xid events.
  std::map<std::pair<std::string, std::string>, std::uint64_t> by_xid;
  EventCounters counters;
};

namespace detail {
class EventSubscriber;
class EventChannelState;
}  // namespace detail

/// RAII handle of an event subscriber. Move-only. Destroying it or calling reset()
/// unsubscribes, from any thread (also from its own callback); once reset() returns on a thread
/// other than the one running this subscription's callback, no callback of it is running or
/// will start. Counters stay readable after reset().
class EventSubscription {
 public:
  EventSubscription() noexcept;
  EventSubscription(EventSubscription&&) noexcept;
  EventSubscription& operator=(EventSubscription&&) noexcept;
  EventSubscription(const EventSubscription&) = delete;
  EventSubscription& operator=(const EventSubscription&) = delete;
  ~EventSubscription();

  void reset();
  bool active() const;
  /// Events discarded because this subscriber's queue was full (the oldest go first).
  std::uint64_t dropped() const;

 private:
  friend class EventChannel;
  explicit EventSubscription(std::shared_ptr<detail::EventSubscriber> sub);
  std::shared_ptr<detail::EventSubscriber> sub_;
};

/// Pull-style event subscriber, from EventChannel::subscribe_queue: the same queue as a callback
/// subscriber's (bounded by EventLimits::queue and queue_bytes; when full, the oldest event is
/// dropped and counted in dropped()), popped by the consumer. Thread-safe: any thread may pop
/// (each event goes to one popper) while the channel publishes. close() — or destroying the
/// queue — unsubscribes, discards what is queued and wakes a waiting pop_for, which then returns
/// null. When the channel is destroyed first, what is queued can still be popped and pops no
/// longer wait.
class EventQueue {
 public:
  ~EventQueue();
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  /// The next event, or null when none is queued.
  EventPtr try_pop();
  /// The next event, waiting up to `timeout`; null on timeout or when closed.
  EventPtr pop_for(std::chrono::steady_clock::duration timeout);
  void close();
  /// True after close() or once the channel is gone.
  bool closed() const;
  /// Events waiting, and event_bytes() of them.
  std::size_t size() const;
  std::size_t bytes() const;
  /// Events discarded because the queue was full (the oldest go first).
  std::uint64_t dropped() const;

 private:
  friend class EventChannel;
  explicit EventQueue(std::shared_ptr<detail::EventSubscriber> sub);
  std::shared_ptr<detail::EventSubscriber> sub_;
};

struct EventSubscribeOptions {
  std::vector<std::string> probes;   // empty: every probe
  std::vector<std::string> devices;  // empty: every device
  /// Where callbacks run (one at a time per subscription). Default: the channel's executor.
  std::optional<boost::asio::any_io_executor> executor;
};

class EventChannel {
 public:
  explicit EventChannel(boost::asio::any_io_executor ex, EventLimits limits = {});
  ~EventChannel();
  EventChannel(const EventChannel&) = delete;
  EventChannel& operator=(const EventChannel&) = delete;

  /// Numbers `e` (sets e.sequence), counts it, keeps it in recent() and queues it for every
  /// matching subscriber. Returns the published object.
  EventPtr publish(GpuEvent e);

  EventSubscription subscribe(std::function<void(const EventPtr&)> on_event,
                              EventSubscribeOptions options = {});
  /// A pull-style subscriber (options.executor is not used). Unsubscribe with
  /// EventQueue::close() or by dropping the last shared_ptr.
  std::shared_ptr<EventQueue> subscribe_queue(EventSubscribeOptions options = {});

  /// The newest events (at most limits.recent, limits.recent_bytes), oldest first.
  std::vector<EventPtr> recent() const;
  EventTotals totals() const;
  EventCounters counters() const;
  std::uint64_t last_sequence() const;
  /// The newest fatal event (is_fatal) of each device, oldest first: what the planner's health
  /// rule reads. Kept apart from recent(), so that a storm of other events cannot push a fatal
  /// one out. At most limits().devices events (one per device; a new device beyond it replaces
  /// the device whose fatal event is the oldest), each one an event the channel published, so
  /// at most limits().devices × event_bytes() bytes.
  std::vector<EventPtr> fatal() const;
  const EventLimits& limits() const noexcept;

  /// A function that publishes into this channel for as long as it exists (then does nothing):
  /// what a probe is given (Probe::start_events). Safe to call from any thread.
  std::function<void(GpuEvent)> sink() const;

 private:
  std::shared_ptr<detail::EventChannelState> state_;
};

}  // namespace gpustream
