// The event counters on /metrics (see prometheus_events.hpp).
#include "gpustream/transport/prometheus_events.hpp"

#include "exposition/prometheus_families.hpp"
#include "gpustream/transport/prometheus.hpp"

namespace gpustream::transport {
namespace {

void family(std::string& out, const char* name, const char* help) {
  prometheus_detail::Exposition::append_head(out, name, "counter", help);
}

void sample(std::string& out, const char* name, std::uint64_t v) {
  out += name;
  out += ' ';
  out += std::to_string(v);
  out += '\n';
}

}  // namespace

std::string render_event_metrics(const EventTotals& totals, const ServerCounters* counters) {
  std::string out;
  if (!totals.by_kind.empty()) {
    family(out, "gpustream_gpu_events_total", "GPU events by device and kind (Xid, ECC, ...).");
    for (const auto& [key, n] : totals.by_kind) {
      out += "gpustream_gpu_events_total{device=\"" + escape_label_value(key.first) + "\",kind=\"" +
             std::string(to_string(key.second)) + "\"} " + std::to_string(n) + '\n';
    }
  }
  if (!totals.by_xid.empty()) {
    family(out, "gpustream_gpu_xid_errors_total", "Xid critical errors by device and Xid number.");
    for (const auto& [key, n] : totals.by_xid) {
      out += "gpustream_gpu_xid_errors_total{device=\"" + escape_label_value(key.first) +
             "\",xid=\"" + escape_label_value(key.second) + "\"} " + std::to_string(n) + '\n';
    }
  }
  family(out, "gpustream_events_published_total", "GPU events published by the probes.");
  sample(out, "gpustream_events_published_total", totals.counters.published);
  family(out, "gpustream_events_dropped_total",
         "GPU events dropped for an in-process subscriber that fell behind.");
  sample(out, "gpustream_events_dropped_total", totals.counters.dropped);
  if (counters) {
    family(out, "gpustream_server_events_sent_total", "Event messages queued to clients.");
    sample(out, "gpustream_server_events_sent_total", counters->events_sent);
    family(out, "gpustream_server_events_dropped_total",
           "Event messages not queued because a client's send queue was full.");
    sample(out, "gpustream_server_events_dropped_total", counters->events_dropped);
  }
  return out;
}

}  // namespace gpustream::transport
