#include "gpustream/model.hpp"

#include <algorithm>

namespace gpustream {
namespace {

template <typename E, std::size_t N>
constexpr std::string_view name_of(E e, const std::array<std::string_view, N>& names) noexcept {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : std::string_view{"unknown"};
}

template <typename E, std::size_t N>
std::optional<E> parse_of(std::string_view s, const std::array<std::string_view, N>& names) noexcept {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

constexpr std::array<std::string_view, 6> kVendors{"unknown", "nvidia", "amd",
                                                   "intel",   "apple",  "simulated"};
constexpr std::array<std::string_view, kSourceCount> kSources{
    "none",       "nvml",   "nvidia-smi", "amd-smi",   "rocm-smi",   "sysfs",  "fdinfo",
    "level-zero", "macmon", "procfs",     "simulated", "integrated", "replay", "derived"};
constexpr std::array<std::string_view, 8> kAbsences{
    "unsupported", "no_permission", "not_yet_seeded", "suspended",
    "tool_failed", "stale",         "lost",           "not_collected"};
constexpr std::array<std::string_view, kMetricCount> kMetrics{"utilization_percent",
                                                              "memory_utilization_percent",
                                                              "memory_used_bytes",
                                                              "memory_total_bytes",
                                                              "temperature_celsius",
                                                              "power_watts",
                                                              "power_average_watts",
                                                              "power_limit_watts",
                                                              "energy_joules",
                                                              "clock_graphics_mhz",
                                                              "clock_sm_mhz",
                                                              "clock_memory_mhz",
                                                              "fan_percent",
                                                              "fan_rpm",
                                                              "gtt_used_bytes",
                                                              "gtt_total_bytes",
                                                              "memory_free_bytes",
                                                              "pcie_rx_bytes_per_second",
                                                              "pcie_tx_bytes_per_second",
                                                              "pcie_link_generation",
                                                              "pcie_link_generation_max",
                                                              "pcie_link_width",
                                                              "pcie_link_width_max",
                                                              "nvlink_rx_bytes_per_second",
                                                              "nvlink_tx_bytes_per_second",
                                                              "ecc_corrected_volatile",
                                                              "ecc_uncorrected_volatile",
                                                              "ecc_corrected_aggregate",
                                                              "ecc_uncorrected_aggregate",
                                                              "retired_pages_single_bit",
                                                              "retired_pages_double_bit",
                                                              "retired_pages_pending",
                                                              "remapped_rows_corrected",
                                                              "remapped_rows_uncorrected",
                                                              "remapped_rows_pending",
                                                              "remapped_rows_failed"};
constexpr std::array<std::string_view, 2> kEnergyKinds{"counter", "integrated"};
constexpr std::array<std::string_view, 3> kPowerStates{"unknown", "active", "suspended"};
constexpr std::array<std::string_view, 2> kPowerKinds{"instant", "average"};
constexpr std::array<std::string_view, 5> kContainerAbsents{"not_collected", "host", "unrecognized",
                                                            "malformed", "no_permission"};
static_assert(kContainerAbsents.size() ==
              static_cast<std::size_t>(ContainerAbsent::no_permission) + 1);

static_assert(kAbsences.size() == static_cast<std::size_t>(Absence::not_collected) + 1);
static_assert(kVendors.size() == static_cast<std::size_t>(Vendor::simulated) + 1);

}  // namespace

std::string_view to_string(Vendor v) noexcept { return name_of(v, kVendors); }
std::string_view to_string(Source s) noexcept { return name_of(s, kSources); }
std::string_view to_string(Absence a) noexcept { return name_of(a, kAbsences); }
std::string_view to_string(Metric m) noexcept { return name_of(m, kMetrics); }
std::string_view to_string(EnergyKind k) noexcept { return name_of(k, kEnergyKinds); }
std::string_view to_string(PowerState p) noexcept { return name_of(p, kPowerStates); }
std::string_view to_string(PowerKind k) noexcept { return name_of(k, kPowerKinds); }
std::string_view to_string(ContainerAbsent a) noexcept { return name_of(a, kContainerAbsents); }

std::optional<Vendor> vendor_from_string(std::string_view s) noexcept {
  return parse_of<Vendor>(s, kVendors);
}
std::optional<Source> source_from_string(std::string_view s) noexcept {
  return parse_of<Source>(s, kSources);
}
std::optional<Absence> absence_from_string(std::string_view s) noexcept {
  return parse_of<Absence>(s, kAbsences);
}
std::optional<Metric> metric_from_string(std::string_view s) noexcept {
  return parse_of<Metric>(s, kMetrics);
}
std::optional<EnergyKind> energy_kind_from_string(std::string_view s) noexcept {
  return parse_of<EnergyKind>(s, kEnergyKinds);
}
std::optional<PowerState> power_state_from_string(std::string_view s) noexcept {
  return parse_of<PowerState>(s, kPowerStates);
}
std::optional<PowerKind> power_kind_from_string(std::string_view s) noexcept {
  return parse_of<PowerKind>(s, kPowerKinds);
}
std::optional<ContainerAbsent> container_absent_from_string(std::string_view s) noexcept {
  return parse_of<ContainerAbsent>(s, kContainerAbsents);
}

BadReadingAccess::BadReadingAccess(Absence reason, Source source)
    : std::logic_error("gpustream: metric absent (" + std::string(to_string(reason)) + ", source " +
                       std::string(to_string(source)) + ")"),
      reason_(reason),
      source_(source) {}

void Reading::throw_absent() const { throw BadReadingAccess(reason_, source_); }

const DeviceSample* GpuSnapshot::find_device(std::string_view id) const noexcept {
  auto it = std::find_if(devices.begin(), devices.end(),
                         [&](const DeviceSample& d) { return d.id == id; });
  return it == devices.end() ? nullptr : &*it;
}

void derive_metrics(DeviceSample& d) noexcept {
  auto& free = d.metrics[Metric::memory_free_bytes];
  const auto& total = d.metrics[Metric::memory_total_bytes];
  const auto& used = d.metrics[Metric::memory_used_bytes];
  if (free || !total || !used) return;
  free = Reading::of(std::max(0.0, total.value() - used.value()), Source::derived);
}

std::int64_t wall_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t steady_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace gpustream
