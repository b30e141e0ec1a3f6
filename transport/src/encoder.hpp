// Snapshot encodings for the wire: the plain one and projections (device and metric subsets).
//
// Thread safety: reentrant functions; Projection is a value.
#pragma once

#include <string>
#include <vector>

#include "gpustream/model.hpp"

namespace gpustream::transport {

/// What a client keeps of each snapshot. Two clients with the same projection share one
/// serialization, so `key` names it canonically ("" for the identity projection).
struct Projection {
  std::vector<std::string> devices;  // sorted, unique; empty: every device
  std::vector<Metric> fields;        // sorted, unique; empty: every metric
  std::string key;

  static Projection make(std::vector<std::string> devices, std::vector<Metric> fields);
  bool identity() const noexcept { return key.empty(); }
};

/// The snapshot message (`{"type":"snapshot",...}\n`) of `s` under `p`. Devices not in
/// p.devices are removed; metrics not in p.fields are removed from each device's "metrics",
/// "sources", "absent" and "absent_sources".
std::string encode_snapshot_message(const GpuSnapshot& s, const Projection& p);

/// The snapshot JSON object inside a snapshot message (without "type" and '\n').
std::string snapshot_json_of_message(std::string_view message);

}  // namespace gpustream::transport
