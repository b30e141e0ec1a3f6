// Snapshot encodings for the wire: the plain one and projections (device and metric subsets).
//
// A client's Projection is what it asked for; Projection::of(snapshot) is what that means for
// one snapshot: which of its devices are kept and which metrics. Its `key` names the resulting
// bytes, so two clients whose requests differ only in ids that are not in the snapshot (unknown
// device ids) share one encoding, and a key is never longer than the snapshot's device count
// plus the metric count.
//
// Thread safety: reentrant functions; Projection and Selection are values.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gpustream/model.hpp"

namespace gpustream::transport {

/// What a projection keeps of one snapshot.
struct Selection {
  bool any = true;             // false: no device of the snapshot is wanted
  bool all_devices = true;     // every device kept (no device filter applies)
  std::vector<bool> keep;      // per device of the snapshot, when !all_devices
  std::vector<Metric> fields;  // sorted, unique; empty: every metric
  std::string key;             // "" for the plain encoding
  std::size_t hash = 0;        // of key
};

/// What a client keeps of each snapshot.
struct Projection {
  std::vector<std::string> devices;  // sorted, unique; empty: every device
  std::vector<Metric> fields;        // sorted, unique; empty: every metric

  static Projection make(std::vector<std::string> devices, std::vector<Metric> fields);
  bool identity() const noexcept { return devices.empty() && fields.empty(); }
  /// The selection of `s`: its devices whose id is in `devices`, and `fields`.
  Selection of(const GpuSnapshot& s) const;
  /// Bytes this projection holds (for the per-client accounting).
  std::size_t bytes() const noexcept;
};

/// The snapshot message (`{"type":"snapshot",...}\n`) of `s` under `sel`. Devices not kept are
/// removed; metrics not in sel.fields are removed from each device's "metrics", "sources",
/// "absent" and "absent_sources" (an "absent_sources" left empty is left out, as the codec
/// does). Numbers are written exactly as the codec writes them (a double always reads back as a
/// double), whichever the projection.
std::string encode_snapshot_message(const GpuSnapshot& s, const Selection& sel);

/// The snapshot JSON object inside a snapshot message (without "type" and '\n').
std::string snapshot_json_of_message(std::string_view message);

}  // namespace gpustream::transport
