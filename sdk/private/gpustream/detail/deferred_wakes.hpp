// Private to the project (channel.cpp; the fleet view's worker, transport/src/fleet/
// fleet_view.cpp; tests/channel/channel_batch_test.cpp): SnapshotChannel's wake-ups deferred on
// one thread, so that a burst of snapshots published together wakes each subscriber once.
//
// While a DeferredWakes lives on a thread, SnapshotChannel::publish() on that thread (to any
// channel) numbers, stores and queues each snapshot for its subscribers at once, as always
// (latest(), history_since() and the subscribers' queues see it when publish() returns), but
// does not wake them: flush() (and the destructor) does, each subscriber once for everything
// queued since. A subscriber already woken stays scheduled, so it is not woken again until its
// delivery task has run; so deferring only delays deliveries, and by as long as the caller waits
// before flush(): the caller bounds that (the fleet's worker flushes when it has nothing queued,
// and every kFleetPublishBatch snapshots).
//
// Thread safety: a DeferredWakes belongs to the thread that made it; one at a time per thread
// (a second one on the same thread defers nothing of its own: the first one wakes). A publish
// from a subscriber that flush() runs inline (an inline executor) wakes at once.
#pragma once

#include <cstddef>

namespace gpustream::detail {

class DeferredWakes {
 public:
  DeferredWakes();
  ~DeferredWakes();
  DeferredWakes(const DeferredWakes&) = delete;
  DeferredWakes& operator=(const DeferredWakes&) = delete;

  /// Wakes the subscribers of every publish since the last flush (or since this was made).
  void flush();
  /// Whether this one defers (false for a second one on the same thread).
  bool active() const noexcept { return owner_; }

 private:
  bool owner_ = false;
  std::size_t mark_ = 0;  // where this thread's deferred wake-ups start in its wake list
};

}  // namespace gpustream::detail
