// /metrics in dcgm-exporter's names, units and labels (see prometheus_dcgm.hpp).
#include "exposition/prometheus_dcgm.hpp"

#include <unistd.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <string_view>
#include <system_error>
#include <utility>

#include "exposition/prometheus_families.hpp"
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

using prometheus_detail::Exposition;
using prometheus_detail::Labels;

/// The families after the field table's: the clock-event reasons, then the last Xid.
constexpr std::size_t kClockEventsFamily = kFields.size();
constexpr std::size_t kXidFamily = kFields.size() + 1;

struct FamilyText {
  std::string_view name, type, help;
};

FamilyText family_text(std::size_t family) {
  if (family == kClockEventsFamily)
    return {kClockEvents, "gauge", "Current clock event reasons (bit mask of NVML's reasons)."};
  if (family == kXidFamily) return {kXid, "gauge", "Value of the last XID error encountered."};
  const auto& f = kFields[family];
  return {f.name, f.type, f.help};
}

/// NVML's bus id form, as dcgm-exporter shows it: an 8-digit domain, upper-case hex
/// ("0000:17:00.0" -> "00000000:17:00.0").
void append_nvml_bus_id(std::string& out, std::string_view id) {
  if (const auto colon = id.find(':'); colon != std::string_view::npos && colon < 8)
    out.append(8 - colon, '0');
  for (const char c : id) out += c >= 'a' && c <= 'f' ? static_cast<char>(c - 'a' + 'A') : c;
}

std::string_view attribute(const DeviceSample& d, const std::string& key) {
  const auto it = d.attributes.find(key);
  return it == d.attributes.end() ? std::string_view() : std::string_view(it->second);
}

template <typename Int>
void append_integer(std::string& out, Int v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

/// `device`: the device node's name, as dcgm-exporter's `nvidia<N>` (/dev/nvidia<N>); an Intel
/// GPU's DRM card ("card1"); otherwise the vendor and the index ("amd0").
void append_device_label(std::string& out, const DeviceSample& d) {
  if (d.vendor == Vendor::nvidia) {
    out += "nvidia";
  } else if (const auto card = attribute(d, "card"); !card.empty()) {
    out += card;
    return;
  } else {
    out += to_string(d.vendor);
  }
  append_integer(out, d.index);
}

/// dcgm_pod_of()'s pod, not copied.
const KubernetesPod* pod_holding(const DeviceSample& d) {
  // One holder: its labels. Several (a GPU shared by time-slicing or MPS) would make one
  // series claim to be several pods': none (the pods are on the process series).
  return d.pods.size() == 1 ? &d.pods.front() : nullptr;
}

/// A device's labels, written into a Labels kept from one device to the next: its strings keep
/// their room, so the labels of a device cost no allocation once a longer one's were written.
/// Returns how many there are (the first entries of `l`).
std::size_t labels_of(Labels& l, const DeviceSample& d, const DeviceSample* parent,
                      const std::string& hostname) {
  std::size_t n = 0;
  const auto add = [&](std::string_view key) -> std::string& {
    if (n == l.size()) l.emplace_back();
    auto& slot = l[n++];
    slot.first = key;
    slot.second.clear();
    return slot.second;
  };
  // A MIG instance is shown as dcgm-exporter shows it: its physical GPU's gpu, UUID, bus id and
  // device, and the instance in GPU_I_PROFILE and GPU_I_ID.
  const DeviceSample& gpu = parent ? *parent : d;
  append_integer(add("gpu"), gpu.index);
  const auto uuid = attribute(gpu, "uuid");
  add("UUID") = uuid.empty() ? std::string_view(gpu.id) : uuid;
  if (!gpu.pci_bus_id.empty()) {
    auto& v = add("pci_bus_id");
    if (gpu.vendor == Vendor::nvidia)
      append_nvml_bus_id(v, gpu.pci_bus_id);
    else
      v = gpu.pci_bus_id;
  }
  append_device_label(add("device"), gpu);
  add("modelName") = gpu.name;
  if (!hostname.empty()) add("Hostname") = hostname;
  if (const auto v = attribute(gpu, "driver_version"); !v.empty())
    add("DCGM_FI_DRIVER_VERSION") = v;
  if (parent && d.mig) {
    add("GPU_I_PROFILE") = d.mig->profile;
    append_integer(add("GPU_I_ID"), d.mig->gpu_instance_id);
  }
  if (const auto* pod = pod_holding(d)) {
    if (!pod->container.empty()) add("container") = pod->container;
    if (!pod->namespace_name.empty()) add("namespace") = pod->namespace_name;
    if (!pod->name.empty()) add("pod") = pod->name;
  }
  return n;
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

using LastXid = std::map<std::string, std::uint64_t, std::less<>>;  // device id -> number

/// A device's value of a family (kFields' row, kClockEventsFamily, kXidFamily) in the field's
/// unit; nullopt when it has none (not reported, not finite, not written for its vendor).
std::optional<double> value_of(std::size_t family, const DeviceSample& d, const LastXid& last_xid) {
  if (family == kClockEventsFamily) {
    if (d.vendor != Vendor::nvidia || d.throttle_reasons_absent) return std::nullopt;
    if (const auto mask = clock_event_mask(d.throttle_reasons)) return static_cast<double>(*mask);
    return std::nullopt;
  }
  if (family == kXidFamily) {
    if (d.vendor != Vendor::nvidia) return std::nullopt;
    if (const auto it = last_xid.find(d.id); it != last_xid.end())
      return static_cast<double>(it->second);
    return std::nullopt;
  }
  const auto& field = kFields[family];
  const auto& r = d.metrics[field.metric];
  if (!r.has_value() || !written_for(field.vendors, d)) return std::nullopt;
  double v = r.value() * field.scale;
  if (field.integer) v = std::round(v);
  if (!std::isfinite(v)) return std::nullopt;  // a value we do not have is left out, never 0
  return v;
}

/// A MIG instance's physical GPU among its snapshot's devices (the first with that id), or
/// null: a device without a parent, or whose parent is not in the snapshot.
const DeviceSample* parent_of(const GpuSnapshot& s, const DeviceSample& d) {
  if (d.parent.empty()) return nullptr;
  for (const auto& p : s.devices)
    if (p.id == d.parent) return &p;
  return nullptr;
}

}  // namespace

struct DcgmWriter::Impl {
  std::vector<SnapshotPtr> latest;
  LastXid last_xid;
  DcgmOptions options;
  /// The families with a sample, in the order their first sample is met.
  std::vector<std::uint8_t> order;

  // The cursor: the family being written, whether its HELP and TYPE are out, the next device.
  std::size_t family = 0;
  bool header = false;
  std::size_t snapshot = 0;
  std::size_t device = 0;
  Labels labels;  // the device's being written (their room kept)

  void plan() {
    std::array<bool, kDcgmFieldsPerDevice> seen{};
    for (const auto& s : latest) {
      if (!s) continue;
      for (const auto& d : s->devices) {
        for (std::size_t f = 0; f < kDcgmFieldsPerDevice; ++f) {
          if (seen[f] || !value_of(f, d, last_xid)) continue;
          seen[f] = true;
          order.push_back(static_cast<std::uint8_t>(f));
        }
        if (order.size() == kDcgmFieldsPerDevice) return;
      }
    }
  }

  /// One piece: the current family's HELP and TYPE, or one device's sample of it.
  bool step(std::string& out) {
    while (family < order.size()) {
      const auto text = family_text(order[family]);
      if (!header) {
        header = true;
        Exposition::append_head(out, text.name, text.type, text.help);
        return true;
      }
      while (snapshot < latest.size()) {
        const auto& s = latest[snapshot];
        if (!s || device >= s->devices.size()) {
          ++snapshot;
          device = 0;
          continue;
        }
        const auto& d = s->devices[device++];
        const auto v = value_of(order[family], d, last_xid);
        if (!v) continue;
        // A fleet's devices are named by their node (docs/fleet.md); ours by this host.
        const std::string& hostname = s->node.empty() ? options.hostname : s->node;
        const auto n = labels_of(labels, d, parent_of(*s, d), hostname);
        Exposition::append_sample(out, text.name, {labels.data(), n}, *v);
        return true;
      }
      ++family;
      header = false;
      snapshot = 0;
      device = 0;
    }
    return false;
  }
};

DcgmWriter::DcgmWriter(std::vector<SnapshotPtr> latest, const std::vector<EventPtr>& recent_events,
                       DcgmOptions options)
    : impl_(std::make_unique<Impl>()) {
  for (const auto& e : recent_events)
    if (e && e->kind == EventKind::xid && e->data) impl_->last_xid[e->device_id] = *e->data;
  impl_->latest = std::move(latest);
  impl_->options = std::move(options);
  impl_->plan();
}

DcgmWriter::~DcgmWriter() = default;
DcgmWriter::DcgmWriter(DcgmWriter&&) noexcept = default;
DcgmWriter& DcgmWriter::operator=(DcgmWriter&&) noexcept = default;

bool DcgmWriter::next(std::string& out, std::size_t want) {
  return prometheus_detail::pull_pieces(out, want,
                                        [this](std::string& o) { return impl_->step(o); });
}

std::size_t DcgmWriter::held_bytes() const {
  const auto& i = *impl_;
  std::size_t n = sizeof(Impl) + i.order.capacity() + i.options.hostname.capacity() +
                  i.labels.capacity() * sizeof(Labels::value_type);
  for (const auto& [key, value] : i.labels) n += value.capacity();
  for (const auto& [id, number] : i.last_xid) n += sizeof(*i.last_xid.begin()) + id.capacity();
  return n;
}

std::optional<DcgmPod> dcgm_pod_of(const DeviceSample& d) {
  const auto* p = pod_holding(d);
  if (!p) return std::nullopt;
  return DcgmPod{p->name, p->namespace_name, p->container};
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
  DcgmWriter w(latest, recent_events, options);
  std::string out;
  while (w.next(out, std::numeric_limits<std::size_t>::max())) {}
  return out;
}

}  // namespace gpustream::transport
