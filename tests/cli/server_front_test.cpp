// SignalStop (cli/server_front.hpp): SIGHUP's reload runs on a thread of its own, so a reload
// that blocks (a file on a hung mount) does not stall the io_context; a SIGHUP during a reload
// is not lost; after the first stop signal no reload starts, and one in progress is waited for.
// Real signals, raised in-process: the signal sets catch them while SignalStop lives.
#include "server_front.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <future>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

namespace gpustream::cli {
namespace {

// Every wait below is for an event the test causes; the bound only turns a hang into a failure.
constexpr auto kEventBound = std::chrono::seconds(30);

template <typename T>
bool arrives(std::future<T>& f) {
  return f.wait_for(kEventBound) == std::future_status::ready;
}

TEST(SignalStop, ASighupReloadsOnAThreadOtherThanTheIoContexts) {
  boost::asio::io_context io;
  SignalStop stop(io);
  std::thread::id reload_thread;
  std::atomic<int> reloads{0};
  boost::asio::post(io, [] { std::raise(SIGHUP); });
  stop.run([&] { io.stop(); }, [&] { io.stop(); },
           [&] {
             reload_thread = std::this_thread::get_id();
             if (++reloads == 1) std::raise(SIGTERM);
           });
  EXPECT_EQ(reloads.load(), 1);
  EXPECT_NE(reload_thread, std::thread::id());
  EXPECT_NE(reload_thread, std::this_thread::get_id());  // run() ran the io_context here
}

TEST(SignalStop, TheIoContextRunsWhileAReloadBlocks) {
  boost::asio::io_context io;
  SignalStop stop(io);
  std::promise<void> entered;
  std::promise<void> release;
  auto released = release.get_future().share();
  std::atomic<bool> finished{false};
  std::promise<void> stopped;
  std::atomic<bool> finished_when_run_returned{false};
  std::thread runner([&] {
    stop.run(
        [&] {
          stopped.set_value();
          io.stop();
        },
        [&] { io.stop(); },
        [&] {
          entered.set_value();
          released.wait();
          finished = true;
        });
    finished_when_run_returned = finished.load();
  });
  std::raise(SIGHUP);
  auto in_reload = entered.get_future();
  ASSERT_TRUE(arrives(in_reload)) << "the SIGHUP did not start a reload";
  // The reload is blocked: work posted to the io_context still runs.
  std::promise<void> io_ran;
  boost::asio::post(io, [&] { io_ran.set_value(); });
  auto ran = io_ran.get_future();
  EXPECT_TRUE(arrives(ran)) << "the io_context stalled behind a blocked reload";
  // Stopping while the reload blocks: run() returns only once the reload has ended.
  std::raise(SIGTERM);
  auto stop_called = stopped.get_future();
  EXPECT_TRUE(arrives(stop_called));
  release.set_value();
  runner.join();
  EXPECT_TRUE(finished_when_run_returned.load())
      << "run() returned while a reload was still running";
}

TEST(SignalStop, ASighupDuringAReloadMakesOneMoreAfterIt) {
  boost::asio::io_context io;
  SignalStop stop(io);
  std::atomic<int> reloads{0};
  std::promise<void> second;
  std::thread runner([&] {
    stop.run([&] { io.stop(); }, [&] { io.stop(); },
             [&] {
               const int n = ++reloads;
               // During the first reload, another SIGHUP: it must not be lost.
               if (n == 1) std::raise(SIGHUP);
               if (n == 2) second.set_value();
             });
  });
  std::raise(SIGHUP);
  auto again = second.get_future();
  EXPECT_TRUE(arrives(again)) << "the SIGHUP that came during a reload was lost";
  std::raise(SIGTERM);
  runner.join();
  EXPECT_GE(reloads.load(), 2);
}

TEST(SignalStop, NoReloadStartsAfterTheStopSignal) {
  boost::asio::io_context io;
  SignalStop stop(io);
  std::atomic<int> reloads{0};
  // SIGTERM first; the SIGHUP after it is handled by the same io_context, in order.
  boost::asio::post(io, [] {
    std::raise(SIGTERM);
    std::raise(SIGHUP);
  });
  stop.run([&] { boost::asio::post(io, [&] { io.stop(); }); }, [&] { io.stop(); },
           [&] { ++reloads; });
  EXPECT_EQ(reloads.load(), 0);
}

}  // namespace
}  // namespace gpustream::cli
