// gpustream/probes/settings.hpp — reading a probe's section of the config file
// (Config::probe_settings, e.g. {"amd": {"source": "sysfs"}}) strictly: a misspelt key or a
// value of the wrong type is an error naming "<section>.<key>", never silently ignored.
//
// Thread safety: pure functions. Cancellation: nothing to cancel.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "gpustream/config.hpp"

namespace gpustream::settings {

/// The section, or null when the config has none. Throws std::invalid_argument when it has a
/// key outside `known`.
const ProbeSettings::Section* section(const Config& config, std::string_view name,
                                      std::initializer_list<std::string_view> known);

enum class Empty { rejected, allowed };

/// The string at `key`, absent when not set. Throws std::invalid_argument for another type, or
/// for "" unless `empty` is allowed (where "" means something, e.g. "do not use it").
std::optional<std::string> string_at(const ProbeSettings::Section* section, std::string_view name,
                                     std::string_view key, Empty empty = Empty::rejected);

/// The positive integer at `key`, absent when not set. Throws std::invalid_argument otherwise.
std::optional<std::int64_t> positive_at(const ProbeSettings::Section* section,
                                        std::string_view name, std::string_view key);

}  // namespace gpustream::settings
