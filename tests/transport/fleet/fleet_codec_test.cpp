// The fleet's bus encoding: round trip, deltas, a mid-stream joiner, hostile messages, node names.
#include "gpustream/transport/fleet_codec.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "gpustream/json.hpp"

namespace gpustream::transport::test {
namespace {

namespace json = boost::json;

GpuSnapshot sample(int tick, int gpus = 8) {
  GpuSnapshot s;
  s.probe = "simulated";
  s.sequence = static_cast<std::uint64_t>(tick) + 1;
  s.time_unix_ns = 1'700'000'000'000'000'000 + tick * 1'000'000'000LL;
  s.monotonic_ns = 5'000'000'000LL + tick * 1'000'000'000LL;
  s.sample_duration_ns = 12'345 + tick;
  for (int i = 0; i < gpus; ++i) {
    DeviceSample d;
    d.id = "sim-" + std::to_string(i);
    d.vendor = Vendor::simulated;
    d.index = i;
    d.name = "Simulated GPU";
    d.metrics.set(Metric::utilization_percent, (tick * 7 + i * 13) % 100, Source::simulated);
    d.metrics.set(Metric::memory_total_bytes, 80.0 * (1ULL << 30), Source::simulated);
    d.metrics.set(Metric::memory_used_bytes, (tick % 5 + i) * double(1ULL << 30),
                  Source::simulated);
    d.metrics.set(Metric::power_watts, 100.5 + tick + i, Source::simulated);
    d.metrics.set_absent(Metric::fan_rpm, Absence::unsupported, Source::simulated);
    derive_metrics(d);
    if (tick % 3 == 0) {
      ProcessSample p;
      p.pid = 1000 + i;
      p.name = "train.py";
      p.gpu_memory_bytes = 1ULL << 30;
      d.processes.push_back(p);
    }
    d.metrics.fill_absent(Absence::unsupported, Source::simulated);
    s.devices.push_back(std::move(d));
  }
  return s;
}

GpuSnapshot with_node(GpuSnapshot s, const std::string& node) {
  s.node = node;
  return s;
}

TEST(NodeName, AcceptsSubjectTokensOnly) {
  EXPECT_FALSE(node_name_error("gpu-node_07"));
  EXPECT_FALSE(node_name_error(std::string(64, 'a')));
  for (const std::string& bad :
       std::vector<std::string>{"", "a.b", "a*", ">", "a b", "n\n", std::string(65, 'a'), "é"})
    EXPECT_TRUE(node_name_error(bad)) << bad;
  EXPECT_FALSE(node_name_error(default_node_name()));
  EXPECT_THROW(BusEncoder("a.b"), std::invalid_argument);
}

TEST(JsonDiff, PatchTurnsOneDocumentIntoTheOther) {
  const json::value a = json::parse(R"({"x":1,"y":[1,2,{"z":3}],"gone":true,"s":"t"})");
  const json::value b = json::parse(R"({"x":2,"y":[1,2,{"z":4}],"s":"t","new":[5]})");
  const auto p = json_diff(a, b);
  ASSERT_TRUE(p);
  json::value c = a;
  json_patch(c, *p);
  EXPECT_EQ(c, b);
  EXPECT_FALSE(json_diff(b, b));
  // Arrays that change length are replaced whole.
  const json::value d = json::parse(R"({"x":2,"y":[1],"s":"t","new":[5]})");
  json::value e = b;
  json_patch(e, *json_diff(b, d));
  EXPECT_EQ(e, d);
}

TEST(BusCodec, RoundTripEveryMessageFullAndDelta) {
  BusEncoder enc("node-1", "gpustream/0.1.0", {.full_every = 4});
  BusDecoder dec;
  int fulls = 0;
  for (int t = 0; t < 12; ++t) {
    const auto s = sample(t);
    const std::string msg = enc.encode(s);
    fulls += enc.last_was_full() ? 1 : 0;
    const auto h = parse_bus_header(msg);
    EXPECT_EQ(h.node, "node-1");
    EXPECT_EQ(h.probe, "simulated");
    EXPECT_EQ(h.agent, "gpustream/0.1.0");
    EXPECT_EQ(h.full, t % 4 == 0) << t;
    const auto d = dec.decode(msg);
    ASSERT_TRUE(d) << t;
    EXPECT_EQ(d->snapshot, with_node(s, "node-1")) << t;
  }
  EXPECT_EQ(fulls, 3);
  EXPECT_EQ(enc.last_fulls().size(), 1U);
}

TEST(BusCodec, UncompressedFormRoundTrips) {
  BusEncoder enc("n", {}, {.full_every = 2, .compress = false});
  BusDecoder dec;
  for (int t = 0; t < 4; ++t) {
    const auto s = sample(t, 2);
    const auto d = dec.decode(enc.encode(s));
    ASSERT_TRUE(d);
    EXPECT_EQ(d->snapshot, with_node(s, "n"));
  }
}

TEST(BusCodec, DeltasAreSmallAndSmallerThanTheSnapshotJson) {
  BusEncoder enc("node-1", {}, {.full_every = 10});
  std::size_t full_bytes = 0;
  std::size_t delta_bytes = 0;
  std::size_t json_bytes = 0;
  for (int t = 0; t < 10; ++t) {
    const auto s = sample(t);
    json_bytes += to_json_string(s).size();
    const auto n = enc.encode(s).size();
    (enc.last_was_full() ? full_bytes : delta_bytes) += n;
  }
  EXPECT_LT(full_bytes + delta_bytes, json_bytes / 4);
}

TEST(BusCodec, MidStreamJoinerWaitsForAFullThenHasTheWholeState) {
  BusEncoder enc("node-1", {}, {.full_every = 5});
  std::vector<std::string> msgs;
  std::vector<GpuSnapshot> snaps;
  for (int t = 0; t < 12; ++t) {
    snaps.push_back(sample(t));
    msgs.push_back(enc.encode(snaps.back()));
  }
  BusDecoder late;  // joins at message 2: deltas until the full at 5 cannot be applied
  for (int t = 2; t < 5; ++t) EXPECT_FALSE(late.decode(msgs[t])) << t;
  EXPECT_EQ(late.waiting(), 3U);
  for (int t = 5; t < 12; ++t) {
    const auto d = late.decode(msgs[t]);
    ASSERT_TRUE(d) << t;
    EXPECT_EQ(d->snapshot, with_node(snaps[t], "node-1")) << t;
  }
  // A joiner that starts from the node's last full (the key-value bucket) applies the next
  // deltas at once; a lost delta costs nothing (deltas are against the full).
  BusDecoder kv;
  ASSERT_TRUE(kv.decode(enc.last_fulls().at("simulated")));
  const auto s12 = sample(12);
  (void)enc.encode(s12);
  const auto s13 = sample(13);
  const auto d13 = kv.decode(enc.encode(s13));
  ASSERT_TRUE(d13);
  EXPECT_EQ(d13->snapshot, with_node(s13, "node-1"));
  // Replays are ignored, not applied twice.
  EXPECT_FALSE(kv.decode(enc.encode(sample(14)).substr(0)) == std::nullopt);
  EXPECT_FALSE(kv.decode(msgs[11]));
}

TEST(BusCodec, AnAgentRestartStartsANewStream) {
  BusDecoder dec;
  BusEncoder first("n");
  ASSERT_TRUE(dec.decode(first.encode(sample(0, 1))));
  ASSERT_TRUE(dec.decode(first.encode(sample(1, 1))));
  BusEncoder second("n");  // same node, new epoch, seq back at 1
  const auto d = dec.decode(second.encode(sample(7, 1)));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->snapshot, with_node(sample(7, 1), "n"));
  EXPECT_EQ(dec.streams(), 1U);
  dec.forget("n");
  EXPECT_EQ(dec.streams(), 0U);
}

TEST(BusCodec, GarbageIsRejectedWithABoundedCost) {
  BusLimits limits;
  limits.max_message_bytes = 4096;
  limits.max_body_bytes = 64 * 1024;
  BusDecoder dec(limits);
  BusEncoder enc("n", {}, {.full_every = 3});
  const std::string good = enc.encode(sample(0, 2));
  const std::vector<std::string> bad = {
      "",
      "hello",
      std::string(5000, 'x'),  // over max_message_bytes
      "GSB1 f z n simulated 1 1 1 10 a\nnot deflate",
      "GSB1 f p n simulated 1 1 1 4 a\n{}",            // declared size differs
      "GSB1 f p n simulated 1 1 1 2 a\n{}",            // not a snapshot
      "GSB1 f p n.x simulated 1 1 1 2 a\n{}",          // bad node
      "GSB1 d p n simulated 1 1 1 2 a\n{}",            // delta base not before seq
      "GSB1 f p n simulated 1 1 1 99999999999 a\n{}",  // body over max_body_bytes
      "GSB1 f p n simulated zz 1 1 2 a\n{}",           // bad epoch
      "GSB1 x p n simulated 1 1 1 2 a\n{}",            // bad kind
      "GSB1 f p n simulated 1 1 1 2 a b\n{}",          // extra field
      good.substr(0, good.size() / 2),                 // truncated deflate stream
      good + "trailing",                               // bytes after the deflate stream
  };
  for (const auto& m : bad) EXPECT_THROW((void)dec.decode(m), BusError) << m.substr(0, 60);
  // A bomb: a body that inflates far past the limit is refused from its header, and a header
  // that lies about the size stops inflating at the declared size.
  std::string zeros(1 << 20, '0');
  BusEncoder big("n", {}, {.full_every = 1});
  GpuSnapshot s = sample(0, 1);
  s.errors.push_back({"x", zeros, ""});
  const std::string bomb = big.encode(s);
  EXPECT_LT(bomb.size(), limits.max_message_bytes);
  EXPECT_THROW((void)dec.decode(bomb), BusError);
  std::string liar = bomb;
  const auto h = parse_bus_header(bomb, BusLimits{});
  liar.replace(liar.find(" " + std::to_string(h.body_bytes) + " "),
               std::to_string(h.body_bytes).size() + 2, " 1000 ");
  EXPECT_THROW((void)dec.decode(liar), BusError);
  // A delta whose patch does not fit the full.
  BusEncoder e2("m", {}, {.full_every = 10, .compress = false});
  ASSERT_TRUE(dec.decode(e2.encode(sample(0, 1))));
  std::string d = e2.encode(sample(1, 1));
  const auto hd = parse_bus_header(d);
  const std::string patch = R"({"devices":{"5":[1]}})";
  d = d.substr(0, d.find('\n'));
  d.replace(d.rfind(" " + std::to_string(hd.body_bytes) + " "),
            std::to_string(hd.body_bytes).size() + 2, " " + std::to_string(patch.size()) + " ");
  d += "\n" + patch;
  EXPECT_THROW((void)dec.decode(d), BusError);
  // The decoder still works after all of that.
  EXPECT_TRUE(dec.decode(good));
}

TEST(BusCodec, StreamsAreBounded) {
  BusLimits limits;
  limits.max_streams = 2;
  BusDecoder dec(limits);
  for (const char* n : {"a", "b"}) ASSERT_TRUE(dec.decode(BusEncoder(n).encode(sample(0, 1))));
  EXPECT_THROW((void)dec.decode(BusEncoder("c").encode(sample(0, 1))), BusError);
  dec.forget("a");
  EXPECT_TRUE(dec.decode(BusEncoder("c").encode(sample(0, 1))));
}

}  // namespace
}  // namespace gpustream::transport::test

namespace gpustream::transport::test {
namespace {

TEST(NodeState, RoundTripAndGarbage) {
  BusEncoder enc("n");
  (void)enc.encode(sample(0, 2));
  GpuSnapshot host = sample(0, 0);
  host.probe = "host";
  (void)enc.encode(host);
  const std::string state = encode_node_state(enc.last_fulls());
  const auto msgs = decode_node_state(state);
  ASSERT_EQ(msgs.size(), 2U);
  BusDecoder dec;
  for (const auto m : msgs) EXPECT_TRUE(dec.decode(m));
  for (const std::string& bad : std::vector<std::string>{
           "", "GSK1 1\n", "GSK1 1\n99\nabc", "GSK1 99\n", "GSK1 0\nx", "GSK2 0\n", "GSK1 1\n-1\n"})
    EXPECT_THROW((void)decode_node_state(bad), BusError) << bad;
  BusLimits small;
  small.max_message_bytes = 10;
  EXPECT_THROW((void)decode_node_state(state, small), BusError);
}

}  // namespace
}  // namespace gpustream::transport::test

namespace gpustream::transport::test {
namespace {

// Found by integration.nats_fleet: one message in a few failed with "bad deflate body: need
// buffers" when the inflated body filled the output buffer exactly. Many sizes of full messages,
// each decoded.
TEST(BusCodec, EveryBodySizeInflates) {
  BusEncoder enc("node-1", "gpustream/0.1.0", {.full_every = 1});
  BusDecoder dec;
  for (int t = 0; t < 400; ++t) {
    auto s = sample(t, 1 + t % 8);
    s.devices[0].name += std::string(static_cast<std::size_t>(t % 97), 'x');
    const std::string msg = enc.encode(s);
    const auto d = dec.decode(msg);
    ASSERT_TRUE(d) << t;
    EXPECT_EQ(d->snapshot, with_node(s, "node-1")) << t;
  }
}

}  // namespace
}  // namespace gpustream::transport::test

namespace gpustream::transport::test {
namespace {

/// A snapshot whose JSON is just under `body_bytes`: the largest a stream may send.
GpuSnapshot at_body_size(std::size_t body_bytes) {
  GpuSnapshot s = sample(0, 8);
  s.node = "n";
  std::string json;
  append_json(json, s);
  s.errors.push_back({"filler", std::string(body_bytes - json.size() - 1024, '0'), ""});
  return s;
}

// The worst input for the decoder's memory: many streams, each a full message at the maximum
// body size (8 MiB inflated from a 1 MiB message). Without the byte bound 24 of them held about
// 24 × 8 MiB; with it the kept state never passes the bound, the stalest stream goes first and
// an evicted stream rebuilds from its next full message.
TEST(BusCodec, StateBytesAreBoundedUnderManyStreamsOfTheMaximumSize) {
  BusLimits limits;
  limits.max_state_bytes = 40u << 20;
  BusDecoder dec(limits);
  const GpuSnapshot big = at_body_size(limits.max_body_bytes);
  std::vector<BusEncoder> encoders;
  for (int i = 0; i < 24; ++i)
    encoders.emplace_back("node-" + std::to_string(i), "a", BusEncoderOptions{.full_every = 2});
  for (std::size_t i = 0; i < encoders.size(); ++i) {
    const std::string& msg = encoders[i].encode(big);
    ASSERT_LE(msg.size(), limits.max_message_bytes);
    ASSERT_GT(parse_bus_header(msg).body_bytes, limits.max_body_bytes - 2048);
    ASSERT_TRUE(dec.decode(msg)) << i;
    ASSERT_LE(dec.state_bytes(), limits.max_state_bytes) << i;
    // What is counted is what the kept documents really take: at least their JSON.
    if (i == 0) {
      EXPECT_GT(dec.state_bytes(), limits.max_body_bytes - 2048);
    }
  }
  EXPECT_GE(dec.streams(), 3u);
  EXPECT_LT(dec.streams(), 6u);
  EXPECT_EQ(dec.evicted(), encoders.size() - dec.streams());
  // The newest stream is kept: its delta applies.
  GpuSnapshot next = big;
  next.devices[0].name = "changed";
  const auto d = dec.decode(encoders.back().encode(next));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->snapshot, with_node(next, "node-23"));
  // The first was evicted: its delta waits, its next full rebuilds it, then deltas apply.
  const auto waiting = dec.waiting();
  EXPECT_FALSE(dec.decode(encoders[0].encode(next)));
  EXPECT_EQ(dec.waiting(), waiting + 1);
  const std::string full = encoders[0].encode(next);
  ASSERT_TRUE(encoders[0].last_was_full());
  ASSERT_TRUE(dec.decode(full));
  GpuSnapshot third = next;
  third.devices[1].name = "third";
  const auto r = dec.decode(encoders[0].encode(third));
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->header.full);
  EXPECT_EQ(r->snapshot, with_node(third, "node-0"));
  EXPECT_LE(dec.state_bytes(), limits.max_state_bytes);
  // Forgetting a node gives its bytes back.
  const auto before = dec.state_bytes();
  dec.forget("node-0");
  EXPECT_LT(dec.state_bytes(), before);
}

TEST(BusCodec, AFullBiggerThanTheWholeStateIsDecodedButNotKept) {
  BusLimits limits;
  limits.max_state_bytes = 4u << 20;
  BusDecoder dec(limits);
  ASSERT_TRUE(dec.decode(BusEncoder("small").encode(sample(0, 1))));
  BusEncoder enc("big");
  const auto d = dec.decode(enc.encode(at_body_size(limits.max_body_bytes)));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->snapshot.errors.size(), 1u);
  EXPECT_EQ(dec.streams(), 1u);  // "small" is not evicted for a stream that cannot fit anyway
  EXPECT_EQ(dec.evicted(), 1u);
  EXPECT_LE(dec.state_bytes(), limits.max_state_bytes);
  EXPECT_FALSE(dec.decode(enc.encode(at_body_size(limits.max_body_bytes))));  // a delta: waits
}

}  // namespace
}  // namespace gpustream::transport::test

namespace gpustream::transport::test {
namespace {

std::string read_source(const std::string& relative) {
  std::ifstream f(std::string(GPUSTREAM_SOURCE_DIR) + "/" + relative, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// The seeds of the bus_decoder fuzz target (fuzz/corpus/bus_decoder/), made by the encoder from
/// the real snapshots of the snapshot_json corpus: single messages (compressed and plain) and
/// node states carrying a full then deltas against it.
std::map<std::string, std::string> make_bus_seeds() {
  std::map<std::string, std::string> out;
  const GpuSnapshot a100 =
      snapshot_from_json_string(read_source("fuzz/corpus/snapshot_json/protocol_example.json"));
  const GpuSnapshot host =
      snapshot_from_json_string(read_source("fuzz/corpus/snapshot_json/minimal_host.json"));
  auto later = [](GpuSnapshot s, int t) {
    s.time_unix_ns += t * 1'000'000'000LL;
    for (auto& d : s.devices) {
      d.metrics.set(Metric::utilization_percent, 10.0 * t, Source::nvml);
      if (t == 2) d.processes.clear();
    }
    return s;
  };
  for (const bool compress : {true, false}) {
    const std::string form = compress ? "z" : "p";
    BusEncoder one("node-1", "gpustream/0.1.0", {.full_every = 1, .compress = compress});
    out["full_a100_" + form + ".gsb"] = one.encode(a100);
    out["full_host_" + form + ".gsb"] = one.encode(host);
    BusEncoder seq("node-2", "gpustream/0.1.0", {.full_every = 3, .compress = compress});
    std::map<std::string, std::string> messages;  // a node state of 4 messages of one stream
    std::string state = "GSK1 4\n";
    for (int t = 0; t < 4; ++t) {
      const std::string& m = seq.encode(later(a100, t));
      state += std::to_string(m.size()) + "\n" + m;
    }
    out["stream_a100_" + form + ".gsk"] = state;
    (void)seq.encode(host);
    out["state_" + form + ".gsk"] = encode_node_state(seq.last_fulls());
  }
  return out;
}

/// The regression input of the bus_decoder fuzz target for ADeltaWhoseEndBeastReadsPastInflates:
/// a node state holding a full then the delta whose stream end Beast reads past.
std::string lookahead_regression() {
  BusEncoder enc("node-1", "a", {.full_every = 2});
  GpuSnapshot s = sample(0, 1);
  const std::string full = enc.encode(s);
  s.devices[0].name = "changed";
  const std::string delta = enc.encode(s);
  return "GSK1 2\n" + std::to_string(full.size()) + "\n" + full + std::to_string(delta.size()) +
         "\n" + delta;
}

// The committed seeds are what the encoder makes now (up to each encoder's random epoch):
// every one decodes. GPUSTREAM_WRITE_BUS_SEEDS=1 rewrites them (after an encoding change).
TEST(BusCodec, FuzzSeedsAreDecodableEncoderOutput) {
  const std::string dir = std::string(GPUSTREAM_SOURCE_DIR) + "/fuzz/corpus/bus_decoder";
  const auto seeds = make_bus_seeds();
  const std::string regression = "fuzz/regressions/bus_decoder/lookahead_delta.gsk";
  if (std::getenv("GPUSTREAM_WRITE_BUS_SEEDS")) {
    std::filesystem::create_directories(dir);
    for (const auto& [name, bytes] : seeds)
      std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    std::filesystem::create_directories(std::string(GPUSTREAM_SOURCE_DIR) +
                                        "/fuzz/regressions/bus_decoder");
    std::ofstream(std::string(GPUSTREAM_SOURCE_DIR) + "/" + regression, std::ios::binary)
        << lookahead_regression();
  }
  {
    BusDecoder dec;
    const std::string state = read_source(regression);
    const auto msgs = decode_node_state(state);
    ASSERT_EQ(msgs.size(), 2u) << regression;
    EXPECT_TRUE(dec.decode(msgs[0]));
    EXPECT_TRUE(dec.decode(msgs[1])) << "the delta of " << regression;
  }
  for (const auto& seed_entry : seeds) {
    const std::string& name = seed_entry.first;
    const std::string seed = read_source("fuzz/corpus/bus_decoder/" + name);
    ASSERT_FALSE(seed.empty()) << name << " is missing: run with GPUSTREAM_WRITE_BUS_SEEDS=1";
    BusDecoder dec;
    std::size_t decoded = 0;
    if (seed.starts_with("GSK1 ")) {
      for (const auto m : decode_node_state(seed)) decoded += dec.decode(m) ? 1 : 0;
    } else {
      decoded += dec.decode(seed) ? 1 : 0;
    }
    EXPECT_EQ(decoded, name.starts_with("stream_")  ? 4u
                       : name.starts_with("state_") ? 2u
                                                    : 1u)
        << name;
  }
}

}  // namespace
}  // namespace gpustream::transport::test

namespace gpustream::transport::test {
namespace {

// Full messages of bodies from 1 MiB to the 8 MiB limit, each decoded whole.
TEST(BusCodec, LargeBodiesInflate) {
  BusEncoder enc("node-1", "gpustream/0.1.0", {.full_every = 1});
  BusDecoder dec;
  for (std::size_t mib = 1; mib <= 8; ++mib) {
    for (const std::size_t less : {std::size_t{1024}, std::size_t{4096} + mib * 7}) {
      const GpuSnapshot s = at_body_size(mib * (std::size_t{1} << 20) - less);
      const auto d = dec.decode(enc.encode(s));
      ASSERT_TRUE(d) << mib;
      EXPECT_EQ(d->snapshot, with_node(s, "node-1")) << mib << " MiB";
    }
  }
}

}  // namespace
}  // namespace gpustream::transport::test

namespace gpustream::transport::test {
namespace {

// Found by BusCodec.StateBytesAreBounded…: this delta's 37-byte deflate stream is valid (zlib
// inflates it whole) but Beast's inflate_stream reads one byte past its end before it reports
// the end, so the decoder refused it ("need buffers"). The bytes are deterministic (level 6);
// the same stream is fuzz/regressions/bus_decoder/lookahead_delta.gsk.
TEST(BusCodec, ADeltaWhoseEndBeastReadsPastInflates) {
  BusEncoder enc("node-1", "a", {.full_every = 2});
  BusDecoder dec;
  GpuSnapshot s = sample(0, 1);
  ASSERT_TRUE(dec.decode(enc.encode(s)));
  s.devices[0].name = "changed";
  const std::string delta = enc.encode(s);
  ASSERT_FALSE(enc.last_was_full());
  const std::string body = delta.substr(delta.find('\n') + 1);
  ASSERT_EQ(body.size(), 37u);
  EXPECT_EQ(static_cast<unsigned char>(body.back()), 0u);
  const auto d = dec.decode(delta);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->snapshot, with_node(s, "node-1"));
  // Not an opening for trailing bytes: one byte more after the stream is still refused.
  EXPECT_THROW((void)BusDecoder().decode(delta + "x"), BusError);
}

}  // namespace
}  // namespace gpustream::transport::test
