// gpustream/probe_settings.hpp — the named sections of settings that belong to parts outside
// the SDK (a probe's "nvidia", "amd", ...; the CLI's "serve"), as plain values.
//
// A section maps a key to a SettingValue: a string, an integer, a number, true/false, or a list
// of those. The SDK stores the sections and never reads them; each owner checks its own
// (probes through gpustream/probes/settings.hpp: a misspelt key or a wrong type is an error
// naming "<section>.<key>"). The JSON form (a config file's sections) is in
// gpustream/config_json.hpp; this header needs only the standard library.
//
// Thread safety: values; copy them freely, do not mutate one from two threads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gpustream {

/// One setting: a string, an integer, a (non-integer or large) number, true/false, or a list of
/// those scalars (e.g. "serve.allow_origins").
class SettingValue {
 public:
  using Scalar = std::variant<bool, std::int64_t, double, std::string>;
  using List = std::vector<Scalar>;
  using Variant = std::variant<bool, std::int64_t, double, std::string, List>;

  // Implicit on purpose: a value type, so that settings.set("amd", "source", "sysfs") and
  // Section{{"library", path}} read naturally.
  // NOLINTBEGIN(google-explicit-constructor)
  SettingValue() : value_(std::string()) {}
  SettingValue(bool b) : value_(b) {}
  SettingValue(int n) : value_(std::int64_t{n}) {}
  SettingValue(std::int64_t n) : value_(n) {}
  SettingValue(double d) : value_(d) {}
  SettingValue(std::string s) : value_(std::move(s)) {}
  SettingValue(std::string_view s) : value_(std::string(s)) {}
  SettingValue(const char* s) : value_(std::string(s)) {}
  SettingValue(List l) : value_(std::move(l)) {}
  // NOLINTEND(google-explicit-constructor)

  const Variant& value() const noexcept { return value_; }

  const std::string* if_string() const noexcept { return std::get_if<std::string>(&value_); }
  const std::int64_t* if_int() const noexcept { return std::get_if<std::int64_t>(&value_); }
  const double* if_double() const noexcept { return std::get_if<double>(&value_); }
  const bool* if_bool() const noexcept { return std::get_if<bool>(&value_); }
  const List* if_list() const noexcept { return std::get_if<List>(&value_); }
  bool is_number() const noexcept { return if_int() || if_double(); }

  /// "a string", "an integer", "a number", "true/false" or "a list", for error messages.
  std::string_view type_name() const noexcept;

  friend bool operator==(const SettingValue&, const SettingValue&) = default;

 private:
  Variant value_;
};

/// Sections of settings by name, each key -> SettingValue. A section can be present and empty
/// ({"amd": {}} in a file): contains() tells it apart from an absent one.
class ProbeSettings {
 public:
  using Section = std::map<std::string, SettingValue, std::less<>>;

  /// Sets `key` in `section` (creating the section).
  void set(std::string_view section, std::string_view key, SettingValue value);
  /// The value at section.key, or null.
  const SettingValue* get(std::string_view section, std::string_view key) const;
  /// The section, or null when absent.
  const Section* section(std::string_view name) const;
  /// The section, created empty when absent.
  Section& operator[](std::string_view name);

  bool contains(std::string_view section) const { return sections_.contains(section); }
  bool contains(std::string_view section, std::string_view key) const {
    return get(section, key) != nullptr;
  }
  /// Removes a whole section; false when there was none.
  bool erase(std::string_view section);
  /// Removes section.key; false when there was none.
  bool erase(std::string_view section, std::string_view key);

  /// The section names, sorted.
  std::vector<std::string> sections() const;
  bool empty() const noexcept { return sections_.empty(); }
  std::size_t size() const noexcept { return sections_.size(); }

  auto begin() const noexcept { return sections_.begin(); }
  auto end() const noexcept { return sections_.end(); }

  friend bool operator==(const ProbeSettings&, const ProbeSettings&) = default;

 private:
  std::map<std::string, Section, std::less<>> sections_;
};

}  // namespace gpustream
