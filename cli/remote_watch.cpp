// run_remote_watch: a RemoteSubscriber on an io_context of its own, for the CLI.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "remote_watch.hpp"

namespace gpustream {

int run_remote_watch(const RemoteSubscriberOptions& options, const RemoteWatchLimits& limits,
                     const RemoteWatchHandlers& handlers, const std::atomic<bool>& interrupted) {
  using Clock = std::chrono::steady_clock;
  boost::asio::io_context io;
  RemoteSubscriber sub(io.get_executor(), options);  // throws on a bad URL
  std::uint64_t delivered = 0;
  bool done = false;

  sub.on_snapshot([&](const SnapshotPtr& s) {
    if (done) return;
    ++delivered;
    if (handlers.on_snapshot) handlers.on_snapshot(*s);
    if (limits.count > 0 && delivered >= limits.count) {
      done = true;
      sub.stop();
    }
  });
  if (handlers.on_gap) sub.on_gap(handlers.on_gap);
  if (handlers.on_status) sub.on_status(handlers.on_status);
  if (handlers.on_event)
    sub.on_event([&](const EventPtr& e) {
      if (!done) handlers.on_event(*e);
    });

  // Polls the interruption flag and the duration; everything runs on this thread.
  const auto end = limits.duration.count() > 0
                       ? std::optional<Clock::time_point>(Clock::now() + limits.duration)
                       : std::nullopt;
  boost::asio::steady_timer poll(io);
  std::function<void()> arm = [&] {
    poll.expires_after(std::chrono::milliseconds(50));
    poll.async_wait([&](const boost::system::error_code& ec) {
      if (ec || done) return;
      if (interrupted.load() || (end && Clock::now() >= *end)) {
        done = true;
        sub.stop();
        return;
      }
      arm();
    });
  };
  sub.start();
  arm();
  // Until stopped: the subscriber's operations end with its stop (the close handshake is
  // bounded), and the poll timer is not re-armed once done.
  while (!done && !io.stopped()) io.run_one();
  poll.cancel();
  io.run_for(std::chrono::milliseconds(1500));
  return delivered > 0 ? 0 : 1;
}

}  // namespace gpustream
