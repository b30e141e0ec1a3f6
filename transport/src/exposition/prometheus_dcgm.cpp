// /metrics in dcgm-exporter's names, units and labels (see prometheus_dcgm.hpp).
#include "exposition/prometheus_dcgm.hpp"

#include <unistd.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string_view>
#include <system_error>
#include <utility>

#include "gpustream/transport/prometheus.hpp"

namespace gpustream::transport {

namespace {

/// Which vendors a field is written for: those whose figure has the DCGM field's meaning
/// (docs/operations.md, "dcgm-exporter compatibility").
enum class Vendors : std::uint8_t {
  any,            // every vendor that reports the value
  not_unified,    // not Apple: its "memory" is the host's unified RAM, not a framebuffer
  nvidia,         // NVIDIA only: an NVML/DCGM notion (retired pages, NVLink, GPM pipes)
  energy_counter  // any vendor, when the energy is a hardware counter (not integrated by us)
};

struct DcgmField {
  Metric metric;
  std::string_view name;
  std::string_view type;
  double scale;  // gpustream's unit to the field's: value * scale
  bool integer;  // DCGM's field is an integer (rounded to the nearest)
  Vendors vendors;
  std::string_view help;
};

constexpr double kMiB = 1.0 / (1024.0 * 1024.0);

// The fields, in the order dcgm-exporter's default counters list them.
constexpr std::array kFields{
    DcgmField{Metric::clock_sm_mhz, "DCGM_FI_DEV_SM_CLOCK", "gauge", 1, true, Vendors::any,
              "SM clock frequency (in MHz)."},
    DcgmField{Metric::clock_memory_mhz, "DCGM_FI_DEV_MEM_CLOCK", "gauge", 1, true, Vendors::any,
              "Memory clock frequency (in MHz)."},
    DcgmField{Metric::temperature_celsius, "DCGM_FI_DEV_GPU_TEMP", "gauge", 1, true, Vendors::any,
              "GPU temperature (in C)."},
    DcgmField{Metric::power_watts, "DCGM_FI_DEV_POWER_USAGE", "gauge", 1, false, Vendors::any,
              "Power draw (in W)."},
    DcgmField{Metric::power_limit_watts, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge", 1, false,
              Vendors::any, "Enforced power limit (in W)."},
    DcgmField{Metric::energy_joules, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", 1000, true,
              Vendors::energy_counter, "Total energy consumption since boot (in mJ)."},
    DcgmField{Metric::pcie_tx_bytes_per_second, "DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", 1, false,
              Vendors::any, "Rate of data sent over the PCIe bus (in B/s)."},
    DcgmField{Metric::pcie_rx_bytes_per_second, "DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", 1, false,
              Vendors::any, "Rate of data received over the PCIe bus (in B/s)."},
    DcgmField{Metric::pcie_link_generation, "DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", 1, true,
              Vendors::any, "Current PCIe link generation."},
    DcgmField{Metric::pcie_link_generation_max, "DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "gauge", 1, true,
              Vendors::any, "Highest PCIe link generation of the device and its slot."},
    DcgmField{Metric::pcie_link_width, "DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", 1, true,
              Vendors::any, "Current PCIe link width (lanes)."},
    DcgmField{Metric::pcie_link_width_max, "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "gauge", 1, true,
              Vendors::any, "Widest PCIe link of the device and its slot (lanes)."},
    DcgmField{Metric::utilization_percent, "DCGM_FI_DEV_GPU_UTIL", "gauge", 1, true, Vendors::any,
              "GPU utilization (in %)."},
    DcgmField{Metric::memory_utilization_percent, "DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", 1, true,
              Vendors::any, "Memory utilization (in %)."},
    DcgmField{Metric::fan_percent, "DCGM_FI_DEV_FAN_SPEED", "gauge", 1, true, Vendors::any,
              "Fan speed (in % of its maximum)."},
    DcgmField{Metric::memory_free_bytes, "DCGM_FI_DEV_FB_FREE", "gauge", kMiB, true,
              Vendors::not_unified, "Framebuffer memory free (in MiB)."},
    DcgmField{Metric::memory_used_bytes, "DCGM_FI_DEV_FB_USED", "gauge", kMiB, true,
              Vendors::not_unified, "Framebuffer memory used (in MiB)."},
    DcgmField{Metric::memory_total_bytes, "DCGM_FI_DEV_FB_TOTAL", "gauge", kMiB, true,
              Vendors::not_unified, "Framebuffer memory in total (in MiB)."},
    DcgmField{Metric::ecc_corrected_volatile, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", 1, true,
              Vendors::any, "Single-bit (corrected) ECC errors since the driver loaded."},
    DcgmField{Metric::ecc_uncorrected_volatile, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", 1, true,
              Vendors::any, "Double-bit (uncorrected) ECC errors since the driver loaded."},
    DcgmField{Metric::ecc_corrected_aggregate, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", 1, true,
              Vendors::any, "Single-bit (corrected) ECC errors over the device's life."},
    DcgmField{Metric::ecc_uncorrected_aggregate, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", 1,
              true, Vendors::any, "Double-bit (uncorrected) ECC errors over the device's life."},
    DcgmField{Metric::retired_pages_single_bit, "DCGM_FI_DEV_RETIRED_SBE", "counter", 1, true,
              Vendors::nvidia, "Pages retired after single-bit errors."},
    DcgmField{Metric::retired_pages_double_bit, "DCGM_FI_DEV_RETIRED_DBE", "counter", 1, true,
              Vendors::nvidia, "Pages retired after double-bit errors."},
    DcgmField{Metric::retired_pages_pending, "DCGM_FI_DEV_RETIRED_PENDING", "counter", 1, true,
              Vendors::nvidia, "1 when a page retirement waits for the next driver reload."},
    DcgmField{Metric::nvlink_tx_bytes_per_second, "DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge", 1, false,
              Vendors::nvidia, "Rate of data sent over NVLink, all links (in B/s)."},
    DcgmField{Metric::nvlink_rx_bytes_per_second, "DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge", 1, false,
              Vendors::nvidia, "Rate of data received over NVLink, all links (in B/s)."},
    DcgmField{Metric::remapped_rows_uncorrected, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
              "counter", 1, true, Vendors::nvidia,
              "Number of remapped rows for uncorrectable errors."},
    DcgmField{Metric::remapped_rows_corrected, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
              1, true, Vendors::nvidia, "Number of remapped rows for correctable errors."},
    DcgmField{Metric::remapped_rows_pending, "DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", 1, true,
              Vendors::nvidia, "1 when a row remapping waits for a GPU reset."},
    DcgmField{Metric::remapped_rows_failed, "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", 1, true,
              Vendors::nvidia, "Whether remapping of rows has failed."},
    DcgmField{Metric::graphics_activity_percent, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", 0.01,
              false, Vendors::any, "Ratio of time the graphics engine is active."},
    DcgmField{Metric::sm_activity_percent, "DCGM_FI_PROF_SM_ACTIVE", "gauge", 0.01, false,
              Vendors::nvidia, "Ratio of cycles an SM has at least one warp assigned."},
    DcgmField{Metric::sm_occupancy_percent, "DCGM_FI_PROF_SM_OCCUPANCY", "gauge", 0.01, false,
              Vendors::nvidia, "Ratio of warps resident on an SM to its maximum."},
    DcgmField{Metric::tensor_activity_percent, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", 0.01,
              false, Vendors::nvidia, "Ratio of cycles the tensor (HMMA) pipe is active."},
    DcgmField{Metric::dram_activity_percent, "DCGM_FI_PROF_DRAM_ACTIVE", "gauge", 0.01, false,
              Vendors::any, "Ratio of cycles the device memory interface is active."},
    DcgmField{Metric::fp64_activity_percent, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", 0.01, false,
              Vendors::nvidia, "Ratio of cycles the fp64 pipes are active."},
    DcgmField{Metric::fp32_activity_percent, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", 0.01, false,
              Vendors::nvidia, "Ratio of cycles the fp32 pipes are active."},
    DcgmField{Metric::fp16_activity_percent, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", 0.01, false,
              Vendors::nvidia, "Ratio of cycles the fp16 pipes are active."},
};
static_assert(kFields.size() + 2 == kDcgmFieldsPerDevice,
              "kDcgmFieldsPerDevice: the field table plus clock-event reasons and the last Xid");

constexpr std::string_view kClockEvents = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS";
constexpr std::string_view kXid = "DCGM_FI_DEV_XID_ERRORS";

bool written_for(Vendors v, const DeviceSample& d) {
  switch (v) {
    case Vendors::any:
      return true;
    case Vendors::not_unified:
      return d.vendor != Vendor::apple;
    case Vendors::nvidia:
      return d.vendor == Vendor::nvidia;
    case Vendors::energy_counter:
      return d.energy_kind == EnergyKind::counter;
  }
  return false;
}

using Labels = std::vector<std::pair<std::string_view, std::string>>;

/// Families by name, written in the order they were first asked for; a family without a
/// sample is not written.
class Families {
 public:
  void sample(std::string_view name, std::string_view type, std::string_view help,
              const Labels& labels, double value) {
    if (!std::isfinite(value)) return;  // a value we do not have is left out, never 0
    auto it = index_.find(name);
    if (it == index_.end()) {
      it = index_.emplace(std::string(name), families_.size()).first;
      families_.push_back({std::string(name), std::string(type), std::string(help), {}});
    }
    auto& out = families_[it->second].samples;
    out += name;
    out += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) out += ',';
      first = false;
      out += k;
      out += "=\"";
      out += escape_label_value(v);
      out += '"';
    }
    out += "} ";
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, value);
    out.append(buf, r.ptr);
    out += '\n';
  }

  std::string str() const {
    std::string out;
    for (const auto& f : families_) {
      out += "# HELP " + f.name + ' ' + f.help + '\n';
      out += "# TYPE " + f.name + ' ' + f.type + '\n';
      out += f.samples;
    }
    return out;
  }

 private:
  struct Family {
    std::string name, type, help, samples;
  };
  std::vector<Family> families_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

/// NVML's bus id form, as dcgm-exporter shows it: an 8-digit domain, upper-case hex
/// ("0000:17:00.0" -> "00000000:17:00.0").
std::string nvml_bus_id(std::string_view id) {
  std::string out(id);
  if (const auto colon = out.find(':'); colon != std::string::npos && colon < 8)
    out.insert(0, 8 - colon, '0');
  for (auto& c : out)
    if (c >= 'a' && c <= 'f') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::string attribute(const DeviceSample& d, const std::string& key) {
  const auto it = d.attributes.find(key);
  return it == d.attributes.end() ? std::string() : it->second;
}

/// `device`: the device node's name, as dcgm-exporter's `nvidia<N>` (/dev/nvidia<N>); an Intel
/// GPU's DRM card ("card1"); otherwise the vendor and the index ("amd0").
std::string device_label(const DeviceSample& d) {
  if (d.vendor == Vendor::nvidia) return "nvidia" + std::to_string(d.index);
  if (auto card = attribute(d, "card"); !card.empty()) return card;
  return std::string(to_string(d.vendor)) + std::to_string(d.index);
}

Labels labels_of(const DeviceSample& d, const DeviceSample* parent, const std::string& hostname) {
  // A MIG instance is shown as dcgm-exporter shows it: its physical GPU's gpu, UUID, bus id and
  // device, and the instance in GPU_I_PROFILE and GPU_I_ID.
  const DeviceSample& gpu = parent ? *parent : d;
  Labels l;
  l.emplace_back("gpu", std::to_string(gpu.index));
  auto uuid = attribute(gpu, "uuid");
  if (uuid.empty()) uuid = gpu.id;
  l.emplace_back("UUID", std::move(uuid));
  if (!gpu.pci_bus_id.empty())
    l.emplace_back("pci_bus_id",
                   gpu.vendor == Vendor::nvidia ? nvml_bus_id(gpu.pci_bus_id) : gpu.pci_bus_id);
  l.emplace_back("device", device_label(gpu));
  l.emplace_back("modelName", gpu.name);
  if (!hostname.empty()) l.emplace_back("Hostname", hostname);
  if (auto v = attribute(gpu, "driver_version"); !v.empty())
    l.emplace_back("DCGM_FI_DRIVER_VERSION", std::move(v));
  if (parent && d.mig) {
    l.emplace_back("GPU_I_PROFILE", d.mig->profile);
    l.emplace_back("GPU_I_ID", std::to_string(d.mig->gpu_instance_id));
  }
  if (const auto pod = dcgm_pod_of(d)) {
    if (!pod->container.empty()) l.emplace_back("container", pod->container);
    if (!pod->namespace_name.empty()) l.emplace_back("namespace", pod->namespace_name);
    if (!pod->pod.empty()) l.emplace_back("pod", pod->pod);
  }
  return l;
}

/// NVML's clocks-event reason bits from the names the NVIDIA probe decoded them to (the
/// probe's decode_clock_event_reasons; an unnamed bit is kept as "0x..."). nullopt: a name this
/// table does not know (the mask would be wrong, so none is written).
std::optional<std::uint64_t> clock_event_mask(const std::vector<std::string>& reasons) {
  std::uint64_t mask = 0;
  for (const auto& r : reasons) {
    bool known = false;
    for (std::size_t bit = 0; bit < kNvmlClockEventReasons.size(); ++bit)
      if (r == kNvmlClockEventReasons[bit]) {
        mask |= std::uint64_t{1} << bit;
        known = true;
      }
    if (!known && r.size() > 2 && r.starts_with("0x")) {
      std::uint64_t v = 0;
      const auto res = std::from_chars(r.data() + 2, r.data() + r.size(), v, 16);
      known = res.ec == std::errc() && res.ptr == r.data() + r.size();
      mask |= v;
    }
    if (!known) return std::nullopt;
  }
  return mask;
}

void device(Families& f, const DeviceSample& d, const DeviceSample* parent,
            const std::string& hostname, const std::map<std::string, std::uint64_t>& last_xid) {
  const Labels l = labels_of(d, parent, hostname);
  for (const auto& field : kFields) {
    const auto& r = d.metrics[field.metric];
    if (!r.has_value() || !written_for(field.vendors, d)) continue;
    double v = r.value() * field.scale;
    if (field.integer) v = std::round(v);
    f.sample(field.name, field.type, field.help, l, v);
  }
  if (d.vendor == Vendor::nvidia && !d.throttle_reasons_absent)
    if (const auto mask = clock_event_mask(d.throttle_reasons))
      f.sample(kClockEvents, "gauge", "Current clock event reasons (bit mask of NVML's reasons).",
               l, static_cast<double>(*mask));
  if (d.vendor == Vendor::nvidia)
    if (const auto it = last_xid.find(d.id); it != last_xid.end())
      f.sample(kXid, "gauge", "Value of the last XID error encountered.", l,
               static_cast<double>(it->second));
}

}  // namespace

std::optional<DcgmPod> dcgm_pod_of(const DeviceSample& d) {
  // One holder: its labels. Several (a GPU shared by time-slicing or MPS) would make one
  // series claim to be several pods': none (the pods are on the process series).
  if (d.pods.size() != 1) return std::nullopt;
  const auto& p = d.pods.front();
  return DcgmPod{p.name, p.namespace_name, p.container};
}

std::string dcgm_local_hostname() {
  if (const char* node = std::getenv("NODE_NAME"); node && *node) return node;
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0) return {};
  return std::string(buf.data());
}

std::string render_prometheus_dcgm(const std::vector<SnapshotPtr>& latest,
                                   const std::vector<EventPtr>& recent_events,
                                   const DcgmOptions& options) {
  std::map<std::string, std::uint64_t> last_xid;  // device id -> its newest Xid number
  for (const auto& e : recent_events)
    if (e && e->kind == EventKind::xid && e->data) last_xid[e->device_id] = *e->data;
  Families f;
  for (const auto& s : latest) {
    if (!s) continue;
    // A fleet's devices are named by their node (docs/fleet.md); ours by this host.
    const std::string& hostname = s->node.empty() ? options.hostname : s->node;
    std::map<std::string_view, const DeviceSample*> by_id;
    for (const auto& d : s->devices) by_id.emplace(d.id, &d);
    for (const auto& d : s->devices) {
      const DeviceSample* parent = nullptr;
      if (!d.parent.empty())
        if (const auto it = by_id.find(d.parent); it != by_id.end()) parent = it->second;
      device(f, d, parent, hostname, last_xid);
    }
  }
  return f.str();
}

}  // namespace gpustream::transport
