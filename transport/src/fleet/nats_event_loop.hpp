// fleet/nats_event_loop.hpp — libnats's external event loop, run by one thread of ours
// (private; the fleet view's worker).
//
// With natsOptions_SetEventLoop, libnats starts no reader thread for a connection: it tells the
// loop which socket to watch (attach, on each connect and reconnect), when to stop reading it
// (read remove: the connection is lost or closed), when it has bytes to write (write add/remove)
// and when the connection is gone (detach). The loop's owner thread polls the sockets in poll()
// and calls natsConnection_ProcessReadEvent (one recv, its messages parsed into their
// subscriptions' queues) and natsConnection_ProcessWriteEvent on those ready.
//
// Thread safety: the callbacks come from libnats's threads (the connecting thread, the
// reconnect thread, the flusher, a thread parsing) and from the owner itself (a PONG written
// while parsing); each changes the watched set under the loop's lock and wakes a poll() in
// progress (an eventfd in its poll set). poll() calls into libnats with no lock of the loop held,
// only for a connection still attached, and detach waits until the owner is out of its call for
// that connection (so that the caller may destroy the connection after Close): once detach has
// returned, the loop never touches the connection again. A detach on the owner thread itself
// (libnats closing the connection while it parses) does not wait.
//
// Bounded: one entry per attached connection (a view has two at most: a new identity's and the
// old one, drained); poll() reads a socket at most kMaxReadsPerPoll times a call.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#include <nats/nats.h>

namespace gpustream::transport {

class NatsEventLoop {
 public:
  /// What to do with a ready connection: libnats's natsConnection_Process{Read,Write}Event (tests
  /// give their own).
  using Process = void (*)(natsConnection*);
  /// The most reads of one socket in one poll() (each up to libnats's 32 KiB buffer): a flood is
  /// read in 2 MiB steps, as fast as libnats's reader thread would, the caller's work in between.
  static constexpr int kMaxReadsPerPoll = 64;

  explicit NatsEventLoop(Process read = &natsConnection_ProcessReadEvent,
                         Process write = &natsConnection_ProcessWriteEvent);
  ~NatsEventLoop();
  NatsEventLoop(const NatsEventLoop&) = delete;
  NatsEventLoop& operator=(const NatsEventLoop&) = delete;

  /// Connections made with `opts` are run by this loop.
  natsStatus use_for(natsOptions* opts);

  /// The owner thread (called on it, before its first poll()).
  void own();
  /// Waits up to `timeout` (0: does not wait) for a watched socket to be ready, or for wake(),
  /// and processes what is ready: writes always, reads only when `reads` (a socket not read
  /// meanwhile gathers what arrives). A readable socket is read again while it stays readable
  /// (at most kMaxReadsPerPoll times). Returns the number of reads made. The owner only.
  std::size_t poll(std::chrono::milliseconds timeout, bool reads);
  /// Any thread: a poll() in progress returns (the caller's flags are to be looked at).
  void wake();

  /// The sockets watched now, for reading and for writing (tests).
  std::size_t reading() const;
  std::size_t writing() const;

  // libnats's callbacks (natsEvLoop_*), public for the tests.
  static natsStatus on_attach(void** user, void* loop, natsConnection* nc, natsSock fd);
  static natsStatus on_read(void* user, bool add);
  static natsStatus on_write(void* user, bool add);
  static natsStatus on_detach(void* user);

 private:
  struct Conn {
    NatsEventLoop* loop = nullptr;
    natsConnection* nc = nullptr;
    int fd = -1;
    bool read = false;
    bool write = false;
    bool attached = false;
  };
  // on_read/on_write: the connection's interest in reading or writing set, the owner woken.
  static natsStatus watch(void* user, bool Conn::*interest, bool add);
  bool is_attached(const Conn* c) const;  // mu_ held
  void call(Conn* c, bool read);          // the owner: one Process call, detach held off
  void changed();                         // mu_ not held: wakes the owner unless it is the owner

  Process read_;
  Process write_;
  int wake_fd_ = -1;
  mutable std::mutex mu_;
  std::condition_variable idle_cv_;  // in_call_ left
  std::vector<Conn*> conns_;         // under mu_: one per connection, from attach to detach
  const Conn* in_call_ = nullptr;    // under mu_: the owner is in a Process call for it
  std::thread::id owner_;
};

}  // namespace gpustream::transport
