// Golden /metrics text (gpustream/transport/prometheus.hpp, prometheus_events.hpp) of the
// fixtures: the native exposition with and without the server's families, with per-process
// series, and the event counters.
#include <string>

#include <gtest/gtest.h>

#include "golden/golden.hpp"
#include "golden/golden_fixtures.hpp"
#include "gpustream/transport/prometheus.hpp"
#include "gpustream/transport/prometheus_events.hpp"

namespace gpustream::golden {
namespace {

std::vector<SnapshotPtr> latest() {
  const auto sim = simulated_snapshots();
  return as_latest(
      {full_snapshot(), failed_snapshot(), extremes_snapshot(), guarded_snapshot(), sim[1]});
}

TEST(GoldenPrometheus, NativeExposition) {
  const auto counters = server_counters();
  expect_golden("prometheus/metrics.txt",
                transport::render_prometheus(latest(), probe_stats(), &counters));
}

TEST(GoldenPrometheus, WithoutServerFamilies) {
  expect_golden("prometheus/metrics.no_server.txt",
                transport::render_prometheus(latest(), {}, nullptr));
}

TEST(GoldenPrometheus, ProcessSeries) {
  transport::PrometheusOptions o;
  o.max_process_series = 1000;
  expect_golden("prometheus/metrics.processes.txt",
                transport::render_prometheus(latest(), probe_stats(), nullptr, o));
  o.max_process_series = 3;  // the rest counted as omitted
  expect_golden("prometheus/metrics.processes_capped.txt",
                transport::render_prometheus(latest(), {}, nullptr, o));
}

TEST(GoldenPrometheus, EmptyLatest) {
  const auto counters = server_counters();
  expect_golden("prometheus/metrics.empty.txt", transport::render_prometheus({}, {}, &counters));
}

TEST(GoldenPrometheus, EventCounters) {
  const auto counters = server_counters();
  expect_golden("prometheus/events.txt",
                transport::render_event_metrics(event_totals(), &counters));
  expect_golden("prometheus/events.no_server.txt",
                transport::render_event_metrics(event_totals(), nullptr));
  expect_golden("prometheus/events.empty.txt", transport::render_event_metrics({}, nullptr));
}

TEST(GoldenPrometheus, LabelEscaping) {
  expect_golden("prometheus/label_escape.txt",
                transport::escape_label_value("a\\b \"c\"\nd\te \u00e9") + "\n");
}

}  // namespace
}  // namespace gpustream::golden
