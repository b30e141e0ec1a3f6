// The fleet view's per-publisher budgets and queues (fleet_intake.hpp).
#include "fleet/fleet_intake.hpp"

#include <algorithm>

namespace gpustream::transport {

PublisherIntake::PublisherIntake(PublisherBudget budget, std::size_t max_publishers)
    : budget_(budget), max_publishers_(std::max<std::size_t>(max_publishers, 1)) {}

PublisherIntake::Publisher* PublisherIntake::find_or_make(const std::string& node,
                                                          Clock::time_point now) {
  if (const auto it = publishers_.find(node); it != publishers_.end()) return it->second.get();
  if (publishers_.size() >= max_publishers_) {
    if (idle_.empty()) return nullptr;
    Publisher* victim = idle_.front();
    idle_.pop_front();
    publishers_.erase(victim->name);
  }
  const double burst = std::chrono::duration<double>(budget_.burst).count();
  auto p = std::make_unique<Publisher>();
  p->name = node;
  p->messages = TokenBucket(budget_.messages_per_second,
                            std::max(1.0, budget_.messages_per_second * burst), now);
  p->bytes = TokenBucket(static_cast<double>(budget_.bytes_per_second),
                         static_cast<double>(budget_.bytes_per_second) * burst, now);
  const double cpu_ns = std::chrono::duration<double, std::nano>(budget_.cpu_per_second).count();
  p->cpu = TokenBucket(cpu_ns, cpu_ns * burst, now);
  Publisher* raw = p.get();
  publishers_.emplace(node, std::move(p));
  set_idle(*raw);
  return raw;
}

void PublisherIntake::set_idle(Publisher& p) {
  if (p.in_idle || p.busy || !p.queue.empty()) return;
  p.idle = idle_.insert(idle_.end(), &p);
  p.in_idle = true;
}

void PublisherIntake::unset_idle(Publisher& p) {
  if (!p.in_idle) return;
  idle_.erase(p.idle);
  p.in_idle = false;
}

PublisherIntake::Push PublisherIntake::push(IntakeItem&& item, Clock::time_point now) {
  const std::size_t bytes = item.bytes();
  std::lock_guard lock(mu_);
  if (closed_) return Push::queue_full;
  Publisher* p = find_or_make(item.node, now);
  if (!p) return Push::queue_full;  // every publisher busy: all queues hold something
  if (!p->messages.take(1, now)) return Push::budget_messages;
  if (p->queue.size() >= budget_.queue_messages || p->queued_bytes + bytes > budget_.queue_bytes ||
      pending_bytes_ + bytes > budget_.total_queue_bytes)
    return Push::queue_full;
  unset_idle(*p);
  p->queue.push_back(std::move(item));
  p->queued_bytes += bytes;
  pending_bytes_ += bytes;
  ++pending_;
  if (!p->ready && !p->busy) {
    ready_.push_back(p);
    p->ready = true;
  }
  return Push::queued;
}

std::optional<IntakeItem> PublisherIntake::pop_locked() {
  if (ready_.empty()) return std::nullopt;
  Publisher* p = ready_.front();
  ready_.pop_front();
  p->ready = false;
  IntakeItem item = std::move(p->queue.front());
  p->queue.pop_front();
  const std::size_t bytes = item.bytes();
  p->queued_bytes -= bytes;
  pending_bytes_ -= bytes;
  p->busy = true;  // back in turn at finish(): one message of it at a time
  return item;
}

std::optional<IntakeItem> PublisherIntake::try_pop() {
  std::optional<IntakeItem> item;
  {
    std::lock_guard lock(mu_);
    item = pop_locked();
  }
  if (item) room_cv_.notify_all();
  return item;
}

void PublisherIntake::finish(const std::string& node) {
  {
    std::lock_guard lock(mu_);
    --pending_;
    const auto it = publishers_.find(node);
    if (it == publishers_.end()) return;
    Publisher& p = *it->second;
    p.busy = false;
    if (!p.queue.empty()) {
      ready_.push_back(&p);  // at the end of the turn: the others go first
      p.ready = true;
    } else {
      set_idle(p);
    }
  }
  room_cv_.notify_all();
}

bool PublisherIntake::take_bytes(const std::string& node, std::size_t bytes,
                                 Clock::time_point now) {
  std::lock_guard lock(mu_);
  const auto it = publishers_.find(node);
  return it != publishers_.end() && it->second->bytes.take(static_cast<double>(bytes), now);
}

bool PublisherIntake::cpu_left(const std::string& node, Clock::time_point now) {
  std::lock_guard lock(mu_);
  const auto it = publishers_.find(node);
  return it != publishers_.end() && it->second->cpu.positive(now);
}

void PublisherIntake::charge_cpu(const std::string& node, std::chrono::nanoseconds cpu) {
  std::lock_guard lock(mu_);
  if (const auto it = publishers_.find(node); it != publishers_.end())
    it->second->cpu.charge(static_cast<double>(cpu.count()));
}

bool PublisherIntake::wait_for_room() {
  std::unique_lock lock(mu_);
  room_cv_.wait(lock,
                [this] { return closed_ || pending_bytes_ <= budget_.total_queue_bytes / 2; });
  return !closed_;
}

void PublisherIntake::close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  room_cv_.notify_all();
}

std::size_t PublisherIntake::publishers() const {
  std::lock_guard lock(mu_);
  return publishers_.size();
}

std::size_t PublisherIntake::pending() const {
  std::lock_guard lock(mu_);
  return pending_;
}

std::size_t PublisherIntake::pending_bytes() const {
  std::lock_guard lock(mu_);
  return pending_bytes_;
}

}  // namespace gpustream::transport
