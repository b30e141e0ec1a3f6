// Parsers of `nvidia-smi --query-gpu / --query-compute-apps --format=csv[,noheader][,nounits]`.
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "gpustream/probes/nvidia_formats.hpp"
#include "gpustream/probes/readers.hpp"

namespace gpustream::nvidia {
namespace {

using readers::trim;

constexpr double kMiB = 1024.0 * 1024.0;

struct Alias {
  std::string_view alias;
  std::string_view canonical;
};
constexpr Alias kAliases[] = {
    {"gpu_name", "name"},
    {"gpu_uuid", "uuid"},
    {"gpu_bus_id", "pci.bus_id"},
    {"gpu_serial", "serial"},
    {"clocks.current.graphics", "clocks.gr"},
    {"clocks.current.sm", "clocks.sm"},
    {"clocks.current.memory", "clocks.mem"},
    {"clocks.current.video", "clocks.video"},
    {"used_memory", "used_gpu_memory"},
    {"clocks_event_reasons.active", "clocks_throttle_reasons.active"},
};

struct MetricField {
  std::string_view field;
  Metric metric;
  double scale;  // tool unit -> base unit
};
constexpr MetricField kMetricFields[] = {
    {"memory.total", Metric::memory_total_bytes, kMiB},
    {"memory.used", Metric::memory_used_bytes, kMiB},
    {"utilization.gpu", Metric::utilization_percent, 1},
    {"utilization.memory", Metric::memory_utilization_percent, 1},
    {"temperature.gpu", Metric::temperature_celsius, 1},
    {"power.limit", Metric::power_limit_watts, 1},
    {"enforced.power.limit", Metric::power_limit_watts, 1},
    {"clocks.gr", Metric::clock_graphics_mhz, 1},
    {"clocks.sm", Metric::clock_sm_mhz, 1},
    {"clocks.mem", Metric::clock_memory_mhz, 1},
    {"fan.speed", Metric::fan_percent, 1},
};

bool is_field_name(std::string_view s) noexcept {
  if (s.empty() || s[0] < 'a' || s[0] > 'z') return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_')) return false;
  return true;
}

/// "memory.used [MiB]" -> "memory.used".
std::string_view strip_unit(std::string_view cell) noexcept {
  const auto bracket = cell.find(" [");
  return trim(bracket == std::string_view::npos ? cell : cell.substr(0, bracket));
}

std::vector<std::string_view> split(std::string_view line, std::size_t max_cells) {
  std::vector<std::string_view> cells;
  while (true) {
    const auto comma = line.find(',');
    if (comma == std::string_view::npos || (max_cells && cells.size() + 1 == max_cells)) {
      cells.push_back(trim(line));
      return cells;
    }
    cells.push_back(trim(line.substr(0, comma)));
    line.remove_prefix(comma + 1);
  }
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const auto line = trim(text.substr(0, nl));
    if (!line.empty()) out.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

// A finite number at the start of `cell` (from_chars also reads "inf", "nan" and "infinity",
// which no nvidia-smi field means); `rest` is what follows it, trimmed.
std::optional<double> number(std::string_view cell, std::string_view* rest) {
  double v = 0;
  const auto* end = cell.data() + cell.size();
  auto [p, ec] = std::from_chars(cell.data(), end, v);
  if (ec != std::errc{} || p == cell.data() || !std::isfinite(v)) return std::nullopt;
  *rest = trim(std::string_view(p, static_cast<std::size_t>(end - p)));
  return v;
}

const std::string* cell_of(const SmiTable& t, const std::vector<std::string>& row,
                           std::string_view field) {
  const int c = t.column(field);
  return c < 0 ? nullptr : &row[static_cast<std::size_t>(c)];
}

void add_error(std::vector<SampleError>* errors, std::string message) {
  if (errors) errors->push_back({"parse_error", std::move(message), {}});
}

/// What `power.draw` means on a board of compute capability `cap` ("8.9"), as nvidia-smi's own
/// help says: averaged over 1 s on Ampere and newer, instantaneous before; GA100 (compute
/// capability 8.0, the only Ampere chip of 8.0) is instantaneous. Nothing for an unparsable cell.
std::optional<PowerKind> power_draw_kind(std::string_view cap) {
  unsigned major = 0, minor = 0;
  const auto* end = cap.data() + cap.size();
  auto [p, ec] = std::from_chars(cap.data(), end, major);
  if (ec != std::errc{} || p == end || *p != '.') return std::nullopt;
  auto [q, ec2] = std::from_chars(p + 1, end, minor);
  if (ec2 != std::errc{} || q != end) return std::nullopt;
  if (major < 8 || (major == 8 && minor == 0)) return PowerKind::instant;
  return PowerKind::average;
}

/// power_watts, power_average_watts and power_kind of one row (docs/probes.md, "Fallback:
/// nvidia-smi"): `power.draw.instant` where the driver has it (R535+), else `power.draw`
/// labelled by `compute_cap` where the row has it; `power.draw.average` as is.
void smi_power(const SmiTable& t, const std::vector<std::string>& row, DeviceSample& d,
               std::vector<SampleError>* errors) {
  auto& m = d.metrics;
  const auto cell = [&](std::string_view field) -> std::optional<SmiValue> {
    const auto* c = cell_of(t, row, field);
    if (!c) return std::nullopt;
    auto v = parse_smi_value(*c);
    if (v.value && *v.value < 0) v = SmiValue{std::nullopt, Absence::tool_failed};
    if (!v.value && v.absence == Absence::tool_failed)
      add_error(errors,
                "nvidia-smi: cannot parse " + std::string(field) + " '" + *c + "' of GPU " + d.id);
    return v;
  };
  const auto instant = cell("power.draw.instant");
  const auto average = cell("power.draw.average");
  const auto draw = cell("power.draw");
  if (average) {
    if (average->value)
      m.set(Metric::power_average_watts, *average->value, Source::nvidia_smi);
    else
      m.set_absent(Metric::power_average_watts, average->absence, Source::nvidia_smi);
  }
  if (instant && instant->value) {
    m.set(Metric::power_watts, *instant->value, Source::nvidia_smi);
    d.power_kind = PowerKind::instant;
    return;
  }
  if (draw && draw->value) {
    m.set(Metric::power_watts, *draw->value, Source::nvidia_smi);
    const auto* cap = cell_of(t, row, "compute_cap");
    d.power_kind = cap ? power_draw_kind(trim(*cap)) : std::nullopt;
    // power.draw on a board that averages is the driver's average (as with NVML).
    if (d.power_kind == PowerKind::average && !m[Metric::power_average_watts].has_value())
      m.set(Metric::power_average_watts, *draw->value, Source::nvidia_smi);
    return;
  }
  // No figure: the instantaneous field's reason where it was asked, else power.draw's.
  if (const auto& why = instant ? instant : draw)
    m.set_absent(Metric::power_watts, why->absence, Source::nvidia_smi);
}

}  // namespace

std::string_view canonical_smi_field(std::string_view field) noexcept {
  for (const auto& a : kAliases)
    if (a.alias == field) return a.canonical;
  return field;
}

int SmiTable::column(std::string_view field) const noexcept {
  const auto want = canonical_smi_field(field);
  for (std::size_t i = 0; i < fields.size(); ++i)
    if (fields[i] == want) return static_cast<int>(i);
  return -1;
}

SmiValue parse_smi_value(std::string_view cell) {
  SmiValue out;
  const auto s = trim(cell);
  if (s.empty()) return out;  // unsupported
  if (s == "[N/A]" || s == "N/A" || s == "[Not Supported]" || s == "Not Supported") return out;
  if (s == "[Insufficient Permissions]" || s == "Insufficient Permissions") {
    out.absence = Absence::no_permission;
    return out;
  }
  if (s == "[GPU is lost]" || s == "[GPU requires reset]") {
    out.absence = Absence::lost;
    return out;
  }
  out.absence = Absence::tool_failed;  // "[Unknown Error]" and anything unparsable
  std::string_view unit;
  auto v = number(s, &unit);
  if (!v) return out;
  double scale = 1;
  if (unit.empty() || unit == "MiB" || unit == "W" || unit == "%" || unit == "MHz" || unit == "C" ||
      unit == "J") {
    scale = 1;
  } else if (unit == "KiB") {
    scale = 1.0 / 1024;
  } else if (unit == "GiB") {
    scale = 1024;
  } else if (unit == "mW") {
    scale = 1.0 / 1000;
  } else {
    return out;
  }
  out.value = *v * scale;
  return out;
}

SmiTable parse_smi_csv(std::string_view text, std::span<const std::string_view> requested) {
  SmiTable t;
  auto lines = lines_of(text);
  std::size_t first = 0;
  if (!lines.empty()) {
    const auto head = split(lines[0], 0);
    bool header = true;
    for (auto cell : head) header = header && is_field_name(strip_unit(cell));
    if (header) {
      for (auto cell : head) t.fields.emplace_back(canonical_smi_field(strip_unit(cell)));
      first = 1;
    }
  }
  if (t.fields.empty())
    for (auto f : requested) t.fields.emplace_back(canonical_smi_field(f));
  if (t.fields.empty()) return t;
  // Only a trailing name column may contain commas.
  const bool last_is_name = t.fields.back() == "process_name" || t.fields.back() == "name";
  for (std::size_t i = first; i < lines.size(); ++i) {
    auto cells = split(lines[i], last_is_name ? t.fields.size() : 0);
    if (cells.size() != t.fields.size()) {
      t.problems.push_back("expected " + std::to_string(t.fields.size()) + " values, got " +
                           std::to_string(cells.size()) + ": '" +
                           std::string(lines[i].substr(0, 80)) + "'");
      continue;
    }
    t.rows.emplace_back(cells.begin(), cells.end());
  }
  return t;
}

std::vector<DeviceSample> smi_devices_from_csv(std::string_view text,
                                               std::span<const std::string_view> requested,
                                               std::vector<SampleError>* errors) {
  const SmiTable t = parse_smi_csv(text, requested);
  for (const auto& p : t.problems) add_error(errors, "nvidia-smi --query-gpu: " + p);
  std::vector<DeviceSample> out;
  out.reserve(t.rows.size());
  int row_number = 0;
  for (const auto& row : t.rows) {
    DeviceSample d;
    d.vendor = Vendor::nvidia;
    d.index = row_number++;
    if (auto* c = cell_of(t, row, "index"))
      if (auto i = readers::parse_int(*c); i && *i >= 0 && *i <= std::numeric_limits<int>::max())
        d.index = static_cast<int>(*i);
    if (auto* c = cell_of(t, row, "name")) d.name = *c;
    if (auto* c = cell_of(t, row, "pci.bus_id"); c && !c->empty() && c->front() != '[')
      d.pci_bus_id = normalize_pci_bus_id(*c);
    if (auto* c = cell_of(t, row, "uuid"); c && !c->empty() && c->front() != '[') {
      d.id = *c;
      d.attributes["uuid"] = *c;
    } else if (!d.pci_bus_id.empty()) {
      d.id = d.pci_bus_id;
    } else {
      d.id = "nvidia-smi:" + std::to_string(d.index);
    }
    for (const auto& m : kMetricFields) {
      const auto* c = cell_of(t, row, m.field);
      if (!c) continue;
      const auto v = parse_smi_value(*c);
      if (v.value) {
        d.metrics.set(m.metric, *v.value * m.scale, Source::nvidia_smi);
      } else if (!d.metrics[m.metric].has_value()) {
        d.metrics.set_absent(m.metric, v.absence, Source::nvidia_smi);
        if (v.absence == Absence::tool_failed)
          add_error(errors, "nvidia-smi: cannot parse " + std::string(m.field) + " '" + *c +
                                "' of GPU " + d.id);
      }
    }
    smi_power(t, row, d, errors);
    if (auto* c = cell_of(t, row, "clocks_throttle_reasons.active")) {
      auto hex = trim(*c);
      if (hex.starts_with("0x") || hex.starts_with("0X")) hex.remove_prefix(2);
      if (auto bits = readers::parse_uint(hex, 16))
        d.throttle_reasons = decode_clock_event_reasons(*bits);
    }
    d.metrics.fill_absent(Absence::unsupported, Source::nvidia_smi);
    d.attributes["metrics_source"] = "nvidia-smi";
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<SmiComputeApp> smi_compute_apps_from_csv(std::string_view text,
                                                     std::span<const std::string_view> requested,
                                                     std::vector<SampleError>* errors) {
  const SmiTable t = parse_smi_csv(text, requested);
  for (const auto& p : t.problems) add_error(errors, "nvidia-smi --query-compute-apps: " + p);
  std::vector<SmiComputeApp> out;
  for (const auto& row : t.rows) {
    SmiComputeApp app;
    const auto* pid = cell_of(t, row, "pid");
    const auto parsed = pid ? readers::parse_int(*pid) : std::nullopt;
    if (!parsed || *parsed <= 0) {
      add_error(errors, "nvidia-smi --query-compute-apps: no pid in '" +
                            (pid ? *pid : std::string("(no pid column)")) + "'");
      continue;
    }
    app.pid = *parsed;
    if (auto* c = cell_of(t, row, "uuid")) app.gpu_uuid = *c;
    if (auto* c = cell_of(t, row, "pci.bus_id")) app.gpu_bus_id = normalize_pci_bus_id(*c);
    if (auto* c = cell_of(t, row, "process_name")) app.process_name = *c;
    if (auto* c = cell_of(t, row, "used_gpu_memory")) {
      // Bytes below 2^63: a larger (or negative) value is garbage, and casting a double out of
      // range to an integer is undefined.
      constexpr double kLimit = 9223372036854775808.0;
      const auto v = parse_smi_value(*c);
      if (v.value && *v.value >= 0 && *v.value * kMiB < kLimit)
        app.used_memory_bytes = static_cast<std::uint64_t>(*v.value * kMiB);
    }
    out.push_back(std::move(app));
  }
  return out;
}

}  // namespace gpustream::nvidia
