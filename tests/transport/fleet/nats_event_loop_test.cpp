// libnats's external event loop as the fleet view's worker runs it (fleet/nats_event_loop.hpp),
// with a socket pair for a connection's socket and recording stand-ins for libnats's
// natsConnection_Process{Read,Write}Event: the callbacks from another thread wake a poll in
// progress, a write asked for is polled for and made until libnats takes it back, a socket not
// to be read is not read, a readable one is read at most kMaxReadsPerPoll times a poll, detach
// waits for the owner's call to end (and does not on the owner itself), a socket closed under
// the poll is not polled again. Built only with libnats.
#if defined(GPUSTREAM_HAS_NATS)

#include "fleet/nats_event_loop.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace gpustream::transport::test {
namespace {

using namespace std::chrono_literals;

/// What the stand-ins saw, and what they do (tests set `on_read`/`on_write`).
struct EvRecord {
  std::mutex mu;
  std::vector<std::string> calls;  // "read" / "write", in order
  std::function<void()> on_read;
  std::function<void()> on_write;
};
EvRecord* ev_record = nullptr;

void ev_read(natsConnection*) {
  {
    std::lock_guard lock(ev_record->mu);
    ev_record->calls.push_back("read");
  }
  if (ev_record->on_read) ev_record->on_read();
}
void ev_write(natsConnection*) {
  {
    std::lock_guard lock(ev_record->mu);
    ev_record->calls.push_back("write");
  }
  if (ev_record->on_write) ev_record->on_write();
}

class NatsEventLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ev_record = &record;
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  }
  void TearDown() override {
    ev_record = nullptr;
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  /// Makes the loop's socket readable.
  void send_byte() { ASSERT_EQ(::write(fds[1], "x", 1), 1); }
  /// Takes what the loop's socket has (a read of libnats's).
  void drain() {
    char buf[64];
    [[maybe_unused]] const auto n = ::recv(fds[0], buf, sizeof buf, MSG_DONTWAIT);
  }
  std::size_t count(const std::string& what) {
    std::lock_guard lock(record.mu);
    return static_cast<std::size_t>(std::count(record.calls.begin(), record.calls.end(), what));
  }

  EvRecord record;
  int fds[2] = {-1, -1};
  int nc_tag = 0;  // a connection's stand-in: only its address is used
  natsConnection* nc = reinterpret_cast<natsConnection*>(&nc_tag);
  NatsEventLoop loop{&ev_read, &ev_write};
  void* user = nullptr;
};

TEST_F(NatsEventLoopTest, AnAttachFromAnotherThreadWakesThePollAndItsSocketIsRead) {
  record.on_read = [&] { drain(); };
  std::promise<std::size_t> reads;
  std::thread owner([&] {
    loop.own();
    std::size_t n = 0;
    // Woken by the attach (nothing to read yet), then by the byte.
    while (n == 0) n = loop.poll(10s, true);
    reads.set_value(n);
  });
  ASSERT_EQ(NatsEventLoop::on_attach(&user, &loop, nc, fds[0]), NATS_OK);
  ASSERT_NE(user, nullptr);
  EXPECT_EQ(loop.reading(), 1U);
  send_byte();
  auto got = reads.get_future();
  ASSERT_EQ(got.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(got.get(), 1U);
  owner.join();
  EXPECT_EQ(count("read"), 1U);
  EXPECT_EQ(NatsEventLoop::on_detach(user), NATS_OK);
  EXPECT_EQ(loop.reading(), 0U);
}

TEST_F(NatsEventLoopTest, AWriteAskedForIsMadeUntilLibnatsTakesItBackAndNoReadWhenNotAsked) {
  loop.own();
  ASSERT_EQ(NatsEventLoop::on_attach(&user, &loop, nc, fds[0]), NATS_OK);
  send_byte();  // readable, but this poll is not to read
  std::thread flusher([&] { NatsEventLoop::on_write(user, true); });
  flusher.join();
  EXPECT_EQ(loop.writing(), 1U);
  // libnats's ProcessWriteEvent: all written, the write taken back (on the owner thread).
  int writes = 0;
  record.on_write = [&] {
    if (++writes == 2) NatsEventLoop::on_write(user, false);
  };
  EXPECT_EQ(loop.poll(10s, false), 0U);
  EXPECT_EQ(loop.poll(10s, false), 0U);
  EXPECT_EQ(count("write"), 2U);
  EXPECT_EQ(count("read"), 0U);
  EXPECT_EQ(loop.writing(), 0U);
  EXPECT_EQ(loop.poll(0ms, false), 0U);  // nothing asked for: nothing done
  EXPECT_EQ(count("write"), 2U);
  record.on_read = [&] { drain(); };
  EXPECT_EQ(loop.poll(0ms, true), 1U);  // now it is read
  EXPECT_EQ(count("read"), 1U);
  NatsEventLoop::on_detach(user);
}

TEST_F(NatsEventLoopTest, AReadableSocketIsReadAtMostTheBoundInOnePoll) {
  loop.own();
  ASSERT_EQ(NatsEventLoop::on_attach(&user, &loop, nc, fds[0]), NATS_OK);
  send_byte();  // never drained: readable for good
  EXPECT_EQ(loop.poll(0ms, true), static_cast<std::size_t>(NatsEventLoop::kMaxReadsPerPoll));
  EXPECT_EQ(count("read"), static_cast<std::size_t>(NatsEventLoop::kMaxReadsPerPoll));
  NatsEventLoop::on_detach(user);
}

TEST_F(NatsEventLoopTest, AfterAReadRemoveTheSocketIsNotReadUntilAttachedAgain) {
  loop.own();
  ASSERT_EQ(NatsEventLoop::on_attach(&user, &loop, nc, fds[0]), NATS_OK);
  void* first = user;
  send_byte();
  NatsEventLoop::on_read(user, false);  // lost: libnats stops polling before it reconnects
  EXPECT_EQ(loop.reading(), 0U);
  EXPECT_EQ(loop.poll(0ms, true), 0U);
  // The reconnect attaches the same entry again (its user data is kept).
  ASSERT_EQ(NatsEventLoop::on_attach(&user, &loop, nc, fds[0]), NATS_OK);
  EXPECT_EQ(user, first);
  record.on_read = [&] { drain(); };
  EXPECT_EQ(loop.poll(0ms, true), 1U);
  NatsEventLoop::on_detach(user);
  EXPECT_EQ(loop.reading(), 0U);
}

TEST_F(NatsEventLoopTest, DetachWaitsForTheOwnersCallForThatConnectionToEnd) {
  std::promise<void> entered;
  std::promise<void> release;
  auto released = release.get_future();
  std::atomic<bool> read_done{false};
  record.on_read = [&] {
    drain();
    entered.set_value();
    released.wait();
    read_done = true;
  };
  ASSERT_EQ(NatsEventLoop::on_attach(&user, &loop, nc, fds[0]), NATS_OK);
  send_byte();
  std::thread owner([&] {
    loop.own();
    while (loop.poll(10s, true) == 0) {}
  });
  entered.get_future().wait();
  std::atomic<bool> detached{false};
  bool read_done_at_detach = false;
  std::thread closer([&] {  // libnats's Close, on another thread
    NatsEventLoop::on_detach(user);
    read_done_at_detach = read_done;
    detached = true;
  });
  // Whatever the timing, detach returns only after the read: it cannot have returned yet.
  std::this_thread::yield();
  EXPECT_FALSE(detached.load());
  release.set_value();
  closer.join();
  owner.join();
  EXPECT_TRUE(read_done_at_detach);
  EXPECT_EQ(loop.reading(), 0U);
}

TEST_F(NatsEventLoopTest, ADetachOnTheOwnerInsideItsCallDoesNotWaitForItself) {
  loop.own();
  ASSERT_EQ(NatsEventLoop::on_attach(&user, &loop, nc, fds[0]), NATS_OK);
  send_byte();
  // libnats closing the connection while it parses what the owner read.
  record.on_read = [&] {
    drain();
    NatsEventLoop::on_detach(user);
  };
  EXPECT_EQ(loop.poll(0ms, true), 1U);
  EXPECT_EQ(loop.reading(), 0U);
  send_byte();
  EXPECT_EQ(loop.poll(0ms, true), 0U);  // gone: not read again
}

TEST_F(NatsEventLoopTest, ASocketClosedUnderThePollIsNotPolledAgain) {
  loop.own();
  ASSERT_EQ(NatsEventLoop::on_attach(&user, &loop, nc, fds[0]), NATS_OK);
  ::close(fds[0]);
  fds[0] = -1;
  EXPECT_EQ(loop.poll(10s, true), 0U);  // POLLNVAL: returns at once
  EXPECT_EQ(loop.reading(), 0U);
  EXPECT_EQ(count("read"), 0U);
  NatsEventLoop::on_detach(user);
}

}  // namespace
}  // namespace gpustream::transport::test

#endif  // GPUSTREAM_HAS_NATS
