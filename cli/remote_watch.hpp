// remote_watch.hpp — `gpustream watch --connect URL`: a RemoteSubscriber driven on the calling
// thread until a count, a duration or an interrupt. A CLI command (it returns an exit code), so
// it lives with the CLI, not in gpustream::transport's public headers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "gpustream/transport/remote_subscriber.hpp"

namespace gpustream {

/// Limits of run_remote_watch (zero: no limit).
struct RemoteWatchLimits {
  std::uint64_t count = 0;                // end after this many snapshots
  std::chrono::milliseconds duration{0};  // end after this long
};

/// What run_remote_watch calls, on the calling thread. Each may be empty.
struct RemoteWatchHandlers {
  std::function<void(const GpuSnapshot&)> on_snapshot;
  std::function<void(const Gap&)> on_gap;
  std::function<void(const RemoteStatus&)> on_status;
  std::function<void(const GpuEvent&)> on_event;
};

/// For `gpustream watch --connect URL`: runs a RemoteSubscriber on an io_context of its own on
/// the calling thread until `limits` are reached or `interrupted` becomes true (checked every
/// 50 ms); then stops it (bounded: about a second for the close handshake). Returns 0 when the
/// count was reached or at least one snapshot was delivered, 1 when it ended without any
/// snapshot (e.g. the server was never reachable within `duration`). Throws
/// std::invalid_argument for a URL it cannot use (before connecting).
int run_remote_watch(const RemoteSubscriberOptions& options, const RemoteWatchLimits& limits,
                     const RemoteWatchHandlers& handlers, const std::atomic<bool>& interrupted);

}  // namespace gpustream
