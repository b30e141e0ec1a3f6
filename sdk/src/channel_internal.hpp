// Private to the SDK: the subscriber and channel state behind gpustream/channel.hpp.
//
// Locking: ChannelState::mu_ may be held while taking a Subscriber::mu_, never the reverse.
// Neither lock is held while user code (a callback) or an executor's post runs.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gpustream/channel.hpp"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace gpustream::detail {

enum class GapReason : std::uint8_t { dropped_slow_subscriber, history_too_old, lossless };

std::string_view to_string(GapReason r) noexcept;

/// Memory for the single delivery task a subscriber has in flight, so that waking a subscriber
/// does not allocate. A second concurrent allocation (or a too large one) uses operator new.
class HandlerSlot {
 public:
  static constexpr std::size_t kSize = 192;
  /// This slot's memory, or null when it is taken or `n` does not fit.
  void* try_allocate(std::size_t n) noexcept {
    if (n <= kSize && !in_use_.exchange(true, std::memory_order_acquire)) return storage_;
    return nullptr;
  }
  bool owns(const void* p) const noexcept { return p == static_cast<const void*>(storage_); }
  void release() noexcept { in_use_.store(false, std::memory_order_release); }
  void* allocate(std::size_t n) {
    if (void* p = try_allocate(n)) return p;
    return ::operator new(n);
  }
  void deallocate(void* p) noexcept {
    if (owns(p))
      release();
    else
      ::operator delete(p);
  }

 private:
  alignas(std::max_align_t) unsigned char storage_[kSize];
  std::atomic<bool> in_use_{false};
};

/// Memory for DeliveryBatch tasks: a few process-wide slots (a batch may outlive its channel
/// and every subscriber it names, so neither can own its memory: kCount * ~200 bytes, fixed).
/// When every slot is taken (more batches in flight at once than slots), operator new.
class BatchSlots {
 public:
  static constexpr std::size_t kCount = 16;
  static void* allocate(std::size_t n);
  static void deallocate(void* p) noexcept;
};

template <typename T>
class BatchSlotAllocator {
 public:
  using value_type = T;
  BatchSlotAllocator() noexcept = default;
  template <typename U>
  BatchSlotAllocator(const BatchSlotAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t));
    return static_cast<T*>(BatchSlots::allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t) noexcept { BatchSlots::deallocate(p); }
  template <typename U>
  bool operator==(const BatchSlotAllocator<U>&) const noexcept {
    return true;
  }
  template <typename U>
  bool operator!=(const BatchSlotAllocator<U>&) const noexcept {
    return false;
  }
};

template <typename T>
class SlotAllocator {
 public:
  using value_type = T;
  explicit SlotAllocator(HandlerSlot* slot) noexcept : slot_(slot) {}
  template <typename U>
  SlotAllocator(const SlotAllocator<U>& other) noexcept : slot_(other.slot()) {}
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t));
    return static_cast<T*>(slot_->allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t) noexcept { slot_->deallocate(p); }
  HandlerSlot* slot() const noexcept { return slot_; }
  template <typename U>
  bool operator==(const SlotAllocator<U>& o) const noexcept {
    return slot_ == o.slot();
  }
  template <typename U>
  bool operator!=(const SlotAllocator<U>& o) const noexcept {
    return slot_ != o.slot();
  }

 private:
  HandlerSlot* slot_;
};

/// One queued snapshot. `missed_before` snapshots were lost just before it (a Gap to report).
struct Pending {
  SnapshotPtr snap;
  std::size_t bytes = 0;  // approx_bytes(*snap)
  std::uint64_t missed_before = 0;
  GapReason reason = GapReason::dropped_slow_subscriber;
};

/// Fixed-capacity FIFO, allocated once. Counts the bytes of what it holds.
class PendingRing {
 public:
  explicit PendingRing(std::size_t capacity) : buf_(capacity) {}
  std::size_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return bytes_; }
  bool empty() const noexcept { return size_ == 0; }
  bool full() const noexcept { return size_ == buf_.size(); }
  Pending& at(std::size_t i) noexcept { return buf_[(head_ + i) % buf_.size()]; }
  Pending& front() noexcept { return buf_[head_]; }
  void push_back(Pending p) noexcept;
  Pending pop_front() noexcept;
  void erase(std::size_t i) noexcept;  // keeps the order of the others
  void clear() noexcept;

 private:
  std::vector<Pending> buf_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  std::size_t bytes_ = 0;
};

class DeliveryBatch;

/// One subscriber: a callback subscriber (with an executor) or a queue.
class Subscriber : public std::enable_shared_from_this<Subscriber> {
 public:
  using SnapshotFn = std::function<void(const SnapshotPtr&)>;
  using GapFn = std::function<void(const Gap&)>;

  Subscriber(const SubscribeOptions& options, boost::asio::any_io_executor ex, SnapshotFn on_snap,
             GapFn on_gap);                              // callback mode
  explicit Subscriber(const SubscribeOptions& options);  // queue mode

  const SubscriptionFilter& filter() const noexcept { return filter_; }
  /// The filter lets `s` through (an empty filter without a call).
  bool matches(const GpuSnapshot& s) const { return match_all_ || filter_.matches(s); }
  /// The io_context whose plain executor runs this subscriber's callbacks, or null (another
  /// executor, or a queue). A publish wakes the subscribers of one io_context with one task.
  boost::asio::io_context* batch_context() const noexcept { return batch_context_; }

  // --- channel side; called with the channel lock held ---
  /// Resume bookkeeping before any offer: the stream continues after `since`, and `missed`
  /// sequence numbers are gone from the history. True when the caller must call wake().
  bool start_after(std::uint64_t since, std::uint64_t missed_from_history);
  /// Queues `s` (approx_bytes `bytes`) under the policy. True when the caller must call wake()
  /// (after unlocking), or, with a batch_context(), add it to a DeliveryBatch instead.
  bool offer(const SnapshotPtr& s, std::size_t bytes);

  // --- any thread, no channel lock ---
  void wake();
  /// Unsubscribe: nothing more is queued or delivered. Waits for a callback of this subscriber
  /// running on another thread to return.
  void deactivate();
  /// The channel is gone: queue pops stop waiting.
  void channel_gone();

  std::optional<QueueItem> try_pop();
  std::optional<QueueItem> pop_for(std::chrono::steady_clock::duration timeout);
  bool active() const;
  bool closed() const;
  std::size_t size() const;
  std::size_t bytes() const;
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  std::uint64_t lost() const noexcept { return lost_.load(std::memory_order_relaxed); }

 private:
  friend class DeliveryBatch;
  struct DeliveryTask {
    std::shared_ptr<Subscriber> self;
    void operator()() const { self->run_delivery(); }
  };

  void run_delivery();
  std::optional<QueueItem> take_locked();
  void add_missed_locked(std::uint64_t n, GapReason why);
  /// With mu_ held: no room for one more snapshot of `bytes` (count or byte bound reached).
  bool full_for_locked(std::size_t bytes) const noexcept;
  /// With mu_ held, drop_oldest: drops the oldest queued snapshot, carrying its gap forward.
  void drop_oldest_locked();
  void invoke(QueueItem& item) noexcept;

  const SubscriptionFilter filter_;
  const bool match_all_;
  const Backpressure policy_;
  const std::size_t capacity_;
  const std::size_t max_bytes_;
  const bool queue_mode_;
  boost::asio::any_io_executor executor_;
  boost::asio::io_context* batch_context_ = nullptr;
  // While this subscriber waits in a DeliveryBatch: the batch's next subscriber, and the
  // reference that keeps this one alive until the batch has delivered to it. Written by the
  // publisher whose offer() set scheduled_, read by the batch before run_delivery() can clear
  // it (scheduled_, under mu_, orders the two).
  Subscriber* batch_next_ = nullptr;
  std::shared_ptr<Subscriber> batch_self_;
  SnapshotFn on_snapshot_;  // touched only by the delivering thread, or when none runs
  GapFn on_gap_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  PendingRing ring_;
  std::uint64_t pending_missed_ = 0;  // lost after the last queued entry
  GapReason pending_reason_ = GapReason::dropped_slow_subscriber;
  std::uint64_t last_taken_ = 0;  // sequence of the last snapshot handed out
  bool active_ = true;
  bool channel_gone_ = false;
  bool scheduled_ = false;  // a delivery task is posted (callback mode)
  bool running_ = false;    // a callback is running on running_thread_
  std::thread::id running_thread_;
  std::size_t waiters_ = 0;
  bool logged_exception_ = false;
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> lost_{0};
  HandlerSlot slot_;
};

/// The delivery task of the subscribers of one io_context that one publish woke: it runs each
/// one's delivery in turn, in the order they were appended (the channel's order). It owns them
/// until it has delivered to them; destroyed without running (its io_context destroyed first),
/// it releases them. Move-only.
class DeliveryBatch {
 public:
  DeliveryBatch() noexcept = default;
  DeliveryBatch(DeliveryBatch&& o) noexcept
      : head_(std::exchange(o.head_, nullptr)), tail_(std::exchange(o.tail_, nullptr)) {}
  DeliveryBatch& operator=(DeliveryBatch&& o) noexcept {
    if (this != &o) {
      release();
      head_ = std::exchange(o.head_, nullptr);
      tail_ = std::exchange(o.tail_, nullptr);
    }
    return *this;
  }
  DeliveryBatch(const DeliveryBatch&) = delete;
  DeliveryBatch& operator=(const DeliveryBatch&) = delete;
  ~DeliveryBatch() { release(); }

  /// Appends a subscriber whose offer() asked for a wake-up; the batch takes `owner`.
  void append(std::shared_ptr<Subscriber>&& owner) noexcept;
  bool empty() const noexcept { return head_ == nullptr; }
  void operator()();

 private:
  void release() noexcept;
  Subscriber* head_ = nullptr;
  Subscriber* tail_ = nullptr;
};

/// The key of the latest cache: (node, probe), so that a node's entries are contiguous.
using LatestKey = std::pair<std::string, std::string>;
struct LatestLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    using View = std::pair<std::string_view, std::string_view>;
    return View(a.first, a.second) < View(b.first, b.second);
  }
};
struct LatestEntry {
  SnapshotPtr snap;
  std::size_t bytes = 0;    // approx_bytes(*snap) + kLatestEntryOverhead
  std::uint64_t first = 0;  // sequence of the key's first publication (latest()'s order)
  std::uint64_t last = 0;   // sequence of its newest (the eviction order: stalest first)
};
using LatestMap = std::map<LatestKey, LatestEntry, LatestLess>;
/// What one latest entry costs beyond its snapshot: the map nodes, the key, the order indexes.
inline constexpr std::size_t kLatestEntryOverhead = 256;

/// The channel's shared state; Subscription and SnapshotQueue keep a weak_ptr to it.
class ChannelState {
 public:
  ChannelState(boost::asio::any_io_executor ex, std::size_t history_capacity,
               std::size_t history_max_bytes, std::size_t latest_capacity,
               std::size_t latest_max_bytes)
      : ex_(std::move(ex)),
        history_(history_capacity),
        history_entry_bytes_(history_capacity),
        history_max_bytes_(history_max_bytes),
        latest_capacity_(std::max<std::size_t>(latest_capacity, 1)),
        latest_max_bytes_(latest_max_bytes),
        instance_(new_instance_id()) {}

  static std::string new_instance_id();

  void add(const std::shared_ptr<Subscriber>& sub, std::optional<std::uint64_t> since);
  void remove(const Subscriber* sub);

  boost::asio::any_io_executor ex_;
  mutable std::mutex mu_;
  std::vector<SnapshotPtr> history_;  // ring of history_.size() slots
  std::size_t history_head_ = 0;      // index of the oldest
  std::size_t history_size_ = 0;
  std::vector<std::size_t> history_entry_bytes_;  // approx_bytes of each slot's snapshot
  std::size_t history_bytes_ = 0;
  const std::size_t history_max_bytes_;
  // The newest snapshot per (node, probe), bounded by latest_capacity_ entries and
  // latest_max_bytes_ (at least the newest one is kept); the stalest entry is evicted first.
  LatestMap latest_;
  std::map<std::uint64_t, LatestMap::iterator> latest_by_first_;  // LatestEntry::first → entry
  std::map<std::uint64_t, LatestMap::iterator> latest_by_last_;   // LatestEntry::last → entry
  std::size_t latest_bytes_ = 0;
  std::uint64_t latest_evicted_ = 0;
  const std::size_t latest_capacity_;
  const std::size_t latest_max_bytes_;
  std::uint64_t last_sequence_ = 0;
  const std::string instance_;
  std::vector<std::shared_ptr<Subscriber>> subscribers_;

  /// With mu_ held: the oldest sequence still in the history (last_sequence_ + 1 when empty).
  std::uint64_t oldest_locked() const noexcept;
  /// With mu_ held: makes `ptr` (`bytes` of it) the latest of its (node, probe), evicting the
  /// stalest others as the bounds require; what leaves the cache goes to `released`.
  void set_latest_locked(const SnapshotPtr& ptr, std::size_t bytes,
                         std::vector<SnapshotPtr>& released);
  /// With mu_ held: removes one entry of the latest cache (its snapshot goes to `released`).
  void erase_latest_locked(LatestMap::iterator it, std::vector<SnapshotPtr>& released);
};

}  // namespace gpustream::detail
