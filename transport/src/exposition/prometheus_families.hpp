// exposition/prometheus_families.hpp — what the parts of the /metrics exposition share:
// the families collected by name (Exposition: the probes' and the server's families, a few
// per probe), the device families' table, and the helpers of prometheus.cpp
// (render_prometheus, the small families), prometheus_writer.cpp (PrometheusWriter, which
// writes the per-snapshot families in pieces) and prometheus_dcgm.cpp (DcgmWriter: its sample
// lines are Exposition::append_sample's). Private to the exposition room.
//
// Thread safety: reentrant; Exposition is one caller's.
#pragma once

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpustream/model.hpp"
#include "gpustream/probe_stats.hpp"
#include "gpustream/transport/prometheus.hpp"
#include "gpustream/transport/server.hpp"

namespace gpustream::transport::prometheus_detail {

using Labels = std::vector<std::pair<std::string_view, std::string>>;

/// `v` escaped as a label value (escape_label_value); the common case (ASCII with nothing to
/// escape) copied as is.
inline void append_label_value(std::string& out, std::string_view v) {
  for (const char c : v) {
    if (static_cast<unsigned char>(c) >= 0x80 || c == '\\' || c == '"' || c == '\n') {
      out += escape_label_value(v);
      return;
    }
  }
  out += v;
}

/// One metric family: its HELP and TYPE, then its samples. Families without a sample are not
/// written at all.
class Exposition {
 public:
  std::size_t family(std::string name, std::string_view type, std::string_view help) {
    if (const auto it = index_.find(name); it != index_.end()) return it->second;
    index_.emplace(name, families_.size());
    families_.push_back({std::move(name), std::string(type), std::string(help), {}});
    return families_.size() - 1;
  }

  void sample(std::size_t f, const Labels& labels, double value) {
    if (!std::isfinite(value)) return;  // a value we do not have is left out, never 0
    append_sample(families_[f].samples, families_[f].name, labels, value);
  }

  void sample(std::size_t f, const Labels& labels, std::uint64_t value) {
    auto& out = families_[f].samples;
    out += families_[f].name;
    append_labels(out, labels);
    out += ' ';
    out += std::to_string(value);
    out += '\n';
  }

  /// `labels` as append_labels writes them, without the braces.
  static std::string render_labels(const Labels& labels) {
    std::string out;
    append_labels(out, labels);
    if (out.size() >= 2) out = out.substr(1, out.size() - 2);
    return out;
  }

  std::string str() const {
    std::size_t total = 0;
    for (const auto& f : families_)
      if (!f.samples.empty())
        total += f.name.size() * 2 + f.help.size() + f.type.size() + 18 + f.samples.size();
    std::string out;
    out.reserve(total);
    for (const auto& f : families_) {
      if (f.samples.empty()) continue;
      append_head(out, f.name, f.type, f.help);
      out += f.samples;
    }
    return out;
  }

  /// A family's `# HELP name help` and `# TYPE name type` lines.
  static void append_head(std::string& out, std::string_view name, std::string_view type,
                          std::string_view help) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
  }

  /// `{key="value",...}` (values escaped); nothing for no labels.
  static void append_labels(std::string& out, std::span<const Labels::value_type> labels) {
    if (labels.empty()) return;
    out += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) out += ',';
      first = false;
      out += k;
      out += "=\"";
      append_label_value(out, v);
      out += '"';
    }
    out += '}';
  }

  /// One sample line: `name{labels} value\n` (the shortest form of a finite `value`).
  static void append_sample(std::string& out, std::string_view name,
                            std::span<const Labels::value_type> labels, double value) {
    out += name;
    append_labels(out, labels);
    out += ' ';
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, value);
    out.append(buf, r.ptr);
    out += '\n';
  }

 private:
  struct Family {
    std::string name, type, help, samples;
  };
  std::vector<Family> families_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

struct DeviceFamily {
  Metric metric;
  std::string_view name;
  std::string_view type;
  double mul;  // to the base unit: value * mul / div
  double div;
  std::string_view help;
  // One more label telling apart the metrics that share a family (ECC counters, ...); empty key:
  // none.
  std::string_view label = {};
  std::string_view label_value = {};
};

// The device metrics, in base units. Percentages become ratios (0..1), MHz become hertz.
inline constexpr std::array<DeviceFamily, kMetricCount> kDeviceFamilies{{
    {Metric::utilization_percent, "gpustream_gpu_utilization_ratio", "gauge", 1, 100,
     "Fraction of time the GPU was busy (0..1)."},
    {Metric::memory_utilization_percent, "gpustream_gpu_memory_utilization_ratio", "gauge", 1, 100,
     "Fraction of time the memory controller was busy (0..1)."},
    {Metric::memory_used_bytes, "gpustream_gpu_memory_used_bytes", "gauge", 1, 1,
     "Device memory in use."},
    {Metric::memory_total_bytes, "gpustream_gpu_memory_total_bytes", "gauge", 1, 1,
     "Device memory in total."},
    {Metric::temperature_celsius, "gpustream_gpu_temperature_celsius", "gauge", 1, 1,
     "GPU temperature."},
    {Metric::power_watts, "gpustream_gpu_power_watts", "gauge", 1, 1,
     "Power draw (instantaneous, else the driver's average: power_kind in the JSON)."},
    {Metric::power_average_watts, "gpustream_gpu_power_average_watts", "gauge", 1, 1,
     "Power draw averaged by the driver over its own window."},
    {Metric::power_limit_watts, "gpustream_gpu_power_limit_watts", "gauge", 1, 1,
     "Enforced power limit."},
    {Metric::energy_joules, "gpustream_gpu_energy_joules_total", "counter", 1, 1,
     "Energy consumed (hardware counter, or integrated from power when the device has none)."},
    {Metric::clock_graphics_mhz, "gpustream_gpu_clock_graphics_hertz", "gauge", 1e6, 1,
     "Graphics clock."},
    {Metric::clock_sm_mhz, "gpustream_gpu_clock_sm_hertz", "gauge", 1e6, 1, "SM clock."},
    {Metric::clock_memory_mhz, "gpustream_gpu_clock_memory_hertz", "gauge", 1e6, 1,
     "Memory clock."},
    {Metric::fan_percent, "gpustream_gpu_fan_speed_ratio", "gauge", 1, 100,
     "Fan speed as a fraction of its maximum (0..1)."},
    {Metric::fan_rpm, "gpustream_gpu_fan_speed_rpm", "gauge", 1, 1,
     "Fan speed in revolutions per minute."},
    {Metric::gtt_used_bytes, "gpustream_gpu_gtt_used_bytes", "gauge", 1, 1,
     "GTT (system memory mapped for the GPU) in use."},
    {Metric::gtt_total_bytes, "gpustream_gpu_gtt_total_bytes", "gauge", 1, 1, "GTT in total."},
    {Metric::memory_free_bytes, "gpustream_gpu_memory_free_bytes", "gauge", 1, 1,
     "Device memory a new allocation can still get (the vendor's figure, else total - used)."},
    {Metric::pcie_rx_bytes_per_second, "gpustream_gpu_pcie_rx_bytes_per_second", "gauge", 1, 1,
     "PCIe traffic into the device."},
    {Metric::pcie_tx_bytes_per_second, "gpustream_gpu_pcie_tx_bytes_per_second", "gauge", 1, 1,
     "PCIe traffic out of the device."},
    {Metric::pcie_link_generation, "gpustream_gpu_pcie_link_generation", "gauge", 1, 1,
     "Current PCIe link generation."},
    {Metric::pcie_link_generation_max, "gpustream_gpu_pcie_link_generation_max", "gauge", 1, 1,
     "Highest PCIe link generation the device and its slot support."},
    {Metric::pcie_link_width, "gpustream_gpu_pcie_link_width_lanes", "gauge", 1, 1,
     "Current PCIe link width."},
    {Metric::pcie_link_width_max, "gpustream_gpu_pcie_link_width_max_lanes", "gauge", 1, 1,
     "Widest PCIe link the device and its slot support."},
    {Metric::nvlink_rx_bytes_per_second, "gpustream_gpu_nvlink_rx_bytes_per_second", "gauge", 1, 1,
     "NVLink data received over all active links, between the last two samples."},
    {Metric::nvlink_tx_bytes_per_second, "gpustream_gpu_nvlink_tx_bytes_per_second", "gauge", 1, 1,
     "NVLink data sent over all active links, between the last two samples."},
    {Metric::ecc_corrected_volatile, "gpustream_gpu_ecc_errors_total", "counter", 1, 1,
     "ECC memory errors; counter=volatile since the driver loaded, aggregate over the device's "
     "life.",
     "error", "corrected,volatile"},
    {Metric::ecc_uncorrected_volatile, "gpustream_gpu_ecc_errors_total", "counter", 1, 1, "",
     "error", "uncorrected,volatile"},
    {Metric::ecc_corrected_aggregate, "gpustream_gpu_ecc_errors_total", "counter", 1, 1, "",
     "error", "corrected,aggregate"},
    {Metric::ecc_uncorrected_aggregate, "gpustream_gpu_ecc_errors_total", "counter", 1, 1, "",
     "error", "uncorrected,aggregate"},
    {Metric::retired_pages_single_bit, "gpustream_gpu_retired_pages", "gauge", 1, 1,
     "Device memory pages retired, by cause.", "cause", "multiple_single_bit_ecc"},
    {Metric::retired_pages_double_bit, "gpustream_gpu_retired_pages", "gauge", 1, 1, "", "cause",
     "double_bit_ecc"},
    {Metric::retired_pages_pending, "gpustream_gpu_retired_pages_pending", "gauge", 1, 1,
     "1 when a page retirement waits for the next driver reload."},
    {Metric::remapped_rows_corrected, "gpustream_gpu_remapped_rows", "gauge", 1, 1,
     "Device memory rows remapped, by the kind of error that caused it.", "cause", "corrected"},
    {Metric::remapped_rows_uncorrected, "gpustream_gpu_remapped_rows", "gauge", 1, 1, "", "cause",
     "uncorrected"},
    {Metric::remapped_rows_pending, "gpustream_gpu_remapped_rows_pending", "gauge", 1, 1,
     "1 when a row remapping waits for a GPU reset."},
    {Metric::remapped_rows_failed, "gpustream_gpu_remapped_rows_failed", "gauge", 1, 1,
     "1 when a row remapping failed (the device needs service)."},
    {Metric::graphics_activity_percent, "gpustream_gpu_graphics_activity_ratio", "gauge", 1, 100,
     "Fraction of time the graphics/compute engine was active (0..1; NVML GPM, AMD gpu_metrics)."},
    {Metric::sm_activity_percent, "gpustream_gpu_sm_activity_ratio", "gauge", 1, 100,
     "Fraction of SMs with at least one warp resident, averaged over the interval (0..1; NVML "
     "GPM)."},
    {Metric::sm_occupancy_percent, "gpustream_gpu_sm_occupancy_ratio", "gauge", 1, 100,
     "Resident warps over the SMs' maximum, averaged over the interval (0..1; NVML GPM)."},
    {Metric::tensor_activity_percent, "gpustream_gpu_tensor_activity_ratio", "gauge", 1, 100,
     "Fraction of time the tensor pipes were active (0..1; NVML GPM)."},
    {Metric::dram_activity_percent, "gpustream_gpu_dram_activity_ratio", "gauge", 1, 100,
     "Fraction of time the device memory interface was busy (0..1; NVML GPM, AMD gpu_metrics)."},
    {Metric::fp64_activity_percent, "gpustream_gpu_fp64_activity_ratio", "gauge", 1, 100,
     "Fraction of time the FP64 pipe was active (0..1; NVML GPM)."},
    {Metric::fp32_activity_percent, "gpustream_gpu_fp32_activity_ratio", "gauge", 1, 100,
     "Fraction of time the FP32 pipe was active (0..1; NVML GPM)."},
    {Metric::fp16_activity_percent, "gpustream_gpu_fp16_activity_ratio", "gauge", 1, 100,
     "Fraction of time the FP16 pipe was active (0..1; NVML GPM)."},
}};

/// Every metric has its row, in Metric order (fam[] is indexed by it).
constexpr bool device_families_complete() {
  for (std::size_t i = 0; i < kMetricCount; ++i)
    if (static_cast<std::size_t>(kDeviceFamilies[i].metric) != i) return false;
  return true;
}
static_assert(device_families_complete(), "kDeviceFamilies: one row per Metric, in order");

/// A metric name made of [a-zA-Z0-9_] from a free-form key.
std::string sanitize_name(std::string_view key);

inline double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

/// Each device family's own labels after the device's, rendered (",key=\"v\"", or
/// ",key=\"a\",counter=\"b\"" for "a,b": ECC's volatile/aggregate); empty for most.
const std::array<std::string, kMetricCount>& device_family_labels();

/// The probes' families (state, counters, latency quantiles), a few per probe.
void probe_stats(Exposition& e, const std::vector<ProbeStats>& stats);
/// The server's families (connections, counters, TLS).
void server(Exposition& e, const ServerCounters& c);

/// A streaming writer's next(out, want) (PrometheusWriter, DcgmWriter): the pieces `step(out)`
/// appends, until `out` holds `want` bytes or more, at least one piece (so a call passes `want`
/// by one piece at most); false once `step` has nothing left and nothing was appended.
template <class Step>
bool pull_pieces(std::string& out, std::size_t want, Step&& step) {
  const std::size_t before = out.size();
  while (out.size() < want || out.size() == before) {
    if (!step(out)) return out.size() != before;
  }
  return true;
}

}  // namespace gpustream::transport::prometheus_detail
