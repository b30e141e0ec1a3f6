// The fixed inputs of the golden suite: hand-built snapshots that between them hold every field
// kind of the model (present and absent metrics with every reason, processes with and without
// containers, MIG, GTT, engines, throttle reasons and their absence, host, errors, integer
// extremes, doubles that stress the shortest form, strings that need JSON escapes), a
// fixed-seed simulated snapshot on driven clocks, events, probe statistics and server counters.
//
// Changing a fixture changes every golden file made from it: regenerate them
// (GPUSTREAM_UPDATE_GOLDEN=1, docs/testing.md) in the same commit.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/events.hpp"
#include "gpustream/model.hpp"
#include "gpustream/probe_stats.hpp"
#include "gpustream/probes/simulated_probe.hpp"
#include "gpustream/transport/server.hpp"

namespace gpustream::golden {

inline constexpr std::int64_t kSecond = 1'000'000'000;
inline constexpr std::int64_t kWall = 1'764'135'600 * kSecond;  // 2025-11-26T05:40:00Z

/// An NVIDIA GPU split into MIG instances, an instance, and an AMD APU, with a host and errors.
inline GpuSnapshot full_snapshot() {
  GpuSnapshot s;
  s.probe = "nvidia";
  s.sequence = 42;
  s.time_unix_ns = kWall + 123'456'789;
  s.monotonic_ns = 98'765 * kSecond + 4321;
  s.sample_duration_ns = 1'234'567;

  DeviceSample g;
  g.id = "GPU-8f6c2b1e-0000-4a5b-9c1d-123456789abc";
  g.vendor = Vendor::nvidia;
  g.index = 0;
  g.name = "NVIDIA A100-SXM4-80GB \"golden\" \\ tab\there";
  g.pci_bus_id = "0000:17:00.0";
  auto& m = g.metrics;
  m.set(Metric::utilization_percent, 87, Source::nvml);
  m.set(Metric::memory_utilization_percent, 41.5, Source::nvml);
  m.set(Metric::memory_used_bytes, 52'613'349'376.0, Source::nvml);
  m.set(Metric::memory_total_bytes, 85'899'345'920.0, Source::nvml);
  m.set(Metric::memory_free_bytes, 33'285'996'544.0, Source::nvml);
  m.set(Metric::temperature_celsius, 64, Source::nvml);
  m.set(Metric::power_watts, 312.25, Source::nvml);
  m.set(Metric::power_average_watts, 299.0, Source::nvml);
  m.set(Metric::power_limit_watts, 400, Source::nvml);
  m.set(Metric::energy_joules, 123'456'789.125, Source::nvml);
  m.set(Metric::clock_graphics_mhz, 1410, Source::nvml);
  m.set(Metric::clock_sm_mhz, 1410, Source::nvml);
  m.set(Metric::clock_memory_mhz, 1593, Source::nvml);
  m.set_absent(Metric::fan_percent, Absence::unsupported, Source::nvml);
  m.set_absent(Metric::fan_rpm, Absence::unsupported);
  m.set_absent(Metric::gtt_used_bytes, Absence::unsupported);
  m.set_absent(Metric::gtt_total_bytes, Absence::unsupported);
  m.set(Metric::pcie_rx_bytes_per_second, 1.5e9, Source::nvml);
  m.set(Metric::pcie_tx_bytes_per_second, 0.1, Source::nvml);
  m.set(Metric::pcie_link_generation, 4, Source::nvml);
  m.set(Metric::pcie_link_generation_max, 4, Source::nvml);
  m.set(Metric::pcie_link_width, 16, Source::nvml);
  m.set(Metric::pcie_link_width_max, 16, Source::nvml);
  m.set_absent(Metric::nvlink_rx_bytes_per_second, Absence::not_yet_seeded, Source::nvml);
  m.set(Metric::nvlink_tx_bytes_per_second, 2.5e10, Source::nvml);
  m.set(Metric::ecc_corrected_volatile, 0, Source::nvml);
  m.set(Metric::ecc_uncorrected_volatile, 0, Source::nvml);
  m.set(Metric::ecc_corrected_aggregate, 12, Source::nvml);
  m.set(Metric::ecc_uncorrected_aggregate, 1, Source::nvml);
  m.set_absent(Metric::retired_pages_single_bit, Absence::no_permission, Source::nvml);
  m.set_absent(Metric::retired_pages_double_bit, Absence::tool_failed, Source::nvml);
  m.set_absent(Metric::retired_pages_pending, Absence::stale, Source::nvml);
  m.set(Metric::remapped_rows_corrected, 3, Source::nvml);
  m.set(Metric::remapped_rows_uncorrected, 0, Source::nvml);
  m.set(Metric::remapped_rows_pending, 0, Source::nvml);
  m.set_absent(Metric::remapped_rows_failed, Absence::lost);
  g.energy_kind = EnergyKind::counter;
  g.power_kind = PowerKind::instant;
  g.power_state = PowerState::active;
  g.throttle_reasons = {"sw_power_cap", "hw_thermal_slowdown"};
  g.engines = {{"graphics", Reading::of(87, Source::nvml)},
               {"encoder", Reading::of(0, Source::nvml)},
               {"decoder", Reading::missing(Absence::unsupported, Source::nvml)}};
  ProcessSample p1;
  p1.pid = 4242;
  p1.name = "python3 train.py --name=\"run 1\"";
  p1.gpu_memory_bytes = 42'949'672'960ULL;
  p1.gpu_utilization_percent = 80.5;
  p1.host_rss_bytes = 8'589'934'592ULL;
  p1.container = ProcessContainer{"containerd", std::string(64, 'a'), "0b6f-uid", "guaranteed"};
  p1.container_absent = ContainerAbsent::not_collected;
  ProcessSample p2;
  p2.pid = std::numeric_limits<std::int32_t>::max();
  p2.name = "Xorg";
  p2.gpu_memory_bytes = 0;
  p2.per_process_exact = false;
  p2.container_absent = ContainerAbsent::host;
  p2.engines = {{"graphics", Reading::of(1.25, Source::fdinfo)}};
  g.processes = {p1, p2};
  g.attributes = {{"driver_version", "550.54.15"},
                  {"serial", "1650221004\u00e9\u2713"},
                  {"vbios", "92.00.45.00.0B"}};
  g.partitioned = true;
  s.devices.push_back(g);

  DeviceSample mig;
  mig.id = "MIG-4f1e0000-1111-5222-8333-444455556666";
  mig.vendor = Vendor::nvidia;
  mig.index = 1;
  mig.name = "NVIDIA A100-SXM4-80GB MIG 1g.10gb";
  mig.pci_bus_id = "0000:17:00.0";
  mig.metrics.set(Metric::memory_used_bytes, 1'048'576, Source::nvml);
  mig.metrics.set(Metric::memory_total_bytes, 10'200'547'328.0, Source::nvml);
  mig.metrics.set_absent(Metric::utilization_percent, Absence::unsupported, Source::nvml);
  mig.metrics.set_absent(Metric::power_watts, Absence::unsupported, Source::nvml);
  derive_metrics(mig);
  mig.metrics.fill_absent(Absence::unsupported, Source::nvml);
  mig.throttle_reasons_absent = Absence::unsupported;
  mig.processes_absent = Absence::no_permission;
  mig.parent = g.id;
  mig.mig = MigIdentity{7, 0, "1g.10gb"};
  s.devices.push_back(mig);

  DeviceSample amd;
  amd.id = "amd-0000:c1:00.0";
  amd.vendor = Vendor::amd;
  amd.index = 2;
  amd.name = "AMD Radeon 780M";
  amd.pci_bus_id = "0000:c1:00.0";
  amd.metrics.set(Metric::utilization_percent, 0, Source::sysfs);
  amd.metrics.set(Metric::gtt_used_bytes, 268'435'456, Source::sysfs);
  amd.metrics.set(Metric::gtt_total_bytes, 16'777'216'000.0, Source::sysfs);
  amd.metrics.set(Metric::memory_total_bytes, 536'870'912, Source::sysfs);
  amd.metrics.set(Metric::memory_used_bytes, 100'663'296, Source::amd_smi);
  amd.metrics.set(Metric::energy_joules, 5e-324, Source::integrated);
  amd.metrics.set(Metric::temperature_celsius, -0.5, Source::sysfs);
  amd.metrics.set_absent(Metric::power_watts, Absence::suspended, Source::sysfs);
  amd.metrics.set_absent(Metric::clock_graphics_mhz, Absence::suspended, Source::sysfs);
  derive_metrics(amd);
  amd.metrics.fill_absent(Absence::not_collected);
  amd.energy_kind = EnergyKind::integrated;
  amd.power_kind = PowerKind::average;
  amd.power_state = PowerState::suspended;
  amd.throttle_reasons = {};
  amd.engines = {{"gfx", Reading::of(0, Source::fdinfo)},
                 {"compute", Reading::of(12.5, Source::fdinfo)}};
  ProcessSample p3;
  p3.pid = 1;
  p3.name = "";
  p3.gtt_memory_bytes = std::numeric_limits<std::uint64_t>::max();
  p3.per_process_exact = false;
  p3.container = ProcessContainer{"kubernetes", "", "pod-uid-1", "besteffort"};
  p3.engines = {{"gfx", Reading::of(100, Source::fdinfo)},
                {"compute", Reading::missing(Absence::not_yet_seeded, Source::fdinfo)}};
  ProcessSample p4;
  p4.pid = 77;
  p4.name = "ctl\x01\x1f\x7f";
  p4.container_absent = ContainerAbsent::unrecognized;
  amd.processes = {p3, p4};
  s.devices.push_back(amd);

  HostSample h;
  h.memory_total_bytes = 67'108'864'000ULL;
  h.memory_available_bytes = 33'554'432'000ULL;
  h.memory_used_bytes = 33'554'432'000ULL;
  h.swap_total_bytes = 0;
  h.processes = {{4242, "python3", 8'589'934'592ULL}, {1, "init", std::nullopt}};
  h.metrics = {{"load1", 0.5}, {"cpu_percent", 12.0}, {"big", 1e21}, {"tiny", 1.5e-7}};
  s.host = h;

  s.errors = {{"tool_failed", "nvidia-smi said \"error\"\nsecond line", g.id},
              {"partial", "one device was skipped", ""}};
  return s;
}

/// A sample that failed: no device, only errors; a node's (fleet) snapshot.
inline GpuSnapshot failed_snapshot() {
  GpuSnapshot s;
  s.probe = "amd";
  s.node = "node-7";
  s.sequence = 1;
  s.time_unix_ns = kWall;
  s.monotonic_ns = 1;
  s.sample_duration_ns = 0;
  s.errors = {{"sample_failed", "amd-smi: exit status 1", ""}};
  return s;
}

/// Integer extremes and doubles at the edges of their shortest form.
inline GpuSnapshot extremes_snapshot() {
  GpuSnapshot s;
  s.probe = "simulated";
  s.sequence = std::numeric_limits<std::uint64_t>::max();
  s.time_unix_ns = std::numeric_limits<std::int64_t>::max();
  s.monotonic_ns = std::numeric_limits<std::int64_t>::max();
  s.sample_duration_ns = std::numeric_limits<std::int64_t>::max();
  DeviceSample d;
  d.id = "sim-extremes";
  d.vendor = Vendor::simulated;
  d.index = std::numeric_limits<int>::max();
  d.name = "Extremes";
  d.metrics.set(Metric::utilization_percent, 100.0, Source::simulated);
  d.metrics.set(Metric::memory_used_bytes, 9'007'199'254'740'993.0, Source::simulated);  // 2^53+1
  d.metrics.set(Metric::memory_total_bytes, 1.8446744073709552e19, Source::simulated);   // 2^64
  d.metrics.set(Metric::power_watts, 1.7976931348623157e308, Source::simulated);
  d.metrics.set(Metric::power_average_watts, 2.2250738585072014e-308, Source::simulated);
  d.metrics.set(Metric::temperature_celsius, -273.15, Source::simulated);
  d.metrics.set(Metric::energy_joules, 0.30000000000000004, Source::simulated);
  d.metrics.set(Metric::fan_percent, 1e-7, Source::simulated);
  d.metrics.set(Metric::fan_rpm, 123456789012345680.0, Source::simulated);
  d.metrics.set(Metric::clock_sm_mhz, -0.0, Source::simulated);
  d.metrics.set(Metric::pcie_rx_bytes_per_second, 1e15, Source::simulated);
  d.metrics.set(Metric::pcie_tx_bytes_per_second, 1e16, Source::simulated);
  d.metrics.set(Metric::gtt_used_bytes, 0.5, Source::simulated);  // a byte count that is not whole
  d.energy_kind = EnergyKind::counter;
  d.metrics.fill_absent(Absence::unsupported, Source::simulated);
  ProcessSample p;
  p.pid = std::numeric_limits<std::int64_t>::max();
  p.name = "max";
  p.gpu_memory_bytes = std::numeric_limits<std::uint64_t>::max();
  p.host_rss_bytes = 0;
  p.gpu_utilization_percent = 0.0;
  d.processes.push_back(p);
  ProcessSample q;
  q.pid = std::numeric_limits<std::int64_t>::min();
  q.name = "min";
  d.processes.push_back(q);
  s.devices.push_back(d);
  HostSample h;
  h.memory_total_bytes = std::numeric_limits<std::uint64_t>::max();
  s.host = h;
  return s;
}

/// What the encoders guard: non-finite numbers and strings that are not UTF-8. Its JSON does not
/// decode back to it (the guards change it), only to what they made of it.
inline GpuSnapshot guarded_snapshot() {
  GpuSnapshot s;
  s.probe = "intel";
  s.sequence = 3;
  s.time_unix_ns = kWall;
  s.monotonic_ns = 5 * kSecond;
  DeviceSample d;
  d.id = "intel-\xff\xfe-bad";
  d.vendor = Vendor::intel;
  d.name = "Arc \xc3\x28 overlong \xc0\xaf";
  d.metrics.set(Metric::utilization_percent, std::numeric_limits<double>::quiet_NaN(),
                Source::level_zero);
  d.metrics.set(Metric::power_watts, std::numeric_limits<double>::infinity(), Source::level_zero);
  d.metrics.set(Metric::temperature_celsius, -std::numeric_limits<double>::infinity(),
                Source::level_zero);
  d.metrics.fill_absent(Absence::unsupported, Source::level_zero);
  ProcessSample p;
  p.pid = 9;
  p.name = "\x80lone continuation";
  p.gpu_utilization_percent = std::numeric_limits<double>::quiet_NaN();
  d.processes.push_back(p);
  s.devices.push_back(d);
  HostSample h;
  h.metrics = {{"nan", std::numeric_limits<double>::quiet_NaN()}, {"ok", 1.0}};
  s.host = h;
  return s;
}

/// Two simulated GPUs of seed 7 sampled twice on driven clocks (t = 10 s, then 11 s): the second
/// sample has rates and integrated energy. sample_duration_ns (measured) is set to 0.
inline std::vector<GpuSnapshot> simulated_snapshots(std::uint64_t seed = 7, int devices = 2) {
  auto mono = std::make_shared<std::int64_t>(10 * kSecond);
  boost::asio::io_context io;
  SimulatedProbeOptions o;
  o.devices = devices;
  o.seed = seed;
  o.monotonic_clock = [mono] { return *mono; };
  o.wall_clock = [mono] { return kWall + *mono; };
  auto probe = make_simulated_probe({io.get_executor(), io.get_executor()}, std::move(o));
  std::vector<GpuSnapshot> out;
  for (int i = 0; i < 2; ++i) {
    auto s = probe->sample_now();
    s.probe = std::string(SimulatedProbe::kName);
    s.sequence = static_cast<std::uint64_t>(i) + 1;
    s.time_unix_ns = kWall + *mono;
    s.monotonic_ns = *mono;
    s.sample_duration_ns = 0;
    out.push_back(std::move(s));
    *mono += kSecond;
  }
  return out;
}

/// Every snapshot fixture by name (the golden files are named after them).
struct NamedSnapshot {
  std::string name;
  GpuSnapshot snapshot;
};
inline std::vector<NamedSnapshot> decodable_snapshots() {
  auto sim = simulated_snapshots();
  return {{"full", full_snapshot()},
          {"failed", failed_snapshot()},
          {"extremes", extremes_snapshot()},
          {"simulated_1", sim[0]},
          {"simulated_2", sim[1]}};
}

inline std::vector<GpuEvent> events() {
  std::vector<GpuEvent> out;
  out.push_back(
      {1, kWall + 5, "nvidia", "GPU-8f6c2b1e-0000-4a5b-9c1d-123456789abc", EventKind::xid, 79});
  out.push_back({2, kWall + 6, "nvidia", "GPU-8f6c2b1e-0000-4a5b-9c1d-123456789abc",
                 EventKind::ecc_double_bit, std::nullopt});
  out.push_back({3, kWall + 7, "nvidia", "MIG-4f1e0000-1111-5222-8333-444455556666",
                 EventKind::clock_event, 0x88});
  out.push_back({std::numeric_limits<std::uint64_t>::max(),
                 std::numeric_limits<std::int64_t>::max(), "amd", "amd-\"quoted\"",
                 EventKind::other, std::numeric_limits<std::uint64_t>::max()});
  out.push_back({5, 0, "nvidia", "GPU-x", EventKind::pstate, 2});
  out.push_back({6, 1, "nvidia", "GPU-x", EventKind::power_source, std::nullopt});
  out.push_back({7, 2, "nvidia", "GPU-x", EventKind::ecc_single_bit, 0});
  return out;
}

inline EventTotals event_totals() {
  EventTotals t;
  t.by_kind[{"GPU-8f6c2b1e-0000-4a5b-9c1d-123456789abc", EventKind::xid}] = 3;
  t.by_kind[{"GPU-8f6c2b1e-0000-4a5b-9c1d-123456789abc", EventKind::ecc_double_bit}] = 1;
  t.by_kind[{"amd-\"quoted\"\\", EventKind::other}] = std::numeric_limits<std::uint64_t>::max();
  t.by_xid[{"GPU-8f6c2b1e-0000-4a5b-9c1d-123456789abc", "79"}] = 2;
  t.by_xid[{"GPU-8f6c2b1e-0000-4a5b-9c1d-123456789abc", "other"}] = 1;
  t.counters.published = 12;
  t.counters.dropped = 2;
  return t;
}

inline std::vector<ProbeStats> probe_stats() {
  ProbeStats a;
  a.probe = "nvidia";
  a.state = ProbeState::available;
  a.samples = 1000;
  a.failures = 2;
  a.timeouts = 1;
  a.overruns = 3;
  a.missed_ticks = 4;
  a.consecutive_failures = 0;
  a.detections = 1;
  a.requested_interval = std::chrono::milliseconds{500};
  a.interval = std::chrono::milliseconds{500};
  a.latency_p50_ns = 1'500'000;
  a.latency_p90_ns = 2'000'000;
  a.latency_p99_ns = 9'000'000;
  a.latency_max_ns = 12'345'678;
  a.latency_window = 256;
  a.last_error = "nvmlDeviceGetPowerUsage: \"timeout\"\nretrying";
  a.devices = 3;
  ProbeStats b;
  b.probe = "amd";
  b.state = ProbeState::backoff;
  b.reason = "amd-smi exited with status 1";
  b.failures = 7;
  b.consecutive_failures = 7;
  b.detections = 2;
  b.requested_interval = std::chrono::milliseconds{100};
  b.interval = std::chrono::milliseconds{250};
  b.backoff = std::chrono::milliseconds{4000};
  return {a, b};
}

inline transport::ServerCounters server_counters() {
  transport::ServerCounters c;
  std::uint64_t v = 1;
  for (auto* f : {&c.connections_accepted,
                  &c.connections_rejected,
                  &c.http_open,
                  &c.websocket_open,
                  &c.tcp_open,
                  &c.http_requests,
                  &c.requests_forbidden,
                  &c.requests_unauthorized,
                  &c.messages_rejected,
                  &c.slow_clients_disconnected,
                  &c.snapshots_received,
                  &c.serializations,
                  &c.snapshots_sent,
                  &c.snapshots_dropped,
                  &c.idle_closed,
                  &c.encoded_cache_bytes,
                  &c.encoded_cache_entries,
                  &c.events_received,
                  &c.events_sent,
                  &c.events_dropped,
                  &c.messages_too_large,
                  &c.http_busy,
                  &c.http_response_bytes,
                  &c.encoded_bytes_live}) {
    *f = v * 1000 + v;
    ++v;
  }
  return c;
}

inline std::vector<SnapshotPtr> as_latest(const std::vector<GpuSnapshot>& snaps) {
  std::vector<SnapshotPtr> out;
  for (const auto& s : snaps) out.push_back(std::make_shared<const GpuSnapshot>(s));
  return out;
}

}  // namespace gpustream::golden
