// Parsing `macmon pipe` lines, every schema generation (see gpustream/probes/apple_probe.hpp).
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/value.hpp>

#include "gpustream/json.hpp"
#include "gpustream/probes/apple_probe.hpp"

namespace gpustream {
namespace {

namespace json = boost::json;

// Reads the fields of one object, remembering which known keys had the wrong type.
class Fields {
 public:
  Fields(const json::object& object, std::vector<std::string>& invalid, std::string prefix = {})
      : object_(object), invalid_(invalid), prefix_(std::move(prefix)) {}

  bool has(std::string_view key) const { return object_.contains(key); }

  /// A number (integer or not); null or absent: nullopt; anything else: invalid.
  std::optional<double> number(std::string_view key) {
    const json::value* v = object_.if_contains(key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (auto d = as_double(*v)) return d;
    bad(key);
    return std::nullopt;
  }

  /// A whole, non-negative number (byte counts).
  std::optional<std::uint64_t> count(std::string_view key) {
    const json::value* v = object_.if_contains(key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (v->is_uint64()) return v->get_uint64();
    if (v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
    if (v->is_double()) {
      const double d = v->get_double();
      if (d >= 0 && d < 1.8e19 && std::floor(d) == d) return static_cast<std::uint64_t>(d);
    }
    bad(key);
    return std::nullopt;
  }

  std::optional<int> integer(std::string_view key) {
    auto n = count(key);
    if (n && *n <= 1'000'000) return static_cast<int>(*n);
    if (n) bad(key);
    return std::nullopt;
  }

  std::string text(std::string_view key) {
    const json::value* v = object_.if_contains(key);
    if (v == nullptr || v->is_null()) return {};
    if (v->is_string()) return std::string(v->get_string());
    bad(key);
    return {};
  }

  /// A [freq_mhz, ratio] pair (v0.4–v0.7, and the aliases of v0.8+).
  std::optional<std::array<double, 2>> pair(std::string_view key) {
    const json::value* v = object_.if_contains(key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (const auto* a = v->if_array(); a && a->size() == 2) {
      const auto first = as_double((*a)[0]);
      const auto second = as_double((*a)[1]);
      if (first && second) return std::array<double, 2>{*first, *second};
    }
    bad(key);
    return std::nullopt;
  }

  const json::object* object(std::string_view key) {
    const json::value* v = object_.if_contains(key);
    if (v == nullptr || v->is_null()) return nullptr;
    if (const auto* o = v->if_object()) return o;
    bad(key);
    return nullptr;
  }

  const json::array* array(std::string_view key) {
    const json::value* v = object_.if_contains(key);
    if (v == nullptr || v->is_null()) return nullptr;
    if (const auto* a = v->if_array()) return a;
    bad(key);
    return nullptr;
  }

 private:
  static std::optional<double> as_double(const json::value& v) {
    if (v.is_double()) return v.get_double();
    if (v.is_int64()) return static_cast<double>(v.get_int64());
    if (v.is_uint64()) return static_cast<double>(v.get_uint64());
    return std::nullopt;
  }
  void bad(std::string_view key) { invalid_.push_back(prefix_ + std::string(key)); }

  const json::object& object_;
  std::vector<std::string>& invalid_;
  std::string prefix_;
};

template <class T>
std::optional<T> first_of(std::optional<T> a, std::optional<T> b) {
  return a ? a : b;
}

// The newest name wins: *_scaled_ratio (v0.8.1+), *_usage_ratio (v0.8.0), the pair (v0.4–v0.7).
MacmonCluster read_cluster(Fields& f, const std::string& name) {
  MacmonCluster c;
  const auto pair = f.pair(name + "_usage");
  c.freq_mhz = f.number(name + "_freq_mhz");
  if (!c.freq_mhz && pair) c.freq_mhz = (*pair)[0];
  c.scaled_ratio = first_of(f.number(name + "_scaled_ratio"), f.number(name + "_usage_ratio"));
  if (!c.scaled_ratio && pair) c.scaled_ratio = (*pair)[1];
  c.active_ratio = f.number(name + "_active_ratio");
  return c;
}

MacmonSchema schema_of(const Fields& f) {
  for (const char* key :
       {"gpu_scaled_ratio", "cpu_scaled_ratio", "ecpu_scaled_ratio", "pcpu_scaled_ratio"})
    if (f.has(key)) return MacmonSchema::scaled_ratio;
  for (const char* key : {"gpu_usage_ratio", "cpu_usage_ratio", "ecpu_usage_ratio",
                          "pcpu_usage_ratio", "gpu_freq_mhz", "gpu_active_ratio"})
    if (f.has(key)) return MacmonSchema::usage_ratio;
  if (f.has("cpu_usage_pct")) return MacmonSchema::pairs_cpu_pct;
  for (const char* key : {"gpu_usage", "ecpu_usage", "pcpu_usage"})
    if (f.has(key)) return MacmonSchema::pairs;
  return MacmonSchema::unknown;
}

MacmonSocInfo read_soc(const json::object& o, std::vector<std::string>& invalid) {
  Fields f(o, invalid, "soc.");
  MacmonSocInfo soc;
  soc.chip_name = f.text("chip_name");
  soc.mac_model = f.text("mac_model");
  soc.memory_gb = f.integer("memory_gb");
  soc.ecpu_cores = f.integer("ecpu_cores");
  soc.pcpu_cores = f.integer("pcpu_cores");
  soc.gpu_cores = f.integer("gpu_cores");
  return soc;
}

bool has_any_figure(const MacmonSample& s) {
  const auto cluster = [](const MacmonCluster& c) {
    return c.freq_mhz || c.scaled_ratio || c.active_ratio;
  };
  return cluster(s.gpu) || cluster(s.ecpu) || cluster(s.pcpu) || cluster(s.cpu) ||
         s.cpu_temp_celsius || s.gpu_temp_celsius || s.ram_total_bytes || s.ram_used_bytes ||
         s.cpu_power_watts || s.gpu_power_watts || s.ane_power_watts || s.all_power_watts ||
         s.sys_power_watts;
}

// Digits [pos, pos+n) as a number; -1 when any is not a digit.
int digits(std::string_view s, std::size_t pos, std::size_t n) {
  if (pos + n > s.size()) return -1;
  int v = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar.
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

// secs * 1e9 + nanos (nanos in [0, 1e9)), or nullopt outside what an int64 of nanoseconds holds
// (1677-09-21 to 2262-04-11): a year such as 9999 would overflow, which is undefined.
std::optional<std::int64_t> seconds_to_ns(std::int64_t secs, std::int64_t nanos) noexcept {
  constexpr std::int64_t kNs = 1'000'000'000;
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  if (secs > kMax / kNs || secs < kMin / kNs - 1) return std::nullopt;
  if (secs >= 0) {
    if (secs == kMax / kNs && nanos > kMax % kNs) return std::nullopt;
    return secs * kNs + nanos;
  }
  // Negative: (secs + 1) s and (nanos - 1 s), so that no intermediate leaves the range.
  const std::int64_t whole = (secs + 1) * kNs;
  const std::int64_t rest = nanos - kNs;  // in [-1e9, 0)
  if (whole < kMin - rest) return std::nullopt;
  return whole + rest;
}

}  // namespace

std::string_view to_string(MacmonSchema schema) noexcept {
  switch (schema) {
    case MacmonSchema::pairs:
      return "v0.4-v0.6";
    case MacmonSchema::pairs_cpu_pct:
      return "v0.7";
    case MacmonSchema::usage_ratio:
      return "v0.8.0";
    case MacmonSchema::scaled_ratio:
      return "v0.8.1+";
    case MacmonSchema::unknown:
      break;
  }
  return "unknown";
}

std::optional<std::int64_t> parse_rfc3339_ns(std::string_view s) noexcept {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)
  const int year = digits(s, 0, 4), month = digits(s, 5, 2), day = digits(s, 8, 2);
  const int hour = digits(s, 11, 2), minute = digits(s, 14, 2), second = digits(s, 17, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 ||
      minute < 0 || minute > 59 || second < 0 || second > 60)
    return std::nullopt;
  if (s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
      s[13] != ':' || s[16] != ':')
    return std::nullopt;
  std::size_t pos = 19;
  std::int64_t nanos = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    std::int64_t scale = 100'000'000;
    const std::size_t start = pos;
    for (; pos < s.size() && s[pos] >= '0' && s[pos] <= '9'; ++pos) {
      nanos += (s[pos] - '0') * scale;  // digits beyond nanoseconds are dropped (scale 0)
      scale /= 10;
    }
    if (pos == start) return std::nullopt;
  }
  if (pos >= s.size()) return std::nullopt;
  std::int64_t offset_s = 0;
  if (s[pos] == 'Z' || s[pos] == 'z') {
    ++pos;
  } else if (s[pos] == '+' || s[pos] == '-') {
    const int oh = digits(s, pos + 1, 2), om = digits(s, pos + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59 || pos + 3 >= s.size() || s[pos + 3] != ':')
      return std::nullopt;
    offset_s = (oh * 3600 + om * 60) * (s[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  const std::int64_t days =
      days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const std::int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  return seconds_to_ns(secs, nanos);
}

MacmonSample parse_macmon_line(std::string_view line) {
  // A line is a few KB: parse it out of a stack buffer, with no heap allocation in most cases.
  std::array<unsigned char, 8192> buffer;
  json::monotonic_resource memory(buffer.data(), buffer.size());
  const json::value doc = parse_json(line, &memory);
  const json::object* top = doc.if_object();
  if (top == nullptr) throw JsonError("not a JSON object");

  MacmonSample s;
  Fields f(*top, s.invalid_fields);
  s.schema = schema_of(f);
  s.gpu = read_cluster(f, "gpu");
  s.ecpu = read_cluster(f, "ecpu");
  s.pcpu = read_cluster(f, "pcpu");
  s.cpu.scaled_ratio = first_of(first_of(f.number("cpu_scaled_ratio"), f.number("cpu_usage_ratio")),
                                f.number("cpu_usage_pct"));
  s.cpu.active_ratio = f.number("cpu_active_ratio");

  if (const auto* temp = f.object("temp")) {
    Fields t(*temp, s.invalid_fields, "temp.");
    s.cpu_temp_celsius = t.number("cpu_temp_avg");
    s.gpu_temp_celsius = t.number("gpu_temp_avg");
  }
  if (const auto* memory_object = f.object("memory")) {
    Fields m(*memory_object, s.invalid_fields, "memory.");
    s.ram_total_bytes = m.count("ram_total");
    s.ram_used_bytes = m.count("ram_usage");
    s.swap_total_bytes = m.count("swap_total");
    s.swap_used_bytes = m.count("swap_usage");
  }
  s.cpu_power_watts = f.number("cpu_power");
  s.gpu_power_watts = f.number("gpu_power");
  s.ane_power_watts = f.number("ane_power");
  s.all_power_watts = f.number("all_power");
  s.sys_power_watts = f.number("sys_power");
  s.ram_power_watts = f.number("ram_power");
  s.gpu_ram_power_watts = f.number("gpu_ram_power");

  if (const auto* fans = f.array("fans")) {
    for (const auto& item : *fans) {
      const auto* fan = item.if_object();
      if (fan == nullptr) {
        s.invalid_fields.emplace_back("fans");
        continue;
      }
      Fields ff(*fan, s.invalid_fields, "fans.");
      MacmonFan out{ff.text("name"), ff.number("rpm"), ff.number("max_rpm")};
      if (out.name.empty()) out.name = "fan" + std::to_string(s.fans.size());
      s.fans.push_back(std::move(out));
    }
  }
  if (const auto* soc = f.object("soc")) s.soc = read_soc(*soc, s.invalid_fields);
  if (const std::string stamp = f.text("timestamp"); !stamp.empty()) {
    s.timestamp_unix_ns = parse_rfc3339_ns(stamp);
    if (!s.timestamp_unix_ns) s.invalid_fields.emplace_back("timestamp");
  }
  if (!has_any_figure(s)) throw JsonError("a JSON object without any of macmon's fields");
  return s;
}

}  // namespace gpustream
