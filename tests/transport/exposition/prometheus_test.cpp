// The Prometheus exposition checked by Prometheus's own linter: `promtool check metrics`
// (Debian `prometheus`) must accept render_prometheus()'s output in every state the server can
// be in — probes in every state with latency quantiles, failures and errors, host figures, and
// the server's counters. A missing promtool is a failure saying what to install, never a skip.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "gpustream/transport/fleet.hpp"
#include "gpustream/transport/prometheus.hpp"
#include "support/temp_tree.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

constexpr const char* kPrometheusPromtool = "/usr/bin/promtool";

struct PromtoolResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

/// Runs `promtool check metrics` with `text` on its standard input.
PromtoolResult promtool_check(const std::string& text) {
  gpustream::test::TempTree tmp;
  const auto file = tmp.file("metrics.txt", text);
  const std::string cmd = std::string(kPrometheusPromtool) + " check metrics < '" + file + "' 2>&1";
  PromtoolResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

void expect_promtool_clean(const std::string& text) {
  ASSERT_EQ(::access(kPrometheusPromtool, X_OK), 0)
      << kPrometheusPromtool << " is missing: install the Debian package 'prometheus' "
      << "(scripts/deps.sh test does)";
  const auto r = promtool_check(text);
  EXPECT_EQ(r.exit_code, 0) << "promtool check metrics:\n" << r.output << "\non:\n" << text;
  EXPECT_EQ(r.output, "") << text;
}

ProbeStats stats_in(std::string probe, ProbeState state) {
  ProbeStats s;
  s.probe = std::move(probe);
  s.state = state;
  s.interval = std::chrono::milliseconds{50};
  return s;
}

/// Every probe state; the sampling ones with a latency window, the failing ones with errors.
std::vector<ProbeStats> stats_of_every_kind() {
  auto ok = stats_in("sim", ProbeState::available);
  ok.samples = 1000;
  ok.failures = 3;
  ok.timeouts = 1;
  ok.overruns = 2;
  ok.missed_ticks = 4;
  ok.latency_p50_ns = 1'500'000;
  ok.latency_p90_ns = 2'000'000;
  ok.latency_p99_ns = 3'000'000;
  ok.latency_max_ns = 4'000'000;
  ok.latency_window = 256;
  ok.devices = 2;
  auto failing = stats_in("nvidia", ProbeState::unavailable);
  failing.reason = "libnvidia-ml.so.1 not found";
  failing.failures = 7;
  failing.consecutive_failures = 7;
  failing.last_error = "tool_failed: nvidia-smi \"exit\" 9\nsecond line";
  auto backoff = stats_in("amd-smi", ProbeState::backoff);
  backoff.backoff = std::chrono::milliseconds{2000};
  backoff.latency_p50_ns = 9'000'000;  // one sample only: p90/p99 not known yet
  return {ok, failing, backoff, stats_in("intel", ProbeState::detecting),
          stats_in("macmon", ProbeState::stopped)};
}

std::vector<SnapshotPtr> snapshots_with_errors() {
  auto sim = make_snapshot("sim", 2, 3, true);
  sim.devices[1].name = "Odd \"GPU\" \\ name\nline";
  sim.devices[1].metrics.set_absent(Metric::power_watts, Absence::no_permission);
  sim.errors.push_back({"tool_failed", "nvidia-smi exited with status 9", sim.devices[0].id});
  sim.errors.push_back({"no_permission", "/dev/dri/card0: permission denied", ""});
  if (sim.host) sim.host->metrics["system_power_watts"] = 42.5;
  auto empty = make_snapshot("amd-smi", 0);
  empty.errors.push_back({"gpu_lost", "device vanished", "GPU-X"});
  return {std::make_shared<const GpuSnapshot>(std::move(sim)),
          std::make_shared<const GpuSnapshot>(std::move(empty))};
}

ServerCounters busy_counters() {
  ServerCounters c;
  c.connections_accepted = 1200;
  c.connections_rejected = 17;
  c.http_open = 3;
  c.websocket_open = 250;
  c.tcp_open = 256;
  c.http_requests = 5000;
  c.requests_forbidden = 4;
  c.requests_unauthorized = 9;
  c.messages_rejected = 31;
  c.slow_clients_disconnected = 2;
  c.snapshots_received = 10'000;
  c.serializations = 20'000;
  c.snapshots_sent = 2'000'000;
  c.snapshots_dropped = 1234;
  return c;
}

TEST(TransportPrometheus, PromtoolAcceptsProbesWithStatsAndErrorsAndServerCounters) {
  auto counters = busy_counters();
  expect_promtool_clean(
      render_prometheus(snapshots_with_errors(), stats_of_every_kind(), &counters));
}

TEST(TransportPrometheus, PromtoolAcceptsEachPartAlone) {
  ServerCounters idle;
  expect_promtool_clean(render_prometheus({}, {}, &idle));
  expect_promtool_clean(render_prometheus({}, stats_of_every_kind(), nullptr));
  expect_promtool_clean(render_prometheus(snapshots_with_errors(), {}, nullptr));
}

TEST(TransportPrometheus, SampleLatencyIsASummaryOfQuantiles) {
  const auto text = render_prometheus({}, stats_of_every_kind(), nullptr);
  EXPECT_NE(text.find("# TYPE gpustream_probe_sample_latency_seconds summary\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("gpustream_probe_sample_latency_seconds{probe=\"sim\",quantile=\"0.99\"} "
                      "0.003\n"),
            std::string::npos)
      << text;
  // A quantile that is not known is left out, never written as 0.
  EXPECT_NE(text.find("gpustream_probe_sample_latency_seconds{probe=\"amd-smi\",quantile=\"0.5\"}"),
            std::string::npos);
  EXPECT_EQ(text.find("gpustream_probe_sample_latency_seconds{probe=\"amd-smi\",quantile=\"0.9\"}"),
            std::string::npos);
  EXPECT_EQ(text.find("gpustream_probe_sample_latency_seconds{probe=\"intel\""), std::string::npos);
}

// The checker itself: a gauge with a quantile label (the defect) is refused.
TEST(TransportPrometheus, PromtoolRefusesAGaugeWithAQuantileLabel) {
  ASSERT_EQ(::access(kPrometheusPromtool, X_OK), 0)
      << kPrometheusPromtool << " is missing (Debian 'prometheus')";
  const auto r = promtool_check(
      "# HELP x_seconds A gauge.\n# TYPE x_seconds gauge\nx_seconds{quantile=\"0.5\"} 1\n");
  EXPECT_NE(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace gpustream::transport::test

namespace gpustream::transport::test {
namespace {

// Two GPUs, three processes: one in a containerd container, one whose pod only is known, one
// on the host without a utilization figure.
std::vector<SnapshotPtr> snapshot_with_processes() {
  GpuSnapshot s;
  s.probe = "amd";
  s.devices.resize(2);
  for (int i = 0; i < 2; ++i) {
    s.devices[i].id = "gpu" + std::to_string(i);
    s.devices[i].vendor = Vendor::amd;
    s.devices[i].name = "Radeon";
  }
  ProcessSample a;
  a.pid = 100;
  a.name = "trainer \"a\"";
  a.gpu_memory_bytes = 1024;
  a.gpu_utilization_percent = 50;
  a.container = ProcessContainer{"containerd", std::string(64, 'a'), "", ""};
  ProcessSample b;
  b.pid = 200;
  b.name = "conmon";
  b.gpu_memory_bytes = 2048;
  b.container =
      ProcessContainer{"kubernetes", "", "5b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", "burstable"};
  ProcessSample c;
  c.pid = 300;
  c.name = "xorg";
  c.gpu_memory_bytes = 4096;
  c.container_absent = ContainerAbsent::host;
  s.devices[0].processes = {a, b};
  s.devices[1].processes = {c};
  return {std::make_shared<const GpuSnapshot>(std::move(s))};
}

TEST(TransportPrometheus, ProcessSeriesAreOptIn) {
  const auto text = render_prometheus(snapshot_with_processes(), {}, nullptr);
  EXPECT_EQ(text.find("gpustream_gpu_process_"), std::string::npos) << text;
}

TEST(TransportPrometheus, ProcessSeriesCarryPidNameAndContainer) {
  const auto text = render_prometheus(snapshot_with_processes(), {}, nullptr, {100});
  EXPECT_NE(text.find("gpustream_gpu_process_memory_bytes{device=\"gpu0\",vendor=\"amd\","
                      "probe=\"amd\",name=\"Radeon\",pid=\"100\",process=\"trainer \\\"a\\\"\","
                      "container=\"" +
                      std::string(64, 'a') + "\"} 1024\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpustream_gpu_process_utilization_ratio{device=\"gpu0\",vendor=\"amd\","
                      "probe=\"amd\",name=\"Radeon\",pid=\"100\",process=\"trainer \\\"a\\\"\","
                      "container=\"" +
                      std::string(64, 'a') + "\"} 0.5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pid=\"200\",process=\"conmon\","
                      "container=\"pod/5b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0\"} 2048\n"),
            std::string::npos)
      << text;
  // A host process has no container label; no utilization series without a figure.
  EXPECT_NE(text.find("pid=\"300\",process=\"xorg\"} 4096\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("pid=\"300\",process=\"xorg\"} 0"), std::string::npos) << text;
  EXPECT_NE(text.find("gpustream_gpu_process_series_omitted 0\n"), std::string::npos) << text;
  expect_promtool_clean(text);
}

TEST(TransportPrometheus, ProcessSeriesCarryTheSlurmJobAndStep) {
  GpuSnapshot s;
  s.probe = "nvidia";
  s.devices.resize(1);
  s.devices[0].id = "GPU-1";
  s.devices[0].vendor = Vendor::nvidia;
  s.devices[0].name = "H100";
  ProcessSample in_step;
  in_step.pid = 10;
  in_step.name = "python";
  in_step.gpu_memory_bytes = 100;
  in_step.slurm = SlurmJob{.job_id = "4242", .step = "batch", .uid = 1000u, .user = "alice"};
  ProcessSample job_level;
  job_level.pid = 11;
  job_level.name = "odd\"name";
  job_level.gpu_memory_bytes = 200;
  job_level.slurm = SlurmJob{.job_id = "7"};
  ProcessSample outside;
  outside.pid = 12;
  outside.name = "xorg";
  outside.gpu_memory_bytes = 300;
  outside.slurm_absent = SlurmAbsent::unrecognized;
  s.devices[0].processes = {in_step, job_level, outside};
  const auto text =
      render_prometheus({std::make_shared<const GpuSnapshot>(std::move(s))}, {}, nullptr, {100});
  EXPECT_NE(text.find("gpustream_gpu_process_memory_bytes{device=\"GPU-1\",vendor=\"nvidia\","
                      "probe=\"nvidia\",name=\"H100\",pid=\"10\",process=\"python\","
                      "slurm_job=\"4242\",slurm_step=\"batch\"} 100\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pid=\"11\",process=\"odd\\\"name\",slurm_job=\"7\"} 200\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pid=\"12\",process=\"xorg\"} 300\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("job=\""), text.find("slurm_job=\"") + 6) << "no bare `job` label";
  expect_promtool_clean(text);
}

TEST(TransportPrometheus, ProcessSeriesCarryTheKubeletsPodNamespaceAndContainer) {
  GpuSnapshot s;
  s.probe = "nvidia";
  s.devices.resize(1);
  s.devices[0].id = "GPU-1";
  s.devices[0].vendor = Vendor::nvidia;
  s.devices[0].name = "H100";
  const std::string id(64, 'a');
  ProcessSample named;
  named.pid = 10;
  named.name = "python";
  named.gpu_memory_bytes = 100;
  named.container = ProcessContainer{"containerd", id, "6f1c2a3b-0000-4c6a-9d9e-1234567890ab", ""};
  named.pod = KubernetesPod{"train-0", "ml", "trainer"};
  ProcessSample unnamed;  // in a pod, but the kubelet did not say which: the old label
  unnamed.pid = 11;
  unnamed.name = "python";
  unnamed.gpu_memory_bytes = 200;
  unnamed.container = ProcessContainer{"kubernetes", "", "0000-1111", "besteffort"};
  unnamed.pod_absent = PodAbsent::kubelet_unavailable;
  s.devices[0].processes = {named, unnamed};
  const auto text =
      render_prometheus({std::make_shared<const GpuSnapshot>(std::move(s))}, {}, nullptr, {100});
  EXPECT_NE(text.find("pid=\"10\",process=\"python\",pod=\"train-0\",namespace=\"ml\","
                      "container=\"trainer\",container_id=\"" +
                      id + "\"} 100\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pid=\"11\",process=\"python\",container=\"pod/0000-1111\"} 200\n"),
            std::string::npos)
      << text;
  expect_promtool_clean(text);
}

TEST(TransportPrometheus, ProcessSeriesAreBoundedAndTheRestCounted) {
  // Four samples exist (memory x3, utilization x1); a bound of 2 writes 2 and counts 2.
  const auto text = render_prometheus(snapshot_with_processes(), {}, nullptr, {2});
  std::size_t samples = 0;
  for (std::size_t at = 0; (at = text.find("\ngpustream_gpu_process_", at)) != std::string::npos;
       ++at) {
    if (text.compare(at + 1, 36, "gpustream_gpu_process_series_omitted") != 0) ++samples;
  }
  EXPECT_EQ(samples, 2u) << text;
  EXPECT_NE(text.find("gpustream_gpu_process_series_omitted 2\n"), std::string::npos) << text;
  expect_promtool_clean(text);
}

/// The lines of `text` that are samples (not # HELP / # TYPE) and contain `needle`.
std::vector<std::string> sample_lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#' && line.find(needle) != std::string::npos)
      out.push_back(line);
  return out;
}

// A stale node's copy has every value absent (reason `stale`), its processes too: its devices
// keep their identity (gpustream_gpu_info 1) and nothing else, never a 0 (issue #28 item 4).
TEST(TransportPrometheus, AStaleNodeHasNoDeviceSeriesButItsIdentity) {
  auto live = make_snapshot("sim", 2, 3, true);
  live.node = "node3";
  live.devices[0].engines.push_back({"video_decode", Reading::of(40.0, Source::simulated)});
  live.devices[1].processes.clear();  // an empty list is known: 0 processes
  const auto options = PrometheusOptions{100};
  // The live snapshot has the series the stale one must not have.
  const auto live_text =
      render_prometheus({std::make_shared<const GpuSnapshot>(live)}, {}, nullptr, options);
  ASSERT_NE(live_text.find("gpustream_gpu_processes{"), std::string::npos) << live_text;
  ASSERT_NE(live_text.find("gpustream_gpu_utilization_ratio{"), std::string::npos) << live_text;
  ASSERT_NE(live_text.find("gpustream_gpu_process_memory_bytes{"), std::string::npos) << live_text;
  ASSERT_NE(live_text.find("gpustream_host_"), std::string::npos) << live_text;
  ASSERT_NE(live_text.find("gpustream_gpu_engine_utilization_ratio{"), std::string::npos)
      << live_text;

  const auto stale = stale_copy(live, live.time_unix_ns);
  const auto text =
      render_prometheus({std::make_shared<const GpuSnapshot>(stale)}, {}, nullptr, options);
  for (const auto& d : live.devices) {
    const auto lines = sample_lines_with(text, "device=\"" + d.id + "\"");
    ASSERT_EQ(lines.size(), 1u) << text;
    EXPECT_EQ(lines[0].rfind("gpustream_gpu_info{", 0), 0u) << lines[0];
    EXPECT_EQ(lines[0].substr(lines[0].size() - 3), "} 1") << lines[0];
  }
  EXPECT_EQ(text.find("gpustream_host_"), std::string::npos) << text;
  EXPECT_EQ(text.find("gpustream_gpu_processes"), std::string::npos) << text;
  // What is known of the node stays: when it last sampled, and that it reports an error.
  EXPECT_NE(text.find("gpustream_snapshot_errors{probe=\"sim\",node=\"node3\"} 1\n"),
            std::string::npos)
      << text;
  expect_promtool_clean(text);
}

// A probe that cannot list a device's processes has no count for it; an empty list is a 0.
TEST(TransportPrometheus, ProcessCountIsAbsentWhenTheListIsAbsent) {
  auto s = make_snapshot("sim", 2);
  s.devices[0].processes.clear();
  s.devices[0].processes_absent = Absence::unsupported;
  s.devices[1].processes.clear();
  const auto text = render_prometheus({std::make_shared<const GpuSnapshot>(s)}, {}, nullptr);
  const auto counts = sample_lines_with(text, "gpustream_gpu_processes{");
  ASSERT_EQ(counts.size(), 1u) << text;
  EXPECT_NE(counts[0].find("device=\"" + s.devices[1].id + "\""), std::string::npos) << counts[0];
  EXPECT_EQ(counts[0].substr(counts[0].size() - 2), " 0") << counts[0];
}

// ---------------------------------------------------------------------------------------------
// PrometheusWriter: the text in pieces (a streamed /metrics, issue #32).

/// A fleet's worth of snapshots that exercise every per-snapshot family: nodes, host parts
/// with figures whose names collide after sanitizing (and with a fixed family), processes,
/// a snapshot without devices, a null entry. The first node has every family (so the order
/// in which families are first met is the table's); `late_key` adds a host figure first met on
/// a later node.
std::vector<SnapshotPtr> fleet_like(int nodes, bool late_key) {
  std::vector<SnapshotPtr> out;
  for (int n = 0; n < nodes; ++n) {
    auto s = make_snapshot("sim", 1 + n % 4, n % 3, n % 2 == 0);
    s.node = "node-" + std::to_string(n);
    s.sequence = 100 + static_cast<std::uint64_t>(n);
    if (s.host) {
      s.host->metrics["load.1m"] = 0.5 * n;
      if (n % 4 == 0) s.host->metrics["load_1m"] = 1.5;          // the same family as "load.1m"
      if (n % 6 == 0) s.host->metrics["memory_used_bytes"] = 7;  // a fixed family's name
      if (late_key && n == nodes - 2) s.host->metrics["late_key"] = 3;
    }
    if (n % 5 == 0) s.devices.front().metrics.set(Metric::fan_rpm, 1200.0 + n, Source::simulated);
    if (n == 3) s.devices.clear();
    out.push_back(std::make_shared<const GpuSnapshot>(std::move(s)));
    if (n == 7) out.push_back(nullptr);
  }
  return out;
}

std::string drain(PrometheusWriter w, std::size_t want, std::size_t* largest_call = nullptr) {
  std::string out;
  std::size_t before = 0;
  while (w.next(out, out.size() + want)) {
    if (largest_call) *largest_call = std::max(*largest_call, out.size() - before);
    before = out.size();
  }
  EXPECT_FALSE(w.next(out, out.size() + want)) << "the end stays the end";
  return out;
}

/// The families of an exposition, in order: name -> (HELP and TYPE lines, sample lines).
struct ParsedFamily {
  std::string name, head, samples;
};
std::vector<ParsedFamily> families_of(const std::string& text) {
  std::vector<ParsedFamily> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("# HELP ")) {
      const auto name = line.substr(7, line.find(' ', 7) - 7);
      out.push_back({name, line + "\n", {}});
    } else if (line.starts_with("# TYPE ")) {
      out.back().head += line + "\n";
    } else {
      out.back().samples += line + "\n";
    }
  }
  return out;
}

TEST(TransportPrometheusWriter, PiecesOfAnySizeJoinToTheWholeText) {
  const auto latest = fleet_like(40, true);
  const std::vector<ProbeStats> stats{stats_in("sim", ProbeState::available)};
  ServerCounters c;
  c.http_requests = 9;
  PrometheusOptions o;
  o.max_process_series = 25;  // some per-process values over the bound
  const auto whole = render_prometheus(latest, stats, &c, o);
  ASSERT_GT(whole.size(), 40'000u);
  for (const std::size_t want :
       {std::size_t{1}, std::size_t{100}, std::size_t{4096}, std::size_t{1} << 20}) {
    std::size_t largest = 0;
    EXPECT_EQ(drain(PrometheusWriter(latest, stats, c, o), want, &largest), whole) << want;
    // A call passes `want` by one piece at most: one device's samples of one family, or a
    // small family (the probes' statistics, the server's counters: a few KB) whole.
    if (want == 1) {
      EXPECT_LT(largest, 4096u);
    }
  }
}

// The text is what collecting every snapshot's samples per family and joining them gives
// (how /metrics was made before it was streamed): each family once, its samples in snapshot
// order, the families in the order they are first met. Checked against each snapshot's own
// exposition, merged here.
TEST(TransportPrometheusWriter, EachFamilyIsEverySnapshotsSamplesInOrder) {
  const auto latest = fleet_like(30, false);
  std::vector<ParsedFamily> merged;
  for (const auto& s : latest) {
    if (!s) continue;
    for (auto& f : families_of(render_prometheus({s}, {}, nullptr))) {
      const auto it = std::find_if(merged.begin(), merged.end(),
                                   [&](const ParsedFamily& m) { return m.name == f.name; });
      if (it == merged.end())
        merged.push_back(std::move(f));
      else
        it->samples += f.samples;
    }
  }
  std::string expected;
  for (const auto& f : merged) expected += f.head + f.samples;
  EXPECT_EQ(render_prometheus(latest, {}, nullptr), expected);
  EXPECT_EQ(drain(PrometheusWriter(latest, {}, std::nullopt), 1), expected);
}

TEST(TransportPrometheusWriter, NothingToWriteIsFalseAtOnce) {
  PrometheusWriter w({}, {}, std::nullopt);
  std::string out;
  EXPECT_FALSE(w.next(out, 1000));
  EXPECT_EQ(out, "");
}

}  // namespace
}  // namespace gpustream::transport::test
