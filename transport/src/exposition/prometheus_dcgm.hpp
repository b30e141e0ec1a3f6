// exposition/prometheus_dcgm.hpp — /metrics under dcgm-exporter's names, units and labels
// (`--metrics-compat dcgm`, docs/operations.md "dcgm-exporter compatibility").
//
// Every device value gpustream has with the meaning of a DCGM field is written under that
// field's name (DCGM_FI_DEV_GPU_UTIL in percent, DCGM_FI_DEV_FB_USED in MiB, ...), with
// dcgm-exporter's labels: gpu (the index), UUID, pci_bus_id, device (nvidia<N>), modelName,
// Hostname, DCGM_FI_DRIVER_VERSION, GPU_I_PROFILE and GPU_I_ID on a MIG instance, and pod,
// namespace, container when known (dcgm_pod_of). A value the device does not report is left
// out, never 0; a field whose meaning differs on a vendor is left out for that vendor.
//
// Size: one line per (device, field) present, at most kDcgmFieldsPerDevice lines per device
// plus one HELP and one TYPE line per family; a line is the name, the labels (their values are
// the device's own strings) and a number. The text is written in pieces by DcgmWriter (a
// streamed /metrics, issue #32): never held whole.
//
// Thread safety: reentrant; the inputs are immutable snapshots and values.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpustream/channel.hpp"
#include "gpustream/events.hpp"
#include "gpustream/model.hpp"

namespace gpustream::transport {

/// Families that can carry a sample of one device (the field table plus the clock-event
/// reasons and the last Xid).
inline constexpr std::size_t kDcgmFieldsPerDevice = 41;

struct DcgmOptions {
  /// The `Hostname` of this machine's own devices (dcgm_local_hostname()); a fleet's devices
  /// carry their node's name instead (GpuSnapshot::node).
  std::string hostname;
};

/// The device families in dcgm-exporter's form. `recent_events` (EventChannel::recent(), oldest
/// first) gives each device's last Xid (DCGM_FI_DEV_XID_ERRORS): the newest xid event with a
/// number among them. A family comes where its first sample is met (devices in snapshot order,
/// a device's fields in the table's order), with the samples of every device in that order.
/// DcgmWriter's text, drained into one string (for the callers that want it whole).
std::string render_prometheus_dcgm(const std::vector<SnapshotPtr>& latest,
                                   const std::vector<EventPtr>& recent_events,
                                   const DcgmOptions& options);

/// render_prometheus_dcgm()'s text written in pieces, as PrometheusWriter writes the native
/// exposition: family by family, a family's HELP and TYPE as one piece, then one device's
/// sample of it per piece. next() appends at least one piece and stops once `out` holds `want`
/// bytes, so a caller's buffer passes `want` by one line at most.
///
/// Memory: the snapshots (one pointer each, never copied), the last Xid of each device named
/// by `recent_events` (bounded by the event channel's recent ring), the families' order (at
/// most kDcgmFieldsPerDevice entries), one device's labels and a cursor: held_bytes(),
/// bounded whatever the number of snapshots. The families' order is found at construction, by
/// one pass over the devices that makes no text. Thread safety: one caller at a time.
class DcgmWriter {
 public:
  DcgmWriter(std::vector<SnapshotPtr> latest, const std::vector<EventPtr>& recent_events,
             DcgmOptions options);
  ~DcgmWriter();
  DcgmWriter(DcgmWriter&&) noexcept;
  DcgmWriter& operator=(DcgmWriter&&) noexcept;

  /// Appends the next pieces to `out` until out.size() >= want or the text ends; false once
  /// the whole text has been written (then nothing is appended).
  bool next(std::string& out, std::size_t want);

  /// What the writer holds besides the snapshots' pointers, in bytes (the allocations' sizes
  /// as asked for, not the allocator's overhead): the last Xids, the families' order and the
  /// labels being written.
  std::size_t held_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Who holds a device in Kubernetes: the `pod`, `namespace` and `container` labels.
struct DcgmPod {
  std::string pod;
  std::string namespace_name;
  std::string container;
};

/// The Kubernetes identity of a device (DeviceSample::pods, from the kubelet's PodResources
/// API), or nullopt when no pod holds it, the kubelet is not read, or several pods share it.
std::optional<DcgmPod> dcgm_pod_of(const DeviceSample& d);

/// The name dcgm-exporter would put in `Hostname`: $NODE_NAME when set (a Kubernetes pod's
/// host name is the pod's), else gethostname(); empty when neither is known.
std::string dcgm_local_hostname();

}  // namespace gpustream::transport
