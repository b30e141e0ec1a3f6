#include "gpustream/model.hpp"

#include <algorithm>
#include <type_traits>
#include <unordered_map>

namespace gpustream {
namespace {

template <typename E, std::size_t N>
constexpr std::string_view name_of(E e, const std::array<std::string_view, N>& names) noexcept {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : std::string_view{"unknown"};
}

template <typename E, std::size_t N>
std::optional<E> parse_of(std::string_view s,
                          const std::array<std::string_view, N>& names) noexcept {
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
                                                              "remapped_rows_failed",
                                                              "graphics_activity_percent",
                                                              "sm_activity_percent",
                                                              "sm_occupancy_percent",
                                                              "tensor_activity_percent",
                                                              "dram_activity_percent",
                                                              "fp64_activity_percent",
                                                              "fp32_activity_percent",
                                                              "fp16_activity_percent"};
constexpr std::array<std::string_view, 2> kEnergyKinds{"counter", "integrated"};
constexpr std::array<std::string_view, 3> kPowerStates{"unknown", "active", "suspended"};
constexpr std::array<std::string_view, 2> kPowerKinds{"instant", "average"};
constexpr std::array<std::string_view, 5> kContainerAbsents{"not_collected", "host", "unrecognized",
                                                            "malformed", "no_permission"};
static_assert(kContainerAbsents.size() ==
              static_cast<std::size_t>(ContainerAbsent::no_permission) + 1);
constexpr std::array<std::string_view, 2> kSlurmAbsents{"none", "unrecognized"};
static_assert(kSlurmAbsents.size() == static_cast<std::size_t>(SlurmAbsent::unrecognized) + 1);
constexpr std::array<std::string_view, 4> kPodAbsents{"none", "kubelet_unavailable", "not_assigned",
                                                      "ambiguous"};
static_assert(kPodAbsents.size() == static_cast<std::size_t>(PodAbsent::ambiguous) + 1);

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
std::string_view to_string(SlurmAbsent a) noexcept { return name_of(a, kSlurmAbsents); }
std::string_view to_string(PodAbsent a) noexcept { return name_of(a, kPodAbsents); }

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
  // A hash of the names, made once: the fleet converts every metric of every device of every bus
  // message, and the linear scan's memcmp was 12 % of its CPU (issue #32's profile).
  static const std::unordered_map<std::string_view, Metric> by_name = [] {
    std::unordered_map<std::string_view, Metric> out;
    for (std::size_t i = 0; i < kMetricCount; ++i) out.emplace(kMetrics[i], static_cast<Metric>(i));
    return out;
  }();
  const auto it = by_name.find(s);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
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
std::optional<SlurmAbsent> slurm_absent_from_string(std::string_view s) noexcept {
  return parse_of<SlurmAbsent>(s, kSlurmAbsents);
}
std::optional<PodAbsent> pod_absent_from_string(std::string_view s) noexcept {
  return parse_of<PodAbsent>(s, kPodAbsents);
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

namespace {

// What a string owns beyond its own object: the buffer, when it is not the small-string one.
std::size_t heap_of(const std::string& s) noexcept {
  static const std::size_t kInline = std::string().capacity();
  return s.capacity() > kInline ? s.capacity() + 1 : 0;
}

template <typename T>
std::size_t buffer_of(const std::vector<T>& v) noexcept {
  return v.capacity() * sizeof(T);
}

template <typename K, typename V>
std::size_t map_heap_of(const std::map<K, V>& m) noexcept {
  // A red-black tree node: colour + three links, then the pair.
  constexpr std::size_t kNode = 4 * sizeof(void*) + sizeof(typename std::map<K, V>::value_type);
  std::size_t n = m.size() * kNode;
  for (const auto& [k, v] : m) {
    if constexpr (std::is_same_v<K, std::string>) n += heap_of(k);
    if constexpr (std::is_same_v<V, std::string>) n += heap_of(v);
  }
  return n;
}

std::size_t heap_of(const std::vector<EngineSample>& engines) noexcept {
  std::size_t n = buffer_of(engines);
  for (const auto& e : engines) n += heap_of(e.name);
  return n;
}

std::size_t heap_of(const KubernetesPod& k) noexcept {
  return heap_of(k.name) + heap_of(k.namespace_name) + heap_of(k.container);
}

std::size_t heap_of(const ProcessContainer& c) noexcept {
  return heap_of(c.runtime) + heap_of(c.id) + heap_of(c.pod_uid) + heap_of(c.qos);
}

std::size_t heap_of(const SlurmJob& j) noexcept {
  return heap_of(j.job_id) + heap_of(j.step) + heap_of(j.user) + heap_of(j.array_job_id) +
         heap_of(j.array_task_id);
}

// A placement's shared block is counted whole in every snapshot that holds it: a bound that
// counts with approx_bytes never undercounts, though snapshots that share a block overcount it.
template <typename T>
std::size_t heap_of(const SharedOptional<T>& o) noexcept {
  return o ? o.block_bytes() + heap_of(*o) : 0;
}

std::size_t heap_of(const ProcessSample& p) noexcept {
  return heap_of(p.name) + heap_of(p.engines) + heap_of(p.container) + heap_of(p.slurm) +
         heap_of(p.pod);
}

std::size_t heap_of(const DeviceSample& d) noexcept {
  std::size_t n = heap_of(d.id) + heap_of(d.name) + heap_of(d.pci_bus_id) +
                  buffer_of(d.throttle_reasons) + heap_of(d.engines) + buffer_of(d.processes) +
                  map_heap_of(d.attributes) + buffer_of(d.power_samples);
  n += heap_of(d.parent) + (d.mig ? heap_of(d.mig->profile) : 0);
  for (const auto& t : d.throttle_reasons) n += heap_of(t);
  for (const auto& p : d.processes) n += heap_of(p);
  n += buffer_of(d.pods);
  for (const auto& k : d.pods) n += heap_of(k);
  return n;
}

}  // namespace

std::size_t approx_bytes(const GpuSnapshot& s) noexcept {
  std::size_t n = sizeof(GpuSnapshot) + heap_of(s.probe) + heap_of(s.node) + buffer_of(s.devices) +
                  buffer_of(s.errors);
  for (const auto& d : s.devices) n += heap_of(d);
  for (const auto& e : s.errors) n += heap_of(e.code) + heap_of(e.message) + heap_of(e.device);
  if (s.host) {
    n += buffer_of(s.host->processes) + map_heap_of(s.host->metrics);
    for (const auto& p : s.host->processes) n += heap_of(p.name);
  }
  return n;
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
