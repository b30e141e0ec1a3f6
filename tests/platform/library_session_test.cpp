#include "gpustream/library_session.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/errors.hpp"
#include "gpustream_fake_paths.hpp"

namespace gpustream {
namespace {

using namespace std::chrono_literals;

// The fake vendor library, loaded the way a probe loads NVML: a typed table of functions.
struct FakeLibrary {
  DynamicLibrary lib = DynamicLibrary::load(fakes::kCountingLibrary);
  int (*init)() = lib.required<int()>("fake_init");
  void (*shutdown)() = lib.required<void()>("fake_shutdown");
  int (*use)() = lib.required<int()>("fake_use");
  int (*init_count)() = lib.required<int()>("fake_init_count");
  int (*shutdown_count)() = lib.required<int()>("fake_shutdown_count");
  int (*is_initialized)() = lib.required<int()>("fake_is_initialized");
  int (*violations)() = lib.required<int()>("fake_violations");
  void (*set_fail_next)(int) = lib.required<void(int)>("fake_set_fail_next");
  void (*set_delay_us)(int) = lib.required<void(int)>("fake_set_delay_us");
  void (*reset)() = lib.required<void()>("fake_reset");

  FakeLibrary() { reset(); }

  LibrarySession::InitFn init_fn() {
    return [this]() -> std::optional<std::string> {
      if (const int rc = init(); rc != 0) return "fake_init returned " + std::to_string(rc);
      return std::nullopt;
    };
  }
  LibrarySession::ShutdownFn shutdown_fn() {
    return [this] { shutdown(); };
  }
};

// Waits (with a generous deadline that only matters on failure) until `done()`.
template <class Pred>
bool eventually(Pred done) {
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

// A gate an init function can block on, so a test decides when init finishes.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> entered{0};
  void wait() {
    entered.fetch_add(1);
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return open; });
  }
  void release() {
    {
      std::lock_guard lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

void hammer(LibrarySession& session, FakeLibrary& fake, int threads, int iterations,
            std::atomic<int>& failures) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < iterations; ++i) {
        auto guard = session.acquire();
        if (fake.use() != 0) failures.fetch_add(1);
        if (session.use_count() <= 0 || !session.initialized()) failures.fetch_add(1);
        if (i % 7 == 0) std::this_thread::yield();
      }
    });
  }
  for (auto& th : pool) th.join();
}

TEST(LibrarySession, LazyManyThreadsOneInitPerTransition) {
  FakeLibrary fake;
  fake.set_delay_us(20);  // widen the windows around init and shutdown
  std::atomic<int> failures{0};
  {
    LibrarySession session("FAKE", LibrarySessionMode::lazy, fake.init_fn(), fake.shutdown_fn());
    hammer(session, fake, 32, 300, failures);
    EXPECT_EQ(session.use_count(), 0);
    EXPECT_FALSE(session.initialized());
    const auto stats = session.stats();
    EXPECT_EQ(stats.inits, static_cast<std::uint64_t>(fake.init_count()));
    EXPECT_EQ(stats.shutdowns, static_cast<std::uint64_t>(fake.shutdown_count()));
    EXPECT_EQ(stats.failed_inits, 0u);
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(fake.violations(), 0) << "init while initialized, concurrent init, shutdown while "
                                     "not initialized, or a call while not initialized";
  EXPECT_GE(fake.init_count(), 1);
  EXPECT_EQ(fake.init_count(), fake.shutdown_count());
  EXPECT_EQ(fake.is_initialized(), 0);
}

// Rounds in lockstep: in each, 32 threads race to take the first reference (0→1) and the
// round ends with every reference dropped (1→0), so the transitions themselves are contended
// hundreds of times.
TEST(LibrarySession, LazyManyThreadsRacingOnEveryTransition) {
  constexpr int kThreads = 32;
  constexpr int kRounds = 150;
  FakeLibrary fake;
  fake.set_delay_us(20);
  std::atomic<int> failures{0};
  {
    LibrarySession session("FAKE", LibrarySessionMode::lazy, fake.init_fn(), fake.shutdown_fn());
    std::barrier sync(kThreads);
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t) {
      pool.emplace_back([&] {
        for (int round = 0; round < kRounds; ++round) {
          sync.arrive_and_wait();
          for (int i = 0; i < 2; ++i) {
            auto guard = session.acquire();
            if (fake.use() != 0) failures.fetch_add(1);
          }
          sync.arrive_and_wait();  // everyone released: the library is shut down
          if (session.initialized() || session.use_count() != 0) failures.fetch_add(1);
        }
      });
    }
    for (auto& th : pool) th.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(fake.violations(), 0);
  EXPECT_GE(fake.init_count(), kRounds);  // at least one 0→1 per round
  EXPECT_EQ(fake.init_count(), fake.shutdown_count());
  EXPECT_EQ(fake.is_initialized(), 0);
}

TEST(LibrarySession, PersistentManyThreadsInitOnceShutdownAtEnd) {
  FakeLibrary fake;
  fake.set_delay_us(200);
  std::atomic<int> failures{0};
  {
    LibrarySession session("FAKE", LibrarySessionMode::persistent, fake.init_fn(),
                           fake.shutdown_fn());
    hammer(session, fake, 32, 100, failures);
    EXPECT_EQ(fake.init_count(), 1);
    EXPECT_EQ(fake.shutdown_count(), 0);
    EXPECT_TRUE(session.initialized());
    EXPECT_EQ(session.use_count(), 1);  // the session's own reference
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(fake.violations(), 0);
  EXPECT_EQ(fake.shutdown_count(), 1);
  EXPECT_EQ(fake.is_initialized(), 0);
}

TEST(LibrarySession, LazyReleasesTheLibraryBetweenSamples) {
  FakeLibrary fake;
  LibrarySession session("FAKE", LibrarySessionMode::lazy, fake.init_fn(), fake.shutdown_fn());
  EXPECT_FALSE(session.initialized());
  EXPECT_EQ(fake.init_count(), 0);  // nothing happens before the first sample
  for (int sample = 1; sample <= 3; ++sample) {
    {
      auto guard = session.acquire();
      EXPECT_TRUE(guard);
      EXPECT_EQ(fake.is_initialized(), 1);
      EXPECT_EQ(session.use_count(), 1);
      EXPECT_EQ(fake.use(), 0);
    }
    EXPECT_EQ(fake.is_initialized(), 0);
    EXPECT_EQ(session.use_count(), 0);
    EXPECT_EQ(fake.init_count(), sample);
    EXPECT_EQ(fake.shutdown_count(), sample);
  }
  EXPECT_EQ(fake.violations(), 0);
}

TEST(LibrarySession, PersistentKeepsTheLibraryUntilDestroyed) {
  FakeLibrary fake;
  {
    LibrarySession session("FAKE", LibrarySessionMode::persistent, fake.init_fn(),
                           fake.shutdown_fn());
    for (int sample = 0; sample < 3; ++sample) {
      auto guard = session.acquire();
      EXPECT_EQ(fake.use(), 0);
    }
    EXPECT_EQ(fake.is_initialized(), 1);
    EXPECT_EQ(fake.init_count(), 1);
    EXPECT_EQ(fake.shutdown_count(), 0);
  }
  EXPECT_EQ(fake.shutdown_count(), 1);
  EXPECT_EQ(fake.violations(), 0);
}

TEST(LibrarySession, PersistentNeverUsedNeverInitializes) {
  FakeLibrary fake;
  {
    LibrarySession session("FAKE", LibrarySessionMode::persistent, fake.init_fn(),
                           fake.shutdown_fn());
  }
  EXPECT_EQ(fake.init_count(), 0);
  EXPECT_EQ(fake.shutdown_count(), 0);
}

TEST(LibrarySession, FailingInitIsReportedAndRetriedNextAcquire) {
  FakeLibrary fake;
  LibrarySession session("FAKE", LibrarySessionMode::lazy, fake.init_fn(), fake.shutdown_fn());
  fake.set_fail_next(2);
  try {
    auto guard = session.acquire();
    FAIL() << "acquire() should throw";
  } catch (const LibrarySessionError& e) {
    EXPECT_STREQ(e.what(), "FAKE init failed: fake_init returned 1");
  }
  boost::system::error_code ec;
  std::string message;
  auto failed = session.acquire(ec, &message);
  EXPECT_FALSE(failed);
  EXPECT_EQ(ec, make_error_code(errc::sample_failed));
  EXPECT_EQ(message, "FAKE init failed: fake_init returned 1");
  EXPECT_FALSE(session.initialized());
  EXPECT_EQ(session.use_count(), 0);

  auto guard = session.acquire(ec, &message);  // the library works again
  EXPECT_FALSE(ec);
  EXPECT_TRUE(guard);
  EXPECT_EQ(fake.is_initialized(), 1);
  const auto stats = session.stats();
  EXPECT_EQ(stats.failed_inits, 2u);
  EXPECT_EQ(stats.inits, 1u);
  guard.release();
  EXPECT_EQ(fake.is_initialized(), 0);
  EXPECT_EQ(fake.violations(), 0);
}

TEST(LibrarySession, InitThatThrowsIsAFailure) {
  int shutdowns = 0;
  LibrarySession session(
      "X", LibrarySessionMode::lazy,
      []() -> std::optional<std::string> { throw std::runtime_error("driver not loaded"); },
      [&] { ++shutdowns; });
  boost::system::error_code ec;
  std::string message;
  EXPECT_FALSE(session.acquire(ec, &message));
  EXPECT_EQ(message, "X init failed: driver not loaded");
  EXPECT_EQ(shutdowns, 0);
}

TEST(LibrarySession, OverlappingAcquiresShareOneInit) {
  FakeLibrary fake;
  Gate gate;
  LibrarySession session(
      "FAKE", LibrarySessionMode::lazy,
      [&]() -> std::optional<std::string> {
        gate.wait();
        return fake.init() == 0 ? std::nullopt : std::optional<std::string>("failed");
      },
      fake.shutdown_fn());
  auto first = std::async(std::launch::async, [&] { return session.acquire(); });
  ASSERT_TRUE(eventually([&] { return gate.entered.load() == 1; }));
  auto second = std::async(std::launch::async, [&] { return session.acquire(); });
  ASSERT_TRUE(eventually([&] { return session.waiters() == 1; }));  // blocked, not initializing
  EXPECT_FALSE(session.initialized());
  gate.release();
  auto a = first.get();
  auto b = second.get();
  EXPECT_TRUE(a);
  EXPECT_TRUE(b);
  EXPECT_EQ(gate.entered.load(), 1);
  EXPECT_EQ(fake.init_count(), 1);
  EXPECT_EQ(session.use_count(), 2);
  a.release();
  EXPECT_EQ(fake.is_initialized(), 1);  // b still holds it
  b.release();
  EXPECT_EQ(fake.is_initialized(), 0);
  EXPECT_EQ(fake.shutdown_count(), 1);
  EXPECT_EQ(fake.violations(), 0);
}

TEST(LibrarySession, WaitersOnAFailedInitShareItsError) {
  Gate gate;
  std::atomic<int> attempts{0};
  LibrarySession session(
      "FAKE", LibrarySessionMode::persistent,
      [&]() -> std::optional<std::string> {
        const int n = attempts.fetch_add(1) + 1;
        if (n == 1) gate.wait();
        if (n == 1) return "no device (attempt " + std::to_string(n) + ")";
        return std::nullopt;
      },
      [] {});
  auto first = std::async(std::launch::async, [&] {
    boost::system::error_code ec;
    std::string message;
    session.acquire(ec, &message);
    return message;
  });
  ASSERT_TRUE(eventually([&] { return gate.entered.load() == 1; }));
  auto second = std::async(std::launch::async, [&] {
    boost::system::error_code ec;
    std::string message;
    session.acquire(ec, &message);
    return message;
  });
  ASSERT_TRUE(eventually([&] { return session.waiters() == 1; }));
  gate.release();
  EXPECT_EQ(first.get(), "FAKE init failed: no device (attempt 1)");
  EXPECT_EQ(second.get(), "FAKE init failed: no device (attempt 1)");
  EXPECT_EQ(attempts.load(), 1);   // one attempt, shared by both
  auto guard = session.acquire();  // the next acquire tries again
  EXPECT_EQ(attempts.load(), 2);
  EXPECT_TRUE(session.initialized());
}

TEST(LibrarySession, GuardMayOutliveTheSession) {
  FakeLibrary fake;
  LibrarySession::Guard guard;
  {
    LibrarySession session("FAKE", LibrarySessionMode::persistent, fake.init_fn(),
                           fake.shutdown_fn());
    guard = session.acquire();
  }
  EXPECT_EQ(fake.is_initialized(), 1);  // still in use
  guard = LibrarySession::Guard();
  EXPECT_EQ(fake.is_initialized(), 0);
  EXPECT_EQ(fake.shutdown_count(), 1);
  EXPECT_EQ(fake.violations(), 0);
}

TEST(LibrarySession, GuardMoves) {
  FakeLibrary fake;
  LibrarySession session("FAKE", LibrarySessionMode::lazy, fake.init_fn(), fake.shutdown_fn());
  auto a = session.acquire();
  LibrarySession::Guard b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_TRUE(b);
  EXPECT_EQ(session.use_count(), 1);
  auto c = session.acquire();
  c = std::move(b);  // drops c's own reference
  EXPECT_EQ(session.use_count(), 1);
  EXPECT_EQ(fake.is_initialized(), 1);
  c.release();
  c.release();  // idempotent
  EXPECT_EQ(fake.is_initialized(), 0);
  EXPECT_EQ(fake.shutdown_count(), 1);
}

}  // namespace
}  // namespace gpustream
