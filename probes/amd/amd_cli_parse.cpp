// Parsers for amd-smi and rocm-smi JSON output (see ../shared/fixtures/amd_*/SCHEMA_NOTES.md).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/power.hpp"
#include "gpustream/probes/readers.hpp"

namespace gpustream::amd_cli {
namespace {

namespace json = boost::json;

// The JSON part of a tool's output: from the first line that starts with '[' or '{'.
json::value parse_tool_json(std::string_view text, std::string_view tool) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    const auto line = readers::trim(text.substr(pos, nl == std::string_view::npos ? nl : nl - pos));
    if (!line.empty() && (line.front() == '[' || line.front() == '{')) break;
    if (nl == std::string_view::npos) {
      pos = text.size();
      break;
    }
    pos = nl + 1;
  }
  // The messages name the kind of failure only; what varies per run goes to the detail.
  const auto body = readers::trim(text.substr(std::min(pos, text.size())));
  if (body.empty()) {
    const auto shown = readers::trim(text).substr(0, 80);
    throw ToolError(std::string(tool) + " printed no JSON",
                    shown.empty() ? "no output" : "it printed '" + std::string(shown) + "'");
  }
  try {
    return parse_json(body);
  } catch (const std::exception& e) {
    throw ToolError(std::string(tool) + " printed invalid JSON", e.what());
  }
}

// The per-GPU array: a bare array (amd-smi < 26) or {"gpu_data": [...]} (>= 26).
const json::array& gpu_array(const json::value& v, std::string_view tool) {
  if (v.is_array()) return v.as_array();
  if (v.is_object()) {
    if (const auto* d = v.as_object().if_contains("gpu_data"); d && d->is_array())
      return d->as_array();
  }
  throw ToolError(std::string(tool) + ": expected a JSON array of GPUs",
                  v.is_object() ? "an object without gpu_data" : "not an array");
}

const json::value* path(const json::value& v, std::initializer_list<std::string_view> keys) {
  const json::value* cur = &v;
  for (auto k : keys) {
    if (!cur->is_object()) return nullptr;
    cur = cur->as_object().if_contains(json::string_view(k.data(), k.size()));
    if (!cur) return nullptr;
  }
  return cur;
}

double scale_of(std::string_view unit) {
  // Memory: amd-smi's "MB" is bytes // 2^20 (MiB), "KB" binary as well.
  if (unit == "B") return 1;
  if (unit == "KB" || unit == "KiB") return 1024.0;
  if (unit == "MB" || unit == "MiB") return 1048576.0;
  if (unit == "GB" || unit == "GiB") return 1073741824.0;
  // Power and energy to W and J.
  if (unit == "mW" || unit == "mJ") return 1e-3;
  if (unit == "uW" || unit == "uJ" || unit == "\xC2\xB5J" || unit == "\xC2\xB5W") return 1e-6;
  if (unit == "GHz") return 1000.0;
  if (unit == "KHz" || unit == "kHz") return 1e-3;
  return 1;  // %, W, C, J, MHz, mV...
}

// Nanoseconds per unit of a busy-time value; nullopt for a unit we do not know.
std::optional<double> ns_per(std::string_view unit) {
  if (unit == "ns") return 1.0;
  if (unit == "us" || unit == "\xC2\xB5s") return 1e3;
  if (unit == "ms") return 1e6;
  if (unit == "s") return 1e9;
  return std::nullopt;
}

// A busy time in ns: {"value": x, "unit": "ns"|"us"|"ms"|"s"} (6.2+) or a bare number, which
// amd-smi 6.0/6.1 printed in ns (the unit only appeared in the human-readable format).
std::optional<std::uint64_t> busy_ns(const json::value& v);

// A value a tool printed, kept only when it is a finite number: std::stod reads "inf" and "nan",
// and a huge number times a unit scale overflows to inf.
std::optional<double> finite(std::optional<double> v) {
  if (v && !std::isfinite(*v)) return std::nullopt;
  return v;
}

// A whole count (pid, bytes, ns) from a measurement: finite, in [0, 2^63), fraction dropped;
// nullopt otherwise (casting NaN, inf or a value out of range to an integer is undefined).
std::optional<std::int64_t> whole(std::optional<double> v) {
  constexpr double kLimit = 9223372036854775808.0;  // 2^63
  if (!v || !std::isfinite(*v) || *v < 0 || *v >= kLimit) return std::nullopt;
  return static_cast<std::int64_t>(*v);
}

std::optional<double> measure_any(const json::value* v, double bare_scale);

// A measurement: a number, a numeric string, or {"value": x, "unit": u}; "N/A" -> nullopt.
// `bare_scale` applies to unit-less numbers (ROCm 6.0 printed VRAM in MB without a unit).
// Non-finite values ("inf", "nan", or an overflow after scaling) are nullopt too.
std::optional<double> measure(const json::value* v, double bare_scale = 1) {
  return finite(measure_any(v, bare_scale));
}

std::optional<double> measure_any(const json::value* v, double bare_scale) {
  if (!v) return std::nullopt;
  if (v->is_object()) {
    const auto* value = v->as_object().if_contains("value");
    const auto* unit = v->as_object().if_contains("unit");
    auto n = measure(value);
    if (!n) return std::nullopt;
    if (unit && unit->is_string()) return *n * scale_of(std::string_view(unit->as_string()));
    return *n * bare_scale;
  }
  if (v->is_number()) return v->to_number<double>() * bare_scale;
  if (v->is_string()) {
    const std::string_view s = v->as_string();
    double out = 0;
    try {
      std::size_t used = 0;
      out = std::stod(std::string(s), &used);
      if (readers::trim(s.substr(used)).size() != 0) return std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
    return out * bare_scale;
  }
  return std::nullopt;
}

std::optional<double> first_of(const json::value& gpu,
                               std::initializer_list<std::initializer_list<std::string_view>> ps,
                               double bare_scale = 1) {
  for (const auto& p : ps)
    if (auto v = measure(path(gpu, p), bare_scale)) return v;
  return std::nullopt;
}

std::string string_at(const json::value& gpu, std::initializer_list<std::string_view> p) {
  const auto* v = path(gpu, p);
  if (!v || !v->is_string()) return {};
  std::string s(v->as_string());
  return s == "N/A" ? std::string{} : s;
}

// The "gpu" index; the position in the array when it is absent or not a whole number in
// [0, INT_MAX] (1.5, -1, 1e300, "x"): one odd field must not cost the whole sample.
int gpu_index(const json::value& gpu, int fallback) {
  const auto* g = path(gpu, {"gpu"});
  if (!g || !g->is_number()) return fallback;
  const double d = g->to_number<double>();  // every JSON number converts to a double
  if (!(d >= 0) || d > std::numeric_limits<int>::max() || std::floor(d) != d) return fallback;
  return static_cast<int>(d);
}

void put(MetricSet& m, Metric metric, std::optional<double> v, Source s) {
  if (v) {
    m.set(metric, *v, s);
  } else {
    m.set_absent(metric, Absence::unsupported, s);
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// rocm-smi value: "49.0", "(1700Mhz)", "N/A" -> number.
std::optional<double> rocm_number(std::string_view s) {
  s = readers::trim(s);
  if (!s.empty() && s.front() == '(') s.remove_prefix(1);
  if (!s.empty() && s.back() == ')') s.remove_suffix(1);
  const auto lower_s = lower(s);
  std::string_view t = s;
  if (lower_s.size() > 3 && lower_s.substr(lower_s.size() - 3) == "mhz") t.remove_suffix(3);
  if (t.empty()) return std::nullopt;
  try {
    std::size_t used = 0;
    const double v = std::stod(std::string(t), &used);
    if (used != t.size()) return std::nullopt;
    return finite(v);  // stod reads "inf" and "nan"
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<std::uint64_t> busy_ns(const json::value& v) {
  std::optional<double> ns;
  if (v.is_object()) {
    const auto* unit = v.as_object().if_contains("unit");
    if (!unit || !unit->is_string()) return std::nullopt;
    const auto scale = ns_per(std::string_view(unit->as_string()));
    const auto value = measure(v.as_object().if_contains("value"));
    if (scale && value) ns = *value * *scale;
  } else if (v.is_number()) {
    ns = measure(&v);
  }
  const auto whole_ns = whole(ns);
  if (!whole_ns) return std::nullopt;  // NaN, inf, negative or past 2^63 ns (292 years)
  return static_cast<std::uint64_t>(*whole_ns);
}

}  // namespace

std::vector<StaticInfo> parse_amd_smi_static(std::string_view text) {
  const auto doc = parse_tool_json(text, "amd-smi static");
  std::vector<StaticInfo> out;
  int i = 0;
  for (const auto& gpu : gpu_array(doc, "amd-smi static")) {
    StaticInfo s;
    s.index = gpu_index(gpu, i++);
    s.bus_id = string_at(gpu, {"bus", "bdf"});
    if (s.bus_id.empty()) s.bus_id = string_at(gpu, {"bdf"});
    s.uuid = string_at(gpu, {"asic", "asic_serial"});
    if (auto u = string_at(gpu, {"uuid"}); !u.empty()) s.uuid = u;
    s.name = string_at(gpu, {"asic", "market_name"});
    if (s.name.empty()) s.name = string_at(gpu, {"board", "product_name"});
    s.vram_total_bytes = first_of(gpu, {{"vram", "size"}}, 1048576.0);
    if (!s.vram_total_bytes)
      s.vram_total_bytes = first_of(gpu, {{"vram", "vram_size_mb"}}, 1048576.0);
    out.push_back(std::move(s));
  }
  return out;
}

std::map<int, MetricSet> parse_amd_smi_metric(std::string_view text,
                                              std::map<int, ThrottleStatus>* throttle) {
  const auto doc = parse_tool_json(text, "amd-smi metric");
  std::map<int, MetricSet> out;
  constexpr auto S = Source::amd_smi;
  int i = 0;
  for (const auto& gpu : gpu_array(doc, "amd-smi metric")) {
    const int index = gpu_index(gpu, i++);
    auto& m = out[index];
    if (const auto* t = path(gpu, {"power", "throttle_status"}); throttle && t) {
      const std::string_view status = t->is_string() ? std::string_view(t->get_string()) : "";
      (*throttle)[index] = status == "THROTTLED"     ? ThrottleStatus::throttled
                           : status == "UNTHROTTLED" ? ThrottleStatus::unthrottled
                                                     : ThrottleStatus::unknown;
    }
    put(m, Metric::utilization_percent,
        first_of(gpu, {{"usage", "gfx_activity"}, {"usage", "gfx_usage"}}), S);
    put(m, Metric::memory_utilization_percent,
        first_of(gpu, {{"usage", "umc_activity"}, {"usage", "mem_usage"}}), S);
    // The driver's average goes to power_average_watts; power::settle (in the probe) makes it
    // power_watts as well when no instantaneous figure is given.
    put(m, Metric::power_watts,
        first_of(gpu, {{"power", "socket_power"},
                       {"power", "current_power"},
                       {"power", "current_socket_power"}}),
        S);
    put(m, Metric::power_average_watts, first_of(gpu, {{"power", "average_socket_power"}}), S);
    put(m, Metric::temperature_celsius,
        first_of(gpu, {{"temperature", "edge"}, {"temperature", "hotspot"}}), S);
    put(m, Metric::clock_graphics_mhz,
        first_of(gpu, {{"clock", "gfx_0", "clk"}, {"clock", "gfx", "cur_clk"}}), S);
    put(m, Metric::clock_memory_mhz,
        first_of(gpu, {{"clock", "mem_0", "clk"}, {"clock", "mem", "cur_clk"}}), S);
    put(m, Metric::memory_used_bytes, first_of(gpu, {{"mem_usage", "used_vram"}}, 1048576.0), S);
    put(m, Metric::memory_total_bytes, first_of(gpu, {{"mem_usage", "total_vram"}}, 1048576.0), S);
    put(m, Metric::memory_free_bytes, first_of(gpu, {{"mem_usage", "free_vram"}}, 1048576.0), S);
    put(m, Metric::energy_joules,
        first_of(gpu, {{"energy", "total_energy_consumption"}, {"energy", "accumulated_energy"}}),
        S);
    put(m, Metric::fan_percent, first_of(gpu, {{"fan", "usage"}}), S);
    put(m, Metric::fan_rpm, first_of(gpu, {{"fan", "rpm"}}), S);
  }
  return out;
}

std::map<int, std::vector<ProcessUsage>> parse_amd_smi_process(std::string_view text) {
  std::map<int, std::vector<ProcessUsage>> out;
  if (readers::trim(text).find("No running processes") != std::string_view::npos &&
      readers::trim(text).find_first_of("[{") == std::string_view::npos)
    return out;
  const auto doc = parse_tool_json(text, "amd-smi process");
  const auto add = [&](int gpu, const json::value& info) {
    if (!info.is_object()) return;  // "N/A" or "No running processes detected"
    ProcessUsage u;
    auto& p = u.process;
    const auto pid = whole(measure(path(info, {"pid"})));
    if (!pid || *pid == 0) return;  // no usable pid: this entry is skipped
    p.pid = *pid;
    p.name = string_at(info, {"name"});
    auto vram = first_of(info, {{"memory_usage", "vram_mem"}, {"mem_usage"}, {"mem"}});
    if (const auto bytes = whole(vram)) p.gpu_memory_bytes = static_cast<std::uint64_t>(*bytes);
    // GTT only where amd-smi prints memory_usage (6.0/6.1 bare bytes, later {"value", "unit"});
    // the 6.2.0 form with only mem_usage leaves it unknown.
    if (const auto gtt = whole(measure(path(info, {"memory_usage", "gtt_mem"}))))
      p.gtt_memory_bytes = static_cast<std::uint64_t>(*gtt);
    if (const auto* usage = path(info, {"usage"}); usage && usage->is_object()) {
      for (const auto& [engine, value] : usage->as_object())
        if (auto ns = busy_ns(value)) u.engine_busy_ns[std::string(engine)] = *ns;
    }
    out[gpu].push_back(std::move(u));
  };
  int i = 0;
  for (const auto& gpu : gpu_array(doc, "amd-smi process")) {
    const int idx = gpu_index(gpu, i++);
    out[idx];  // a GPU listed without processes has none
    if (const auto* list = path(gpu, {"process_list"}); list && list->is_array()) {
      for (const auto& e : list->as_array()) {
        if (const auto* info = path(e, {"process_info"})) add(idx, *info);
      }
    } else if (const auto* info = path(gpu, {"process_info"})) {
      add(idx, *info);
    }
  }
  return out;
}

std::vector<std::string> rocm_smi_args() {
  return {
      "--showproductname", "--showuse",    "--showmemuse",   "--showmeminfo", "vram",  "--showtemp",
      "--showpower",       "--showclocks", "--showuniqueid", "--showbus",     "--json"};
}

std::vector<DeviceSample> parse_rocm_smi(std::string_view text) {
  if (readers::trim(text).empty())
    throw ToolError(
        "rocm-smi printed nothing (exit code 0): the amdgpu driver is probably not loaded",
        "empty output");
  const auto doc = parse_tool_json(text, "rocm-smi");
  if (!doc.is_object())
    throw ToolError("rocm-smi: expected a JSON object of cards", "the JSON is not an object");
  std::vector<DeviceSample> out;
  constexpr auto S = Source::rocm_smi;
  for (const auto& [key, card] : doc.as_object()) {
    const std::string_view k = key;
    if (k.substr(0, 4) != "card" || !card.is_object()) continue;
    const auto index = readers::parse_int(k.substr(4));
    if (!index || *index < 0 || *index > std::numeric_limits<int>::max()) continue;
    // Normalised keys: lower case, without a trailing ':'.
    std::map<std::string, std::string> f;
    for (const auto& [fk, fv] : card.as_object()) {
      if (!fv.is_string()) continue;
      auto name = lower(readers::trim(std::string_view(fk)));
      while (!name.empty() && (name.back() == ':' || name.back() == ' ')) name.pop_back();
      f[name] = std::string(readers::trim(std::string_view(fv.as_string())));
    }
    const auto num = [&](std::initializer_list<std::string_view> names) -> std::optional<double> {
      for (auto n : names)
        if (auto it = f.find(std::string(n)); it != f.end())
          if (auto v = rocm_number(it->second)) return v;
      return std::nullopt;
    };
    const auto str = [&](std::initializer_list<std::string_view> names) -> std::string {
      for (auto n : names)
        if (auto it = f.find(std::string(n)); it != f.end() && it->second != "N/A")
          return it->second;
      return {};
    };
    DeviceSample d;
    d.vendor = Vendor::amd;
    d.index = static_cast<int>(*index);
    d.pci_bus_id = lower(str({"pci bus"}));
    d.id = d.pci_bus_id.empty() ? "amd:card" + std::to_string(*index) : amd_device_id(d.pci_bus_id);
    d.name = str({"card series", "card model"});
    if (auto uid = str({"unique id"}); !uid.empty()) d.attributes["unique_id"] = uid;
    auto& m = d.metrics;
    put(m, Metric::utilization_percent, num({"gpu use (%)"}), S);
    // Memory activity: the share of time the memory controller was busy
    // (rsmi_dev_memory_busy_percent_get), "GPU Memory Read/Write Activity (%)" from ROCm 6.2 and
    // "GPU memory use (%)" before. ROCm 6.2's "GPU Memory Allocated (VRAM%)" is the share of
    // VRAM allocated, not activity: it is not read (the byte figures below say the same exactly;
    // where they are missing, so is the memory use).
    put(m, Metric::memory_utilization_percent,
        num({"gpu memory read/write activity (%)", "gpu memory use (%)"}), S);
    put(m, Metric::memory_total_bytes, num({"vram total memory (b)"}), S);
    put(m, Metric::memory_used_bytes, num({"vram total used memory (b)"}), S);
    put(m, Metric::temperature_celsius,
        num({"temperature (sensor edge) (c)", "temperature (sensor junction) (c)"}), S);
    // "Current Socket ..." (MI300, APUs) is instantaneous; "Average ..." (dGPUs) is the driver's
    // average, which is also power_watts when there is no instantaneous figure.
    put(m, Metric::power_watts, num({"current socket graphics package power (w)"}), S);
    put(m, Metric::power_average_watts, num({"average graphics package power (w)"}), S);
    put(m, Metric::clock_graphics_mhz, num({"sclk clock speed"}), S);
    put(m, Metric::clock_memory_mhz, num({"mclk clock speed"}), S);
    put(m, Metric::fan_percent, num({"fan speed (%)"}), S);
    power::settle(d);
    out.push_back(std::move(d));
  }
  if (out.empty()) throw ToolError("rocm-smi reported no cards", "no \"card<N>\" key");
  std::sort(out.begin(), out.end(),
            [](const DeviceSample& a, const DeviceSample& b) { return a.index < b.index; });
  return out;
}

}  // namespace gpustream::amd_cli
