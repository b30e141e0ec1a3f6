#include "gpustream/probes/settings.hpp"

#include <stdexcept>

namespace gpustream::settings {
namespace {

[[noreturn]] void bad(std::string_view name, std::string_view key, const std::string& why) {
  throw std::invalid_argument(std::string(name) + (key.empty() ? "" : ".") + std::string(key) +
                              ": " + why);
}

}  // namespace

const boost::json::object* section(const Config& config, std::string_view name,
                                   std::initializer_list<std::string_view> known) {
  const auto* v = config.probe_settings.if_contains(name);
  if (!v) return nullptr;
  if (!v->is_object()) bad(name, {}, "expected an object of settings");
  for (const auto& [key, value] : v->get_object()) {
    bool ok = false;
    for (auto k : known) ok = ok || k == key;
    if (ok) continue;
    std::string list;
    for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    bad(name, key, "unknown setting (known: " + (list.empty() ? "none" : list) + ")");
  }
  return &v->get_object();
}

std::optional<std::string> string_at(const boost::json::object* section, std::string_view name,
                                     std::string_view key, Empty empty) {
  const auto* v = section ? section->if_contains(key) : nullptr;
  if (!v) return std::nullopt;
  if (!v->is_string()) bad(name, key, empty == Empty::allowed ? "expected a string"
                                                               : "expected a non-empty string");
  if (v->get_string().empty() && empty == Empty::rejected)
    bad(name, key, "expected a non-empty string");
  return std::string(v->get_string());
}

std::optional<std::int64_t> positive_at(const boost::json::object* section, std::string_view name,
                                        std::string_view key) {
  const auto* v = section ? section->if_contains(key) : nullptr;
  if (!v) return std::nullopt;
  if (!v->is_int64() || v->get_int64() <= 0) bad(name, key, "expected a positive integer");
  return v->get_int64();
}

}  // namespace gpustream::settings
