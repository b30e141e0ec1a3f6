// gpustream/transport/protocol_event.hpp — the `event` wire message (docs/protocol.md,
// "event"): one GPU event (gpustream/events.hpp) on a WebSocket or TCP stream.
//
//   {"type":"event","sequence":7,"time_unix_ns":1764135600123456789,"probe":"nvidia",
//    "device":"GPU-8f6c...","kind":"xid","data":79}
//
// `sequence` is the server's event sequence (its own numbering, not the snapshots'): a client
// that sees a hole in it knows events were dropped for it (a slow client). `data` is left out
// when the event has none. Old clients ignore the message (an unknown `type`);
// RemoteSubscriber::on_event delivers it.
//
// Thread safety: reentrant.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/json/object.hpp>

#include "gpustream/events.hpp"

namespace gpustream::transport {

/// The event as a JSON object, without "type" (as /api/v1/events lists them).
boost::json::object event_to_json(const GpuEvent& e);
/// The wire message, "type":"event" first, with a trailing '\n'.
std::string event_message(const GpuEvent& e);
/// Decodes an `event` message (or an object of /api/v1/events). A `kind` this version does not
/// know reads as EventKind::other. Throws JsonError (gpustream/json.hpp) naming what is wrong.
GpuEvent parse_event_message(std::string_view text);
/// For a client reading a stream of server messages: the event when `text` is an `event`
/// message, nullopt when it is a message of another type. Throws JsonError for text that is not
/// a JSON object or an `event` message that does not decode.
std::optional<GpuEvent> parse_if_event_message(std::string_view text);

}  // namespace gpustream::transport
