#include "gpustream/probes/settings.hpp"

#include <stdexcept>

namespace gpustream::settings {
namespace {

[[noreturn]] void bad(std::string_view name, std::string_view key, const std::string& why) {
  throw std::invalid_argument(std::string(name) + (key.empty() ? "" : ".") + std::string(key) +
                              ": " + why);
}

}  // namespace

const ProbeSettings::Section* section(const Config& config, std::string_view name,
                                      std::initializer_list<std::string_view> known) {
  const auto* s = config.probe_settings.section(name);
  if (!s) return nullptr;
  for (const auto& [key, value] : *s) {
    bool ok = false;
    for (auto k : known) ok = ok || k == key;
    if (ok) continue;
    std::string list;
    for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    bad(name, key, "unknown setting (known: " + (list.empty() ? "none" : list) + ")");
  }
  return s;
}

namespace {

const SettingValue* find(const ProbeSettings::Section* section, std::string_view key) {
  if (!section) return nullptr;
  const auto it = section->find(key);
  return it == section->end() ? nullptr : &it->second;
}

}  // namespace

std::optional<std::string> string_at(const ProbeSettings::Section* section, std::string_view name,
                                     std::string_view key, Empty empty) {
  const auto* v = find(section, key);
  if (!v) return std::nullopt;
  const auto* s = v->if_string();
  if (!s)
    bad(name, key, empty == Empty::allowed ? "expected a string" : "expected a non-empty string");
  if (s->empty() && empty == Empty::rejected) bad(name, key, "expected a non-empty string");
  return *s;
}

std::optional<std::int64_t> positive_at(const ProbeSettings::Section* section,
                                        std::string_view name, std::string_view key) {
  const auto* v = find(section, key);
  if (!v) return std::nullopt;
  const auto* n = v->if_int();
  if (!n || *n <= 0) bad(name, key, "expected a positive integer");
  return *n;
}

TrackerPeriods tracker_periods_at(const ProbeSettings::Section* section, std::string_view name) {
  const auto ms = [&](std::string_view key) -> std::optional<std::chrono::milliseconds> {
    if (auto v = positive_at(section, name, key)) return std::chrono::milliseconds(*v);
    return std::nullopt;
  };
  TrackerPeriods p;
  p.freshness = ms(kTrackerKeys[0]);
  p.fd_count = ms(kTrackerKeys[1]);
  p.sweep = ms(kTrackerKeys[2]);
  return p;
}

}  // namespace gpustream::settings
