#include "gpustream/work_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <pthread.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "gpustream/log.hpp"

namespace gpustream {
namespace {

// Process-wide: abandoned workers outlive their pool.
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
std::atomic<std::size_t> g_abandoned_alive{0};

void name_this_thread(const std::string& name) {
  // Linux limits thread names to 15 characters plus the terminator.
  const std::string shortened = name.substr(0, 15);
  pthread_setname_np(pthread_self(), shortened.c_str());
}

}  // namespace

// Shared by the WorkPool and each of its threads: a thread abandoned by stop() keeps it alive
// until it exits, so it never touches freed memory.
struct WorkPool::State {
  explicit State(std::size_t n) : count(n), ctx(static_cast<int>(n)), guard(ctx.get_executor()) {}

  const std::size_t count;
  boost::asio::io_context ctx;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard;

  std::mutex mu;
  std::condition_variable cv;
  // Guarded by mu.
  std::vector<std::thread> threads;
  std::vector<std::thread::id> ids;
  std::vector<bool> done;
  std::vector<bool> abandoned;
  bool stopped = false;
};

// The public signature takes the name by value (work_pool.hpp).
// NOLINTNEXTLINE(performance-unnecessary-value-param)
WorkPool::WorkPool(std::size_t threads, std::string name)
    : state_(std::make_shared<State>(std::max<std::size_t>(threads, 1))) {
  const std::size_t n = state_->count;
  std::lock_guard lock(state_->mu);
  state_->done.assign(n, false);
  state_->abandoned.assign(n, false);
  try {
    for (std::size_t i = 0; i < n; ++i) {
      state_->threads.emplace_back(
          [st = state_, i, thread_name = name + "-" + std::to_string(i)]() mutable {
            name_this_thread(thread_name);
            run_worker(st, i);
          });
      state_->ids.push_back(state_->threads.back().get_id());
    }
  } catch (...) {
    // Could not start every thread: stop the ones that did start, then report.
    state_->stopped = true;
    state_->guard.reset();
    state_->ctx.stop();
    for (auto& t : state_->threads) t.join();
    throw;
  }
}

WorkPool::~WorkPool() {
  if (state_) stop(kDefaultStopDeadline);
}

boost::asio::any_io_executor WorkPool::executor() const { return state_->ctx.get_executor(); }

std::size_t WorkPool::size() const noexcept { return state_->count; }

bool WorkPool::stopped() const noexcept {
  std::lock_guard lock(state_->mu);
  return state_->stopped;
}

std::size_t WorkPool::abandoned_threads_alive() noexcept { return g_abandoned_alive.load(); }

WorkPool::StopResult WorkPool::stop(std::chrono::steady_clock::duration deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  auto st = state_;
  std::vector<std::thread> to_join;
  StopResult result;
  {
    std::unique_lock lock(st->mu);
    if (st->stopped) return result;
    st->stopped = true;
    st->guard.reset();
    st->ctx.stop();  // idle threads return from run(); busy ones after their current task

    const auto self = std::this_thread::get_id();
    auto all_done = [&] {
      for (std::size_t i = 0; i < st->done.size(); ++i)
        if (!st->done[i] && st->ids[i] != self) return false;
      return true;
    };
    st->cv.wait_until(lock, until, all_done);

    for (std::size_t i = 0; i < st->threads.size(); ++i) {
      if (st->done[i]) {
        to_join.push_back(std::move(st->threads[i]));
        ++result.joined;
      } else {
        // Still busy (or it is the calling thread): let it finish on its own.
        st->abandoned[i] = true;
        g_abandoned_alive.fetch_add(1);
        st->threads[i].detach();
        ++result.abandoned;
      }
    }
  }
  for (auto& t : to_join) t.join();
  if (result.abandoned > 0) {
    logger()->warn(
        "work pool stopped with {} thread(s) still busy in a task; they were "
        "abandoned and will exit when their task returns",
        result.abandoned);
  }
  return result;
}

void WorkPool::run_worker(std::shared_ptr<State>& st, std::size_t index) {
  for (;;) {
    try {
      st->ctx.run();
      break;  // stopped, or out of work after the guard was released
    } catch (const std::exception& e) {
      logger()->error("work pool task threw: {}", e.what());
    } catch (...) {
      logger()->error("work pool task threw a non-standard exception");
    }
  }
  bool was_abandoned = false;
  {
    std::lock_guard lock(st->mu);
    st->done[index] = true;
    was_abandoned = st->abandoned[index];
  }
  st->cv.notify_all();
  // Drop this thread's share of the state; for the last abandoned thread this destroys the
  // io_context (and any tasks that never ran) here, after run() has returned.
  st.reset();
  if (was_abandoned) g_abandoned_alive.fetch_sub(1);
}

}  // namespace gpustream
