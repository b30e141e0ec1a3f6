// gpustream/work_pool.hpp — the threads that run blocking work (vendor calls, file walks).
//
// WorkPool owns N threads that run tasks posted to executor(); that executor is what probes get
// as ProbeExecutors::work. Tasks run in parallel and in no particular order.
//
// Stopping: stop(deadline) stops taking tasks, lets the threads that are idle or finish their
// current task within the deadline exit (and joins them), and returns by the deadline even when
// a task is hung forever (a vendor call that never returns must not hang Telemetry::stop).
// A thread still busy at the deadline is *abandoned*: detached, it finishes its task whenever
// that returns and then exits on its own. This is safe because everything such a thread touches
// is kept alive by reference counting: the pool's internal state (its io_context) is shared with
// every thread, and tasks keep their own objects alive through shared_ptr (BlockingProbe does).
// What a late task still must not do is use an object owned elsewhere that its owner destroys
// after stop(): e.g. post to an io_context that is gone (BlockingProbe posts its result to the
// io executor when the vendor call finally returns). So when stop() reports abandoned threads,
// the owner of such objects should keep them alive (Telemetry: intentionally leak the
// io_context rather than destroy it under a thread that may still post to it).
// Tasks that were queued but not started when stop() is called never run; they are destroyed
// with the pool's state, i.e. once the last thread has exited (with abandoned threads: later,
// on the last of them) — the same caveat applies to what those tasks hold.
//
// Thread safety: executor() and the accessors may be called from any thread; stop() is
// idempotent and may be called from any thread, including from a task on the pool itself (that
// thread is then abandoned rather than joined). The destructor calls stop(kDefaultStopDeadline).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>

namespace gpustream {

class WorkPool {
 public:
  static constexpr std::chrono::milliseconds kDefaultStopDeadline{2000};

  struct StopResult {
    std::size_t joined = 0;     // threads that exited within the deadline
    std::size_t abandoned = 0;  // threads still busy at the deadline, detached
  };

  /// Starts `threads` threads (at least 1). `name` prefixes the thread names ("name-0", ...),
  /// cut to the 15 characters Linux allows.
  explicit WorkPool(std::size_t threads = 2, std::string name = "gs-work");
  ~WorkPool();

  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  /// Executor for blocking work. Stays valid (posting is harmless) after stop(); tasks posted
  /// after stop() never run.
  boost::asio::any_io_executor executor() const;

  /// Stops the pool; see the class comment. Returns within `deadline` (plus the time to join
  /// threads that have already finished). A second call returns {0, 0}.
  StopResult stop(std::chrono::steady_clock::duration deadline = kDefaultStopDeadline);

  std::size_t size() const noexcept;
  bool stopped() const noexcept;

  /// Threads of any WorkPool in this process that were abandoned by stop() and have not exited
  /// yet (diagnostics and tests).
  static std::size_t abandoned_threads_alive() noexcept;

 private:
  struct State;
  static void run_worker(std::shared_ptr<State>& st, std::size_t index);

  std::shared_ptr<State> state_;
};

}  // namespace gpustream
