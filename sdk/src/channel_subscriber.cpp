// The per-subscriber side of SnapshotChannel: bounded queue, backpressure policies, gaps,
// delivery tasks, and the Subscription / SnapshotQueue handles.
#include <algorithm>
#include <utility>

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "channel_internal.hpp"
#include "gpustream/log.hpp"

namespace gpustream {
namespace detail {

std::string_view to_string(GapReason r) noexcept {
  switch (r) {
    case GapReason::dropped_slow_subscriber:
      return kGapDroppedSlowSubscriber;
    case GapReason::history_too_old:
      return kGapHistoryTooOld;
    case GapReason::lossless:
      return kGapLosslessBoundExceeded;
  }
  return "unknown";
}

namespace {
HandlerSlot g_batch_slots[BatchSlots::kCount];  // NOLINT: process-wide handler memory
}  // namespace

void* BatchSlots::allocate(std::size_t n) {
  for (auto& slot : g_batch_slots)
    if (void* p = slot.try_allocate(n)) return p;
  return ::operator new(n);
}

void BatchSlots::deallocate(void* p) noexcept {
  for (auto& slot : g_batch_slots) {
    if (slot.owns(p)) {
      slot.release();
      return;
    }
  }
  ::operator delete(p);
}

void DeliveryBatch::append(std::shared_ptr<Subscriber>&& owner) noexcept {
  Subscriber* sub = owner.get();
  sub->batch_self_ = std::move(owner);
  sub->batch_next_ = nullptr;
  if (tail_)
    tail_->batch_next_ = sub;
  else
    head_ = sub;
  tail_ = sub;
}

void DeliveryBatch::operator()() {
  while (Subscriber* sub = head_) {
    head_ = std::exchange(sub->batch_next_, nullptr);
    if (!head_) tail_ = nullptr;
    // Read before run_delivery: once it clears scheduled_, a publisher may link it again.
    const std::shared_ptr<Subscriber> owner = std::move(sub->batch_self_);
    sub->run_delivery();
  }
}

void DeliveryBatch::release() noexcept {
  while (Subscriber* sub = head_) {
    head_ = std::exchange(sub->batch_next_, nullptr);
    const std::shared_ptr<Subscriber> owner = std::move(sub->batch_self_);
  }
  tail_ = nullptr;
}

void PendingRing::push_back(Pending p) noexcept {
  bytes_ += p.bytes;
  buf_[(head_ + size_) % buf_.size()] = std::move(p);
  ++size_;
}

Pending PendingRing::pop_front() noexcept {
  Pending p = std::move(buf_[head_]);
  head_ = (head_ + 1) % buf_.size();
  --size_;
  bytes_ -= p.bytes;
  return p;
}

void PendingRing::erase(std::size_t i) noexcept {
  bytes_ -= at(i).bytes;
  for (std::size_t k = i; k + 1 < size_; ++k) at(k) = std::move(at(k + 1));
  at(size_ - 1) = Pending{};
  --size_;
}

void PendingRing::clear() noexcept {
  while (size_ > 0) pop_front();
  head_ = 0;
}

Subscriber::Subscriber(const SubscribeOptions& o, boost::asio::any_io_executor ex,
                       SnapshotFn on_snap, GapFn on_gap)
    : filter_(o.filter),
      match_all_(o.filter.empty()),
      policy_(o.policy),
      capacity_(std::max<std::size_t>(1, o.capacity)),
      max_bytes_(o.max_bytes),
      queue_mode_(false),
      executor_(std::move(ex)),
      on_snapshot_(std::move(on_snap)),
      on_gap_(std::move(on_gap)),
      ring_(capacity_) {
  if (auto* io = executor_.target<boost::asio::io_context::executor_type>())
    batch_context_ = &io->context();
}

Subscriber::Subscriber(const SubscribeOptions& o)
    : filter_(o.filter),
      match_all_(o.filter.empty()),
      policy_(o.policy),
      capacity_(std::max<std::size_t>(1, o.capacity)),
      max_bytes_(o.max_bytes),
      queue_mode_(true),
      ring_(capacity_) {}

void Subscriber::add_missed_locked(std::uint64_t n, GapReason why) {
  if (pending_missed_ == 0) pending_reason_ = why;
  pending_missed_ += n;
}

bool Subscriber::start_after(std::uint64_t since, std::uint64_t missed_from_history) {
  std::lock_guard lock(mu_);
  last_taken_ = since;
  // The latest policy reports no gaps: it only ever promises the newest snapshot.
  if (missed_from_history == 0 || policy_ == Backpressure::latest) return false;
  add_missed_locked(missed_from_history, GapReason::history_too_old);
  if (queue_mode_ || scheduled_) return false;
  scheduled_ = true;
  return true;
}

bool Subscriber::full_for_locked(std::size_t bytes) const noexcept {
  if (ring_.full()) return true;
  // A queue always takes one snapshot, however large: an empty one is never full.
  return !ring_.empty() && (ring_.bytes() > max_bytes_ || bytes > max_bytes_ - ring_.bytes());
}

void Subscriber::drop_oldest_locked() {
  Pending old = ring_.pop_front();
  dropped_.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t carry = old.missed_before + 1;
  const GapReason why = old.missed_before > 0 ? old.reason : GapReason::dropped_slow_subscriber;
  if (ring_.empty()) {
    add_missed_locked(carry, why);
  } else {
    Pending& front = ring_.front();
    if (front.missed_before == 0) front.reason = why;
    front.missed_before += carry;
  }
}

bool Subscriber::offer(const SnapshotPtr& s, std::size_t bytes) {
  std::lock_guard lock(mu_);
  if (!active_) return false;
  switch (policy_) {
    case Backpressure::latest:
      for (std::size_t i = 0; i < ring_.size(); ++i) {
        if (ring_.at(i).snap->probe == s->probe && ring_.at(i).snap->node == s->node) {
          ring_.erase(i);
          dropped_.fetch_add(1, std::memory_order_relaxed);
          break;
        }
      }
      while (full_for_locked(bytes)) {  // more probes than capacity, or than max_bytes holds
        ring_.pop_front();
        dropped_.fetch_add(1, std::memory_order_relaxed);
      }
      break;
    case Backpressure::drop_oldest:
      while (full_for_locked(bytes)) drop_oldest_locked();
      break;
    case Backpressure::lossless:
      if (full_for_locked(bytes)) {
        lost_.fetch_add(1, std::memory_order_relaxed);
        add_missed_locked(1, GapReason::lossless);
        return false;  // the queue holds something, so its consumer has already been woken
      }
      break;
  }
  ring_.push_back(Pending{s, bytes, pending_missed_, pending_reason_});
  pending_missed_ = 0;
  if (queue_mode_) return waiters_ > 0;
  if (scheduled_) return false;
  scheduled_ = true;
  return true;
}

std::optional<QueueItem> Subscriber::take_locked() {
  if (!ring_.empty()) {
    Pending& front = ring_.front();
    if (front.missed_before > 0) {
      Gap gap{last_taken_, front.missed_before, std::string(to_string(front.reason))};
      front.missed_before = 0;
      return QueueItem{std::move(gap)};
    }
    Pending p = ring_.pop_front();
    last_taken_ = p.snap->sequence;
    return QueueItem{std::move(p.snap)};
  }
  if (pending_missed_ > 0) {
    Gap gap{last_taken_, pending_missed_, std::string(to_string(pending_reason_))};
    pending_missed_ = 0;
    return QueueItem{std::move(gap)};
  }
  return std::nullopt;
}

void Subscriber::wake() {
  if (queue_mode_) {
    cv_.notify_all();
    return;
  }
  namespace asio = boost::asio;
  // The task lives in slot_ (at most one is in flight), so waking does not allocate when the
  // executor is a plain io_context or thread_pool one. Other executors (strands, any_io_executor
  // wrappers of other types) use their own allocation.
  auto task = asio::bind_allocator(SlotAllocator<void>(&slot_), DeliveryTask{shared_from_this()});
  if (auto* io = executor_.target<asio::io_context::executor_type>())
    asio::post(*io, std::move(task));
  else if (auto* pool = executor_.target<asio::thread_pool::executor_type>())
    asio::post(*pool, std::move(task));
  else
    asio::post(executor_, std::move(task));
}

void Subscriber::invoke(QueueItem& item) noexcept {
  try {
    if (auto* snap = std::get_if<SnapshotPtr>(&item)) {
      if (on_snapshot_) on_snapshot_(*snap);
    } else if (on_gap_) {
      on_gap_(std::get<Gap>(item));
    }
  } catch (const std::exception& e) {
    if (!std::exchange(logged_exception_, true))
      logger()->error("a snapshot subscriber's callback threw: {} (logged once)", e.what());
  } catch (...) {
    if (!std::exchange(logged_exception_, true))
      logger()->error("a snapshot subscriber's callback threw (logged once)");
  }
}

void Subscriber::run_delivery() {
  std::unique_lock lock(mu_);
  // Deliver at most about one queue's worth per task, then yield the executor to others.
  std::size_t budget = capacity_ + 2;
  for (;;) {
    if (!active_) {
      scheduled_ = false;
      auto on_snapshot = std::move(on_snapshot_);  // released outside the lock
      auto on_gap = std::move(on_gap_);
      lock.unlock();
      return;
    }
    if (budget == 0 && (!ring_.empty() || pending_missed_ > 0)) {
      lock.unlock();
      wake();  // still scheduled_: continue in a fresh task
      return;
    }
    auto item = take_locked();
    if (!item) {
      scheduled_ = false;
      return;
    }
    --budget;
    running_ = true;
    running_thread_ = std::this_thread::get_id();
    lock.unlock();
    invoke(*item);
    item.reset();
    lock.lock();
    running_ = false;
    running_thread_ = std::thread::id{};
    if (waiters_ > 0) cv_.notify_all();
  }
}

void Subscriber::deactivate() {
  SnapshotFn on_snapshot;  // released after unlocking
  GapFn on_gap;
  std::unique_lock lock(mu_);
  active_ = false;
  ring_.clear();
  pending_missed_ = 0;
  if (running_ && running_thread_ == std::this_thread::get_id()) {
    // Inside our own callback: run_delivery releases the callbacks when it returns.
    cv_.notify_all();
    return;
  }
  ++waiters_;
  cv_.wait(lock, [&] { return !running_; });
  --waiters_;
  on_snapshot = std::move(on_snapshot_);
  on_gap = std::move(on_gap_);
  cv_.notify_all();
  lock.unlock();
}

void Subscriber::channel_gone() {
  {
    std::lock_guard lock(mu_);
    channel_gone_ = true;
  }
  cv_.notify_all();
}

std::optional<QueueItem> Subscriber::try_pop() {
  std::lock_guard lock(mu_);
  if (!active_) return std::nullopt;
  return take_locked();
}

std::optional<QueueItem> Subscriber::pop_for(std::chrono::steady_clock::duration timeout) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kLongest = std::chrono::hours(24 * 365);
  const auto deadline = Clock::now() + std::min<Clock::duration>(timeout, kLongest);
  std::unique_lock lock(mu_);
  for (;;) {
    if (!active_) return std::nullopt;
    if (auto item = take_locked()) return item;
    if (channel_gone_) return std::nullopt;
    ++waiters_;
    const auto status = cv_.wait_until(lock, deadline);
    --waiters_;
    if (status == std::cv_status::timeout) {
      if (!active_) return std::nullopt;
      return take_locked();
    }
  }
}

bool Subscriber::active() const {
  std::lock_guard lock(mu_);
  return active_ && !channel_gone_;
}

bool Subscriber::closed() const { return !active(); }

std::size_t Subscriber::size() const {
  std::lock_guard lock(mu_);
  return ring_.size();
}

std::size_t Subscriber::bytes() const {
  std::lock_guard lock(mu_);
  return ring_.bytes();
}

}  // namespace detail

// --- Subscription ---

Subscription::Subscription() noexcept = default;

Subscription::Subscription(std::shared_ptr<detail::Subscriber> sub,
                           std::weak_ptr<detail::ChannelState> channel)
    : sub_(std::move(sub)), channel_(std::move(channel)) {}

Subscription::Subscription(Subscription&& o) noexcept
    : sub_(std::move(o.sub_)), channel_(std::move(o.channel_)) {}

Subscription& Subscription::operator=(Subscription&& o) noexcept {
  if (this != &o) {
    reset();
    sub_ = std::move(o.sub_);
    channel_ = std::move(o.channel_);
  }
  return *this;
}

Subscription::~Subscription() { reset(); }

void Subscription::reset() {
  if (!sub_) return;
  if (auto channel = channel_.lock()) channel->remove(sub_.get());
  channel_.reset();
  sub_->deactivate();  // sub_ is kept so that dropped() and lost() stay readable
}

bool Subscription::active() const { return sub_ && sub_->active(); }
std::uint64_t Subscription::dropped() const { return sub_ ? sub_->dropped() : 0; }
std::uint64_t Subscription::lost() const { return sub_ ? sub_->lost() : 0; }

// --- SnapshotQueue ---

SnapshotQueue::SnapshotQueue(std::shared_ptr<detail::Subscriber> sub,
                             std::weak_ptr<detail::ChannelState> channel)
    : sub_(std::move(sub)), channel_(std::move(channel)) {}

SnapshotQueue::~SnapshotQueue() { close(); }

std::optional<QueueItem> SnapshotQueue::try_pop() { return sub_->try_pop(); }

std::optional<QueueItem> SnapshotQueue::pop_for(std::chrono::steady_clock::duration timeout) {
  return sub_->pop_for(timeout);
}

void SnapshotQueue::close() {
  // Idempotent and safe from any thread: channel_ itself is never modified.
  if (auto channel = channel_.lock()) channel->remove(sub_.get());
  sub_->deactivate();
}

bool SnapshotQueue::closed() const { return sub_->closed(); }
std::size_t SnapshotQueue::size() const { return sub_->size(); }
std::size_t SnapshotQueue::bytes() const { return sub_->bytes(); }
std::uint64_t SnapshotQueue::dropped() const { return sub_->dropped(); }
std::uint64_t SnapshotQueue::lost() const { return sub_->lost(); }

}  // namespace gpustream
