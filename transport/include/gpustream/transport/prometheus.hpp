// gpustream/transport/prometheus.hpp — Prometheus text exposition (format 0.0.4) of the latest
// snapshots, the probes' statistics and the server's counters (docs/metrics.md section in
// docs/protocol.md ("Wire messages")).
//
// Naming follows the Prometheus guide: prefix gpustream_, base units in the name (_bytes,
// _watts, _celsius, _hertz, _seconds, _ratio for 0..1 fractions), _total for counters, one
// HELP and one TYPE line per family. Labels: device, vendor, probe, name (the device's name).
// A metric a device does not report is left out, never written as 0.
//
// Thread safety: reentrant; the inputs are immutable snapshots and values.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/channel.hpp"
#include "gpustream/probe_stats.hpp"
#include "gpustream/transport/server.hpp"

namespace gpustream::transport {

inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

/// Per-process series (opt-in: one series per GPU process and device is a cardinality the
/// operator must choose): gpustream_gpu_process_memory_bytes and
/// gpustream_gpu_process_utilization_ratio with the device's labels plus `pid`, `process` (its
/// name) and, when known, `container` (the container id; `pod/<uid>` when only the Kubernetes
/// pod is known). At most `max_process_series` samples in all; the rest are counted in
/// gpustream_gpu_process_series_omitted.
struct PrometheusOptions {
  std::size_t max_process_series = 0;  // 0: no per-process series
  /// false: no gpustream_gpu_* device families: `--metrics-compat dcgm` writes
  /// the devices under dcgm-exporter's names instead (exposition/prometheus_dcgm.hpp).
  bool device_families = true;
};

/// `counters` may be null (no server families then).
std::string render_prometheus(const std::vector<SnapshotPtr>& latest,
                              const std::vector<ProbeStats>& stats, const ServerCounters* counters,
                              const PrometheusOptions& options = {});

/// render_prometheus()'s text written in pieces (a streamed /metrics, issue #32), family by
/// family, from the inputs given at construction: the snapshots are held (one pointer each),
/// never copied, and the text is never held whole. next() appends at least one piece (one
/// snapshot's samples of one family, or one of the small families whole) and stops once `out`
/// holds `want` bytes, so a caller's buffer passes `want` by one piece at most. The text is
/// byte for byte render_prometheus()'s of the same inputs.
///
/// Memory: the inputs, the list of families (with the host figures' distinct names) and a
/// cursor. Thread safety: one caller at a time; the snapshots are immutable.
class PrometheusWriter {
 public:
  PrometheusWriter(std::vector<SnapshotPtr> latest, std::vector<ProbeStats> stats,
                   std::optional<ServerCounters> counters, PrometheusOptions options = {});
  ~PrometheusWriter();
  PrometheusWriter(PrometheusWriter&&) noexcept;
  PrometheusWriter& operator=(PrometheusWriter&&) noexcept;

  /// Appends the next pieces to `out` until out.size() >= want or the text ends; false once
  /// the whole text has been written (then nothing is appended).
  bool next(std::string& out, std::size_t want);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A label value escaped for the exposition format (\\, \", \n).
std::string escape_label_value(std::string_view v);

}  // namespace gpustream::transport
