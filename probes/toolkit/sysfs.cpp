#include "gpustream/probes/sysfs.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "gpustream/probes/pci.hpp"

namespace gpustream::sysfs {
namespace {

namespace fs = std::filesystem;
using readers::join_path;

std::string link_name(const std::string& path) {
  auto target = readers::read_link(path);
  if (!target) return {};
  return fs::path(*target).filename().string();
}

}  // namespace

std::vector<Numbered> numbered_entries(const std::string& dir, std::string_view prefix) {
  std::vector<Numbered> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    auto name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const auto digits = std::string_view(name).substr(prefix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (auto n = readers::parse_uint(digits)) out.push_back({*n, std::move(name)});
  }
  std::sort(out.begin(), out.end(),
            [](const Numbered& a, const Numbered& b) { return a.number < b.number; });
  return out;
}

std::string pci_bus_id_of(const std::string& device_dir) {
  if (auto uevent = readers::read_file(join_path(device_dir, "uevent"))) {
    if (auto slot = readers::find_value(*uevent, "PCI_SLOT_NAME", '=')) {
      if (auto id = pci::normalize_bus_id(*slot); !id.empty()) return id;
    }
  }
  return pci::normalize_bus_id(link_name(device_dir));
}

std::string driver_of(const std::string& device_dir) {
  if (auto uevent = readers::read_file(join_path(device_dir, "uevent"))) {
    if (auto d = readers::find_value(*uevent, "DRIVER", '='); d && !d->empty())
      return std::string(*d);
  }
  return link_name(join_path(device_dir, "driver"));
}

Absence absence_of(const readers::ReadError& e) noexcept {
  if (e.code == std::errc::permission_denied || e.code == std::errc::operation_not_permitted)
    return Absence::no_permission;
  return Absence::unsupported;
}

void read_metric(MetricSet& m, Metric metric, const std::string& path, double scale,
                 Source source) {
  auto v = readers::read_uint_file(path);
  if (v) {
    m.set(metric, static_cast<double>(*v) * scale, source);
  } else {
    m.set_absent(metric, absence_of(v.error()), source);
  }
}

std::vector<Temperature> read_temperatures(const std::string& hwmon_dir) {
  std::vector<Temperature> out;
  for (int i = 1; i <= kMaxTemperatureSensors; ++i) {
    const auto base = join_path(hwmon_dir, "temp" + std::to_string(i));
    auto milli = readers::read_int_file(base + "_input");
    if (!milli) continue;
    Temperature t{i, "temp" + std::to_string(i), static_cast<double>(*milli) / 1000.0};
    if (auto l = readers::read_file(base + "_label")) {
      std::string label(readers::trim(*l));
      std::transform(label.begin(), label.end(), label.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (!label.empty()) t.label = std::move(label);
    }
    out.push_back(std::move(t));
  }
  return out;
}

void set_temperature(DeviceSample& d, const std::vector<Temperature>& sensors,
                     std::initializer_list<std::string_view> preferred) {
  const Temperature* chosen = nullptr;
  for (auto want : preferred) {
    for (const auto& t : sensors)
      if (t.label == want) {
        chosen = &t;
        break;
      }
    if (chosen) break;
  }
  if (!chosen && !sensors.empty()) chosen = &sensors.front();
  for (const auto& t : sensors) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", t.celsius);
    d.attributes["temperature_" + t.label + "_celsius"] = buf;
  }
  if (chosen) {
    d.metrics.set(Metric::temperature_celsius, chosen->celsius, Source::sysfs);
  } else {
    d.metrics.set_absent(Metric::temperature_celsius, Absence::unsupported, Source::sysfs);
  }
}

}  // namespace gpustream::sysfs
