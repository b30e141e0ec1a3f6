// The OTLP ExportMetricsServiceRequest in the protobuf JSON mapping (OTLP specification,
// "JSON Protobuf Encoding": lowerCamelCase field names, 64-bit integers as decimal strings, enums
// as integers, bytes ids none here), and the name mapping of docs/operations.md ("OTLP").
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "gpustream/json.hpp"
#include "gpustream/transport/otlp.hpp"
#include "gpustream/transport/protocol.hpp"

namespace gpustream::transport {

namespace {

/// How a metric is sent. gauge: Gauge; updown: a non-monotonic cumulative Sum (the semantic
/// conventions' UpDownCounter); counter: a monotonic cumulative Sum with a start time.
enum class Kind : std::uint8_t { gauge, updown, counter };

struct OtlpMetric {
  Metric metric;
  std::string_view name;
  std::string_view unit;  // UCUM, as the semantic conventions write it
  Kind kind;
  double div;    // value / div in `unit`
  bool integer;  // asInt (a whole number of bytes, errors, lanes...), else asDouble
  std::string_view description;
  std::string_view extra_key = {};  // one more attribute (hw.gpu.task on hw.gpu.utilization)
  std::string_view extra_value = {};
};

// Semantic-convention names (v1.37.0: model/hardware/gpu-metrics.yaml, common-metrics.yaml,
// temperature-metrics.yaml) where one has the same meaning; gpustream.gpu.<name> elsewhere: the
// model's metric name without its unit suffix, the unit in `unit`. memory_utilization_percent
// is the memory controller's busy time, not hw.gpu.memory.utilization (the fraction of memory
// used), so it keeps a gpustream name.
constexpr std::array<OtlpMetric, kMetricCount> kOtlpMetrics{{
    {Metric::utilization_percent, "hw.gpu.utilization", "1", Kind::gauge, 100, false,
     "Fraction of time the GPU was busy running work (0..1).", "hw.gpu.task", "general"},
    {Metric::memory_utilization_percent, "gpustream.gpu.memory_utilization", "1", Kind::gauge, 100,
     false, "Fraction of time the memory controller was busy (0..1)."},
    {Metric::memory_used_bytes, "hw.gpu.memory.usage", "By", Kind::updown, 1, true,
     "GPU memory used."},
    {Metric::memory_total_bytes, "hw.gpu.memory.limit", "By", Kind::updown, 1, true,
     "Size of the GPU memory."},
    {Metric::temperature_celsius, "hw.temperature", "Cel", Kind::gauge, 1, false,
     "GPU temperature."},
    {Metric::power_watts, "hw.power", "W", Kind::gauge, 1, false,
     "Power draw (instantaneous, else the driver's average)."},
    {Metric::power_average_watts, "gpustream.gpu.power_average", "W", Kind::gauge, 1, false,
     "Power draw averaged by the driver over its own window."},
    {Metric::power_limit_watts, "gpustream.gpu.power_limit", "W", Kind::gauge, 1, false,
     "Enforced power limit."},
    {Metric::energy_joules, "hw.energy", "J", Kind::counter, 1, false,
     "Energy consumed by the GPU."},
    {Metric::clock_graphics_mhz, "gpustream.gpu.clock_graphics", "MHz", Kind::gauge, 1, false,
     "Graphics clock."},
    {Metric::clock_sm_mhz, "gpustream.gpu.clock_sm", "MHz", Kind::gauge, 1, false, "SM clock."},
    {Metric::clock_memory_mhz, "gpustream.gpu.clock_memory", "MHz", Kind::gauge, 1, false,
     "Memory clock."},
    {Metric::fan_percent, "gpustream.gpu.fan", "1", Kind::gauge, 100, false,
     "Fan speed as a fraction of its maximum (0..1)."},
    {Metric::fan_rpm, "gpustream.gpu.fan_speed", "{rpm}", Kind::gauge, 1, false,
     "Fan speed in revolutions per minute."},
    {Metric::gtt_used_bytes, "gpustream.gpu.gtt_used", "By", Kind::updown, 1, true,
     "GTT (system memory mapped for the GPU) in use."},
    {Metric::gtt_total_bytes, "gpustream.gpu.gtt_total", "By", Kind::updown, 1, true,
     "GTT in total."},
    {Metric::memory_free_bytes, "gpustream.gpu.memory_free", "By", Kind::updown, 1, true,
     "GPU memory a new allocation can still get."},
    {Metric::pcie_rx_bytes_per_second, "gpustream.gpu.pcie_rx", "By/s", Kind::gauge, 1, false,
     "PCIe traffic into the device."},
    {Metric::pcie_tx_bytes_per_second, "gpustream.gpu.pcie_tx", "By/s", Kind::gauge, 1, false,
     "PCIe traffic out of the device."},
    {Metric::pcie_link_generation, "gpustream.gpu.pcie_link_generation", "1", Kind::gauge, 1, true,
     "Current PCIe link generation."},
    {Metric::pcie_link_generation_max, "gpustream.gpu.pcie_link_generation_max", "1", Kind::gauge,
     1, true, "Highest PCIe link generation the device and its slot support."},
    {Metric::pcie_link_width, "gpustream.gpu.pcie_link_width", "{lane}", Kind::gauge, 1, true,
     "Current PCIe link width."},
    {Metric::pcie_link_width_max, "gpustream.gpu.pcie_link_width_max", "{lane}", Kind::gauge, 1,
     true, "Widest PCIe link the device and its slot support."},
    {Metric::nvlink_rx_bytes_per_second, "gpustream.gpu.nvlink_rx", "By/s", Kind::gauge, 1, false,
     "NVLink data received over all active links."},
    {Metric::nvlink_tx_bytes_per_second, "gpustream.gpu.nvlink_tx", "By/s", Kind::gauge, 1, false,
     "NVLink data sent over all active links."},
    {Metric::ecc_corrected_volatile, "gpustream.gpu.ecc_corrected_volatile", "{error}",
     Kind::counter, 1, true, "Corrected ECC errors since the driver loaded."},
    {Metric::ecc_uncorrected_volatile, "gpustream.gpu.ecc_uncorrected_volatile", "{error}",
     Kind::counter, 1, true, "Uncorrected ECC errors since the driver loaded."},
    {Metric::ecc_corrected_aggregate, "gpustream.gpu.ecc_corrected_aggregate", "{error}",
     Kind::counter, 1, true, "Corrected ECC errors over the device's life."},
    {Metric::ecc_uncorrected_aggregate, "gpustream.gpu.ecc_uncorrected_aggregate", "{error}",
     Kind::counter, 1, true, "Uncorrected ECC errors over the device's life."},
    {Metric::retired_pages_single_bit, "gpustream.gpu.retired_pages_single_bit", "{page}",
     Kind::gauge, 1, true, "Pages retired after repeated single-bit errors."},
    {Metric::retired_pages_double_bit, "gpustream.gpu.retired_pages_double_bit", "{page}",
     Kind::gauge, 1, true, "Pages retired after a double-bit error."},
    {Metric::retired_pages_pending, "gpustream.gpu.retired_pages_pending", "1", Kind::gauge, 1,
     true, "1 when a page retirement waits for the next driver reload."},
    {Metric::remapped_rows_corrected, "gpustream.gpu.remapped_rows_corrected", "{row}", Kind::gauge,
     1, true, "Rows remapped after correctable errors."},
    {Metric::remapped_rows_uncorrected, "gpustream.gpu.remapped_rows_uncorrected", "{row}",
     Kind::gauge, 1, true, "Rows remapped after uncorrectable errors."},
    {Metric::remapped_rows_pending, "gpustream.gpu.remapped_rows_pending", "1", Kind::gauge, 1,
     true, "1 when a row remapping waits for a GPU reset."},
    {Metric::remapped_rows_failed, "gpustream.gpu.remapped_rows_failed", "1", Kind::gauge, 1, true,
     "1 when a row remapping failed."},
    {Metric::graphics_activity_percent, "gpustream.gpu.graphics_activity", "1", Kind::gauge, 100,
     false, "Fraction of time the graphics/compute engine was active (0..1)."},
    {Metric::sm_activity_percent, "gpustream.gpu.sm_activity", "1", Kind::gauge, 100, false,
     "Fraction of SMs with at least one warp resident (0..1)."},
    {Metric::sm_occupancy_percent, "gpustream.gpu.sm_occupancy", "1", Kind::gauge, 100, false,
     "Resident warps over the SMs' maximum (0..1)."},
    {Metric::tensor_activity_percent, "gpustream.gpu.tensor_activity", "1", Kind::gauge, 100, false,
     "Fraction of time the tensor pipes were active (0..1)."},
    {Metric::dram_activity_percent, "gpustream.gpu.dram_activity", "1", Kind::gauge, 100, false,
     "Fraction of time the device memory interface was busy (0..1)."},
    {Metric::fp64_activity_percent, "gpustream.gpu.fp64_activity", "1", Kind::gauge, 100, false,
     "Fraction of time the FP64 pipe was active (0..1)."},
    {Metric::fp32_activity_percent, "gpustream.gpu.fp32_activity", "1", Kind::gauge, 100, false,
     "Fraction of time the FP32 pipe was active (0..1)."},
    {Metric::fp16_activity_percent, "gpustream.gpu.fp16_activity", "1", Kind::gauge, 100, false,
     "Fraction of time the FP16 pipe was active (0..1)."},
}};

constexpr bool otlp_table_complete() {
  for (std::size_t i = 0; i < kMetricCount; ++i)
    if (static_cast<std::size_t>(kOtlpMetrics[i].metric) != i) return false;
  return true;
}
static_assert(otlp_table_complete(), "kOtlpMetrics: one row per Metric, in order");

/// The semantic conventions' hw.vendor spelling; empty: unknown (left out).
std::string_view vendor_name(Vendor v) {
  switch (v) {
    case Vendor::nvidia:
      return "NVIDIA";
    case Vendor::amd:
      return "AMD";
    case Vendor::intel:
      return "Intel";
    case Vendor::apple:
      return "Apple";
    case Vendor::simulated:
      return "simulated";
    case Vendor::unknown:
      break;
  }
  return {};
}

void append_string(std::string& out, std::string_view s) {
  std::string fixed;
  if (!is_valid_utf8(s)) {
    fixed = to_valid_utf8(s);
    s = fixed;
  }
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append_attribute(std::string& out, std::string_view key, std::string_view value) {
  out += "{\"key\":";
  append_string(out, key);
  out += ",\"value\":{\"stringValue\":";
  append_string(out, value);
  out += "}}";
}

void append_int64_string(std::string& out, std::int64_t v) {
  out += '"';
  out += std::to_string(v);
  out += '"';
}

/// A finite double as JSON (shortest round-trip form).
void append_double(std::string& out, double v) {
  std::array<char, 32> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  out.append(buf.data(), r.ptr);
}

struct Point {
  const GpuSnapshot* snapshot;
  const DeviceSample* device;
  double value;  // in the metric's unit
};

std::string series_key(std::size_t metric, const GpuSnapshot& s, const DeviceSample& d) {
  std::string key = std::to_string(metric);
  key += '\0';
  key += s.node;
  key += '\0';
  key += s.probe;
  key += '\0';
  key += d.id;
  return key;
}

/// One resource's metrics (a node's; this machine's node is ""): every metric with points.
/// Returns false when there was none.
bool append_scope_metrics(std::string& out, const std::vector<const GpuSnapshot*>& snapshots,
                          OtlpEncoderState& state, std::set<std::string>& live_sums) {
  out += "\"scopeMetrics\":[{\"scope\":{\"name\":\"gpustream\",\"version\":\"";
  out += kServerName.substr(kServerName.find('/') + 1);
  out += "\"},\"metrics\":[";
  bool first_metric = true;
  std::vector<Point> points;
  for (std::size_t m = 0; m < kMetricCount; ++m) {
    const auto& row = kOtlpMetrics[m];
    points.clear();
    for (const auto* s : snapshots)
      for (const auto& d : s->devices)
        if (const auto v = d.metrics[row.metric].get(); v && std::isfinite(*v))
          points.push_back({s, &d, *v / row.div});
    if (points.empty()) continue;
    if (!first_metric) out += ',';
    first_metric = false;
    out += "{\"name\":";
    append_string(out, row.name);
    out += ",\"description\":";
    append_string(out, row.description);
    out += ",\"unit\":";
    append_string(out, row.unit);
    switch (row.kind) {
      case Kind::gauge:
        out += ",\"gauge\":{";
        break;
      // AGGREGATION_TEMPORALITY_CUMULATIVE = 2
      case Kind::updown:
        out += ",\"sum\":{\"aggregationTemporality\":2,\"isMonotonic\":false,";
        break;
      case Kind::counter:
        out += ",\"sum\":{\"aggregationTemporality\":2,\"isMonotonic\":true,";
        break;
    }
    out += "\"dataPoints\":[";
    bool first_point = true;
    for (const auto& p : points) {
      if (!first_point) out += ',';
      first_point = false;
      out += "{\"attributes\":[";
      append_attribute(out, "hw.id", p.device->id);
      out += ',';
      append_attribute(out, "hw.type", "gpu");
      if (!p.device->name.empty()) {
        out += ',';
        append_attribute(out, "hw.name", p.device->name);
      }
      if (const auto vendor = vendor_name(p.device->vendor); !vendor.empty()) {
        out += ',';
        append_attribute(out, "hw.vendor", vendor);
      }
      if (!p.device->parent.empty()) {
        out += ',';
        append_attribute(out, "hw.parent", p.device->parent);
      }
      out += ',';
      append_attribute(out, "gpustream.probe", p.snapshot->probe);
      if (!row.extra_key.empty()) {
        out += ',';
        append_attribute(out, row.extra_key, row.extra_value);
      }
      out += "]";
      const std::int64_t t = p.snapshot->time_unix_ns;
      if (row.kind != Kind::gauge) {
        // A cumulative sum starts when the exporter first saw it, and again after it went down
        // (a driver reload, a device reset): at the previous point's time.
        auto key = series_key(m, *p.snapshot, *p.device);
        auto [it, inserted] = state.sums.try_emplace(key);
        auto& sum = it->second;
        if (inserted) {
          sum.start_unix_ns = t;
        } else if (row.kind == Kind::counter && p.value < sum.last) {
          sum.start_unix_ns = std::min(sum.last_unix_ns, t);
        }
        sum.last = p.value;
        sum.last_unix_ns = t;
        live_sums.insert(std::move(key));
        out += ",\"startTimeUnixNano\":";
        append_int64_string(out, sum.start_unix_ns);
      }
      out += ",\"timeUnixNano\":";
      append_int64_string(out, t);
      if (row.integer) {
        out += ",\"asInt\":";
        append_int64_string(out, static_cast<std::int64_t>(std::llround(p.value)));
      } else {
        out += ",\"asDouble\":";
        append_double(out, p.value);
      }
      out += '}';
    }
    out += "]}}";
  }
  out += "],\"schemaUrl\":";
  append_string(out, kOtlpSchemaUrl);
  out += "}]";
  return !first_metric;
}

}  // namespace

std::string encode_otlp_metrics(const std::vector<SnapshotPtr>& latest,
                                const OtlpResource& resource, OtlpEncoderState& state) {
  // The snapshots not sent yet, by node (one resource each).
  std::map<std::string_view, std::vector<const GpuSnapshot*>> nodes;
  std::map<std::string, std::uint64_t, std::less<>> sent;
  std::set<std::string, std::less<>> exported;
  for (const auto& s : latest) {
    if (!s) continue;
    std::string key = s->node + '\0' + s->probe;
    const auto it = state.sent.find(key);
    sent.emplace(key, s->sequence);
    if (it != state.sent.end() && it->second == s->sequence) continue;
    exported.insert(std::move(key));
    nodes[s->node].push_back(s.get());
  }
  state.sent = std::move(sent);  // forgets what is no longer in the latest cache
  std::set<std::string> live_sums;
  std::string out = "{\"resourceMetrics\":[";
  bool any = false;
  for (const auto& [node, snapshots] : nodes) {
    const auto mark = out.size();
    if (any) out += ',';
    out += "{\"resource\":{\"attributes\":[";
    append_attribute(out, "host.name", node.empty() ? resource.host_name : node);
    out += ',';
    append_attribute(out, "service.name", "gpustream");
    out += ',';
    append_attribute(out, "service.instance.id",
                     node.empty() ? resource.instance_id : std::string(node));
    out += ',';
    append_attribute(out, "service.version", resource.service_version);
    out += "]},";
    if (!append_scope_metrics(out, snapshots, state, live_sums)) {
      out.resize(mark);  // no data point for this node
      continue;
    }
    out += ",\"schemaUrl\":";
    append_string(out, kOtlpSchemaUrl);
    out += '}';
    any = true;
  }
  // A sum not in this export keeps its state only while its snapshot is still the latest (not
  // re-sent); a series whose snapshot is gone, or whose new snapshot lacks it, is forgotten.
  std::erase_if(state.sums, [&](const auto& entry) {
    if (live_sums.contains(entry.first)) return false;
    const auto& k = entry.first;
    const auto a = k.find('\0');
    const auto b = k.find('\0', a + 1);
    const auto c = k.find('\0', b + 1);
    const auto node_probe = k.substr(a + 1, c - a - 1);  // "node\0probe"
    return !state.sent.contains(node_probe) || exported.contains(node_probe);
  });
  if (!any) return {};
  out += "]}";
  return out;
}

}  // namespace gpustream::transport
