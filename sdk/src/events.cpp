// EventChannel: numbering, the recent ring, totals and bounded fan-out of GPU events.
#include "gpustream/events.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

namespace gpustream {
namespace {

constexpr std::array<std::string_view, kEventKindCount> kKinds{
    "xid", "ecc_single_bit", "ecc_double_bit", "clock_event", "power_source", "pstate", "other"};

}  // namespace

std::string_view to_string(EventKind k) noexcept {
  const auto i = static_cast<std::size_t>(k);
  return i < kKinds.size() ? kKinds[i] : std::string_view{"other"};
}

std::optional<EventKind> event_kind_from_string(std::string_view s) noexcept {
  for (std::size_t i = 0; i < kKinds.size(); ++i)
    if (kKinds[i] == s) return static_cast<EventKind>(i);
  return std::nullopt;
}

std::size_t event_bytes(const GpuEvent& e) noexcept {
  // The shared_ptr control block shares the allocation with the event (make_shared).
  return sizeof(GpuEvent) + 32 + e.probe.capacity() + e.device_id.capacity();
}

bool is_fatal(const GpuEvent& e) noexcept {
  if (e.kind == EventKind::ecc_double_bit) return true;
  return e.kind == EventKind::xid && e.data && std::ranges::binary_search(kFatalXids, *e.data);
}

namespace detail {

/// One subscriber: a bounded queue (count and bytes, the oldest dropped first) drained on its
/// strand by at most one delivery task at a time, or (without a callback: an EventQueue) popped
/// by the consumer.
class EventSubscriber : public std::enable_shared_from_this<EventSubscriber> {
 public:
  EventSubscriber(const boost::asio::any_io_executor& ex, std::function<void(const EventPtr&)> cb,
                  EventSubscribeOptions options, const EventLimits& limits,
                  std::shared_ptr<std::atomic<std::uint64_t>> channel_dropped)
      : strand_(boost::asio::make_strand(ex)),
        callback_(std::move(cb)),
        options_(std::move(options)),
        queue_limit_(std::max<std::size_t>(limits.queue, 1)),
        queue_bytes_limit_(limits.queue_bytes),
        channel_dropped_(std::move(channel_dropped)) {}

  bool matches(const GpuEvent& e) const {
    if (!options_.probes.empty() &&
        std::ranges::find(options_.probes, e.probe) == options_.probes.end())
      return false;
    if (!options_.devices.empty() &&
        std::ranges::find(options_.devices, e.device_id) == options_.devices.end())
      return false;
    return true;
  }

  void push(const EventPtr& e) {
    std::lock_guard lock(mu_);
    if (!active_) return;
    const auto size = event_bytes(*e);
    queue_.push_back(e);
    bytes_ += size;
    while (queue_.size() > 1 && (queue_.size() > queue_limit_ || bytes_ > queue_bytes_limit_)) {
      bytes_ -= event_bytes(*queue_.front());
      queue_.pop_front();
      ++dropped_;
      channel_dropped_->fetch_add(1, std::memory_order_relaxed);
    }
    if (!callback_) {  // pull-style: a waiting pop takes it
      ready_.notify_one();
      return;
    }
    if (scheduled_) return;
    scheduled_ = true;
    boost::asio::post(strand_, [self = shared_from_this()] { self->drain(); });
  }

  void drain() {
    std::unique_lock lock(mu_);
    while (active_ && !queue_.empty()) {
      auto e = std::move(queue_.front());
      queue_.pop_front();
      bytes_ -= event_bytes(*e);
      running_ = true;
      runner_ = std::this_thread::get_id();
      lock.unlock();
      try {
        callback_(e);
      } catch (...) {  // a subscriber's exception must not stop the others' deliveries
      }
      lock.lock();
      running_ = false;
      idle_.notify_all();
    }
    scheduled_ = false;
  }

  /// Pull-style: the next event, waiting up to `timeout` (zero: no wait) unless closed or the
  /// channel is gone.
  EventPtr pop(std::chrono::steady_clock::duration timeout) {
    std::unique_lock lock(mu_);
    if (timeout > std::chrono::steady_clock::duration::zero())
      ready_.wait_for(lock, timeout, [&] { return !active_ || channel_gone_ || !queue_.empty(); });
    if (!active_ || queue_.empty()) return nullptr;
    auto e = std::move(queue_.front());
    queue_.pop_front();
    bytes_ -= event_bytes(*e);
    return e;
  }

  /// The channel is being destroyed: nothing more comes; pops stop waiting.
  void channel_gone() {
    std::lock_guard lock(mu_);
    channel_gone_ = true;
    ready_.notify_all();
  }

  bool open() const {
    std::lock_guard lock(mu_);
    return active_ && !channel_gone_;
  }
  std::size_t size() const {
    std::lock_guard lock(mu_);
    return queue_.size();
  }
  std::size_t bytes() const {
    std::lock_guard lock(mu_);
    return bytes_;
  }

  void deactivate() {
    std::unique_lock lock(mu_);
    active_ = false;
    queue_.clear();
    bytes_ = 0;
    ready_.notify_all();
    idle_.wait(lock, [&] { return !running_ || runner_ == std::this_thread::get_id(); });
  }

  bool active() const {
    std::lock_guard lock(mu_);
    return active_;
  }
  std::uint64_t dropped() const {
    std::lock_guard lock(mu_);
    return dropped_;
  }

 private:
  boost::asio::strand<boost::asio::any_io_executor> strand_;
  std::function<void(const EventPtr&)> callback_;
  const EventSubscribeOptions options_;
  const std::size_t queue_limit_;
  const std::size_t queue_bytes_limit_;
  std::shared_ptr<std::atomic<std::uint64_t>> channel_dropped_;

  mutable std::mutex mu_;
  std::condition_variable idle_;
  std::condition_variable ready_;  // pull-style: an event was queued, or closed
  std::deque<EventPtr> queue_;     // guarded by mu_, as is everything below
  std::size_t bytes_ = 0;
  std::uint64_t dropped_ = 0;
  bool active_ = true;
  bool scheduled_ = false;
  bool running_ = false;
  bool channel_gone_ = false;
  std::thread::id runner_;
};

class EventChannelState {
 public:
  EventChannelState(boost::asio::any_io_executor ex, EventLimits limits)
      : ex_(std::move(ex)), limits_(limits) {}
  EventChannelState(const EventChannelState&) = delete;
  EventChannelState& operator=(const EventChannelState&) = delete;

  ~EventChannelState() {
    for (auto& w : subs_)
      if (auto s = w.lock()) s->channel_gone();
  }

  EventPtr publish(GpuEvent e) {
    std::vector<std::shared_ptr<EventSubscriber>> subs;
    EventPtr p;
    {
      std::lock_guard lock(mu_);
      e.sequence = ++last_;
      count(e);
      p = std::make_shared<const GpuEvent>(std::move(e));
      if (is_fatal(*p)) keep_fatal(p);
      recent_.push_back(p);
      recent_bytes_ += event_bytes(*p);
      while (recent_.size() > 1 &&
             (recent_.size() > limits_.recent || recent_bytes_ > limits_.recent_bytes)) {
        recent_bytes_ -= event_bytes(*recent_.front());
        recent_.pop_front();
      }
      std::erase_if(subs_, [](const std::weak_ptr<EventSubscriber>& w) { return w.expired(); });
      subs.reserve(subs_.size());
      for (auto& w : subs_)
        if (auto s = w.lock()) subs.push_back(std::move(s));
    }
    for (auto& s : subs)
      if (s->matches(*p)) s->push(p);
    return p;
  }

  std::shared_ptr<EventSubscriber> subscribe(std::function<void(const EventPtr&)> cb,
                                             EventSubscribeOptions options) {
    auto ex = options.executor.value_or(ex_);
    auto s = std::make_shared<EventSubscriber>(std::move(ex), std::move(cb), std::move(options),
                                               limits_, dropped_);
    std::lock_guard lock(mu_);
    subs_.push_back(s);
    return s;
  }

  std::vector<EventPtr> recent() const {
    std::lock_guard lock(mu_);
    return {recent_.begin(), recent_.end()};
  }

  EventTotals totals() const {
    std::lock_guard lock(mu_);
    EventTotals t{by_kind_, by_xid_, counters_locked()};
    return t;
  }

  EventCounters counters() const {
    std::lock_guard lock(mu_);
    return counters_locked();
  }

  std::uint64_t last() const {
    std::lock_guard lock(mu_);
    return last_;
  }

  std::vector<EventPtr> fatal() const {
    std::lock_guard lock(mu_);
    std::vector<EventPtr> out;
    out.reserve(fatal_.size());
    for (const auto& [device, e] : fatal_) out.push_back(e);
    std::ranges::sort(out, {}, &GpuEvent::sequence);
    return out;
  }

  const EventLimits& limits() const noexcept { return limits_; }

 private:
  EventCounters counters_locked() const {
    return {last_, dropped_->load(std::memory_order_relaxed)};
  }

  /// The device's newest fatal event replaces its previous one; a device beyond the bound
  /// replaces the device whose fatal event is the oldest.
  void keep_fatal(const EventPtr& p) {
    auto it = fatal_.find(p->device_id);
    if (it != fatal_.end()) {
      it->second = p;
      return;
    }
    if (fatal_.size() >= std::max<std::size_t>(limits_.devices, 1)) {
      const auto oldest =
          std::ranges::min_element(fatal_, {}, [](const auto& kv) { return kv.second->sequence; });
      fatal_.erase(oldest);
    }
    fatal_.emplace(p->device_id, p);
  }

  /// Totals, with bounded label sets: a device or an Xid number beyond the bounds is counted
  /// under "other" (so garbage event data cannot grow the maps).
  void count(const GpuEvent& e) {
    std::string device = e.device_id;
    if (!devices_.contains(device)) {
      if (devices_.size() >= limits_.devices)
        device = "other";
      else
        devices_[device] = 0;
    }
    ++by_kind_[{device, e.kind}];
    if (e.kind != EventKind::xid) return;
    std::string xid = e.data ? std::to_string(*e.data) : "other";
    auto& n = devices_[device];
    if (!by_xid_.contains({device, xid})) {
      if (n >= limits_.xid_labels)
        xid = "other";
      else
        ++n;
    }
    ++by_xid_[{device, xid}];
  }

  const boost::asio::any_io_executor ex_;
  const EventLimits limits_;
  std::shared_ptr<std::atomic<std::uint64_t>> dropped_ =
      std::make_shared<std::atomic<std::uint64_t>>(0);
  mutable std::mutex mu_;
  std::uint64_t last_ = 0;  // guarded by mu_, as is everything below
  std::deque<EventPtr> recent_;
  std::size_t recent_bytes_ = 0;
  std::vector<std::weak_ptr<EventSubscriber>> subs_;
  std::map<std::pair<std::string, EventKind>, std::uint64_t> by_kind_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> by_xid_;
  std::map<std::string, std::size_t> devices_;  // device → distinct Xid labels counted
  std::map<std::string, EventPtr> fatal_;       // device → its newest fatal event
};

}  // namespace detail

// --- EventSubscription ---

EventSubscription::EventSubscription() noexcept = default;
EventSubscription::EventSubscription(std::shared_ptr<detail::EventSubscriber> sub)
    : sub_(std::move(sub)) {}
EventSubscription::EventSubscription(EventSubscription&&) noexcept = default;
EventSubscription& EventSubscription::operator=(EventSubscription&& o) noexcept {
  if (this != &o) {
    reset();
    sub_ = std::move(o.sub_);
  }
  return *this;
}
EventSubscription::~EventSubscription() { reset(); }

void EventSubscription::reset() {
  if (sub_) sub_->deactivate();
}
bool EventSubscription::active() const { return sub_ && sub_->active(); }
std::uint64_t EventSubscription::dropped() const { return sub_ ? sub_->dropped() : 0; }

// --- EventQueue ---

EventQueue::EventQueue(std::shared_ptr<detail::EventSubscriber> sub) : sub_(std::move(sub)) {}
EventQueue::~EventQueue() { close(); }
EventPtr EventQueue::try_pop() { return sub_->pop(std::chrono::steady_clock::duration::zero()); }
EventPtr EventQueue::pop_for(std::chrono::steady_clock::duration timeout) {
  return sub_->pop(timeout);
}
void EventQueue::close() { sub_->deactivate(); }
bool EventQueue::closed() const { return !sub_->open(); }
std::size_t EventQueue::size() const { return sub_->size(); }
std::size_t EventQueue::bytes() const { return sub_->bytes(); }
std::uint64_t EventQueue::dropped() const { return sub_->dropped(); }

// --- EventChannel ---

EventChannel::EventChannel(boost::asio::any_io_executor ex, EventLimits limits)
    : state_(std::make_shared<detail::EventChannelState>(std::move(ex), limits)) {}
EventChannel::~EventChannel() = default;

EventPtr EventChannel::publish(GpuEvent e) { return state_->publish(std::move(e)); }

EventSubscription EventChannel::subscribe(std::function<void(const EventPtr&)> on_event,
                                          EventSubscribeOptions options) {
  return EventSubscription(state_->subscribe(std::move(on_event), std::move(options)));
}

std::shared_ptr<EventQueue> EventChannel::subscribe_queue(EventSubscribeOptions options) {
  options.executor.reset();
  // Not make_shared: the constructor is private to EventChannel.
  return std::shared_ptr<EventQueue>(new EventQueue(state_->subscribe({}, std::move(options))));
}

std::vector<EventPtr> EventChannel::recent() const { return state_->recent(); }
EventTotals EventChannel::totals() const { return state_->totals(); }
EventCounters EventChannel::counters() const { return state_->counters(); }
std::uint64_t EventChannel::last_sequence() const { return state_->last(); }
std::vector<EventPtr> EventChannel::fatal() const { return state_->fatal(); }
const EventLimits& EventChannel::limits() const noexcept { return state_->limits(); }

std::function<void(GpuEvent)> EventChannel::sink() const {
  return [weak = std::weak_ptr<detail::EventChannelState>(state_)](GpuEvent e) {
    if (auto s = weak.lock()) s->publish(std::move(e));
  };
}

}  // namespace gpustream
