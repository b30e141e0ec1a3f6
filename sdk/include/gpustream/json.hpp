// gpustream/json.hpp — the JSON codec of the model (schema "gpustream/1", docs/protocol.md).
//
// Encoding is deterministic (fixed key order) so the same snapshot always gives the same bytes.
// Decoding our own output gives back an equal GpuSnapshot. Decoding rejects malformed input
// with a JsonError that says what and where (never a crash, never a silent 0).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <boost/json/fwd.hpp>
#include <boost/json/value.hpp>

#include "gpustream/model.hpp"

namespace gpustream {

inline constexpr std::string_view kSchema = "gpustream/1";

class JsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

boost::json::value to_json(const GpuSnapshot& snapshot);
boost::json::value to_json(const DeviceSample& device);
boost::json::value to_json(const HostSample& host);

/// Serialized snapshot, no trailing newline.
std::string to_json_string(const GpuSnapshot& snapshot);

/// Throws JsonError on anything that is not a valid gpustream/1 snapshot.
GpuSnapshot snapshot_from_json(const boost::json::value& v);
GpuSnapshot snapshot_from_json_string(std::string_view text);
DeviceSample device_from_json(const boost::json::value& v);
HostSample host_from_json(const boost::json::value& v);

}  // namespace gpustream
