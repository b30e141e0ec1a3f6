// gpustream/transport/prometheus_events.hpp — the event counters on /metrics (docs/protocol.md,
// "Prometheus metrics"): appended to render_prometheus()'s text.
//
//   gpustream_gpu_events_total{device,kind}      events per device and kind since the start
//   gpustream_gpu_xid_errors_total{device,xid}   Xid errors per device and Xid number
//   gpustream_events_published_total             every event the channel numbered
//   gpustream_events_dropped_total               events a slow in-process subscriber lost
//   gpustream_server_events_sent_total           event messages queued to clients
//   gpustream_server_events_dropped_total        not queued: a client's queue was full
//
// Label sets are bounded by EventLimits (devices, xid_labels; the rest under "other"). A
// device with no event has no sample (a counter appears with its first event).
//
// Thread safety: reentrant.
#pragma once

#include <string>

#include "gpustream/events.hpp"
#include "gpustream/transport/server.hpp"

namespace gpustream::transport {

/// `counters` may be null (no server families then).
std::string render_event_metrics(const EventTotals& totals, const ServerCounters* counters);

}  // namespace gpustream::transport
