#include "format.hpp"

#include <ctime>

#include <fmt/format.h>

#include "gpustream/terminal_text.hpp"

namespace gpustream::cli {
namespace {

std::string cell(const Reading& r, const char* fmt_spec) {
  if (!r.has_value()) return "-";
  return fmt::format(fmt::runtime(fmt_spec), r.value());
}

/// One indented line of interconnect and health figures ("" when the device has none):
/// "pcie gen4/4 x16/16 rx 2.0 MiB/s tx 1.0 MiB/s · nvlink ... · ecc ...".
std::string health_line(const MetricSet& m) {
  std::vector<std::string> parts;
  const auto has = [&](std::initializer_list<Metric> ms) {
    for (auto x : ms)
      if (m[x]) return true;
    return false;
  };
  const auto rate = [&](Metric x) {
    return m[x] ? human_bytes(m[x].value()) + "/s" : std::string("-");
  };
  if (has({Metric::pcie_link_generation, Metric::pcie_link_width, Metric::pcie_rx_bytes_per_second,
           Metric::pcie_tx_bytes_per_second}))
    parts.push_back(fmt::format(
        "pcie gen{}/{} x{}/{} rx {} tx {}", cell(m[Metric::pcie_link_generation], "{:.0f}"),
        cell(m[Metric::pcie_link_generation_max], "{:.0f}"),
        cell(m[Metric::pcie_link_width], "{:.0f}"), cell(m[Metric::pcie_link_width_max], "{:.0f}"),
        rate(Metric::pcie_rx_bytes_per_second), rate(Metric::pcie_tx_bytes_per_second)));
  if (has({Metric::nvlink_rx_bytes_per_second, Metric::nvlink_tx_bytes_per_second}))
    parts.push_back(fmt::format("nvlink rx {} tx {}", rate(Metric::nvlink_rx_bytes_per_second),
                                rate(Metric::nvlink_tx_bytes_per_second)));
  if (has({Metric::ecc_corrected_volatile, Metric::ecc_uncorrected_volatile,
           Metric::ecc_corrected_aggregate, Metric::ecc_uncorrected_aggregate}))
    parts.push_back(fmt::format("ecc corrected {}/{} uncorrected {}/{} (volatile/aggregate)",
                                cell(m[Metric::ecc_corrected_volatile], "{:.0f}"),
                                cell(m[Metric::ecc_corrected_aggregate], "{:.0f}"),
                                cell(m[Metric::ecc_uncorrected_volatile], "{:.0f}"),
                                cell(m[Metric::ecc_uncorrected_aggregate], "{:.0f}")));
  if (has({Metric::retired_pages_single_bit, Metric::retired_pages_double_bit}))
    parts.push_back(fmt::format(
        "retired pages sbe {} dbe {}{}", cell(m[Metric::retired_pages_single_bit], "{:.0f}"),
        cell(m[Metric::retired_pages_double_bit], "{:.0f}"),
        m[Metric::retired_pages_pending].value_or(0) > 0 ? " (pending)" : ""));
  if (has({Metric::remapped_rows_corrected, Metric::remapped_rows_uncorrected}))
    parts.push_back(
        fmt::format("remapped rows {} corrected {} uncorrected{}{}",
                    cell(m[Metric::remapped_rows_corrected], "{:.0f}"),
                    cell(m[Metric::remapped_rows_uncorrected], "{:.0f}"),
                    m[Metric::remapped_rows_pending].value_or(0) > 0 ? " (pending)" : "",
                    m[Metric::remapped_rows_failed].value_or(0) > 0 ? " (FAILED)" : ""));
  if (parts.empty()) return {};
  std::string out(11, ' ');
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? " · " : "") + parts[i];
  return out + "\n";
}

/// One indented line of the activity metrics the device has ("" when none):
/// "activity graphics 72% sm 64% occupancy 32% tensor 41% dram 56% fp64 3% fp32 27% fp16 13%".
std::string activity_line(const MetricSet& m) {
  static constexpr struct {
    Metric metric;
    const char* label;
  } kActivity[] = {
      {Metric::graphics_activity_percent, "graphics"}, {Metric::sm_activity_percent, "sm"},
      {Metric::sm_occupancy_percent, "occupancy"},     {Metric::tensor_activity_percent, "tensor"},
      {Metric::dram_activity_percent, "dram"},         {Metric::fp64_activity_percent, "fp64"},
      {Metric::fp32_activity_percent, "fp32"},         {Metric::fp16_activity_percent, "fp16"}};
  std::string parts;
  for (const auto& a : kActivity)
    if (m[a.metric]) parts += fmt::format(" {} {:.0f}%", a.label, m[a.metric].value());
  if (parts.empty()) return {};
  return std::string(11, ' ') + "activity" + parts + "\n";
}

}  // namespace

std::string human_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", bytes, kUnits[u])
                : fmt::format("{:.1f} {}", bytes, kUnits[u]);
}

std::string table_header() {
  return fmt::format("{:<10} {:<24} {:>6} {:>21} {:>6} {:>8} {:>11} {:>7} {:>5}  {}", "PROBE",
                     "DEVICE", "UTIL%", "MEMORY USED/TOTAL", "TEMP", "POWER", "ENERGY", "CLOCK",
                     "PROCS", "SOURCE");
}

std::string format_table(const std::vector<const GpuSnapshot*>& snapshots) {
  std::string out;
  for (const auto* s : snapshots) {
    const std::string probe = terminal_safe(s->probe);
    for (const auto& d : s->devices) {
      const auto& m = d.metrics;
      std::string mem = "-";
      if (m[Metric::memory_used_bytes] || m[Metric::memory_total_bytes]) {
        mem = fmt::format(
            "{} / {}",
            m[Metric::memory_used_bytes] ? human_bytes(m[Metric::memory_used_bytes].value()) : "-",
            m[Metric::memory_total_bytes] ? human_bytes(m[Metric::memory_total_bytes].value())
                                          : "-");
      }
      // Every string of a snapshot comes from a tool, a recording or the bus: terminal_safe.
      std::string name = terminal_safe(d.name.empty() ? d.id : d.name);
      // A MIG instance, under its GPU: "└ MIG 1g.10gb 1/0" (profile, GPU/compute instance).
      if (d.mig)
        name = fmt::format("\u2514 MIG {} {}/{}", terminal_safe(d.mig->profile),
                           d.mig->gpu_instance_id, d.mig->compute_instance_id);
      name = fit_columns(name, 24);  // whole characters, so that the columns line up
      std::string energy = "-";
      if (m[Metric::energy_joules])
        energy = fmt::format("{:.1f} kJ{}", m[Metric::energy_joules].value() / 1000.0,
                             d.energy_kind == EnergyKind::integrated ? "~" : "");
      std::string source;
      for (const auto& r :
           {m[Metric::utilization_percent], m[Metric::memory_used_bytes], m[Metric::power_watts]})
        if (r.has_value()) {
          source = std::string(to_string(r.source()));
          break;
        }
      if (d.power_state == PowerState::suspended) source = "suspended";
      out += fmt::format("{:<10} {:<24} {:>6} {:>21} {:>6} {:>8} {:>11} {:>7} {:>5}  {}\n", probe,
                         name, cell(m[Metric::utilization_percent], "{:.0f}"), mem,
                         cell(m[Metric::temperature_celsius], "{:.0f}C"),
                         cell(m[Metric::power_watts], "{:.1f}W"), energy,
                         cell(m[Metric::clock_graphics_mhz], "{:.0f}"), d.processes.size(), source);
      out += health_line(m);
      out += activity_line(m);
    }
    if (s->host) {
      const auto& h = *s->host;
      std::string mem = "-";
      if (h.memory_used_bytes && h.memory_total_bytes)
        mem = fmt::format("{} / {}", human_bytes(static_cast<double>(*h.memory_used_bytes)),
                          human_bytes(static_cast<double>(*h.memory_total_bytes)));
      std::string rss;
      for (const auto& p : h.processes)
        rss += fmt::format(" {}({})={}", terminal_safe(p.name), p.pid,
                           p.rss_bytes ? human_bytes(static_cast<double>(*p.rss_bytes)) : "-");
      out += fmt::format("{:<10} {:<24} {:>6} {:>21}  rss:{}\n", probe, "host RAM", "", mem, rss);
    }
    for (const auto& e : s->errors)
      out += fmt::format("{:<10} error {}: {}{}\n", probe, terminal_safe(e.code),
                         terminal_safe(e.message),
                         e.device.empty() ? "" : " (device " + terminal_safe(e.device) + ")");
  }
  return out;
}

std::string event_line(const GpuEvent& e) {
  const std::int64_t ns = e.time_unix_ns;
  auto seconds = static_cast<std::time_t>(ns / 1'000'000'000);
  std::int64_t rest = ns % 1'000'000'000;
  if (rest < 0) {  // before the epoch: floor, not truncation
    --seconds;
    rest += 1'000'000'000;
  }
  const std::int64_t millis = rest / 1'000'000;
  std::tm tm{};
  std::string time = "(unknown time)";
  if (::gmtime_r(&seconds, &tm) != nullptr) {
    char buf[40];
    if (std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm) > 0)
      time = fmt::format("{}.{:03}Z", buf, millis);
  }
  std::string detail;
  if (e.data) {
    switch (e.kind) {
      case EventKind::clock_event:
      case EventKind::other:
        detail = fmt::format(" {:#x}", *e.data);
        break;
      default:
        detail = fmt::format(" {}", *e.data);
        break;
    }
  }
  return fmt::format("{} {} {}{} (#{}, {})", time,
                     e.device_id.empty() ? "-" : terminal_safe(e.device_id), to_string(e.kind),
                     detail, e.sequence, terminal_safe(e.probe));
}

}  // namespace gpustream::cli
