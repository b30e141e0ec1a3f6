// A server's `event` message (docs/protocol.md, "event"; a TCP line or a WebSocket text frame) as
// a client decodes it: parse_event_message (also /api/v1/events objects, without "type") and
// parse_if_event_message (what RemoteSubscriber uses on every message of a type it does not
// know). Both may only throw JsonError and must agree; an event they accept must survive
// event_message (encoded and decoded again, it is the same event).
#include <optional>

#include "common.hpp"
#include "gpustream/json.hpp"
#include "gpustream/transport/protocol_event.hpp"

namespace transport = gpustream::transport;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = gpustream::fuzz::text_of(data, size);
  std::optional<gpustream::GpuEvent> plain;
  try {
    plain = transport::parse_event_message(text);
  } catch (const gpustream::JsonError&) {}
  std::optional<gpustream::GpuEvent> typed;
  bool typed_threw = false;
  try {
    typed = transport::parse_if_event_message(text);
  } catch (const gpustream::JsonError&) {
    typed_threw = true;
  }
  // An `event` message decodes the same either way; what parse_if_event_message rejects as a
  // bad event (or not JSON), parse_event_message rejects too.
  if (typed) FUZZ_CHECK(plain && *plain == *typed);
  if (typed_threw) FUZZ_CHECK(!plain);
  if (plain) {
    const auto message = transport::event_message(*plain);
    FUZZ_CHECK(!message.empty() && message.back() == '\n');
    const auto again = transport::parse_if_event_message(message);
    FUZZ_CHECK(again && *again == *plain);
  }
  return 0;
}
