// gpustream/detail/json_text.hpp — the SDK's JSON text writer, for the project's own JSON
// documents beyond the snapshot (the transport's wire messages). One writer: the same escaping,
// UTF-8 repair and number rules as the snapshot codec (gpustream/json.hpp). Not installed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <boost/json/fwd.hpp>

#include "gpustream/model.hpp"

namespace gpustream::detail {

/// Appends `v` as compact JSON text: strings escaped (a byte that is not UTF-8 becomes U+FFFD,
/// silently), a double always with a '.' or an exponent ("64.0"), a non-finite double as null,
/// integers exactly, object members in their order.
void append_json_value(std::string& out, const boost::json::value& v);

/// How append_snapshot_json writes a snapshot.
struct SnapshotText {
  /// Written as the first key, `"type":"<type>"`, when not empty (a wire message's type).
  std::string_view type;
  /// When not null: the only metrics written in each device's four metric objects (sorted). A
  /// map key that two bytes-not-UTF-8 keys repair to is then written once (the first), as the
  /// document form (gpustream::to_json) holds it.
  const std::vector<Metric>* fields = nullptr;
};

/// Appends the gpustream/1 document of `s` (json.hpp's append_json), as `how` says.
void append_snapshot_json(std::string& out, const GpuSnapshot& s, const SnapshotText& how);

}  // namespace gpustream::detail
