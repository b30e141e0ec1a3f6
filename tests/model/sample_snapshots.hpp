// Snapshots for the codec tests: one with every field populated, one that uses every enum value.
#pragma once

#include <string>

#include "gpustream/model.hpp"

namespace gpustream::test {

inline DeviceSample rich_device(int index) {
  DeviceSample d;
  d.id = "GPU-8c1f3e2a-5b7d-4c9e-a1f0-00000000000" + std::to_string(index);
  d.vendor = Vendor::nvidia;
  d.index = index;
  d.name = "NVIDIA A100-SXM4-80GB";
  d.pci_bus_id = "0000:0" + std::to_string(index + 1) + ":00.0";
  d.power_state = PowerState::active;
  d.energy_kind = EnergyKind::counter;
  d.power_kind = PowerKind::instant;
  d.metrics.set(Metric::utilization_percent, 87.5, Source::nvml);
  d.metrics.set(Metric::memory_utilization_percent, 41.25, Source::nvml);
  d.metrics.set(Metric::memory_used_bytes, 34359738368.0 + index, Source::nvml);
  d.metrics.set(Metric::memory_total_bytes, 85899345920.0, Source::nvml);
  d.metrics.set(Metric::temperature_celsius, 64.0, Source::nvml);
  d.metrics.set(Metric::power_watts, 312.457, Source::nvml);
  d.metrics.set(Metric::power_average_watts, 298.1, Source::nvml);
  d.metrics.set(Metric::power_limit_watts, 400.0, Source::nvml);
  d.metrics.set(Metric::energy_joules, 123456789.012, Source::nvml);
  d.metrics.set(Metric::clock_graphics_mhz, 1410.0, Source::nvml);
  d.metrics.set(Metric::clock_sm_mhz, 1410.0, Source::nvml);
  d.metrics.set(Metric::clock_memory_mhz, 1593.0, Source::nvml);
  d.metrics.set_absent(Metric::fan_percent, Absence::unsupported, Source::nvml);
  d.metrics.set_absent(Metric::fan_rpm, Absence::unsupported);
  d.metrics.set_absent(Metric::gtt_used_bytes, Absence::not_collected);
  d.metrics.set(Metric::gtt_total_bytes, 0.1 + 0.2, Source::sysfs);  // not a whole byte count
  d.throttle_reasons = {"sw_power_cap", "hw_slowdown"};
  d.engines = {{"graphics", Reading::of(87.5, Source::nvml)},
               {"copy", Reading::of(3.0, Source::nvml)},
               {"video_decode", Reading::missing(Absence::not_yet_seeded, Source::fdinfo)},
               {"video_encode", Reading::missing(Absence::unsupported)}};
  for (int p = 0; p < 3; ++p) {
    ProcessSample ps;
    ps.pid = 4000 + index * 10 + p;
    ps.name = p == 0 ? "python3" : "trainer \"rank " + std::to_string(p) + "\"\n";
    ps.gpu_memory_bytes = 1073741824ull * (p + 1);
    if (p != 2) ps.gpu_utilization_percent = 12.5 * (p + 1);
    if (p != 1) ps.host_rss_bytes = 2147483648ull + p;
    ps.per_process_exact = p != 2;
    if (p == 1)
      ps.container = ProcessContainer{
          "containerd", "3f9a1c2b7d4e5f60718293a4b5c6d7e8f90123456789abcdef0123456789abcd",
          "5b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", "burstable"};
    if (p == 2) ps.container_absent = ContainerAbsent::host;
    if (p == 0)
      ps.engines = {{"compute", Reading::of(55.5, Source::fdinfo)},
                    {"copy", Reading::missing(Absence::stale, Source::fdinfo)}};
    d.processes.push_back(ps);
  }
  d.attributes = {{"uuid", d.id}, {"metrics_source", "nvml"}, {"driver", "550.54.15"}};
  return d;
}

inline GpuSnapshot rich_snapshot() {
  GpuSnapshot s;
  s.probe = "nvidia";
  s.sequence = 18446744073709551000ull;  // near the top of uint64
  s.time_unix_ns = 1717171717123456789;
  s.monotonic_ns = 987654321012345;
  s.sample_duration_ns = 1834567;
  for (int i = 0; i < 3; ++i) s.devices.push_back(rich_device(i));
  s.devices[2].power_state = PowerState::suspended;
  s.devices[2].energy_kind.reset();
  s.devices[2].metrics.fill_absent(Absence::suspended);
  HostSample h;
  h.memory_total_bytes = 270582939648ull;
  h.memory_available_bytes = 200000000000ull;
  h.memory_used_bytes = 70582939648ull;
  h.swap_total_bytes = 8589934592ull;
  // swap_used_bytes unknown
  h.processes = {{1234, "planner", 512000000ull}, {1235, "zombie", std::nullopt}};
  h.metrics = {{"system_power_watts", 1234.5}, {"cpu_package_watts", 95.25}};
  s.host = h;
  s.errors = {{"gpu_lost", "GPU 3 fell off the bus; check dmesg", "GPU-lost-3"},
              {"tool_failed", "nvidia-smi exited with status 9", ""}};
  return s;
}

/// A snapshot that uses every Vendor, Source, Absence, PowerState, EnergyKind and PowerKind value.
inline GpuSnapshot every_enum_snapshot() {
  GpuSnapshot s;
  s.probe = "enums";
  s.sequence = 7;
  s.time_unix_ns = -5;  // before the epoch: still representable
  int index = 0;
  for (int v = 0; v <= static_cast<int>(Vendor::simulated); ++v) {
    DeviceSample d;
    d.id = "dev-" + std::to_string(index);
    d.vendor = static_cast<Vendor>(v);
    d.index = index++;
    d.power_state = static_cast<PowerState>(v % 3);
    if (v % 3 != 2) d.energy_kind = static_cast<EnergyKind>(v % 2);
    if (v % 3 != 1) d.power_kind = static_cast<PowerKind>((v / 2) % 2);
    if (v % 2 == 1) d.processes_absent = v % 4 == 1 ? Absence::unsupported : Absence::no_permission;
    s.devices.push_back(d);
  }
  // Spread every (absence, source) pair and every present source over the devices' metrics.
  std::size_t slot = 0;
  const auto next = [&]() -> Reading& {
    auto& d = s.devices[(slot / kMetricCount) % s.devices.size()];
    return d.metrics[static_cast<Metric>(slot++ % kMetricCount)];
  };
  for (int src = 0; src < static_cast<int>(kSourceCount); ++src) {
    next() = Reading::of(src * 1.5, static_cast<Source>(src));
    for (int a = 0; a <= static_cast<int>(Absence::not_collected); ++a) {
      const Reading r = Reading::missing(static_cast<Absence>(a), static_cast<Source>(src));
      if (slot < kMetricCount * s.devices.size()) next() = r;
      s.devices[0].engines.push_back({"e" + std::to_string(src) + "_" + std::to_string(a), r});
    }
    s.devices[1].engines.push_back({"p" + std::to_string(src), Reading::of(src, Source(src))});
  }
  return s;
}

}  // namespace gpustream::test
