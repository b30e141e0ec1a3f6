// libnats's external event loop, polled by its owner thread (fleet/nats_event_loop.hpp).
#include "fleet/nats_event_loop.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>

namespace gpustream::transport {

NatsEventLoop::NatsEventLoop(Process read, Process write) : read_(read), write_(write) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}

NatsEventLoop::~NatsEventLoop() {
  // Every connection was destroyed (so detached) before; whatever was not is dropped.
  for (Conn* c : conns_) delete c;
  ::close(wake_fd_);
}

natsStatus NatsEventLoop::use_for(natsOptions* opts) {
  return natsOptions_SetEventLoop(opts, this, &on_attach, &on_read, &on_write, &on_detach);
}

void NatsEventLoop::own() {
  std::lock_guard lock(mu_);
  owner_ = std::this_thread::get_id();
}

void NatsEventLoop::wake() {
  const std::uint64_t one = 1;
  // Only EAGAIN can fail it (the counter at its maximum): a wake-up is pending then anyway.
  [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof one);
}

void NatsEventLoop::changed() {
  bool other = false;
  {
    std::lock_guard lock(mu_);
    other = owner_ != std::this_thread::get_id();
  }
  // The owner itself (a PONG written while it parses) looks at the flags before it polls again.
  if (other) wake();
}

bool NatsEventLoop::is_attached(const Conn* c) const {
  return std::find(conns_.begin(), conns_.end(), c) != conns_.end() && c->attached;
}

std::size_t NatsEventLoop::reading() const {
  std::lock_guard lock(mu_);
  return static_cast<std::size_t>(
      std::count_if(conns_.begin(), conns_.end(), [](const Conn* c) { return c->read; }));
}

std::size_t NatsEventLoop::writing() const {
  std::lock_guard lock(mu_);
  return static_cast<std::size_t>(
      std::count_if(conns_.begin(), conns_.end(), [](const Conn* c) { return c->write; }));
}

natsStatus NatsEventLoop::on_attach(void** user, void* loop, natsConnection* nc, natsSock fd) {
  auto* self = static_cast<NatsEventLoop*>(loop);
  Conn* c = static_cast<Conn*>(*user);
  {
    std::lock_guard lock(self->mu_);
    if (!c) {  // a connect; else a reconnect, on the entry it had
      c = new Conn;
      c->loop = self;
      c->nc = nc;
      self->conns_.push_back(c);
      *user = c;
    }
    // Attached means read (natsEvLoop_Attach: "start polling the given socket for READ").
    c->fd = static_cast<int>(fd);
    c->read = true;
    c->write = false;
    c->attached = true;
  }
  self->changed();
  return NATS_OK;
}

natsStatus NatsEventLoop::on_read(void* user, bool add) { return watch(user, &Conn::read, add); }

natsStatus NatsEventLoop::on_write(void* user, bool add) { return watch(user, &Conn::write, add); }

natsStatus NatsEventLoop::watch(void* user, bool Conn::*interest, bool add) {
  auto* c = static_cast<Conn*>(user);
  {
    std::lock_guard lock(c->loop->mu_);
    c->*interest = add;
  }
  c->loop->changed();
  return NATS_OK;
}

natsStatus NatsEventLoop::on_detach(void* user) {
  auto* c = static_cast<Conn*>(user);
  NatsEventLoop* self = c->loop;
  {
    std::unique_lock lock(self->mu_);
    c->attached = false;
    c->read = false;
    c->write = false;
    // The caller may destroy the connection next: the owner must be out of its call for it. On
    // the owner thread (libnats closing the connection inside that call) it cannot be waited
    // for; the entry is then freed here all the same, and call() does not touch it after.
    if (self->owner_ != std::this_thread::get_id())
      self->idle_cv_.wait(lock, [&] { return self->in_call_ != c; });
    std::erase(self->conns_, c);
    if (self->in_call_ == c) self->in_call_ = nullptr;
  }
  delete c;
  self->wake();
  return NATS_OK;
}

void NatsEventLoop::call(Conn* c, bool read) {
  natsConnection* nc = nullptr;
  {
    std::lock_guard lock(mu_);
    if (!is_attached(c) || !(read ? c->read : c->write)) return;
    in_call_ = c;
    nc = c->nc;
  }
  (read ? read_ : write_)(nc);
  {
    std::lock_guard lock(mu_);
    in_call_ = nullptr;
  }
  idle_cv_.notify_all();
}

std::size_t NatsEventLoop::poll(std::chrono::milliseconds timeout, bool reads) {
  std::vector<pollfd> fds;
  std::vector<Conn*> of;
  std::size_t made = 0;
  int wait_ms = static_cast<int>(std::max<std::int64_t>(timeout.count(), 0));
  for (int round = 0; round < kMaxReadsPerPoll; ++round) {
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    of.assign(1, nullptr);
    {
      std::lock_guard lock(mu_);
      for (Conn* c : conns_) {
        const short events =
            static_cast<short>((reads && c->read ? POLLIN : 0) | (c->write ? POLLOUT : 0));
        if (!c->attached || c->fd < 0 || events == 0) continue;
        fds.push_back(pollfd{c->fd, events, 0});
        of.push_back(c);
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), wait_ms);
    if (ready <= 0) break;  // nothing (more), or EINTR: the caller polls again
    wait_ms = 0;            // the next rounds only read on what is already there
    if (fds[0].revents) {
      std::uint64_t n = 0;
      [[maybe_unused]] const auto r = ::read(wake_fd_, &n, sizeof n);
    }
    bool read_any = false;
    for (std::size_t i = 1; i < fds.size(); ++i) {
      const short rev = fds[i].revents;
      if (rev & POLLNVAL) {  // closed under the poll: not polled again until attached again
        std::lock_guard lock(mu_);
        if (is_attached(of[i]) && of[i]->fd == fds[i].fd) of[i]->read = of[i]->write = false;
        continue;
      }
      // An error or a hang-up is the read's to find (libnats then reconnects).
      if (rev & (POLLOUT | POLLERR | POLLHUP)) call(of[i], false);
      if (rev & (POLLIN | POLLERR | POLLHUP) && reads) {
        call(of[i], true);
        ++made;
        read_any = true;
      }
    }
    if (!read_any) break;  // a wake-up or a write: done; else read again while it is readable
  }
  return made;
}

}  // namespace gpustream::transport
