// The fleet's bus decoder (transport/src/fleet/fleet_codec.cpp): bytes straight from NATS. The
// input is one bus message, or a node state ("GSK1 <n>\n" then "<bytes>\n<message>" each, as kept
// in the key-value bucket) whose messages go through one decoder in order, so that fulls, deltas
// against them, replays and evictions are reached. The decoder may only throw BusError; what it
// decodes names the header's node and survives a JSON round trip; what the encoder makes of it
// (a full, then a delta) another decoder takes back equal; its kept state stays within its
// count and byte bounds.
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
    if (auto d = dec.decode(message)) {
      FUZZ_CHECK(d->snapshot.node == d->header.node);
      const std::string again = gpustream::to_json_string(d->snapshot);
      FUZZ_CHECK(gpustream::snapshot_from_json_string(again) == d->snapshot);
      // The encoder's own output always decodes (this caught Beast's inflate read-ahead).
      gpustream::transport::BusEncoder enc(d->header.node, "fuzz", {.full_every = 2});
      BusDecoder back;
      for (int i = 0; i < 2; ++i) {
        const auto r = back.decode(enc.encode(d->snapshot));
        FUZZ_CHECK(r && r->snapshot == d->snapshot);
      }
    }
  } catch (const BusError&) {}
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
