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
// the device's own strings) and a number.
//
// Thread safety: reentrant; the inputs are immutable snapshots and values.
#pragma once

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
/// number among them.
std::string render_prometheus_dcgm(const std::vector<SnapshotPtr>& latest,
                                   const std::vector<EventPtr>& recent_events,
                                   const DcgmOptions& options);

/// Who holds a device in Kubernetes: the `pod`, `namespace` and `container` labels.
struct DcgmPod {
  std::string pod;
  std::string namespace_name;
  std::string container;
};

/// The Kubernetes identity of a device, or nullopt when unknown. The one place the dcgm writer
/// asks for it: it returns nullopt until the kubelet PodResources identity is on the model.
std::optional<DcgmPod> dcgm_pod_of(const DeviceSample& d);

/// The name dcgm-exporter would put in `Hostname`: $NODE_NAME when set (a Kubernetes pod's
/// host name is the pod's), else gethostname(); empty when neither is known.
std::string dcgm_local_hostname();

}  // namespace gpustream::transport
