// gpustream/probes/settings.hpp — reading a probe's section of the config file
// (Config::probe_settings, e.g. {"amd": {"source": "sysfs"}}) strictly: a misspelt key or a
// value of the wrong type is an error naming "<section>.<key>", never silently ignored.
//
// Thread safety: pure functions. Cancellation: nothing to cancel.
#pragma once

#include <chrono>
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

/// The DRM client tracker's three periods (drm::TrackerOptions; docs/probes.md, "DRM clients"),
/// as a probe's section sets them: keys process_freshness_ms, process_fd_count_ms and
/// process_sweep_ms (positive integers, milliseconds). Unset: the probe keeps its default.
struct TrackerPeriods {
  std::optional<std::chrono::milliseconds> freshness;  // process_freshness_ms
  std::optional<std::chrono::milliseconds> fd_count;   // process_fd_count_ms
  std::optional<std::chrono::milliseconds> sweep;      // process_sweep_ms

  /// Writes the periods that are set into a probe's options.
  void apply(std::chrono::milliseconds& freshness_out, std::chrono::milliseconds& fd_count_out,
             std::chrono::milliseconds& sweep_out) const {
    if (freshness) freshness_out = *freshness;
    if (fd_count) fd_count_out = *fd_count;
    if (sweep) sweep_out = *sweep;
  }
};

/// The three tracker keys, for a section's list of known keys.
inline constexpr std::string_view kTrackerKeys[] = {"process_freshness_ms", "process_fd_count_ms",
                                                    "process_sweep_ms"};

/// Reads the three tracker periods of section `name`. Throws std::invalid_argument naming
/// "<name>.<key>" for a value that is not a positive integer.
TrackerPeriods tracker_periods_at(const ProbeSettings::Section* section, std::string_view name);

}  // namespace gpustream::settings
