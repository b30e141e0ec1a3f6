// WorkPool: runs blocking work on its threads, and stop(deadline) returns even when a task is
// hung (the thread is abandoned and exits on its own once the task returns).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include <boost/asio/post.hpp>

#include "gpustream/work_pool.hpp"

namespace gpustream::test {
namespace {

using namespace std::chrono_literals;

/// An event a test can wait for (with a generous deadline that only matters on failure).
class Flag {
 public:
  void set() {
    std::lock_guard lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait(std::chrono::seconds limit = 10s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return set_; });
  }
  bool is_set() {
    std::lock_guard lock(mu_);
    return set_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

/// Waits until no abandoned pool thread is left alive: a detached thread must not outlive the
/// test (the sanitizers would see it). Polls: an exiting thread has nobody left to notify.
bool abandoned_threads_exit(std::size_t baseline) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (WorkPool::abandoned_threads_alive() > baseline) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(WorkPool, RunsTasksOnItsOwnThreads) {
  WorkPool pool(3);
  EXPECT_EQ(pool.size(), 3u);
  constexpr int kTasks = 20;
  std::mutex mu;
  std::set<std::thread::id> ids;
  int done = 0;
  Flag all_done;
  for (int i = 0; i < kTasks; ++i) {
    boost::asio::post(pool.executor(), [&] {
      std::lock_guard lock(mu);
      ids.insert(std::this_thread::get_id());
      if (++done == kTasks) all_done.set();
    });
  }
  ASSERT_TRUE(all_done.wait());
  const auto r = pool.stop(10s);
  EXPECT_EQ(r.joined, 3u);
  EXPECT_EQ(r.abandoned, 0u);
  EXPECT_TRUE(pool.stopped());
  std::lock_guard lock(mu);
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);
}

TEST(WorkPool, StopReturnsAtTheDeadlineAndAbandonsAHungTask) {
  const auto baseline = WorkPool::abandoned_threads_alive();
  std::latch release(1);
  Flag started;
  auto finished = std::make_shared<std::atomic<bool>>(false);
  {
    WorkPool pool(2);
    boost::asio::post(pool.executor(), [&release, &started, finished] {
      started.set();
      release.wait();  // a vendor call that does not return
      finished->store(true);
    });
    ASSERT_TRUE(started.wait());

    const auto r = pool.stop(50ms);
    EXPECT_EQ(r.abandoned, 1u);
    EXPECT_EQ(r.joined, 1u);
    EXPECT_FALSE(finished->load());  // stop() did not wait for it
    EXPECT_EQ(WorkPool::abandoned_threads_alive(), baseline + 1);
    EXPECT_EQ(pool.stop(50ms).abandoned, 0u);  // idempotent
  }  // the pool is destroyed while its abandoned thread is still blocked

  release.count_down();
  ASSERT_TRUE(abandoned_threads_exit(baseline));
  EXPECT_TRUE(finished->load());
}

TEST(WorkPool, TasksQueuedBehindAHungOneNeverRunAndAreReleased) {
  const auto baseline = WorkPool::abandoned_threads_alive();
  std::latch release(1);
  Flag started;
  auto ran = std::make_shared<std::atomic<int>>(0);
  auto payload = std::make_shared<int>(7);
  std::weak_ptr<int> watch = payload;
  {
    WorkPool pool(1);
    boost::asio::post(pool.executor(), [&] {
      started.set();
      release.wait();
    });
    ASSERT_TRUE(started.wait());
    boost::asio::post(pool.executor(), [ran, p = std::move(payload)] { ran->fetch_add(*p); });
    EXPECT_EQ(pool.stop(20ms).abandoned, 1u);
    boost::asio::post(pool.executor(), [ran] { ran->fetch_add(100); });  // after stop
  }
  release.count_down();
  ASSERT_TRUE(abandoned_threads_exit(baseline));
  EXPECT_EQ(ran->load(), 0);
  EXPECT_TRUE(watch.expired());  // destroyed with the pool's state, by the last thread
}

TEST(WorkPool, StopFromInsideATaskDoesNotDeadlock) {
  const auto baseline = WorkPool::abandoned_threads_alive();
  auto pool = std::make_shared<WorkPool>(1);
  std::promise<WorkPool::StopResult> result;
  boost::asio::post(pool->executor(), [&, pool] { result.set_value(pool->stop(10s)); });
  auto fut = result.get_future();
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
  const auto r = fut.get();
  EXPECT_EQ(r.abandoned, 1u);  // the calling thread itself, which then exits on its own
  EXPECT_EQ(r.joined, 0u);
  pool.reset();
  ASSERT_TRUE(abandoned_threads_exit(baseline));
}

TEST(WorkPool, ATaskThatThrowsDoesNotKillItsThread) {
  WorkPool pool(1);
  Flag after;
  boost::asio::post(pool.executor(), [] { throw std::runtime_error("vendor bug"); });
  boost::asio::post(pool.executor(), [&] { after.set(); });
  EXPECT_TRUE(after.wait());
  EXPECT_EQ(pool.stop(10s).joined, 1u);
}

}  // namespace
}  // namespace gpustream::test
