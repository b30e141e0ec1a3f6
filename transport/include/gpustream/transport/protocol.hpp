// gpustream/transport/protocol.hpp — the wire protocol shared by TCP and WebSocket
// (docs/protocol.md ("Wire messages")).
//
// Every message is one JSON object with a "type". Server → client: hello, snapshot, gap,
// subscribed, error. Client → server: subscribe (and, on TCP with a token, auth). On TCP each
// message is one line ending in '\n'; on WebSocket each message is one text frame (no '\n').
//
// The builders here return the message *with* its trailing '\n', so one buffer serves both
// framings: TCP writes all of it, WebSocket all but the last byte.
//
// Thread safety: every function is reentrant; nothing is shared between calls.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/fwd.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/model.hpp"

namespace gpustream::transport {

/// Version string sent in hello.server.
inline constexpr std::string_view kServerName = "gpustream/0.1.0";

/// Error codes of {"type":"error"}.
inline constexpr std::string_view kErrBadRequest = "bad_request";     // not JSON / bad message
inline constexpr std::string_view kErrTooLarge = "too_large";         // inbound message too big
inline constexpr std::string_view kErrUnauthorized = "unauthorized";  // missing or wrong token
inline constexpr std::string_view kErrLimit = "limit";                // a server limit was hit
inline constexpr std::string_view kErrShuttingDown = "shutting_down";

/// A client's subscribe. Empty vectors mean "everything".
struct SubscribeRequest {
  std::vector<std::string> probes;     // only snapshots of these probes
  std::vector<std::string> devices;    // only these devices (others are removed from snapshots)
  std::vector<Metric> fields;          // only these device metrics (projection)
  std::optional<double> max_rate_hz;   // per probe; newest wins
  std::optional<std::uint64_t> since;  // resume: history with sequence > since first
  friend bool operator==(const SubscribeRequest&, const SubscribeRequest&) = default;
};

/// Bounds on what a subscribe may ask (each list at most this long, each name this long).
inline constexpr std::size_t kMaxSubscribeListSize = 256;
inline constexpr std::size_t kMaxNameLength = 256;
inline constexpr double kMaxRateHz = 1000.0;

/// A message the server refuses; what() is the text sent back in the error message.
class ProtocolError : public std::runtime_error {
 public:
  ProtocolError(std::string_view code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  std::string_view code() const noexcept { return code_; }

 private:
  std::string_view code_;  // one of the kErr* constants (static storage)
};

/// A parsed client message.
struct ClientMessage {
  enum class Kind { subscribe, auth };
  Kind kind = Kind::subscribe;
  SubscribeRequest subscribe;
  std::string token;  // auth
};

/// Parses one client message (one line or one text frame). Throws ProtocolError(bad_request)
/// naming what is wrong. Unknown keys inside a subscribe are ignored (forward compatibility);
/// known keys are validated (types, metric names, list sizes, rate in (0, 1000]).
ClientMessage parse_client_message(std::string_view text);

/// The subscribe message a client sends (no trailing newline).
std::string encode_subscribe(const SubscribeRequest& r);

/// Description of one probe in hello.probes.
struct ProbeInfo {
  std::string name;
  std::string state;   // ProbeState name, or "unknown" when the server has no statistics
  std::string reason;  // empty: the key is left out
};

/// Description of one device in hello.devices (and /api/v1/devices).
struct DeviceInfo {
  std::string id;
  std::string vendor;
  std::string name;
  std::string probe;
  int index = 0;
  std::string pci_bus_id;
};

/// The devices in the latest snapshots, in probe order then device order.
std::vector<DeviceInfo> devices_of(const std::vector<SnapshotPtr>& latest);
boost::json::value to_json(const DeviceInfo& d);

struct Hello {
  std::string instance;  // SnapshotChannel::instance(): which sequence space
  std::uint64_t last_sequence = 0;
  std::size_t history_capacity = 0;
  std::vector<ProbeInfo> probes;
  std::vector<DeviceInfo> devices;
};

std::string hello_message(const Hello& h);
/// `snapshot_json` is a serialized snapshot object ("{...}"); returns it with
/// "type":"snapshot" spliced in first, and '\n'.
std::string snapshot_message(std::string_view snapshot_json);
std::string gap_message(const Gap& g);
/// The ack of a subscribe, with the effective `since` (null when none).
std::string subscribed_message(const SubscribeRequest& r, std::optional<std::uint64_t> since);
std::string error_message(std::string_view code, std::string_view message);

/// Compact JSON text of `v`, doubles in their shortest round-trip form ("0.5", not "5E-1").
/// Object keys keep their insertion order.
std::string to_compact_json(const boost::json::value& v);
void append_compact_json(std::string& out, const boost::json::value& v);

}  // namespace gpustream::transport
