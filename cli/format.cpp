#include "format.hpp"

#include <fmt/format.h>

namespace gpustream::cli {
namespace {

std::string cell(const Reading& r, const char* fmt_spec) {
  if (!r.has_value()) return "-";
  return fmt::format(fmt::runtime(fmt_spec), r.value());
}

}  // namespace

std::string human_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", bytes, kUnits[u]) : fmt::format("{:.1f} {}", bytes, kUnits[u]);
}

std::string table_header() {
  return fmt::format("{:<10} {:<24} {:>6} {:>21} {:>6} {:>8} {:>11} {:>7} {:>5}  {}", "PROBE",
                     "DEVICE", "UTIL%", "MEMORY USED/TOTAL", "TEMP", "POWER", "ENERGY", "CLOCK",
                     "PROCS", "SOURCE");
}

std::string format_table(const std::vector<const GpuSnapshot*>& snapshots) {
  std::string out;
  for (const auto* s : snapshots) {
    for (const auto& d : s->devices) {
      const auto& m = d.metrics;
      std::string mem = "-";
      if (m[Metric::memory_used_bytes] || m[Metric::memory_total_bytes]) {
        mem = fmt::format("{} / {}",
                          m[Metric::memory_used_bytes] ? human_bytes(m[Metric::memory_used_bytes].value()) : "-",
                          m[Metric::memory_total_bytes] ? human_bytes(m[Metric::memory_total_bytes].value()) : "-");
      }
      std::string name = d.name.empty() ? d.id : d.name;
      if (name.size() > 24) name = name.substr(0, 23) + "~";
      std::string energy = "-";
      if (m[Metric::energy_joules])
        energy = fmt::format("{:.1f} kJ{}", m[Metric::energy_joules].value() / 1000.0,
                             d.energy_kind == EnergyKind::integrated ? "~" : "");
      std::string source;
      for (const auto& r : {m[Metric::utilization_percent], m[Metric::memory_used_bytes],
                            m[Metric::power_watts]})
        if (r.has_value()) {
          source = std::string(to_string(r.source()));
          break;
        }
      if (d.power_state == PowerState::suspended) source = "suspended";
      out += fmt::format("{:<10} {:<24} {:>6} {:>21} {:>6} {:>8} {:>11} {:>7} {:>5}  {}\n",
                         s->probe, name, cell(m[Metric::utilization_percent], "{:.0f}"), mem,
                         cell(m[Metric::temperature_celsius], "{:.0f}C"),
                         cell(m[Metric::power_watts], "{:.1f}W"), energy,
                         cell(m[Metric::clock_graphics_mhz], "{:.0f}"), d.processes.size(), source);
    }
    if (s->host) {
      const auto& h = *s->host;
      std::string mem = "-";
      if (h.memory_used_bytes && h.memory_total_bytes)
        mem = fmt::format("{} / {}", human_bytes(static_cast<double>(*h.memory_used_bytes)),
                          human_bytes(static_cast<double>(*h.memory_total_bytes)));
      std::string rss;
      for (const auto& p : h.processes)
        rss += fmt::format(" {}({})={}", p.name, p.pid,
                           p.rss_bytes ? human_bytes(static_cast<double>(*p.rss_bytes)) : "-");
      out += fmt::format("{:<10} {:<24} {:>6} {:>21}  rss:{}\n", s->probe, "host RAM", "", mem, rss);
    }
    for (const auto& e : s->errors)
      out += fmt::format("{:<10} error {}: {}{}\n", s->probe, e.code, e.message,
                         e.device.empty() ? "" : " (device " + e.device + ")");
  }
  return out;
}

}  // namespace gpustream::cli
