// A client's protocol message (a TCP line or a WebSocket text frame). The parser may only throw
// ProtocolError, and a subscribe or a fit it accepts must survive encode_subscribe / encode_fit.
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
  if (m.kind == transport::ClientMessage::Kind::fit) {
    // A fit it accepts is within its bounds, and survives encode_fit.
    const auto& r = m.fit;
    FUZZ_CHECK(r.limit >= 1 && r.limit <= transport::kFitMaxLimit);
    FUZZ_CHECK(r.exclude.size() <= transport::kFitMaxExclude);
    std::size_t bytes = 0;
    for (const auto& id : r.exclude) bytes += id.size();
    FUZZ_CHECK(bytes <= transport::kFitMaxExcludeBytes);
    const auto again = transport::parse_client_message(transport::encode_fit(r));
    FUZZ_CHECK(again.fit == r);
  }
  return 0;
}
