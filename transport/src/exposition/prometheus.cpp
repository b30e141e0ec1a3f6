// Prometheus text exposition 0.0.4: the small families (the probes' statistics, the server's
// counters), the device families' labels, label escaping, and render_prometheus (the
// PrometheusWriter of prometheus_writer.cpp, drained).
#include "gpustream/transport/prometheus.hpp"

#include <limits>
#include <optional>

#include "exposition/prometheus_families.hpp"
#include "gpustream/json.hpp"

namespace gpustream::transport {

namespace prometheus_detail {

/// A metric name made of [a-zA-Z0-9_] from a free-form key.
std::string sanitize_name(std::string_view key) {
  std::string out;
  for (const char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out.push_back(ok ? c : '_');
  }
  return out;
}

/// Each device family's own labels after the device's, rendered (",key=\"v\"", or
/// ",key=\"a\",counter=\"b\"" for "a,b": ECC's volatile/aggregate); empty for most.
const std::array<std::string, kMetricCount>& device_family_labels() {
  static const std::array<std::string, kMetricCount> all = [] {
    std::array<std::string, kMetricCount> out;
    for (std::size_t i = 0; i < kMetricCount; ++i) {
      const auto& f = kDeviceFamilies[i];
      if (f.label.empty()) continue;
      Labels lf;
      const auto comma = f.label_value.find(',');
      lf.emplace_back(f.label, std::string(f.label_value.substr(0, comma)));
      if (comma != std::string_view::npos)
        lf.emplace_back("counter", std::string(f.label_value.substr(comma + 1)));
      out[i] = ',' + Exposition::render_labels(lf);
    }
    return out;
  }();
  return all;
}

void probe_stats(Exposition& e, const std::vector<ProbeStats>& stats) {
  constexpr std::array kStates{ProbeState::detecting, ProbeState::available,
                               ProbeState::unavailable, ProbeState::backoff, ProbeState::stopped};
  for (const auto& ps : stats) {
    const Labels l{{"probe", ps.probe}};
    e.sample(e.family("gpustream_probe_up", "gauge", "1 when the probe is sampling, else 0."), l,
             std::uint64_t{ps.state == ProbeState::available ? 1u : 0u});
    const auto state = e.family("gpustream_probe_state", "gauge",
                                "1 for the probe's current state, 0 for the others.");
    for (const auto st : kStates) {
      Labels ls = l;
      ls.emplace_back("state", std::string(to_string(st)));
      e.sample(state, ls, std::uint64_t{ps.state == st ? 1u : 0u});
    }
    const auto counter = [&](std::string name, std::string_view help, std::uint64_t v) {
      e.sample(e.family(std::move(name), "counter", help), l, v);
    };
    counter("gpustream_probe_samples_total", "Samples completed (partial ones included).",
            ps.samples);
    counter("gpustream_probe_failures_total", "Samples that failed (timeouts included).",
            ps.failures);
    counter("gpustream_probe_timeouts_total", "Samples or detections abandoned after a timeout.",
            ps.timeouts);
    counter("gpustream_probe_overruns_total",
            "Ticks skipped because the previous sample was still running.", ps.overruns);
    counter("gpustream_probe_missed_ticks_total",
            "Ticks skipped because the scheduler fell far behind.", ps.missed_ticks);
    e.sample(e.family("gpustream_probe_consecutive_failures", "gauge",
                      "Failures in a row (0 when the last sample succeeded)."),
             l, ps.consecutive_failures);
    e.sample(e.family("gpustream_probe_interval_seconds", "gauge", "Effective sampling interval."),
             l, static_cast<double>(ps.interval.count()) / 1e3);
    e.sample(e.family("gpustream_probe_devices", "gauge", "Devices in the last sample."), l,
             static_cast<std::uint64_t>(ps.devices));
    // A summary of quantiles only: they cover the recent window (ProbeStats::latency_window
    // samples), and no cumulative _sum/_count is kept. A gauge may not carry a `quantile` label.
    const auto lat = e.family("gpustream_probe_sample_latency_seconds", "summary",
                              "Sample latency quantiles over the recent window.");
    const std::pair<std::string_view, const std::optional<std::int64_t>*> qs[] = {
        {"0.5", &ps.latency_p50_ns}, {"0.9", &ps.latency_p90_ns}, {"0.99", &ps.latency_p99_ns}};
    for (const auto& [q, v] : qs) {
      if (!*v) continue;
      Labels lq = l;
      lq.emplace_back("quantile", std::string(q));
      e.sample(lat, lq, seconds(**v));
    }
    const auto max = e.family("gpustream_probe_sample_latency_max_seconds", "gauge",
                              "Longest sample latency over the recent window.");
    if (ps.latency_max_ns) e.sample(max, l, seconds(*ps.latency_max_ns));
  }
}

void server(Exposition& e, const ServerCounters& c) {
  const auto conns = e.family("gpustream_server_connections", "gauge", "Open connections.");
  e.sample(conns, {{"transport", "http"}}, c.http_open);
  e.sample(conns, {{"transport", "websocket"}}, c.websocket_open);
  e.sample(conns, {{"transport", "tcp"}}, c.tcp_open);
  const auto counter = [&](std::string name, std::string_view help, std::uint64_t v,
                           const Labels& l = {}) {
    e.sample(e.family(std::move(name), "counter", help), l, v);
  };
  counter("gpustream_server_connections_accepted_total", "Connections accepted.",
          c.connections_accepted);
  counter("gpustream_server_connections_rejected_total",
          "Connections refused because of the connection limit.", c.connections_rejected);
  counter("gpustream_server_http_requests_total", "HTTP requests read.", c.http_requests);
  counter("gpustream_server_requests_refused_total", "Requests refused.", c.requests_forbidden,
          {{"reason", "forbidden"}});
  counter("gpustream_server_requests_refused_total", "Requests refused.", c.requests_unauthorized,
          {{"reason", "unauthorized"}});
  counter("gpustream_server_messages_rejected_total",
          "Client messages rejected (malformed, too large, over a limit).", c.messages_rejected);
  counter("gpustream_server_slow_clients_disconnected_total",
          "Clients disconnected because they did not keep up.", c.slow_clients_disconnected);
  counter("gpustream_server_snapshots_received_total", "Snapshots received from the channel.",
          c.snapshots_received);
  counter("gpustream_server_serializations_total", "Snapshot encodings made.", c.serializations);
  counter("gpustream_server_snapshots_sent_total", "Snapshot messages queued to clients.",
          c.snapshots_sent);
  counter("gpustream_server_snapshots_dropped_total",
          "Snapshot messages dropped because a client's queue was full.", c.snapshots_dropped);
  counter("gpustream_server_messages_too_large_total",
          "Snapshot or hello messages not queued to a client: larger than its send budget.",
          c.messages_too_large);
  counter("gpustream_server_http_busy_total",
          "HTTP 503s: the response byte budget was in use, or a reserved connection asked for "
          "another path than /healthz and /metrics.",
          c.http_busy);
  e.sample(e.family("gpustream_server_http_response_bytes", "gauge",
                    "Bytes of HTTP responses being written (a shared body counted once)."),
           {}, c.http_response_bytes);
  e.sample(e.family("gpustream_server_encoded_bytes_live", "gauge",
                    "Bytes of shared messages (snapshots, hellos, API bodies) alive, each once."),
           {}, c.encoded_bytes_live);
  if (!c.tls) return;  // the TLS families exist only when the listeners speak TLS
  counter("gpustream_tls_handshakes_total", "TLS handshakes completed on the listeners.",
          c.tls_handshakes);
  for (std::size_t i = 0; i < transport::kTlsFailureReasons; ++i)
    counter("gpustream_tls_handshake_failures_total",
            "TLS handshakes failed on the listeners, by reason (plaintext: a client that does "
            "not speak TLS).",
            c.tls_handshake_failures[i],
            {{"reason", std::string(transport::to_string(static_cast<transport::TlsFailure>(i)))}});
  counter("gpustream_tls_reloads_total", "TLS certificate reloads.", c.tls_reloads,
          {{"result", "ok"}});
  counter("gpustream_tls_reloads_total", "TLS certificate reloads.", c.tls_reload_failures,
          {{"result", "failed"}});
  if (c.tls_certificate_not_after > 0)
    e.sample(e.family("gpustream_tls_certificate_expiry_timestamp_seconds", "gauge",
                      "When the listeners' certificate expires (Unix time)."),
             {}, static_cast<double>(c.tls_certificate_not_after));
}

}  // namespace prometheus_detail

std::string escape_label_value(std::string_view v) {
  const std::string valid = to_valid_utf8(v);
  std::string out;
  out.reserve(valid.size());
  for (const char c : valid) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string render_prometheus(const std::vector<SnapshotPtr>& latest,
                              const std::vector<ProbeStats>& stats, const ServerCounters* counters,
                              const PrometheusOptions& options) {
  PrometheusWriter w(latest, stats, counters ? std::optional(*counters) : std::nullopt, options);
  std::string out;
  while (w.next(out, std::numeric_limits<std::size_t>::max())) {}
  return out;
}

}  // namespace gpustream::transport
