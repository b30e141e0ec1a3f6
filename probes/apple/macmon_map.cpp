// From a macmon line to the model. The rules (docs/probes.md, "Apple Silicon"):
//
// * utilization_percent: 100 x gpu active ratio (v0.8+, the share of time the GPU was busy, as
//   NVML means it), else 100 x the frequency-scaled ratio (v0.4–v0.7 print only that); the
//   device attribute "utilization_basis" says which ("active_residency" / "frequency_scaled").
// * clock_graphics_mhz: macmon averages the frequency over the GPU's active time, and prints 0
//   when the GPU was not active at all in the interval: that 0 is absent `suspended`.
// * temperature_celsius (and the host's CPU temperature): macmon prints 0.0 when it found no
//   sensor (it divides by a count of zero). Only 0 < t <= 150 °C is trusted; else `unsupported`.
// * power_watts: gpu_power, the mean over macmon's interval (energy delta / interval). A 0.0 W
//   GPU or ANE is real (the energy counters exist on every Apple Silicon chip).
// * memory_total_bytes / memory_used_bytes: the unified memory (ram_total / ram_usage), shared by
//   CPU and GPU; the same figures go to the host part. A ram_total of 0 is not trusted.
// * host metrics: system_power_watts (sys_power; left out when 0, which macmon prints when the
//   Mac does not report it), package_power_watts (all_power = CPU + GPU + ANE),
//   cpu_power_watts, ane_power_watts, dram_power_watts, gpu_sram_power_watts,
//   cpu_temperature_celsius, cpu_utilization_percent, fan_<name>_rpm.
// * ratios outside 0..1 (beyond rounding), negative or non-finite numbers are ignored.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "gpustream/probes/apple_probe.hpp"

namespace gpustream {
namespace {

constexpr double kRatioSlack = 1e-3;  // macmon prints f32 ratios; 1.0000001 is still 1

std::optional<double> valid_ratio(const std::optional<double>& r) {
  if (!r || !std::isfinite(*r) || *r < 0 || *r > 1 + kRatioSlack) return std::nullopt;
  return std::min(*r, 1.0);
}

std::optional<double> valid_nonnegative(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v) || *v < 0) return std::nullopt;
  return v;
}

std::optional<double> valid_temperature(const std::optional<double>& t) {
  if (!t || !std::isfinite(*t) || *t <= 0 || *t > 150) return std::nullopt;
  return t;
}

void set_or_absent(MetricSet& m, Metric metric, const std::optional<double>& v,
                   Absence why = Absence::unsupported) {
  if (v) {
    m.set(metric, *v, Source::macmon);
  } else {
    m.set_absent(metric, why, Source::macmon);
  }
}

// The CPU (or GPU) utilization: active residency where macmon has it, else the scaled ratio.
std::optional<double> utilization_percent(const MacmonCluster& c) {
  if (auto active = valid_ratio(c.active_ratio)) return *active * 100.0;
  if (auto scaled = valid_ratio(c.scaled_ratio)) return *scaled * 100.0;
  return std::nullopt;
}

void add_soc_attributes(DeviceSample& d, const MacmonSocInfo& soc) {
  if (!soc.chip_name.empty()) d.attributes["chip_name"] = soc.chip_name;
  if (!soc.mac_model.empty()) d.attributes["mac_model"] = soc.mac_model;
  const std::pair<const char*, const std::optional<int>*> counts[] = {
      {"gpu_cores", &soc.gpu_cores},
      {"ecpu_cores", &soc.ecpu_cores},
      {"pcpu_cores", &soc.pcpu_cores},
      {"memory_gb", &soc.memory_gb},
  };
  for (const auto& [key, value] : counts)
    if (*value) d.attributes[key] = std::to_string(**value);
}

void fill_host(HostSample& h, const MacmonSample& s) {
  if (s.ram_total_bytes && *s.ram_total_bytes > 0) {
    h.memory_total_bytes = s.ram_total_bytes;
    h.memory_used_bytes = s.ram_used_bytes;
  }
  h.swap_total_bytes = s.swap_total_bytes;
  if (s.swap_total_bytes) h.swap_used_bytes = s.swap_used_bytes;

  const auto put = [&h](const char* key, const std::optional<double>& v) {
    if (v) h.metrics[key] = *v;
  };
  if (auto sys = valid_nonnegative(s.sys_power_watts); sys && *sys > 0)
    h.metrics["system_power_watts"] = *sys;
  put("package_power_watts", valid_nonnegative(s.all_power_watts));
  put("cpu_power_watts", valid_nonnegative(s.cpu_power_watts));
  put("ane_power_watts", valid_nonnegative(s.ane_power_watts));
  put("dram_power_watts", valid_nonnegative(s.ram_power_watts));
  put("gpu_sram_power_watts", valid_nonnegative(s.gpu_ram_power_watts));
  put("cpu_temperature_celsius", valid_temperature(s.cpu_temp_celsius));
  put("cpu_utilization_percent", utilization_percent(s.cpu));
  for (const auto& fan : s.fans)
    if (auto rpm = valid_nonnegative(fan.rpm)) h.metrics["fan_" + fan.name + "_rpm"] = *rpm;
}

}  // namespace

DeviceInfo apple_device_info(const std::optional<MacmonSocInfo>& soc) {
  DeviceInfo info;
  info.id = std::string(kAppleGpuId);
  info.vendor = Vendor::apple;
  info.index = 0;
  info.name = soc && !soc->chip_name.empty() ? soc->chip_name + " GPU" : "Apple Silicon GPU";
  return info;
}

void fill_apple_snapshot(GpuSnapshot& snap, const MacmonSample& s,
                         const std::optional<MacmonSocInfo>& soc_from_detection) {
  const std::optional<MacmonSocInfo>& soc = s.soc ? s.soc : soc_from_detection;
  const DeviceInfo info = apple_device_info(soc);
  DeviceSample d;
  d.id = info.id;
  d.vendor = info.vendor;
  d.index = info.index;
  d.name = info.name;
  d.attributes["memory"] = "unified";
  // macmon has no per-process figures, and on unified memory a process's GPU share is not
  // separable from its RAM: the process list is absent, not empty.
  d.processes_absent = Absence::unsupported;
  d.attributes["macmon_schema"] = std::string(to_string(s.schema));
  if (soc) add_soc_attributes(d, *soc);

  MetricSet& m = d.metrics;
  const auto utilization = utilization_percent(s.gpu);
  set_or_absent(m, Metric::utilization_percent, utilization);
  if (utilization)
    d.attributes["utilization_basis"] =
        valid_ratio(s.gpu.active_ratio) ? "active_residency" : "frequency_scaled";

  if (auto freq = valid_nonnegative(s.gpu.freq_mhz); freq && *freq == 0) {
    m.set_absent(Metric::clock_graphics_mhz, Absence::suspended, Source::macmon);
  } else {
    set_or_absent(m, Metric::clock_graphics_mhz, freq);
  }
  set_or_absent(m, Metric::power_watts, valid_nonnegative(s.gpu_power_watts));
  set_or_absent(m, Metric::temperature_celsius, valid_temperature(s.gpu_temp_celsius));
  if (s.ram_total_bytes && *s.ram_total_bytes > 0) {
    m.set(Metric::memory_total_bytes, static_cast<double>(*s.ram_total_bytes), Source::macmon);
    if (s.ram_used_bytes && *s.ram_used_bytes <= *s.ram_total_bytes)
      m.set(Metric::memory_used_bytes, static_cast<double>(*s.ram_used_bytes), Source::macmon);
  }
  m.fill_absent(Absence::unsupported, Source::macmon);

  d.engines.push_back({"gpu", m[Metric::utilization_percent]});
  // macmon measures the Neural Engine's power only (host metric ane_power_watts), not its load.
  d.engines.push_back({"ane", Reading::missing(Absence::unsupported, Source::macmon)});

  HostSample host;
  fill_host(host, s);
  snap.devices.clear();
  snap.devices.push_back(std::move(d));
  snap.host = std::move(host);
}

}  // namespace gpustream
