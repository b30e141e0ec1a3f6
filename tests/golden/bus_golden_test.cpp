// Golden bytes of the fleet bus (gpustream/transport/fleet_codec.hpp): GSB1 full and delta
// messages, compressed and plain, the GSK1 node state, the JSON patch, and decoding them back.
//
// The encoder's epoch is random (a new stream per agent start): it is the one volatile field and
// is rewritten to kEpoch in the header before anything is compared or stored. Compressed
// messages are stored as hex (header line as text, then the body's bytes: golden.hpp to_hex).
#include <boost/json.hpp>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "golden/golden.hpp"
#include "golden/golden_fixtures.hpp"
#include "gpustream/json.hpp"
#include "gpustream/transport/fleet.hpp"
#include "gpustream/transport/fleet_codec.hpp"

namespace gpustream::golden {
namespace {

using transport::BusDecoder;
using transport::BusEncoder;
using transport::BusEncoderOptions;

constexpr std::string_view kEpoch = "1234567890";  // as the header writes it: hex

/// `message` with the header's epoch (6th field) replaced by kEpoch.
std::string fixed_epoch(const std::string& message) {
  const auto nl = message.find('\n');
  EXPECT_NE(nl, std::string::npos);
  std::size_t start = 0;
  for (int field = 0; field < 5; ++field) start = message.find(' ', start) + 1;
  const auto end = message.find(' ', start);
  EXPECT_LT(end, nl);
  return message.substr(0, start) + std::string(kEpoch) + message.substr(end);
}

/// The header line as text, then the body as hex.
std::string dump(const std::string& message) {
  const auto nl = message.find('\n');
  return message.substr(0, nl + 1) + to_hex(std::string_view(message).substr(nl + 1));
}

std::string undump(const std::string& text) {
  const auto nl = text.find('\n');
  return text.substr(0, nl + 1) + from_hex(std::string_view(text).substr(nl + 1));
}

GpuSnapshot with_node(GpuSnapshot s, const std::string& node) {
  s.node = node;
  return s;
}

/// The full_snapshot() a second later with a few changes: what a delta carries.
GpuSnapshot full_snapshot_later() {
  auto s = full_snapshot();
  s.sequence += 1;
  s.time_unix_ns += kSecond;
  s.monotonic_ns += kSecond;
  s.devices[0].metrics.set(Metric::power_watts, 305.5, Source::nvml);
  s.devices[0].processes.pop_back();
  s.devices[2].throttle_reasons = {"thermal"};
  s.errors.clear();
  return s;
}

struct Stream {
  std::string full;
  std::string delta;
  std::map<std::string, std::string> fulls;
};

Stream encode(bool compress) {
  BusEncoderOptions o;
  o.compress = compress;
  o.full_every = 10;
  BusEncoder enc("node-7", "gpustream/0.1.0", o);
  Stream out;
  const auto sim = simulated_snapshots();
  out.full = fixed_epoch(enc.encode(sim[0]));
  EXPECT_TRUE(enc.last_was_full());
  out.delta = fixed_epoch(enc.encode(sim[1]));
  EXPECT_FALSE(enc.last_was_full());
  enc.encode(full_snapshot());
  for (const auto& [probe, message] : enc.last_fulls()) out.fulls[probe] = fixed_epoch(message);
  return out;
}

TEST(GoldenBus, PlainMessages) {
  const auto s = encode(false);
  expect_golden("bus/plain.full.txt", s.full);
  expect_golden("bus/plain.delta.txt", s.delta);
  expect_golden("bus/plain.node_state.txt", transport::encode_node_state(s.fulls));
}

TEST(GoldenBus, CompressedMessages) {
  const auto s = encode(true);
  expect_golden("bus/deflate.full.hex", dump(s.full));
  expect_golden("bus/deflate.delta.hex", dump(s.delta));
  expect_golden("bus/deflate.node_state.hex", to_hex(transport::encode_node_state(s.fulls)));
}

TEST(GoldenBus, DeltaOfARichSnapshot) {
  BusEncoder enc("node-7", "gpustream/0.1.0", {.full_every = 10, .compress = false});
  const auto a = fixed_epoch(enc.encode(full_snapshot()));
  const auto b = fixed_epoch(enc.encode(full_snapshot_later()));
  expect_golden("bus/plain.rich_full.txt", a);
  expect_golden("bus/plain.rich_delta.txt", b);
  BusDecoder dec;
  EXPECT_EQ(dec.decode(golden_text("bus/plain.rich_full.txt"))->snapshot,
            with_node(full_snapshot(), "node-7"));
  EXPECT_EQ(dec.decode(golden_text("bus/plain.rich_delta.txt"))->snapshot,
            with_node(full_snapshot_later(), "node-7"));
}

TEST(GoldenBus, JsonDiff) {
  const auto sim = simulated_snapshots();
  const auto patch = transport::json_diff(to_json(sim[0]), to_json(sim[1]));
  ASSERT_TRUE(patch);
  const auto rich = transport::json_diff(to_json(full_snapshot()), to_json(full_snapshot_later()));
  ASSERT_TRUE(rich);
  expect_golden("bus/json_diff.jsonl",
                boost::json::serialize(*patch) + "\n" + boost::json::serialize(*rich) + "\n");
  auto doc = to_json(sim[0]);
  transport::json_patch(doc, parse_json(split_lines(golden_text("bus/json_diff.jsonl"))[0]));
  EXPECT_EQ(snapshot_from_json(doc), sim[1]);
}

TEST(GoldenBus, GoldenMessagesDecodeBack) {
  const auto sim = simulated_snapshots();
  for (const bool compressed : {false, true}) {
    SCOPED_TRACE(compressed ? "deflate" : "plain");
    const std::string full = compressed ? undump(golden_text("bus/deflate.full.hex"))
                                        : golden_text("bus/plain.full.txt");
    const std::string delta = compressed ? undump(golden_text("bus/deflate.delta.hex"))
                                         : golden_text("bus/plain.delta.txt");
    const auto h = transport::parse_bus_header(full);
    EXPECT_TRUE(h.full);
    EXPECT_EQ(h.compressed, compressed);
    EXPECT_EQ(h.node, "node-7");
    EXPECT_EQ(h.probe, "simulated");
    EXPECT_EQ(h.epoch, 0x1234567890u);
    EXPECT_EQ(h.seq, 1u);
    EXPECT_EQ(h.agent, "gpustream/0.1.0");
    BusDecoder dec;
    const auto f = dec.decode(full);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->snapshot, with_node(sim[0], "node-7"));
    const auto d = dec.decode(delta);
    ASSERT_TRUE(d);
    EXPECT_FALSE(d->header.full);
    EXPECT_EQ(d->header.base, 1u);
    EXPECT_EQ(d->snapshot, with_node(sim[1], "node-7"));

    const std::string state = compressed ? from_hex(golden_text("bus/deflate.node_state.hex"))
                                         : golden_text("bus/plain.node_state.txt");
    const auto messages = transport::decode_node_state(state);
    ASSERT_EQ(messages.size(), 2u);  // nvidia, simulated (the probe token's order)
    BusDecoder kv;
    EXPECT_EQ(kv.decode(messages[0])->snapshot, with_node(full_snapshot(), "node-7"));
    EXPECT_EQ(kv.decode(messages[1])->snapshot, with_node(sim[0], "node-7"));
    EXPECT_EQ(std::string(messages[1]), full);
  }
}

#ifdef GPUSTREAM_HAS_NATS
/// `text` with the value of each sample line of `families` replaced by "<bytes>": allocation
/// sizes, which a change of containers may move without changing what is exposed.
std::string bytes_normalised(const std::string& text, std::initializer_list<std::string> families) {
  std::string out;
  for (const auto& line : split_lines(text)) {
    std::string l(line);
    for (const auto& f : families)
      if (l.rfind(f + " ", 0) == 0) l = f + " <bytes>";
    out += l + "\n";
  }
  return out;
}

TEST(GoldenBus, FleetViewMetrics) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor(), 64);
  transport::FleetOptions o;
  o.kv_bucket.clear();
  transport::FleetView view(io.get_executor(), channel, o);
  view.on_message(golden_text("bus/plain.full.txt"), "gpustream.node-7.simulated");
  view.on_message(undump(golden_text("bus/deflate.delta.hex")), "gpustream.node-7.simulated");
  view.on_message("GSB1 garbage", "gpustream.node-7.simulated");
  io.poll();
  const auto text = view.metrics()();
  expect_golden(
      "prometheus/fleet_view.txt",
      bytes_normalised(text, {"gpustream_fleet_bus_state_bytes", "gpustream_fleet_latest_bytes",
                              "gpustream_fleet_decode_cpu_seconds_total"}));
}
#endif

}  // namespace
}  // namespace gpustream::golden
