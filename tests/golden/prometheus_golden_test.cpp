// Golden /metrics text (gpustream/transport/prometheus.hpp, prometheus_events.hpp,
// exposition/prometheus_dcgm.hpp) of the fixtures: the native exposition with and without the
// server's families, with per-process series, the event counters, and the device families
// under dcgm-exporter's names (`--metrics-compat dcgm`).
#include <string>

#include <gtest/gtest.h>

#include "exposition/prometheus_dcgm.hpp"
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

std::vector<EventPtr> recent_events() {
  std::vector<EventPtr> out;
  for (auto& e : events()) out.push_back(std::make_shared<const GpuEvent>(std::move(e)));
  return out;
}

/// A fleet's view for the dcgm names: each node's devices under its name; the first node's GPU
/// has no SM clock and no framebuffer figures (so those families come after the ones it has:
/// a family is written where its first sample is met), one pod holds the second node's GPU,
/// two pods share its MIG instance (no pod labels then).
std::vector<SnapshotPtr> dcgm_fleet() {
  auto a = full_snapshot();
  a.node = "node-a";
  a.devices.resize(1);
  auto& g = a.devices[0];
  g.metrics.set_absent(Metric::clock_sm_mhz, Absence::unsupported, Source::nvml);
  for (const auto m :
       {Metric::memory_used_bytes, Metric::memory_free_bytes, Metric::memory_total_bytes})
    g.metrics.set_absent(m, Absence::unsupported, Source::nvml);
  auto b = full_snapshot();
  b.node = "node-b";
  b.devices[0].pods = {{"train-0", "ml", "trainer"}};
  b.devices[1].pods = {{"infer-0", "ml", "server"}, {"infer-1", "ml", "server"}};
  return as_latest({a, failed_snapshot(), b, simulated_snapshots()[0]});
}

TEST(GoldenPrometheus, DcgmCompat) {
  expect_golden("prometheus/dcgm.txt",
                transport::render_prometheus_dcgm(latest(), recent_events(), {"golden-host"}));
  expect_golden("prometheus/dcgm.fleet.txt",
                transport::render_prometheus_dcgm(dcgm_fleet(), {}, {"not-a-node"}));
  EXPECT_EQ(transport::render_prometheus_dcgm({}, recent_events(), {"golden-host"}), "");
}

}  // namespace
}  // namespace gpustream::golden
