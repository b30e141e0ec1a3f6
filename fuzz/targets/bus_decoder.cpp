// The fleet's bus decoder (transport/src/fleet/fleet_codec.cpp): bytes straight from NATS. The
// input is one bus message, or a node state ("GSK1 <n>\n" then "<bytes>\n<message>" each, as kept
// in the key-value bucket) whose messages go through one decoder in order, so that fulls, deltas
// against them, replays and evictions are reached. The decoder may only throw BusError; what it
// decodes names the header's node and survives a JSON round trip; what the encoder makes of it
// (a full, then a delta) another decoder takes back equal; its kept state stays within its
// count and byte bounds; a refusal is counted once by its reason; what a message will cost is
// known from its header.
#include <optional>

#include "common.hpp"
#include "gpustream/json.hpp"
#include "gpustream/transport/fleet_codec.hpp"

namespace {

using gpustream::transport::BusDecoder;
using gpustream::transport::BusError;
using gpustream::transport::BusLimits;

BusLimits limits() {
  BusLimits l;
  l.max_message_bytes = 256 * 1024;
  l.max_body_bytes = 1024 * 1024;
  l.max_streams = 4;
  l.max_state_bytes = 96 * 1024;  // small enough that a few seeds evict
  return l;
}

void decode_one(BusDecoder& dec, std::string_view message, const BusLimits& l) {
  try {
    // What a message costs is known from its header, and is at least its body.
    const auto h = gpustream::transport::parse_bus_header(message, l);
    FUZZ_CHECK(dec.cost_bytes(h) >= h.body_bytes);
    FUZZ_CHECK(h.body_bytes <= l.max_body_bytes);
  } catch (const BusError&) {}
  const auto refused = dec.counters();
  std::optional<BusDecoder::Decoded> d;
  try {
    d = dec.decode(message);
  } catch (const BusError&) {
    // Each refusal is counted once, by its reason.
    const auto& c = dec.counters();
    FUZZ_CHECK(c.malformed + c.too_large + c.inflation + c.too_many_devices + c.too_many_streams ==
               refused.malformed + refused.too_large + refused.inflation +
                   refused.too_many_devices + refused.too_many_streams + 1);
  }
  if (d) {
    FUZZ_CHECK(d->snapshot.node == d->header.node);
    const std::string again = gpustream::to_json_string(d->snapshot);
    FUZZ_CHECK(gpustream::snapshot_from_json_string(again) == d->snapshot);
    // The encoder's own output always decodes (this caught Beast's inflate read-ahead), within
    // the inflation ratio (a body that deflates past it goes plain), unless too big to send.
    gpustream::transport::BusEncoder enc(d->header.node, "fuzz", {.full_every = 2});
    BusDecoder back;
    for (int i = 0; i < 2; ++i) {
      try {
        const auto r = back.decode(enc.encode(d->snapshot));
        FUZZ_CHECK(r && r->snapshot == d->snapshot);
      } catch (const BusError& e) {
        FUZZ_CHECK(e.reason() == gpustream::transport::BusRefusal::too_large);
      }
    }
  }
  FUZZ_CHECK(dec.streams() <= l.max_streams);
  FUZZ_CHECK(dec.state_bytes() <= l.max_state_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = gpustream::fuzz::text_of(data, size);
  const BusLimits l = limits();
  BusDecoder dec(l);
  if (input.substr(0, 5) == "GSK1 ") {
    std::vector<std::string_view> messages;
    try {
      messages = gpustream::transport::decode_node_state(input, l);
    } catch (const BusError&) {
      return 0;
    }
    for (const auto m : messages) decode_one(dec, m, l);
    for (const auto m : messages) decode_one(dec, m, l);  // again: replays are refused quietly
    return 0;
  }
  decode_one(dec, input, l);
  return 0;
}
