// A client's protocol message (a TCP line or a WebSocket text frame). The parser may only throw
// ProtocolError, and a subscribe it accepts must survive encode_subscribe.
#include "common.hpp"
#include "gpustream/transport/protocol.hpp"

namespace transport = gpustream::transport;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  transport::ClientMessage m;
  try {
    m = transport::parse_client_message(gpustream::fuzz::text_of(data, size));
  } catch (const transport::ProtocolError& e) {
    FUZZ_CHECK(e.code() == transport::kErrBadRequest);
    return 0;
  }
  if (m.kind == transport::ClientMessage::Kind::subscribe) {
    const auto& r = m.subscribe;
    FUZZ_CHECK(r.probes.size() <= transport::kMaxSubscribeListSize);
    FUZZ_CHECK(r.devices.size() <= transport::kMaxSubscribeListSize);
    if (r.max_rate_hz) FUZZ_CHECK(*r.max_rate_hz > 0 && *r.max_rate_hz <= transport::kMaxRateHz);
    const auto again = transport::parse_client_message(transport::encode_subscribe(r));
    FUZZ_CHECK(again.subscribe == r);
  }
  return 0;
}
