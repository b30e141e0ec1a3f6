// gpustream/json.hpp — the JSON codec of the model (schema "gpustream/1", docs/protocol.md).
//
// Encoding is deterministic (fixed key order) so the same snapshot always gives the same bytes.
// Decoding our own output gives back an equal GpuSnapshot. Decoding rejects malformed input
// with a JsonError that says what and where (never a crash, never a silent 0).
//
// Two encoders produce the same document: to_json_string / append_json write text directly
// (the fast path, used for the wire), to_json builds a boost::json::value (for callers that want
// to edit or embed the document). Doubles are written in their shortest form that reads back to
// the same bits; whole byte counts are written as integers.
//
// Values that JSON cannot carry are guarded by the encoder: a Reading is expected to hold a
// finite number, and one that holds NaN or an infinity is written as absent with reason
// "unsupported" (its source kept); a non-finite optional double is written as null, and a
// non-finite host metric is left out. Strings that are not valid UTF-8 have each bad byte
// replaced by U+FFFD. Both are logged once.
//
// Thread safety: every function here is reentrant; nothing is shared between calls.
#pragma once

#include <boost/json/fwd.hpp>
#include <boost/json/storage_ptr.hpp>
#include <boost/json/value.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "gpustream/model.hpp"
#include "gpustream/probe_stats.hpp"

namespace gpustream {

inline constexpr std::string_view kSchema = "gpustream/1";

/// The most `power_samples` a reader accepts for one device (a producer gives one snapshot's
/// driver readings: NVML's ring holds about 120, the probe takes at most 128 per snapshot). In
/// memory 16 bytes each, 64 KiB per device; in text at most 46 bytes each
/// (`[-9223372036854775808,-1.7976931348623157e+308]`), about 184 KiB. A longer list is refused.
inline constexpr std::size_t kMaxPowerSamplesPerDevice = 4096;

/// Malformed or invalid JSON. what() names the place, e.g.
/// "$.devices[0].metrics.power_watts: expected a number, got string".
class JsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

boost::json::value to_json(const GpuSnapshot& snapshot);
boost::json::value to_json(const DeviceSample& device);
boost::json::value to_json(const HostSample& host);
/// A probe's stats (gpustream/probe_stats.hpp): keys as the field names, durations with their
/// unit in the key, absent latencies as null.
boost::json::value to_json(const ProbeStats& stats);

/// Serialized snapshot, no trailing newline.
std::string to_json_string(const GpuSnapshot& snapshot);

/// Appends the serialized form (no trailing newline) to `out`; lets a caller reuse one buffer.
void append_json(std::string& out, const GpuSnapshot& snapshot);
void append_json(std::string& out, const DeviceSample& device);
void append_json(std::string& out, const HostSample& host);

/// Throws JsonError on anything that is not a valid gpustream/1 snapshot.
GpuSnapshot snapshot_from_json(const boost::json::value& v);
GpuSnapshot snapshot_from_json_string(std::string_view text);
DeviceSample device_from_json(const boost::json::value& v);
HostSample host_from_json(const boost::json::value& v);

/// Parses one JSON document, reading every number exactly (Boost 1.81's own parser may be off by
/// an ulp on doubles). Numbers too large for a double are an error. Throws JsonError that gives
/// the byte offset. The value's memory comes from `sp` (default: the heap).
boost::json::value parse_json(std::string_view text, boost::json::storage_ptr sp = {});

/// True when `s` is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view s) noexcept;
/// `s` with every byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD.
std::string to_valid_utf8(std::string_view s);

}  // namespace gpustream
