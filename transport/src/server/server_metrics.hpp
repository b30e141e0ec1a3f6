// The server's counters: one atomic per figure, bumped from the strand (and read from any
// thread by Server::counters(), /api/v1/stats and /metrics). The only owner of the numbers in
// ServerCounters; each bound that counts something counts it here.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "gpustream/transport/server.hpp"

namespace gpustream::transport {

struct ServerMetrics {
  using Counter = std::atomic<std::uint64_t>;
  Counter connections_accepted{0}, connections_rejected{0}, http_open{0}, websocket_open{0},
      tcp_open{0}, http_requests{0}, requests_forbidden{0}, requests_unauthorized{0},
      messages_rejected{0}, slow_clients_disconnected{0}, snapshots_received{0}, serializations{0},
      snapshots_sent{0}, snapshots_dropped{0}, idle_closed{0}, encoded_cache_bytes{0},
      encoded_cache_entries{0}, events_received{0}, events_sent{0}, events_dropped{0},
      messages_too_large{0}, http_busy{0}, http_response_bytes{0}, tls_handshakes{0},
      tls_reloads{0}, tls_reload_failures{0}, http_stream_bytes{0};
  std::array<Counter, kTlsFailureReasons> tls_handshake_failures{};
  std::atomic<std::int64_t> tls_certificate_not_after{0};
  /// Bytes of the shared messages alive anywhere (the cache, send queues, writes, responses),
  /// each counted once however many hold it. Shared with the buffers' deleters, which may run
  /// after the metrics are gone.
  std::shared_ptr<Counter> encoded_bytes_live = std::make_shared<Counter>(0);

  /// `text` as an immutable buffer every queue and response may share; its bytes count in
  /// encoded_bytes_live until its last holder lets it go.
  std::shared_ptr<const std::string> share(std::string text) const {
    const auto size = text.size();
    auto live = encoded_bytes_live;
    live->fetch_add(size, std::memory_order_relaxed);
    return {new const std::string(std::move(text)), [live, size](const std::string* p) {
              live->fetch_sub(size, std::memory_order_relaxed);
              delete p;
            }};
  }

  static void bump(Counter& c, std::uint64_t n = 1) noexcept {
    c.fetch_add(n, std::memory_order_relaxed);
  }
  static void set(Counter& c, std::uint64_t v) noexcept { c.store(v, std::memory_order_relaxed); }

  /// A consistent-enough copy (each figure read once, relaxed).
  ServerCounters snapshot() const noexcept {
    const auto r = [](const Counter& a) { return a.load(std::memory_order_relaxed); };
    ServerCounters out;
    out.connections_accepted = r(connections_accepted);
    out.connections_rejected = r(connections_rejected);
    out.http_open = r(http_open);
    out.websocket_open = r(websocket_open);
    out.tcp_open = r(tcp_open);
    out.http_requests = r(http_requests);
    out.requests_forbidden = r(requests_forbidden);
    out.requests_unauthorized = r(requests_unauthorized);
    out.messages_rejected = r(messages_rejected);
    out.slow_clients_disconnected = r(slow_clients_disconnected);
    out.snapshots_received = r(snapshots_received);
    out.serializations = r(serializations);
    out.snapshots_sent = r(snapshots_sent);
    out.snapshots_dropped = r(snapshots_dropped);
    out.idle_closed = r(idle_closed);
    out.encoded_cache_bytes = r(encoded_cache_bytes);
    out.encoded_cache_entries = r(encoded_cache_entries);
    out.events_received = r(events_received);
    out.events_sent = r(events_sent);
    out.events_dropped = r(events_dropped);
    out.messages_too_large = r(messages_too_large);
    out.http_busy = r(http_busy);
    out.http_response_bytes = r(http_response_bytes);
    out.encoded_bytes_live = r(*encoded_bytes_live);
    out.http_stream_bytes = r(http_stream_bytes);
    out.tls_handshakes = r(tls_handshakes);
    for (std::size_t i = 0; i < kTlsFailureReasons; ++i)
      out.tls_handshake_failures[i] = r(tls_handshake_failures[i]);
    out.tls_reloads = r(tls_reloads);
    out.tls_reload_failures = r(tls_reload_failures);
    out.tls_certificate_not_after = tls_certificate_not_after.load(std::memory_order_relaxed);
    return out;
  }
};

}  // namespace gpustream::transport
