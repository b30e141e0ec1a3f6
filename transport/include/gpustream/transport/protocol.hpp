// gpustream/transport/protocol.hpp — the wire protocol shared by TCP and WebSocket
// (docs/protocol.md ("Wire messages")).
//
// Every message is one JSON object with a "type". Server → client: hello, snapshot, gap,
// subscribed, event, fit_result, error. Client → server: subscribe, fit (and, on TCP with a
// token, auth). On TCP each
// message is one line ending in '\n'; on WebSocket each message is one text frame (no '\n').
//
// Each message type has one encoder and one decoder here, used by the server and by
// RemoteSubscriber alike. The encoders return the message *with* its trailing '\n', so one
// buffer serves both framings: TCP writes all of it, WebSocket all but the last byte. Every
// string they write is valid UTF-8 (a bad byte becomes U+FFFD).
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
#include "gpustream/planner.hpp"

namespace gpustream::transport {

/// Version string sent in hello.server.
inline constexpr std::string_view kServerName = "gpustream/0.1.0";

/// Error codes of {"type":"error"}.
inline constexpr std::string_view kErrBadRequest = "bad_request";     // not JSON / bad message
inline constexpr std::string_view kErrTooLarge = "too_large";         // inbound message too big
inline constexpr std::string_view kErrUnauthorized = "unauthorized";  // missing or wrong token
inline constexpr std::string_view kErrLimit = "limit";                // a server limit was hit
inline constexpr std::string_view kErrShuttingDown = "shutting_down";
inline constexpr std::string_view kErrTimeout = "timeout";         // TCP idle timeout
inline constexpr std::string_view kErrSlowClient = "slow_client";  // disconnected: read too slowly
/// A snapshot (or the hello) larger than the client's send budget: skipped for this client.
inline constexpr std::string_view kErrMessageTooLarge = "message_too_large";

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
  ProtocolError(std::string_view code, const std::string& message, std::string id = {})
      : std::runtime_error(message), code_(code), id_(std::move(id)) {}
  std::string_view code() const noexcept { return code_; }
  /// The refused request's `id` (a fit's), echoed in the error; empty: none.
  const std::string& id() const noexcept { return id_; }

 private:
  std::string_view code_;  // one of the kErr* constants (static storage)
  std::string id_;
};

/// A client's planner query: where do `bytes` of device memory fit now? (docs/protocol.md,
/// "fit"). The server answers with one fit_result carrying the same `id`.
struct FitRequest {
  std::uint64_t bytes = 0;
  std::size_t limit = 16;  // at most this many devices in the answer, 1..kFitMaxLimit
  std::string id;          // echoed in the answer (and in an error about it); may be empty
  /// Device ids to leave out (FitOptions::exclude): at most kFitMaxExclude ids, each at most
  /// kMaxNameLength bytes, kFitMaxExcludeBytes together.
  std::vector<std::string> exclude;
  /// The health rule's window, seconds (FitOptions::fatal_event_window; 0: off), at most
  /// kMaxFatalEventWindow. nullopt: the default (kDefaultFatalEventWindow).
  std::optional<std::uint64_t> fatal_event_window_s;
  friend bool operator==(const FitRequest&, const FitRequest&) = default;
};
inline constexpr std::size_t kFitDefaultLimit = 16;
inline constexpr std::size_t kFitMaxLimit = 256;
inline constexpr std::size_t kFitMaxIdBytes = 64;
inline constexpr std::size_t kFitMaxExclude = 256;
inline constexpr std::size_t kFitMaxExcludeBytes = 16 * 1024;
/// The planner's options of a fit request.
FitOptions fit_options(const FitRequest& r);
/// A fit_result message is at most this long (whole entries are left out past it: truncated).
inline constexpr std::size_t kFitMaxReplyBytes = 64 * 1024;

/// One device of a fit answer: the same fields as /api/v1/fit's entries (docs/fleet.md).
struct FitEntry {
  std::string node;  // empty: the server's own device (`gpustream serve`)
  std::string device;
  std::string name;
  std::string probe;
  std::string vendor;
  std::uint64_t free_bytes = 0;
  std::string source;        // where free_bytes came from: nvml, amd-smi, derived, ...
  std::string state = "up";  // the node's state (always "up": no other is a candidate)
  double age_seconds = 0;    // now − the figure's sample time
  /// An excluded device's (FitResult::excluded): why it was left out, ExclusionReason's name
  /// ("excluded", "fatal_event"), and in words (FitExclusion::detail). Empty in `fits`.
  std::string reason;
  std::string detail;
  friend bool operator==(const FitEntry&, const FitEntry&) = default;
};
boost::json::object to_json(const FitEntry& e);
/// The entry of one DeviceFit: `state` of its node, `age_ns` = now − the figure's sample time.
FitEntry fit_entry(const DeviceFit& f, std::string_view state, std::int64_t age_ns);
/// fits() over `latest` as entries: every device is "up", aged from its snapshot's time_unix_ns
/// to `now_unix_ns` (`gpustream serve`'s own answer to a fit).
std::vector<FitEntry> local_fits(const std::vector<SnapshotPtr>& latest, std::uint64_t bytes,
                                 std::int64_t now_unix_ns);

/// A planner's whole answer: what fits, and what had room but was left out (with `reason`).
struct FitAnswer {
  std::vector<FitEntry> fits;
  std::vector<FitEntry> excluded;
};
/// fits() under the request's exclusions and health rule, over `latest` and this machine's
/// `fatal_events` (EventChannel::fatal()): `gpustream serve`'s own answer.
FitAnswer local_fits(const std::vector<SnapshotPtr>& latest,
                     const std::vector<EventPtr>& fatal_events, const FitRequest& r,
                     std::int64_t now_unix_ns);
/// Moves the entries of `a.fits` whose device is in r.exclude to `a.excluded` (reason
/// "excluded"): the request's exclusions over a fit source that has no events (a fleet's).
void exclude_requested(FitAnswer& a, const FitRequest& r);

/// The answer to a fit: the devices where `bytes` fit, most free first.
struct FitResult {
  std::string id;
  std::uint64_t bytes = 0;
  std::uint64_t total = 0;  // devices that fit (fits holds the first `limit` of them)
  bool truncated = false;   // fits holds fewer than total (limit or kFitMaxReplyBytes), or
                            // excluded fewer than the server left out (kFitMaxReplyBytes)
  std::vector<FitEntry> fits;
  /// Devices that had `bytes` free but were left out (request's exclusions, health rule), each
  /// with `reason` and `detail`; most free first; at most kFitMaxLimit. Empty from a server
  /// older than exclusions.
  std::vector<FitEntry> excluded;
};

/// A parsed client message.
struct ClientMessage {
  enum class Kind { subscribe, auth, fit };
  Kind kind = Kind::subscribe;
  SubscribeRequest subscribe;
  std::string token;  // auth
  FitRequest fit;
};

/// Parses one client message (one line or one text frame). Throws ProtocolError(bad_request)
/// naming what is wrong (text that is not UTF-8 is named as such). Unknown keys inside a
/// subscribe are ignored (forward compatibility); known keys are validated (types, metric names,
/// list sizes, rate in (0, 1000]).
ClientMessage parse_client_message(std::string_view text);

/// The client requests this server answers after hello, listed in hello's `requests`: the
/// types parse_client_message() accepts, `auth` left out (it is the TCP handshake, before
/// hello). A request added to the protocol is added here.
inline constexpr std::string_view kClientRequests[] = {"subscribe", "fit"};

/// The subscribe message a client sends (no trailing newline).
std::string encode_subscribe(const SubscribeRequest& r);
/// The fit message a client sends (no trailing newline).
std::string encode_fit(const FitRequest& r);

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
  std::string node;  // GpuSnapshot::node (a fleet's devices); empty: the key is left out
};

/// The devices in the latest snapshots, in probe order then device order.
std::vector<DeviceInfo> devices_of(const std::vector<SnapshotPtr>& latest);
boost::json::value to_json(const DeviceInfo& d);
/// Throws JsonError.
DeviceInfo device_info_from_json(const boost::json::value& v);

/// The first message of a connection.
struct Hello {
  std::string schema{"gpustream/1"};  // the snapshot schema (gpustream::kSchema)
  std::string server{kServerName};    // "gpustream/0.1.0"
  std::string instance;  // SnapshotChannel::instance(): which sequence space; empty: older server
  std::uint64_t last_sequence = 0;
  std::size_t history_capacity = 0;
  std::vector<ProbeInfo> probes;
  std::vector<DeviceInfo> devices;
  /// Probes whose devices are not (all) in `devices` yet: still detecting, or available with no
  /// snapshot yet (a freshly started server). Empty: `devices` is complete for every probe.
  /// nullopt: not said (a server older than the key, or one without probe statistics).
  std::optional<std::vector<std::string>> devices_pending;
  /// The client requests the server answers (kClientRequests for this version's server).
  /// nullopt: the key was not sent — a server older than the list, which knows `subscribe`
  /// and may or may not know `fit` (it answers an unknown one with bad_request).
  std::optional<std::vector<std::string>> requests;
};

/// The acknowledgement of a subscribe: what is in force, and what the server does not know.
struct Subscribed {
  SubscribeRequest request;  // request.since: the effective resume point (nullopt: none)
  std::vector<std::string> unknown_probes;   // asked for, not among the server's probes now
  std::vector<std::string> unknown_devices;  // asked for, not among its devices now
};

/// A server's error message.
struct ServerError {
  std::string code;  // one of the kErr* codes (or a newer one)
  std::string message;
  std::string id;  // the refused request's id (a fit's); empty: none
};

/// One decoded server message. `kind` says which member is set; `other` is a type this
/// version does not know (ignore it).
struct ServerMessage {
  enum class Kind { hello, snapshot, gap, subscribed, error, fit_result, other };
  Kind kind = Kind::other;
  Hello hello;
  GpuSnapshot snapshot;
  Gap gap;
  Subscribed subscribed;
  ServerError error;
  FitResult fit;
};

/// Decodes one server message (one line or one text frame). Throws JsonError (from
/// gpustream/json.hpp) naming what is wrong.
ServerMessage parse_server_message(std::string_view text);

std::string hello_message(const Hello& h);
/// `snapshot_json` is a serialized snapshot object ("{...}"); returns it with
/// "type":"snapshot" spliced in first, and '\n'.
std::string snapshot_message(std::string_view snapshot_json);
std::string gap_message(const Gap& g);
/// The ack of a subscribe, with the effective `since` (null when none).
std::string subscribed_message(const Subscribed& s);
/// `id`: the refused request's id, written only when not empty.
std::string error_message(std::string_view code, std::string_view message,
                          std::string_view id = {});
/// The answer to a fit: `fits` (all that fit, most free first) cut to `limit` entries and to
/// kFitMaxReplyBytes, `total` and `truncated` saying so.
std::string fit_result_message(std::string_view id, std::uint64_t bytes,
                               const std::vector<FitEntry>& fits, std::size_t limit);
/// The same with the excluded devices, after the fits, within the same byte bound (at most
/// kFitMaxLimit of them).
std::string fit_result_message(std::string_view id, std::uint64_t bytes, const FitAnswer& a,
                               std::size_t limit);

/// The document of the HTTP endpoint /api/v1/fit (`gpustream serve`'s and `gpustream fleet`'s):
/// {"schema","bytes","fits":[every entry, most free first]}, each entry as in fit_result.
std::string fit_json(const std::vector<FitEntry>& fits, std::uint64_t bytes);
/// The same with `excluded` (every excluded entry).
std::string fit_json(const FitAnswer& a, std::uint64_t bytes);
/// The fit request of an /api/v1/fit target: `bytes` (required), `exclude` (device ids,
/// comma-separated, bounded as the `fit` message's), `fatal_event_window_s`. Throws
/// ProtocolError naming the bad parameter (the endpoint answers 400 with it).
FitRequest fit_request_of_target(std::string_view target);
/// The `bytes` of an /api/v1/fit request target ("/api/v1/fit?bytes=N"): nullopt when it is
/// missing or not a whole number of bytes from 0 to 2^64 − 1 (the endpoint then answers 400).
std::optional<std::uint64_t> fit_bytes_parameter(std::string_view target);
/// The 400 body of /api/v1/fit for a bad or missing `bytes`.
inline constexpr std::string_view kFitBytesError =
    "{\"error\":\"expected ?bytes=N (a whole number of bytes from 0 to 18446744073709551615)\"}\n";

/// Compact JSON text of `v`, by the codec's rules: doubles in their shortest round-trip form,
/// always with a '.' or an exponent ("0.5", "64.0", not "5E-1" or "64"); strings as valid UTF-8.
/// Object keys keep their insertion order.
std::string to_compact_json(const boost::json::value& v);
void append_compact_json(std::string& out, const boost::json::value& v);

}  // namespace gpustream::transport
