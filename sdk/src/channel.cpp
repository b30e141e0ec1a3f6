// SnapshotChannel: numbering, history ring, latest cache and fan-out to subscribers.
#include <algorithm>
#include <array>
#include <random>

#include <spdlog/fmt/fmt.h>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "channel_internal.hpp"
#include "gpustream/detail/deferred_wakes.hpp"

namespace gpustream {
namespace {

constexpr std::array<std::string_view, 3> kPolicies{"latest", "drop_oldest", "lossless"};

template <typename T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

/// Subscribers to wake after a publish, kept per thread so that publishing does not allocate.
/// Used as a stack: a nested publish (an executor that runs inline) works above its caller.
std::vector<std::shared_ptr<detail::Subscriber>>& wake_list() {
  thread_local std::vector<std::shared_ptr<detail::Subscriber>> list;
  return list;
}

/// The delivery batches of a publish, one per io_context; a stack like wake_list().
std::vector<std::pair<boost::asio::io_context*, detail::DeliveryBatch>>& batch_list() {
  thread_local std::vector<std::pair<boost::asio::io_context*, detail::DeliveryBatch>> list;
  return list;
}

/// History entries evicted by a publish, released after unlocking; a stack like wake_list().
std::vector<SnapshotPtr>& evicted_list() {
  thread_local std::vector<SnapshotPtr> list;
  return list;
}

/// Whether this thread's publishes leave their wake-ups in wake_list() for a DeferredWakes.
bool& deferring() {
  thread_local bool on = false;
  return on;
}

/// Wakes the subscribers in wake_list() from `mark` on and drops them from it.
void wake_from(std::size_t mark) {
  auto& wake = wake_list();
  // Subscribers on a plain io_context executor: one task per io_context delivers to all of
  // them, in the channel's order (posting to an io_context never runs the task inline).
  auto& batches = batch_list();
  const std::size_t batch_mark = batches.size();
  for (std::size_t i = mark; i < wake.size(); ++i) {
    boost::asio::io_context* ctx = wake[i]->batch_context();
    if (!ctx) continue;
    auto it = std::find_if(batches.begin() + static_cast<std::ptrdiff_t>(batch_mark), batches.end(),
                           [&](const auto& b) { return b.first == ctx; });
    if (it == batches.end()) it = batches.emplace(batches.end(), ctx, detail::DeliveryBatch{});
    it->second.append(std::move(wake[i]));
  }
  for (std::size_t i = batch_mark; i < batches.size(); ++i)
    boost::asio::post(batches[i].first->get_executor(),
                      boost::asio::bind_allocator(detail::BatchSlotAllocator<void>{},
                                                  std::move(batches[i].second)));
  batches.erase(batches.begin() + static_cast<std::ptrdiff_t>(batch_mark), batches.end());
  // The others (and queues) one by one. Index-based: wake() may run a nested publish on this
  // thread (an executor that runs inline), which uses the list above us.
  for (std::size_t i = mark; i < wake.size(); ++i) {
    if (!wake[i]) continue;  // in a batch
    auto sub = std::move(wake[i]);
    sub->wake();
  }
  wake.erase(wake.begin() + static_cast<std::ptrdiff_t>(mark), wake.end());
}

}  // namespace

std::string_view to_string(Backpressure p) noexcept {
  const auto i = static_cast<std::size_t>(p);
  return i < kPolicies.size() ? kPolicies[i] : std::string_view{"unknown"};
}

std::optional<Backpressure> backpressure_from_string(std::string_view s) noexcept {
  for (std::size_t i = 0; i < kPolicies.size(); ++i)
    if (kPolicies[i] == s) return static_cast<Backpressure>(i);
  return std::nullopt;
}

bool SubscriptionFilter::matches(const GpuSnapshot& s) const {
  if (!probes.empty() && !contains(probes, s.probe)) return false;
  if (!devices.empty() &&
      std::none_of(s.devices.begin(), s.devices.end(),
                   [&](const DeviceSample& d) { return contains(devices, d.id); }))
    return false;
  if (!metrics.empty() &&
      std::none_of(s.devices.begin(), s.devices.end(), [&](const DeviceSample& d) {
        return std::any_of(metrics.begin(), metrics.end(),
                           [&](Metric m) { return d.metrics[m].has_value(); });
      }))
    return false;
  return true;
}

namespace detail {

std::uint64_t ChannelState::oldest_locked() const noexcept {
  if (history_size_ == 0) return last_sequence_ + 1;
  return history_[history_head_]->sequence;
}

void ChannelState::add(const std::shared_ptr<Subscriber>& sub, std::optional<std::uint64_t> since) {
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    if (since) {
      // A position beyond the last sequence (a stale or hostile resume, up to UINT64_MAX)
      // resumes from the last sequence: nothing to replay, no gap, and later gaps are counted
      // from a sequence that exists. No `+ 1` below can wrap.
      const std::uint64_t from = std::min(*since, last_sequence_);
      const std::uint64_t oldest = oldest_locked();
      const std::uint64_t missed = from + 1 < oldest ? oldest - from - 1 : 0;
      wake = sub->start_after(from, missed);
      for (std::size_t i = 0; i < history_size_; ++i) {
        const std::size_t slot = (history_head_ + i) % history_.size();
        const SnapshotPtr& h = history_[slot];
        if (h->sequence > from && sub->matches(*h))
          wake = sub->offer(h, history_entry_bytes_[slot]) || wake;
      }
    }
    subscribers_.push_back(sub);
  }
  if (wake) sub->wake();
}

void ChannelState::erase_latest_locked(LatestMap::iterator it, std::vector<SnapshotPtr>& released) {
  latest_by_first_.erase(it->second.first);
  latest_by_last_.erase(it->second.last);
  latest_bytes_ -= it->second.bytes;
  released.push_back(std::move(it->second.snap));
  latest_.erase(it);
}

void ChannelState::set_latest_locked(const SnapshotPtr& ptr, std::size_t bytes,
                                     std::vector<SnapshotPtr>& released) {
  bytes += kLatestEntryOverhead;
  const std::pair<std::string_view, std::string_view> key(ptr->node, ptr->probe);
  auto it = latest_.find(key);
  if (it != latest_.end()) {
    // Replaced in place: out of the eviction order while the others make room for it.
    latest_bytes_ -= it->second.bytes;
    released.push_back(std::exchange(it->second.snap, ptr));
    it->second.bytes = 0;
    auto node = latest_by_last_.extract(it->second.last);
    while (!latest_by_last_.empty() && latest_bytes_ + bytes > latest_max_bytes_) {
      erase_latest_locked(latest_by_last_.begin()->second, released);
      ++latest_evicted_;
    }
    node.key() = ptr->sequence;
    latest_by_last_.insert(std::move(node));
  } else {
    while (!latest_by_last_.empty() &&
           (latest_.size() >= latest_capacity_ || latest_bytes_ + bytes > latest_max_bytes_)) {
      erase_latest_locked(latest_by_last_.begin()->second, released);
      ++latest_evicted_;
    }
    it = latest_.emplace(LatestKey(ptr->node, ptr->probe), LatestEntry{}).first;
    it->second.snap = ptr;
    it->second.first = ptr->sequence;
    latest_by_first_.emplace(ptr->sequence, it);
    latest_by_last_.emplace(ptr->sequence, it);
  }
  it->second.last = ptr->sequence;
  it->second.bytes = bytes;
  latest_bytes_ += bytes;
}

void ChannelState::remove(const Subscriber* sub) {
  std::shared_ptr<Subscriber> removed;  // released after unlocking
  std::lock_guard lock(mu_);
  auto it = std::find_if(subscribers_.begin(), subscribers_.end(),
                         [&](const auto& s) { return s.get() == sub; });
  if (it == subscribers_.end()) return;
  removed = std::move(*it);
  *it = std::move(subscribers_.back());
  subscribers_.pop_back();
}

}  // namespace detail

SnapshotChannel::SnapshotChannel(boost::asio::any_io_executor ex, std::size_t history_capacity,
                                 std::size_t history_max_bytes, std::size_t latest_capacity,
                                 std::size_t latest_max_bytes)
    : state_(std::make_shared<detail::ChannelState>(ex, history_capacity, history_max_bytes,
                                                    latest_capacity, latest_max_bytes)),
      events_(std::make_unique<EventChannel>(std::move(ex))) {}

SnapshotChannel::~SnapshotChannel() {
  std::vector<std::shared_ptr<detail::Subscriber>> subs;
  {
    std::lock_guard lock(state_->mu_);
    subs.swap(state_->subscribers_);
  }
  for (auto& s : subs) s->channel_gone();
}

SnapshotPtr SnapshotChannel::publish(GpuSnapshot s) {
  auto snap = std::make_shared<GpuSnapshot>(std::move(s));
  const std::size_t bytes = approx_bytes(*snap);
  auto& wake = wake_list();
  const std::size_t mark = wake.size();
  auto& evicted = evicted_list();  // history and latest entries, released after unlocking
  const std::size_t evicted_mark = evicted.size();
  {
    auto& st = *state_;
    std::lock_guard lock(st.mu_);
    snap->sequence = ++st.last_sequence_;
    SnapshotPtr ptr = snap;
    if (!st.history_.empty()) {
      const std::size_t cap = st.history_.size();
      auto evict_oldest = [&] {
        evicted.push_back(std::move(st.history_[st.history_head_]));
        st.history_bytes_ -= st.history_entry_bytes_[st.history_head_];
        st.history_head_ = (st.history_head_ + 1) % cap;
        --st.history_size_;
      };
      // The byte bound first (keeping room for this one), then the count.
      while (st.history_size_ > 0 && st.history_bytes_ + bytes > st.history_max_bytes_)
        evict_oldest();
      if (st.history_size_ == cap) evict_oldest();
      const std::size_t slot = (st.history_head_ + st.history_size_) % cap;
      st.history_[slot] = ptr;
      st.history_entry_bytes_[slot] = bytes;
      st.history_bytes_ += bytes;
      ++st.history_size_;
    }
    st.set_latest_locked(ptr, bytes, evicted);
    for (const auto& sub : st.subscribers_)
      if (sub->matches(*ptr) && sub->offer(ptr, bytes)) wake.push_back(sub);
  }
  evicted.erase(evicted.begin() + static_cast<std::ptrdiff_t>(evicted_mark), evicted.end());
  // A DeferredWakes on this thread wakes them (each subscriber is in the list once: it stays
  // scheduled until its delivery task runs).
  if (!deferring()) wake_from(mark);
  return snap;
}

namespace detail {

DeferredWakes::DeferredWakes() : owner_(!deferring()), mark_(wake_list().size()) {
  if (owner_) deferring() = true;
}

DeferredWakes::~DeferredWakes() {
  if (!owner_) return;
  flush();
  deferring() = false;
}

void DeferredWakes::flush() {
  if (!owner_ || wake_list().size() == mark_) return;
  // A publish run inline by a wake-up (an inline executor) wakes at once, above mark_.
  struct Resume {
    ~Resume() { deferring() = true; }
  } resume;
  deferring() = false;
  wake_from(mark_);
}

}  // namespace detail

Subscription SnapshotChannel::subscribe(SubscribeOptions options,
                                        std::function<void(const SnapshotPtr&)> on_snapshot,
                                        std::function<void(const Gap&)> on_gap) {
  auto ex = options.executor ? *options.executor : state_->ex_;
  auto sub = std::make_shared<detail::Subscriber>(options, std::move(ex), std::move(on_snapshot),
                                                  std::move(on_gap));
  state_->add(sub, options.since);
  return Subscription(std::move(sub), state_);
}

std::shared_ptr<SnapshotQueue> SnapshotChannel::subscribe_queue(const SubscribeOptions& options) {
  auto sub = std::make_shared<detail::Subscriber>(options);
  state_->add(sub, options.since);
  return std::shared_ptr<SnapshotQueue>(new SnapshotQueue(std::move(sub), state_));
}

std::vector<SnapshotPtr> SnapshotChannel::latest() const {
  std::vector<SnapshotPtr> out;
  std::lock_guard lock(state_->mu_);
  out.reserve(state_->latest_.size());
  for (const auto& [first, it] : state_->latest_by_first_) out.push_back(it->second.snap);
  return out;
}

SnapshotPtr SnapshotChannel::latest(std::string_view probe) const {
  std::lock_guard lock(state_->mu_);
  for (const auto& [first, it] : state_->latest_by_first_)
    if (it->second.snap->probe == probe) return it->second.snap;
  return nullptr;
}

std::size_t SnapshotChannel::forget_node(std::string_view node) {
  std::vector<SnapshotPtr> released;  // destroyed after unlocking
  std::lock_guard lock(state_->mu_);
  auto& st = *state_;
  auto it = st.latest_.lower_bound(std::pair<std::string_view, std::string_view>(node, ""));
  while (it != st.latest_.end() && it->first.first == node) st.erase_latest_locked(it++, released);
  return released.size();
}

std::size_t SnapshotChannel::latest_size() const {
  std::lock_guard lock(state_->mu_);
  return state_->latest_.size();
}

std::size_t SnapshotChannel::latest_bytes() const {
  std::lock_guard lock(state_->mu_);
  return state_->latest_bytes_;
}

std::uint64_t SnapshotChannel::latest_evicted() const {
  std::lock_guard lock(state_->mu_);
  return state_->latest_evicted_;
}

std::size_t SnapshotChannel::latest_capacity() const noexcept { return state_->latest_capacity_; }

std::size_t SnapshotChannel::latest_max_bytes() const noexcept { return state_->latest_max_bytes_; }

std::vector<SnapshotPtr> SnapshotChannel::history_since(std::uint64_t seq,
                                                        std::optional<Gap>* gap) const {
  const auto& st = *state_;
  std::vector<SnapshotPtr> out;
  std::lock_guard lock(st.mu_);
  const std::uint64_t oldest = st.oldest_locked();
  seq = std::min(seq, st.last_sequence_);  // beyond the end: nothing, and seq + 1 cannot wrap
  if (gap) {
    if (seq + 1 < oldest)
      *gap = Gap{seq, oldest - seq - 1, std::string(kGapHistoryTooOld)};
    else
      gap->reset();
  }
  // The history holds the contiguous sequence numbers [oldest, last_sequence_].
  const std::uint64_t first = std::max(seq + 1, oldest);
  if (first > st.last_sequence_) return out;
  const auto skip = static_cast<std::size_t>(first - oldest);
  out.reserve(st.history_size_ - skip);
  for (std::size_t i = skip; i < st.history_size_; ++i)
    out.push_back(st.history_[(st.history_head_ + i) % st.history_.size()]);
  return out;
}

std::uint64_t SnapshotChannel::last_sequence() const {
  std::lock_guard lock(state_->mu_);
  return state_->last_sequence_;
}

std::size_t SnapshotChannel::subscriber_count() const {
  std::lock_guard lock(state_->mu_);
  return state_->subscribers_.size();
}

std::size_t SnapshotChannel::history_capacity() const noexcept { return state_->history_.size(); }

std::size_t SnapshotChannel::history_max_bytes() const noexcept {
  return state_->history_max_bytes_;
}

std::size_t SnapshotChannel::history_size() const {
  std::lock_guard lock(state_->mu_);
  return state_->history_size_;
}

std::size_t SnapshotChannel::history_bytes() const {
  std::lock_guard lock(state_->mu_);
  return state_->history_bytes_;
}

const std::string& SnapshotChannel::instance() const noexcept { return state_->instance_; }

std::string detail::ChannelState::new_instance_id() {
  std::random_device rd;
  const std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{:016x}", v);
}

boost::asio::any_io_executor SnapshotChannel::get_executor() const noexcept { return state_->ex_; }

}  // namespace gpustream
