#include "gpustream/probe_settings.hpp"

namespace gpustream {

std::string_view SettingValue::type_name() const noexcept {
  // In the order of Variant's alternatives.
  static constexpr std::string_view kNames[] = {"true/false", "an integer", "a number", "a string",
                                                "a list"};
  return kNames[value_.index()];
}

void ProbeSettings::set(std::string_view section, std::string_view key, SettingValue value) {
  (*this)[section].insert_or_assign(std::string(key), std::move(value));
}

const SettingValue* ProbeSettings::get(std::string_view section, std::string_view key) const {
  const auto* s = this->section(section);
  if (!s) return nullptr;
  const auto it = s->find(key);
  return it == s->end() ? nullptr : &it->second;
}

const ProbeSettings::Section* ProbeSettings::section(std::string_view name) const {
  const auto it = sections_.find(name);
  return it == sections_.end() ? nullptr : &it->second;
}

ProbeSettings::Section& ProbeSettings::operator[](std::string_view name) {
  auto it = sections_.find(name);
  if (it == sections_.end()) it = sections_.emplace(std::string(name), Section{}).first;
  return it->second;
}

bool ProbeSettings::erase(std::string_view section) {
  const auto it = sections_.find(section);
  if (it == sections_.end()) return false;
  sections_.erase(it);
  return true;
}

bool ProbeSettings::erase(std::string_view section, std::string_view key) {
  const auto it = sections_.find(section);
  if (it == sections_.end()) return false;
  const auto k = it->second.find(key);
  if (k == it->second.end()) return false;
  it->second.erase(k);
  return true;
}

std::vector<std::string> ProbeSettings::sections() const {
  std::vector<std::string> out;
  out.reserve(sections_.size());
  for (const auto& [name, section] : sections_) out.push_back(name);
  return out;
}

}  // namespace gpustream
