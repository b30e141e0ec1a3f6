// fleet/fleet_intake.hpp — the fleet view's per-publisher budgets and queues (private).
//
// Between the bus (the view's worker takes each message from its NATS subscription, the bucket's
// thread its entries) and the decoding: each publisher (a node, named by the subject) has token
// buckets (messages, inflated bytes and decode CPU time per second, PublisherBudget) and a queue
// bounded in messages and bytes. push() is the delivery side (the message rate, the queue
// bounds); try_pop() gives the worker one message of the next publisher round robin, so a
// flooding publisher waits its turn like any other. Time is given by the caller (tests drive
// it).
//
// Bounded: at most `max_publishers` entries; a new publisher beyond that replaces the idle one
// (empty queue, nothing being decoded) used longest ago, or is refused (queue_full) when none
// is idle. All queues together hold at most total_queue_bytes.
//
// Thread safety: every member may be called from any thread. close() wakes wait_for_room() for
// good.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "gpustream/transport/fleet.hpp"

namespace gpustream::transport {

/// A rate with a burst: `rate` units a second, at most `capacity` kept. take() refuses what the
/// level lacks; charge() may leave it in debt (below 0), paid back by time.
class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  TokenBucket() = default;
  TokenBucket(double rate, double capacity, Clock::time_point now)
      : rate_(rate), capacity_(capacity), level_(capacity), last_(now) {}

  bool take(double amount, Clock::time_point now) {
    refill(now);
    if (level_ < amount) return false;
    level_ -= amount;
    return true;
  }
  /// Whether anything is left (a debt refuses until it is paid back).
  bool positive(Clock::time_point now) {
    refill(now);
    return level_ > 0;
  }
  void charge(double amount) { level_ -= amount; }
  bool full(Clock::time_point now) {
    refill(now);
    return level_ >= capacity_;
  }
  double level() const noexcept { return level_; }

 private:
  void refill(Clock::time_point now) {
    if (now > last_) {
      level_ =
          std::min(capacity_, level_ + rate_ * std::chrono::duration<double>(now - last_).count());
      last_ = now;
    }
  }
  double rate_ = 0;
  double capacity_ = 0;
  double level_ = 0;
  Clock::time_point last_{};
};

/// A message waiting to be decoded.
struct IntakeItem {
  std::string data;
  std::string node;   // the publisher: the subject's node token (or the bucket's key)
  std::string probe;  // the subject's probe token ("" for the bucket's entries)
  std::chrono::steady_clock::time_point heard;
  std::int64_t heard_unix_ns = 0;
  /// Set for an entry of the key-value bucket: shared by the messages of one key, so that the
  /// node is counted once in kv_nodes when one of them gives a snapshot.
  std::shared_ptr<bool> kv_key;
  std::size_t bytes() const noexcept { return data.size() + node.size() + probe.size() + 64; }
};

class PublisherIntake {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Push { queued, budget_messages, queue_full };

  PublisherIntake(PublisherBudget budget, std::size_t max_publishers);

  /// The delivery side: takes one message token of the item's publisher and queues the item.
  Push push(IntakeItem&& item, Clock::time_point now);
  /// One item, of the next publisher in turn (nullopt: nothing queued). The publisher is busy
  /// until finish(item.node): its budget entry stays while the item is decoded.
  std::optional<IntakeItem> try_pop();
  void finish(const std::string& node);
  /// The worker side, before decoding: takes `bytes` inflated bytes of the publisher's budget;
  /// whether its CPU bucket has anything left; after decoding: charges `cpu`.
  bool take_bytes(const std::string& node, std::size_t bytes, Clock::time_point now);
  bool cpu_left(const std::string& node, Clock::time_point now);
  void charge_cpu(const std::string& node, std::chrono::nanoseconds cpu);
  /// Waits until all queues together hold at most half of total_queue_bytes (the bucket's read
  /// waits so rather than have its entries refused); false once closed.
  bool wait_for_room();
  void close();

  std::size_t publishers() const;
  std::size_t pending() const;        // queued, or popped and not finished
  std::size_t pending_bytes() const;  // queued, as received

 private:
  struct Publisher {
    std::string name;
    TokenBucket messages, bytes, cpu;
    std::deque<IntakeItem> queue;
    std::size_t queued_bytes = 0;
    bool busy = false;                     // an item of it is being decoded
    bool ready = false;                    // in ready_
    std::list<Publisher*>::iterator idle;  // in idle_ when !busy && queue.empty()
    bool in_idle = false;
  };
  Publisher* find_or_make(const std::string& node, Clock::time_point now);
  void set_idle(Publisher& p);
  void unset_idle(Publisher& p);
  std::optional<IntakeItem> pop_locked();

  PublisherBudget budget_;
  std::size_t max_publishers_;
  mutable std::mutex mu_;
  std::condition_variable room_cv_;  // bytes taken out, or closed
  std::unordered_map<std::string, std::unique_ptr<Publisher>> publishers_;
  std::deque<Publisher*> ready_;  // publishers with something queued, in turn
  std::list<Publisher*> idle_;    // idle publishers, used longest ago first
  std::size_t pending_ = 0;
  std::size_t pending_bytes_ = 0;
  bool closed_ = false;
};

}  // namespace gpustream::transport
