// The fleet's bus encoding: round trip, deltas, a mid-stream joiner, hostile messages, node names.
#include "gpustream/transport/fleet_codec.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <boost/beast/zlib/deflate_stream.hpp>
#include <boost/beast/zlib/error.hpp>
#include <boost/beast/zlib/inflate_stream.hpp>
#include <boost/json.hpp>

#include "gpustream/detail/json_patch.hpp"
#include "gpustream/json.hpp"
#include "model/sample_snapshots.hpp"
#include "support/beast_deflate.hpp"

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

/// Raw deflate of `in` by Boost.Beast's zlib port at `level`: what the bus encoder wrote before
/// it moved to libdeflate (session 15), and the reference deflater of the wire-format tests.
std::string beast_deflate(std::string_view in, int level = 6) {
  boost::system::error_code ec;
  std::string out = ::gpustream::test::beast_deflate(in, level, ec);
  EXPECT_TRUE(!ec || ec == boost::beast::zlib::error::end_of_stream) << ec.message();
  return out;
}

/// `in` inflated by Boost.Beast's inflate_stream (the reference inflater: what decoders before
/// session 15 ran), or nullopt when it is not exactly one raw deflate stream. The input is
/// padded by one byte and the output has room to spare: Beast may read a byte past a stream's
/// end and stop early on an exactly full buffer (fleet_codec.cpp before session 15 said why).
std::optional<std::string> beast_inflate(std::string_view in) {
  namespace zlib = boost::beast::zlib;
  zlib::inflate_stream is;
  std::string padded(in);
  padded += '\0';
  std::string out(64 * in.size() + 1024, '\0');
  zlib::z_params zs;
  zs.next_in = padded.data();
  zs.avail_in = padded.size();
  zs.next_out = out.data();
  zs.avail_out = out.size();
  boost::system::error_code ec;
  is.write(zs, zlib::Flush::finish, ec);
  const std::size_t read_ahead = static_cast<std::size_t>(zs.data_type & 63) / 8;
  if (ec != zlib::error::end_of_stream || zs.total_in - read_ahead != in.size())
    return std::nullopt;
  out.resize(zs.total_out);
  return out;
}

/// `m` (a message) with its body replaced by `body`, compressed (`z`) or plain; the header's
/// other fields kept.
std::string rebodied(const std::string& m, bool z, std::string_view body) {
  std::string out = m.substr(0, m.find('\n') + 1);
  out.replace(out.find(z ? " p " : " z "), 3, z ? " z " : " p ");
  out += body;
  return out;
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

TEST(BusCodec, AStreamsBaseStaysBoundedOverManyDeltas) {
  // A kept base lives in an arena of its own, whose patches are undone but not freed one by one
  // (issue #32): a publisher that never sends another full (here 400 deltas whose device names,
  // 2 KB each, change every time, so each patch copies 16 KB of strings into the base) must not
  // grow it past about twice its size after the full; every delta still decodes to its snapshot.
  const auto renamed = [](int t) {
    auto s = with_node(sample(t), "node-1");
    for (auto& d : s.devices) d.name = std::string(2048, 'n') + std::to_string(t);
    return s;
  };
  BusEncoder enc("node-1", "gpustream/0.1.0", {.full_every = 1000});
  BusDecoder dec;
  ASSERT_TRUE(dec.decode(enc.encode(renamed(0))));
  const std::size_t after_full = dec.state_bytes();
  ASSERT_GT(after_full, 0U);
  std::size_t most = 0;
  for (int t = 1; t <= 400; ++t) {
    const auto s = renamed(t);
    const auto d = dec.decode(enc.encode(s));
    ASSERT_FALSE(enc.last_was_full());
    ASSERT_TRUE(d) << t;
    EXPECT_EQ(d->snapshot, s) << t;
    most = std::max(most, dec.state_bytes());
  }
  EXPECT_LE(most, 3 * after_full);
  EXPECT_EQ(dec.streams(), 1U);
  EXPECT_EQ(dec.evicted(), 0U);
}

TEST(BusCodec, PowerSamplesTravelOnTheProducersClock) {
  // The driver's power readings arrive as the node took them, full and delta alike: their
  // monotonic_ns keep their offset from the snapshot's (the node's own clock), and a list that
  // grows, shrinks or empties between snapshots is carried whole.
  BusEncoder enc("node-1", {}, {.full_every = 3});
  BusDecoder dec;
  for (int t = 0; t < 7; ++t) {
    auto s = sample(t, 2);
    for (int k = 0; k < (t * 5) % 7; ++k)
      s.devices[1].power_samples.push_back(
          {s.monotonic_ns - 900'000'000 + k * 20'000'017LL, 250.0 + 0.125 * k + t});
    const auto d = dec.decode(enc.encode(s));
    ASSERT_TRUE(d) << t;
    EXPECT_EQ(d->snapshot, with_node(s, "node-1")) << t;
    const auto& got = d->snapshot.devices[1].power_samples;
    for (std::size_t k = 0; k < got.size(); ++k)
      EXPECT_EQ(got[k].monotonic_ns - d->snapshot.monotonic_ns,
                -900'000'000 + static_cast<std::int64_t>(k) * 20'000'017LL);
    EXPECT_TRUE(d->snapshot.devices[0].power_samples.empty());
  }
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
  // that lies about the size stops inflating at the declared size. (Our encoder would send it
  // plain, being over the inflation ratio: this one is told not to care.)
  std::string zeros(1 << 20, '0');
  BusEncoder big("n", {}, {.full_every = 1, .max_inflation_ratio = 1'000'000});
  GpuSnapshot s = sample(0, 1);
  s.errors.push_back({"x", zeros, ""});
  const std::string bomb = big.encode(s);
  EXPECT_LT(bomb.size(), limits.max_message_bytes);
  EXPECT_THROW((void)dec.decode(bomb), BusError);
  std::string liar = bomb;
  EXPECT_THROW((void)parse_bus_header(bomb, BusLimits{}), BusError);  // over 64 × its bytes
  BusLimits loose;
  loose.max_inflation_ratio = 1'000'000;
  const auto h = parse_bus_header(bomb, loose);
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

/// A snapshot whose JSON is just under `body_bytes`: the largest a stream may send. Its filler
/// (runs of 16 to 79 of a pseudo-random digit) deflates about 20 to 1: under the inflation ratio,
/// so that 8 MiB come in a message of about 1/2 MiB.
GpuSnapshot at_body_size(std::size_t body_bytes) {
  GpuSnapshot s = sample(0, 8);
  s.node = "n";
  std::string json;
  append_json(json, s);
  std::string filler(body_bytes - json.size() - 1024, '0');
  std::uint32_t x = 2463534242u;
  for (std::size_t i = 0; i < filler.size();) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    const std::size_t run = std::min<std::size_t>(16 + x % 64, filler.size() - i);
    std::fill_n(filler.begin() + static_cast<std::ptrdiff_t>(i), run,
                static_cast<char>('0' + (x >> 8) % 10));
    i += run;
  }
  s.errors.push_back({"filler", std::move(filler), ""});
  return s;
}

// The worst input for the decoder's memory: many streams, each a full message at the maximum
// body size. Without the byte bound 24 of them held 24 maximum bodies; with it the kept state
// never passes the bound, the stalest stream goes first and an evicted stream rebuilds from its
// next full message. The limits are the defaults divided by 4, in the same proportions (a body
// 8 × a message, the state 5 bodies): the bound is relative to them, and 24 streams of the
// default 8 MiB took 40 s under ASan (120 s on a loaded machine).
TEST(BusCodec, StateBytesAreBoundedUnderManyStreamsOfTheMaximumSize) {
  BusLimits limits;
  limits.max_message_bytes = 256u << 10;
  limits.max_body_bytes = 2u << 20;
  limits.max_state_bytes = 10u << 20;
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
    // What is counted is what the kept bases really take: at least their snapshots (a
    // document as this release writes it is kept as its snapshot).
    if (i == 0) {
      EXPECT_GE(dec.state_bytes(), approx_bytes(with_node(big, "node-0")));
      EXPECT_GT(dec.state_bytes(), limits.max_body_bytes - 32 * 1024);
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
  BusEncoder enc("node-1", "a", {.full_every = 2, .compress = false});
  GpuSnapshot s = sample(0, 1);
  const std::string plain_full = enc.encode(s);
  s.devices[0].name = "changed";
  const std::string plain_delta = enc.encode(s);
  const auto body_of = [](const std::string& m) { return m.substr(m.find('\n') + 1); };
  const std::string full = rebodied(plain_full, true, beast_deflate(body_of(plain_full)));
  const std::string delta = rebodied(plain_delta, true, beast_deflate(body_of(plain_delta)));
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

// ---- the wire format across deflaters (session 15: the bus moved from Beast's zlib port to
// libdeflate): a body is plain RFC 1951, whoever wrote it ----

/// 60 snapshots of 1 to 8 GPUs whose bodies take many sizes, then one of about 1 MiB.
std::vector<GpuSnapshot> wire_snapshots() {
  std::vector<GpuSnapshot> out;
  for (int t = 0; t < 60; ++t) {
    auto s = sample(t, 1 + t % 8);
    s.devices[0].name += std::string(static_cast<std::size_t>(t * 7 % 97), 'x');
    out.push_back(std::move(s));
  }
  out.push_back(at_body_size((std::size_t{1} << 20) - 1024));
  return out;
}

// What this encoder deflates, at every level, a reference inflater (Beast's, what decoders
// before session 15 ran) inflates to exactly the plain body: older views read newer agents.
TEST(BusWire, TheEncodersBodiesInflateWithBeastsInflater) {
  const auto snaps = wire_snapshots();
  for (int level = 1; level <= 9; ++level) {
    BusEncoder z("node-1", "a", {.full_every = 5, .level = level});
    BusEncoder p("node-1", "a", {.full_every = 5, .compress = false});
    std::size_t compressed = 0;
    for (std::size_t i = 0; i < snaps.size(); ++i) {
      const std::string mz = z.encode(snaps[i]);
      const std::string mp = p.encode(snaps[i]);
      const auto hz = parse_bus_header(mz);
      const auto hp = parse_bus_header(mp);
      EXPECT_EQ(hz.full, hp.full) << level << " " << i;
      ASSERT_EQ(hz.body_bytes, hp.body_bytes) << level << " " << i;
      const std::string body = mp.substr(mp.find('\n') + 1);
      ASSERT_EQ(body.size(), hp.body_bytes);
      if (!hz.compressed) continue;  // over the inflation ratio: sent plain
      ++compressed;
      const auto inflated = beast_inflate(std::string_view(mz).substr(mz.find('\n') + 1));
      ASSERT_TRUE(inflated) << "level " << level << ", message " << i;
      EXPECT_EQ(*inflated, body) << "level " << level << ", message " << i;
    }
    EXPECT_GT(compressed, snaps.size() / 2) << level;
  }
}

// What Beast's deflater wrote (agents before session 15), at levels 1, 6 and 9, this decoder
// decodes to the same snapshots as the plain messages: newer views read older agents.
TEST(BusWire, BeastsDeflatedBodiesDecode) {
  const auto snaps = wire_snapshots();
  for (const int level : {1, 6, 9}) {
    BusEncoder p("node-1", "a", {.full_every = 5, .compress = false});
    BusDecoder dec;
    for (std::size_t i = 0; i < snaps.size(); ++i) {
      const std::string mp = p.encode(snaps[i]);
      const std::string mz =
          rebodied(mp, true, beast_deflate(std::string_view(mp).substr(mp.find('\n') + 1), level));
      const auto d = dec.decode(mz);
      ASSERT_TRUE(d) << "level " << level << ", message " << i;
      EXPECT_EQ(d->snapshot, with_node(snaps[i], "node-1")) << "level " << level << ", " << i;
    }
    EXPECT_EQ(dec.counters().malformed + dec.counters().inflation, 0u) << level;
  }
}

// The decoder's refusals of a body in the new inflater, each the BusError of before: one byte
// more (inflation, "past the declared"), one short (malformed), corrupt, truncated, or
// followed by a byte (malformed); and the decoder goes on decoding after each.
TEST(BusWire, EveryWayABodyFailsIsTheSameRefusal) {
  BusEncoder p("n", "a", {.full_every = 1, .compress = false});
  const std::string mp = p.encode(sample(3, 2));
  const auto h = parse_bus_header(mp);
  const std::string body = mp.substr(mp.find('\n') + 1);
  const std::string packed = beast_deflate(body);
  const auto with = [&](std::size_t declared, std::string_view bytes) {
    std::string m = mp.substr(0, mp.find('\n'));
    m.replace(m.find(" p "), 3, " z ");
    m.replace(m.rfind(" " + std::to_string(h.body_bytes) + " "),
              std::to_string(h.body_bytes).size() + 2, " " + std::to_string(declared) + " ");
    return m + "\n" + std::string(bytes);
  };
  BusDecoder dec;
  const auto refused = [&](const std::string& m) -> std::optional<BusError> {
    try {
      (void)dec.decode(m);
    } catch (const BusError& e) {
      return e;
    }
    return std::nullopt;
  };
  const auto past = refused(with(body.size() - 1, packed));
  ASSERT_TRUE(past);
  EXPECT_EQ(past->reason(), BusRefusal::inflation);
  EXPECT_NE(std::string(past->what()).find("past the declared " + std::to_string(body.size() - 1)),
            std::string::npos)
      << past->what();
  const auto short_of = refused(with(body.size() + 1, packed));
  ASSERT_TRUE(short_of);
  EXPECT_EQ(short_of->reason(), BusRefusal::malformed);
  EXPECT_NE(std::string(short_of->what()).find("does not inflate to the declared"),
            std::string::npos)
      << short_of->what();
  std::string corrupt = packed;
  corrupt[0] = static_cast<char>(0x07);  // BTYPE 11: a reserved block type
  const auto bad = refused(with(body.size(), corrupt));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->reason(), BusRefusal::malformed);
  EXPECT_NE(std::string(bad->what()).find("bad deflate body"), std::string::npos) << bad->what();
  // Cut to at least half its bytes: shorter, the header's declared size is over the inflation
  // ratio for what is left (refused from the header, as before any inflater). A stream cut short
  // is malformed, or inflating past the declared size when the zero bits libdeflate reads past
  // the end of its input (at most 8 bytes: then it calls the stream truncated) decode to more
  // than the declared bytes, as they can near the stream's end: refused either way.
  ASSERT_LT(body.size(), BusLimits{}.max_inflation_ratio * (packed.size() / 2));
  std::uint64_t cut_past = 0;
  for (std::size_t cut = packed.size() / 2; cut < packed.size(); cut += 3) {
    const auto truncated = refused(with(body.size(), std::string_view(packed).substr(0, cut)));
    ASSERT_TRUE(truncated) << cut;
    if (truncated->reason() == BusRefusal::inflation) {
      ++cut_past;
      EXPECT_NE(std::string(truncated->what()).find("past the declared"), std::string::npos);
    } else {
      EXPECT_EQ(truncated->reason(), BusRefusal::malformed) << cut;
    }
  }
  for (const std::string tail : {std::string(1, '\0'), std::string("x")}) {
    const auto trailing = refused(with(body.size(), packed + tail));
    ASSERT_TRUE(trailing);
    EXPECT_EQ(trailing->reason(), BusRefusal::malformed);
  }
  EXPECT_EQ(dec.counters().inflation, 1u + cut_past);
  const auto d = dec.decode(with(body.size(), packed));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->snapshot, with_node(sample(3, 2), "n"));
}

}  // namespace
}  // namespace gpustream::transport::test

namespace gpustream::transport::test {
namespace {

// Found by BusCodec.StateBytesAreBounded…: this delta's 37-byte deflate stream is valid (zlib
// inflates it whole) but Beast's inflate_stream reads one byte past its end before it reports
// the end, so the decoder refused it ("need buffers"). The bytes are deterministic (Beast's
// deflate at level 6, what the encoder wrote before session 15 moved it to libdeflate); the same
// stream is fuzz/regressions/bus_decoder/lookahead_delta.gsk.
TEST(BusCodec, ADeltaWhoseEndBeastReadsPastInflates) {
  BusEncoder enc("node-1", "a", {.full_every = 2, .compress = false});
  BusDecoder dec;
  GpuSnapshot s = sample(0, 1);
  const std::string plain_full = enc.encode(s);
  const std::string full =
      rebodied(plain_full, true, beast_deflate(plain_full.substr(plain_full.find('\n') + 1)));
  ASSERT_TRUE(dec.decode(full));
  s.devices[0].name = "changed";
  const std::string plain_delta = enc.encode(s);
  ASSERT_FALSE(enc.last_was_full());
  const std::string delta =
      rebodied(plain_delta, true, beast_deflate(plain_delta.substr(plain_delta.find('\n') + 1)));
  const std::string body = delta.substr(delta.find('\n') + 1);
  ASSERT_EQ(body.size(), 37u);
  EXPECT_EQ(static_cast<unsigned char>(body.back()), 0u);
  const auto d = dec.decode(delta);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->snapshot, with_node(s, "node-1"));
  // Not an opening for trailing bytes: one byte more after the stream is still refused.
  BusDecoder other;
  ASSERT_TRUE(other.decode(full));
  EXPECT_THROW((void)other.decode(delta + "x"), BusError);
}

}  // namespace
}  // namespace gpustream::transport::test

namespace gpustream::transport::test {
namespace {

// ---- issue #27: the bus is hostile input ----

/// Raw deflate of `in` (level 6, by another deflater than the encoder's), for messages the
/// encoder would never make.
std::string deflated(std::string_view in) { return beast_deflate(in); }

/// A message with any header fields and body (compressed when `z`), body_bytes as given.
std::string message(bool full, bool z, std::uint64_t epoch, std::uint64_t seq, std::uint64_t base,
                    std::size_t body_bytes, std::string_view body, std::string_view node = "n") {
  char hex[17];
  const auto r = std::to_chars(hex, hex + sizeof(hex), epoch, 16);
  std::string m = "GSB1 " + std::string(full ? "f " : "d ") + (z ? "z " : "p ") +
                  std::string(node) + " simulated " + std::string(hex, r.ptr) + " " +
                  std::to_string(seq) + " " + std::to_string(base) + " " +
                  std::to_string(body_bytes) + " a\n";
  m += body;
  return m;
}

/// `m` (an encoder's message) with its seq and base replaced.
std::string with_seq(const std::string& m, std::uint64_t seq, std::uint64_t base) {
  const auto h = parse_bus_header(m);
  return message(h.full, h.compressed, h.epoch, seq, base, h.body_bytes,
                 std::string_view(m).substr(m.find('\n') + 1), h.node);
}

BusRefusal refusal(BusDecoder& dec, const std::string& m) {
  try {
    (void)dec.decode(m);
  } catch (const BusError& e) {
    return e.reason();
  }
  ADD_FAILURE() << "not refused: " << m.substr(0, 80);
  return BusRefusal::malformed;
}

// Item 1. A deflate bomb: 8 KB that inflates to 8 MiB. Declared honestly it is refused from its
// header (8 MiB is over 64 × 8 KB) before any inflation; declared at the ratio bound (a lying
// header), inflation stops one byte past that bound: never 8 MiB.
TEST(BusBounds, ADeflateBombIsRefusedWithinTheInflationRatio) {
  const std::string zeros(std::size_t{8} << 20, '0');
  const std::string bomb = deflated(zeros);
  ASSERT_LT(bomb.size(), 9000u);  // ≈ 8 KB on the bus
  const BusLimits limits;
  EXPECT_EQ(limits.max_inflation_ratio, 64u);
  BusDecoder dec;
  const std::string honest = message(true, true, 1, 1, 1, zeros.size(), bomb);
  try {
    (void)parse_bus_header(honest);
    ADD_FAILURE() << "the header of a bomb parsed";
  } catch (const BusError& e) {
    EXPECT_EQ(e.reason(), BusRefusal::inflation);
    EXPECT_NE(std::string(e.what()).find("more than 64 times"), std::string::npos) << e.what();
  }
  EXPECT_EQ(refusal(dec, honest), BusRefusal::inflation);
  // The largest a header may declare for these bytes: accepted by the header, then inflation
  // stops at the first byte past it (the error says so).
  const std::size_t bound = bomb.size() * limits.max_inflation_ratio;
  const std::string at_bound = message(true, true, 1, 1, 1, bound, bomb);
  EXPECT_EQ(parse_bus_header(at_bound).body_bytes, bound);
  try {
    (void)dec.decode(at_bound);
    ADD_FAILURE() << "a bomb decoded";
  } catch (const BusError& e) {
    EXPECT_EQ(e.reason(), BusRefusal::inflation);
    EXPECT_NE(std::string(e.what()).find("past the declared " + std::to_string(bound)),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)parse_bus_header(message(true, true, 1, 1, 1, bound + 1, bomb)), BusError);
  EXPECT_EQ(dec.counters().inflation, 2u);
  // A header lying the other way (more than the body inflates to, within the ratio) is refused
  // once the stream ends short of it.
  const std::string body = to_json_string(with_node(sample(0, 1), "n"));
  const std::string packed = deflated(body);
  EXPECT_EQ(refusal(dec, message(true, true, 1, 1, 1, body.size() + 1, packed)),
            BusRefusal::malformed);
  EXPECT_EQ(refusal(dec, message(true, true, 1, 1, 1, body.size() - 1, packed)),
            BusRefusal::inflation);
  EXPECT_TRUE(dec.decode(message(true, true, 1, 1, 1, body.size(), packed)));
  // A tighter ratio refuses what compresses better than it.
  BusLimits tight;
  tight.max_inflation_ratio = 2;
  ASSERT_GT(body.size(), 2 * packed.size());
  BusDecoder strict(tight);
  EXPECT_EQ(refusal(strict, message(true, true, 1, 1, 1, body.size(), packed)),
            BusRefusal::inflation);
  EXPECT_TRUE(strict.decode(message(true, false, 1, 1, 1, body.size(), body)));  // plain: no ratio
}

/// A snapshot document with `devices` minimal devices.
std::string many_devices(std::size_t devices) {
  json::object doc = json::parse(to_json_string(with_node(sample(0, 0), "n"))).as_object();
  doc["devices"] = json::array(devices, json::object{});
  return json::serialize(doc);
}

// Item 2. 62,000 minimal devices in one 32 KB message (issue #27, 5.): refused, whatever its form.
TEST(BusBounds, SixtyTwoThousandDevicesInOneMessageAreRefused) {
  const BusLimits limits;
  EXPECT_EQ(limits.max_devices, 1024u);
  EXPECT_EQ(limits.max_processes, 16384u);
  const std::string body = many_devices(62000);
  const std::string packed = deflated(body);
  EXPECT_LT(packed.size(), 40000u);
  BusDecoder dec;
  // Compressed it is over the inflation ratio (refused from the header) ...
  EXPECT_EQ(refusal(dec, message(true, true, 1, 1, 1, body.size(), packed)), BusRefusal::inflation);
  // ... plain, or with a ratio that lets it through, it is refused by the device count, before
  // it becomes a snapshot.
  EXPECT_EQ(refusal(dec, message(true, false, 1, 1, 1, body.size(), body)),
            BusRefusal::too_many_devices);
  BusLimits loose;
  loose.max_inflation_ratio = 1'000'000;
  BusDecoder dec2(loose);
  try {
    (void)dec2.decode(message(true, true, 1, 1, 1, body.size(), packed));
    ADD_FAILURE() << "62,000 devices decoded";
  } catch (const BusError& e) {
    EXPECT_EQ(e.reason(), BusRefusal::too_many_devices);
    EXPECT_NE(std::string(e.what()).find("62000 devices, more than the 1024"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(dec.counters().too_many_devices, 1u);
  EXPECT_EQ(dec.counters().inflation, 1u);
  EXPECT_EQ(dec.streams(), 0u);
  EXPECT_EQ(dec2.limits().max_inflation_ratio, 1'000'000u);
  // At the bound it decodes; processes are counted across devices and the host.
  BusLimits small;
  small.max_devices = 4;
  small.max_processes = 4;
  BusDecoder d3(small);
  BusEncoder enc("n", "a", {.full_every = 1});
  const GpuSnapshot four = sample(0, 4);  // one process per device
  ASSERT_TRUE(d3.decode(enc.encode(four)));
  EXPECT_EQ(refusal(d3, enc.encode(sample(0, 5))), BusRefusal::too_many_devices);
  GpuSnapshot host = four;
  host.host.emplace();
  host.host->processes.emplace_back();
  EXPECT_EQ(refusal(d3, enc.encode(host)), BusRefusal::too_many_devices);
  GpuSnapshot procs = four;
  procs.devices[2].processes.push_back(procs.devices[2].processes[0]);
  EXPECT_EQ(refusal(d3, enc.encode(procs)), BusRefusal::too_many_devices);
  EXPECT_EQ(d3.counters().too_many_devices, 3u);
  const auto again = d3.decode(enc.encode(four));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->snapshot, with_node(four, "n"));
}

// Item 2, after a delta: a delta that would grow the snapshot past the bound is refused, and the
// base is left as it was.
TEST(BusBounds, ADeltaPastTheDeviceBoundIsRefusedAndTheBaseKept) {
  BusLimits limits;
  limits.max_devices = 3;
  limits.max_processes = 3;
  BusDecoder dec(limits);
  BusEncoder enc("n", "a", {.full_every = 100});
  const GpuSnapshot base = sample(1, 3);  // tick 1: no processes
  ASSERT_TRUE(dec.decode(enc.encode(base)));
  EXPECT_EQ(refusal(dec, enc.encode(sample(1, 4))), BusRefusal::too_many_devices);
  EXPECT_EQ(refusal(dec, enc.encode(sample(3, 4))), BusRefusal::too_many_devices);
  GpuSnapshot procs = sample(3, 3);  // 3 devices, one process each: at the bound
  procs.devices[0].processes.push_back(procs.devices[0].processes[0]);  // 4
  EXPECT_EQ(refusal(dec, enc.encode(procs)), BusRefusal::too_many_devices);
  const GpuSnapshot next = sample(2, 3);
  const auto d = dec.decode(enc.encode(next));
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->header.full);
  EXPECT_EQ(d->snapshot, with_node(next, "n"));
}

/// A big base: `devices` devices, each with a `name_bytes`-character name of its own.
GpuSnapshot big_base(int devices, std::size_t name_bytes) {
  GpuSnapshot s = sample(0, devices);
  for (auto& d : s.devices) {
    d.name.assign(name_bytes, 'a');
    for (std::size_t i = 0; i < name_bytes; i += 7)
      d.name[i] = static_cast<char>('a' + (i / 7 + static_cast<std::size_t>(d.index)) % 26);
  }
  return with_node(s, "n");
}

// Item 3. An 8 MiB base then many tiny deltas, each against it: every delta decodes to exactly
// the base plus its own change (so the one before left the base as it was), and the base's
// bytes do not grow.
TEST(BusBounds, ManyTinyDeltasOnAnEightMiBBaseLeaveTheBaseUnchanged) {
  BusLimits limits;
  limits.max_message_bytes = 16u << 20;
  limits.max_body_bytes = 16u << 20;
  BusDecoder dec(limits);
  BusEncoder enc("n", "a", {.full_every = 1'000'000, .compress = false});
  const GpuSnapshot base = big_base(1000, 6000);
  const std::string full = enc.encode(base);
  ASSERT_GT(full.size(), 8u << 20);
  ASSERT_TRUE(dec.decode(full));
  const std::size_t bytes = dec.state_bytes();
  for (int k = 0; k < 16; ++k) {
    GpuSnapshot s = base;
    auto& dev = s.devices[static_cast<std::size_t>(k * 37) % s.devices.size()];
    if (k % 4 == 0) dev.metrics.set(Metric::power_watts, 1000.0 + k, Source::simulated);
    if (k % 4 == 1) dev.processes.push_back({});  // an array that grows: replaced whole
    if (k % 4 == 2) s.errors.push_back({"x", "e" + std::to_string(k), ""});
    if (k % 4 == 3) dev.name = "short";
    s.sequence += static_cast<std::uint64_t>(k) + 1;
    const std::string& m = enc.encode(s);
    ASSERT_FALSE(enc.last_was_full());
    ASSERT_LT(m.size(), 1024u) << k;
    const auto d = dec.decode(m);
    ASSERT_TRUE(d) << k;
    ASSERT_EQ(d->snapshot, s) << k;
    ASSERT_EQ(dec.state_bytes(), bytes) << k;
  }
}

/// A stream's messages as plain bodies: the full's document, then deltas of raw patches.
std::string plain_full(std::uint64_t seq, const std::string& body) {
  return message(true, false, 7, seq, seq, body.size(), body);
}
std::string plain_delta(std::uint64_t seq, std::uint64_t base, const std::string& patch) {
  return message(false, false, 7, seq, base, patch.size(), patch);
}

// Item 3: a patch refused half-way (after it removed, added and replaced keys), or one that
// applies but leaves no snapshot, is undone: the next delta decodes against the base as it was.
TEST(BusBounds, ARefusedPatchLeavesTheBaseAsItWas) {
  json::object doc = json::parse(to_json_string(with_node(sample(0, 2), "n"))).as_object();
  doc["extra"] = json::object{{"keep", 1}, {"nested", json::array{1, 2, 3}}};
  const std::string body = json::serialize(doc);
  BusDecoder dec;
  const auto first = dec.decode(plain_full(1, body));
  ASSERT_TRUE(first);
  const std::size_t bytes = dec.state_bytes();
  const std::vector<std::string> bad = {
      // removes, adds, replaces, descends, then an index past the array
      R"({"extra":null,"added":[{"a":1}],"sequence":[99],"devices":{"0":{"name":["x"]},"5":[1]}})",
      R"({"extra":{"nested":{"1":[7]},"keep":null},"devices":{"1":{"name":{"x":[1]}}}})",
      R"({"probe":null,"extra":{"new":[1]},"schema":["gpustream/0"]})",  // no snapshot
      R"({"sequence":[5],"devices":[[{"id":5},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}]]})",
      R"({"sequence":[5],"host":{"x":[1]}})",        // patches a key that is not there
      R"({"sequence":[5], "devices":{"0":[1,2]}})",  // a replacement of two values
  };
  BusLimits few;
  few.max_devices = 16;
  BusDecoder small(few);
  ASSERT_TRUE(small.decode(plain_full(1, body)));
  // A patch undone may leave an object's table grown (capacity, not content): once. The second
  // round of the same patches leaves the bytes where the first left them.
  std::uint64_t seq = 2;
  std::size_t after_first = 0;
  for (int round = 0; round < 2; ++round) {
    for (const auto& p : bad) {
      EXPECT_THROW((void)dec.decode(plain_delta(seq, 1, p)), BusError) << p;
      if (round == 0) EXPECT_THROW((void)small.decode(plain_delta(seq, 1, p)), BusError) << p;
      ++seq;
    }
    if (round == 0) after_first = dec.state_bytes();
  }
  EXPECT_EQ(dec.state_bytes(), after_first);
  EXPECT_LE(after_first, bytes + 256);
  // The base is the full, exactly: an empty patch gives the full's snapshot, and a patch that
  // needs the keys the bad ones removed or added applies.
  const auto same = dec.decode(plain_delta(seq++, 1, "{}"));
  ASSERT_TRUE(same);
  EXPECT_EQ(same->snapshot, first->snapshot);
  const auto next = dec.decode(
      plain_delta(seq++, 1, R"({"extra":{"keep":[2],"nested":{"2":[4]}},"sequence":[42]})"));
  ASSERT_TRUE(next);
  GpuSnapshot want = first->snapshot;
  want.sequence = 42;
  EXPECT_EQ(next->snapshot, want);
  EXPECT_THROW((void)dec.decode(plain_delta(seq++, 1, R"({"added":{"a":[2]}})")), BusError);
  EXPECT_EQ(dec.counters().malformed, 2 * bad.size() + 1);
  EXPECT_EQ(small.counters().too_many_devices, 1u);
  EXPECT_EQ(small.counters().malformed, bad.size() - 1);
}

// Item 4. A forged full of the agent's own epoch with seq 2^64−1 is a jump: dropped and counted,
// and the agent's next messages are decoded, values current.
TEST(BusSequence, AForgedMaximalSeqDoesNotFreezeTheStream) {
  BusEncoder enc("n", "a", {.full_every = 3});
  BusDecoder dec;
  ASSERT_TRUE(dec.decode(enc.encode(sample(0))));
  const std::string forged = with_seq(enc.last_fulls().at("simulated"), UINT64_MAX, UINT64_MAX);
  EXPECT_FALSE(dec.decode(forged));
  EXPECT_EQ(dec.jumps(), 1u);
  EXPECT_FALSE(dec.decode(with_seq(enc.encode(sample(50)), UINT64_MAX, 1)));  // a forged delta
  EXPECT_EQ(dec.jumps(), 2u);
  for (int t = 1; t < 10; ++t) {
    const auto d = dec.decode(enc.encode(sample(t)));
    ASSERT_TRUE(d) << t;
    EXPECT_EQ(d->snapshot, with_node(sample(t), "n")) << t;
  }
  EXPECT_EQ(dec.resyncs(), 0u);
  // Drops must be consecutive to resync: two forged, one real, two forged, then a forged full.
  for (int round = 0; round < 2; ++round) {
    EXPECT_FALSE(dec.decode(forged));
    EXPECT_FALSE(dec.decode(forged));
    ASSERT_TRUE(dec.decode(enc.encode(sample(20 + round))));
  }
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(dec.decode(forged));  // the third: only 2 before it
  const auto d = dec.decode(enc.encode(sample(30)));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->snapshot, with_node(sample(30), "n"));
  EXPECT_EQ(dec.resyncs(), 0u);
  EXPECT_EQ(dec.jumps(), 9u);
}

// Item 4. A replay of an old full (or delta) of the stream is dropped: the values stay current.
TEST(BusSequence, AReplayedOldFullIsDropped) {
  BusEncoder enc("n", "a", {.full_every = 3});
  BusDecoder dec;
  const std::string old_full = enc.encode(sample(0));
  const std::string old_delta = enc.encode(sample(1));
  ASSERT_TRUE(dec.decode(old_full));
  for (int t = 2; t < 8; ++t) ASSERT_TRUE(dec.decode(enc.encode(sample(t))));
  EXPECT_FALSE(dec.decode(old_full));
  EXPECT_FALSE(dec.decode(old_delta));
  EXPECT_EQ(dec.stale(), 2u);
  const auto d = dec.decode(enc.encode(sample(8)));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->snapshot, with_node(sample(8), "n"));
  EXPECT_EQ(dec.resyncs(), 0u);
}

// Item 4. After an agent restart, the messages of its old epoch (late, or replayed) are old:
// dropped, they do not take the stream back. A forged new epoch is taken, and the agent's own
// stream is back after resync_after of its messages and its next full.
TEST(BusSequence, AnEpochTheStreamLeftIsOld) {
  BusDecoder dec;
  BusEncoder before("n", "a", {.full_every = 3});
  const std::string old_full = before.encode(sample(0));
  const std::string old_delta = before.encode(sample(1));
  ASSERT_TRUE(dec.decode(old_full));
  BusEncoder agent("n", "a", {.full_every = 3});  // the restart
  ASSERT_TRUE(dec.decode(agent.encode(sample(10))));
  EXPECT_FALSE(dec.decode(old_full));
  EXPECT_FALSE(dec.decode(old_delta));
  EXPECT_EQ(dec.stale(), 2u);
  const auto d = dec.decode(agent.encode(sample(11)));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->snapshot, with_node(sample(11), "n"));

  BusEncoder forger("n", "a", {.full_every = 1});
  ASSERT_TRUE(dec.decode(forger.encode(sample(11))));  // a new epoch: taken
  int t = 12;
  for (; t < 30; ++t) {
    const std::string& m = agent.encode(sample(t));
    if (dec.decode(m)) break;
  }
  EXPECT_TRUE(agent.last_was_full());
  EXPECT_EQ(dec.resyncs(), 1u);
  EXPECT_LE(t, 12 + 3 + 3);  // resync_after drops, then within a full period
  const auto next = dec.decode(agent.encode(sample(40)));
  ASSERT_TRUE(next);
  EXPECT_EQ(next->snapshot, with_node(sample(40), "n"));
  EXPECT_FALSE(dec.decode(forger.encode(sample(98))));  // the forger's epoch is old now
}

// Item 4. A resync takes a full only when it is newer than anything the stream took and not
// dated far ahead: an old full replayed over and over (every replay a drop, so resync_after is
// soon reached) is never taken, so its old values are never shown as current; a forger that
// dates its full ahead holds the stream only until the agent's clock passes it (the agent's
// fulls older than the forged one are dropped), and one dated more than resync_max_future ahead
// is not taken at all.
TEST(BusSequence, AResyncTakesOnlyANewerFull) {
  BusEncoder enc("n", "a", {.full_every = 2});
  BusDecoder dec;
  const std::string old_full = enc.encode(sample(0));
  ASSERT_TRUE(dec.decode(old_full));
  for (int t = 1; t < 6; ++t) ASSERT_TRUE(dec.decode(enc.encode(sample(t))));
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(dec.decode(old_full)) << i;
  EXPECT_EQ(dec.resyncs(), 0u);
  EXPECT_EQ(dec.stale(), 20u);
  const auto d = dec.decode(enc.encode(sample(6)));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->snapshot, with_node(sample(6), "n"));

  // Dated far ahead of this machine's clock: never a resync.
  GpuSnapshot future = sample(7);
  future.time_unix_ns = wall_now_ns() + 3'600'000'000'000LL;
  BusEncoder forger("n", "a", {.full_every = 1});
  const std::string f = forger.encode(future);
  const auto fh = parse_bus_header(f);
  const std::string ahead =  // the agent's epoch, seq 2^64−1
      message(true, fh.compressed, parse_bus_header(enc.last_fulls().at("simulated")).epoch,
              UINT64_MAX, UINT64_MAX, fh.body_bytes, std::string_view(f).substr(f.find('\n') + 1),
              "n");
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(dec.decode(ahead)) << i;
  EXPECT_EQ(dec.resyncs(), 0u);
  const auto e = dec.decode(enc.encode(sample(7)));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->snapshot, with_node(sample(7), "n"));
}

// Item 4, recovery. A stream a forged seq got ahead of (its first message, so taken) drops the
// agent's real messages as stale; after resync_after of them in a row, the agent's next full is
// taken whatever its seq. A consumer that missed more than seq_window messages is back the same
// way: the jump is not taken as-is, the next full after resync_after drops is.
TEST(BusSequence, ConsecutiveDropsLetTheNextFullResyncTheStream) {
  BusEncoder enc("n", "a", {.full_every = 4});
  const std::string first = enc.encode(sample(0));
  BusDecoder dec;
  ASSERT_TRUE(dec.decode(with_seq(first, UINT64_MAX, UINT64_MAX)));  // a new stream: taken
  EXPECT_FALSE(dec.decode(first));                                   // dropped, 1
  for (int t = 1; t < 4; ++t) EXPECT_FALSE(dec.decode(enc.encode(sample(t)))) << t;  // 2, 3, 4
  const std::string full = enc.encode(sample(4));
  ASSERT_TRUE(enc.last_was_full());
  const auto r = dec.decode(full);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->snapshot, with_node(sample(4), "n"));
  EXPECT_EQ(dec.resyncs(), 1u);
  EXPECT_EQ(dec.stale(), 4u);
  const auto d = dec.decode(enc.encode(sample(5)));  // a delta on the rebased stream
  ASSERT_TRUE(d);
  EXPECT_EQ(d->snapshot, with_node(sample(5), "n"));

  BusLimits limits;
  limits.seq_window = 8;
  EXPECT_EQ(BusLimits{}.seq_window, 4096u);
  EXPECT_EQ(BusLimits{}.resync_after, 3u);
  BusDecoder late(limits);
  BusEncoder agent("m", "a", {.full_every = 4});
  ASSERT_TRUE(late.decode(agent.encode(sample(0))));
  for (int t = 1; t <= 20; ++t) (void)agent.encode(sample(t));  // missed: 20 > 8
  int taken_at = 0;
  for (int t = 21; t < 40 && !taken_at; ++t) {
    const std::string& m = agent.encode(sample(t));
    if (auto x = late.decode(m)) {
      EXPECT_TRUE(agent.last_was_full()) << t;
      EXPECT_EQ(x->snapshot, with_node(sample(t), "m"));
      taken_at = t;
    }
  }
  EXPECT_EQ(late.jumps(), 3u);  // seqs 22, 23, 24 (deltas); the full of seq 25 resyncs
  EXPECT_EQ(late.resyncs(), 1u);
  EXPECT_GT(taken_at, 21);
  const auto after = late.decode(agent.encode(sample(50)));
  ASSERT_TRUE(after);
  EXPECT_EQ(after->snapshot, with_node(sample(50), "m"));
}

// Item 5. The cost of a message is known from its header: its body, plus for a delta the base it
// applies to.
TEST(BusBounds, CostBytesIsKnownBeforeDecoding) {
  BusEncoder enc("n", "a", {.full_every = 10});
  BusDecoder dec;
  const std::string full = enc.encode(sample(0, 8));
  const auto hf = parse_bus_header(full);
  EXPECT_EQ(dec.cost_bytes(hf), hf.body_bytes);
  const std::string delta = enc.encode(sample(1, 8));
  const auto hd = parse_bus_header(delta);
  EXPECT_EQ(dec.cost_bytes(hd), hd.body_bytes);  // no base yet: the delta would wait
  ASSERT_TRUE(dec.decode(full));
  EXPECT_EQ(dec.cost_bytes(hd), hd.body_bytes + dec.state_bytes());  // its one stream's base
  // The base is the full's snapshot (a delta is applied to a copy of it): at least what it holds.
  EXPECT_GE(dec.cost_bytes(hd), hd.body_bytes + approx_bytes(with_node(sample(0, 8), "n")));
  dec.forget("n");
  EXPECT_EQ(dec.cost_bytes(hd), hd.body_bytes);
}

// Item 5. Every refusal is counted once, by its reason.
TEST(BusBounds, EveryRefusalIsCountedByReason) {
  BusLimits limits;
  limits.max_message_bytes = 64 * 1024;
  limits.max_streams = 1;
  BusDecoder dec(limits);
  EXPECT_THROW((void)dec.decode("nonsense"), BusError);
  EXPECT_THROW((void)dec.decode(std::string(70 * 1024, 'x')), BusError);
  EXPECT_THROW((void)dec.decode(message(true, false, 1, 1, 1, 99u << 20, "{}")), BusError);
  ASSERT_TRUE(dec.decode(BusEncoder("a").encode(sample(0, 1))));
  EXPECT_THROW((void)dec.decode(BusEncoder("b").encode(sample(0, 1))), BusError);
  const auto& c = dec.counters();
  EXPECT_EQ(c.malformed, 1u);
  EXPECT_EQ(c.too_large, 2u);
  EXPECT_EQ(c.too_many_streams, 1u);
  EXPECT_EQ(c.inflation + c.too_many_devices + c.stale + c.jumps + c.waiting, 0u);
}

// The decoder keeps the last full's snapshot rather than its document when the document is as
// this release writes it, and applies a delta's patch to a copy of the snapshot
// (gpustream/detail/json_patch.hpp). For every patch, that gives what applying the patch to the
// document and reading it gives, or both refuse.
TEST(BusPatch, APatchOfTheSnapshotReadsAsThePatchedDocument) {
  const GpuSnapshot base = with_node(gpustream::test::rich_snapshot(), "n");
  const std::vector<std::string> patches = {
      R"({})",
      R"({"sequence":[5],"time_unix_ns":[6],"sample_duration_ns":[7]})",
      R"({"devices":{"0":{"metrics":{"power_watts":[1.5]},"sources":{"power_watts":["sysfs"]}}}})",
      R"({"devices":{"1":{"metrics":{"power_watts":null},"sources":{"power_watts":null},)"
      R"("absent":{"power_watts":["unsupported"]},"absent_sources":{"power_watts":["nvml"]}}}})",
      R"({"devices":{"0":{"absent":{"power_watts":["lost"]}}}})",          // present and absent
      R"({"devices":{"0":{"metrics":{"power_watts":null}}}})",             // a source, no value
      R"({"devices":{"0":{"absent_sources":{"power_watts":["nvml"]}}}})",  // not absent
      R"({"devices":{"0":{"absent_sources":null}}})",
      R"({"devices":{"1":{"metrics":[{"power_watts":3}]}}})",
      R"({"devices":{"1":{"metrics":[{"power_watts":3}],"sources":[{"power_watts":"nvml"}]}}})",
      R"({"devices":{"0":{"metrics":{"a_newer_metric":[1]},"absent":{"fan_rpm":["lost"]}}}})",
      R"({"devices":{"0":{"metrics":{"a_newer_metric":{"a":[1]}}}}})",
      R"({"devices":{"0":{"metrics":{"power_watts":{"a":[1]}}}}})",
      R"({"devices":{"0":{"metrics":{"power_watts":["x"]}}}})",
      R"({"devices":{"0":{"sources":{"power_watts":["no such source"]}}}})",
      R"({"devices":{"0":{"metrics":null}}})",
      R"({"devices":{"0":{"engines":{"0":{"utilization_percent":[null],"absent":["stale"]}}}}})",
      R"({"devices":{"0":{"engines":{"0":{"absent":["stale"]}}}}})",
      R"({"devices":{"0":{"engines":{"2":{"absent":null,"source":null}}}}})",
      R"({"devices":{"0":{"engines":{"2":{"utilization_percent":[4],"absent":null}}}}})",
      R"({"devices":{"0":{"engines":{"1":{"utilization_percent":null}}}}})",
      R"({"devices":{"0":{"engines":{"1":{"absent":{"x":[1]}}}}}})",
      R"({"devices":{"0":{"engines":{"1":{"name":["render"]},"3":[{"name":"x","utilization_percent":2}]}}}})",
      R"({"devices":{"0":{"processes":{"1":{"container":null,"container_absent":["host"]}}}}})",
      R"({"devices":{"0":{"processes":{"2":{"container":[{"runtime":"docker","id":"abc"}]}}}}})",
      R"({"devices":{"0":{"processes":{"2":{"container_absent":["no such reason"]}}}}})",
      R"({"devices":{"0":{"processes":{"1":{"container_absent":["host"]}}}}})",
      R"({"devices":{"0":{"processes":{"0":{"container":{"id":["x"]}}}}}})",
      R"({"devices":{"0":{"processes":{"1":{"container":{"id":["x"],"qos":null}}}}}})",
      R"({"devices":{"0":{"processes":{"0":{"gpu_memory_bytes":[null],"host_rss_bytes":[7]}}}}})",
      R"({"devices":{"0":{"processes":{"0":{"gpu_memory_bytes":null}}}}})",
      R"({"devices":{"0":{"processes":{"0":{"engines":{"1":{"source":["nvml"],"absent":null,)"
      R"("utilization_percent":[3]}}}}}}})",
      R"({"devices":{"0":{"processes":{"0":{"slurm":[{"job_id":"12","step":"0"}]}}}}})",
      R"({"devices":{"0":{"processes":{"0":{"pod":[{"name":"p","namespace":"n","container":"c"}],)"
      R"("pod_absent":["ambiguous"]}}}}})",
      R"({"host":{"metrics":{"system_power_watts":[1],"new_metric":[2],"cpu_package_watts":null}}})",
      R"({"host":{"metrics":{"system_power_watts":{"a":[1]}}}})",
      R"({"host":{"processes":{"1":{"rss_bytes":[5]}},"swap_used_bytes":[9]}})",
      R"({"host":{"processes":{"1":{"rss_bytes":{"a":[1]}}}}})",
      R"({"host":null})",
      R"({"errors":[[]]})",
      R"({"errors":{"0":{"device":null}}})",
      R"({"errors":{"1":{"device":{"x":[1]}}}})",
      R"({"errors":{"1":{"device":["GPU-1"],"code":null}}})",
      R"({"devices":{"0":{"attributes":{"driver":["x"],"new":["y"],"uuid":null}}}})",
      R"({"devices":{"0":{"attributes":{"driver":[1]}}}})",
      R"({"devices":{"0":{"throttle_reasons":{"1":["x"]}}}})",
      R"({"devices":{"0":{"throttle_reasons":{"5":["x"]}}}})",
      R"({"devices":{"0":{"throttle_reasons":{"1":{"a":[1]}}}}})",
      R"({"devices":{"0":{"throttle_reasons_absent":["unsupported"]}}})",
      R"({"devices":{"0":{"throttle_reasons":[[]],"throttle_reasons_absent":["unsupported"]}}})",
      R"({"devices":{"0":{"name":{"x":[1]}}}})",
      R"({"devices":{"0":{"id":null}}})",
      R"({"devices":{"0":{"power_state":null,"energy_kind":null,"power_kind":[null]}}})",
      R"({"devices":{"0":{"mig":{"profile":["x"]}}}})",
      R"({"devices":{"0":{"mig":[{"gpu_instance_id":1,"compute_instance_id":2,"profile":"1g"}],)"
      R"("parent":["GPU-x"]}}})",
      R"({"devices":{"0":{"pods":[[{"name":"p","namespace":"n","container":"c"}]]}}})",
      R"({"devices":{"0":{"pods":{"0":{"name":["x"]}}}}})",
      R"({"devices":{"0":{"power_samples":[[[1,2],[3,4]]]}}})",
      R"({"devices":{"0":{"power_samples":[[[3,2],[1,4]]]}}})",
      R"({"devices":{"0":{"power_samples":[[[1,2],[3,-4]]]}}})",
      R"({"devices":{"0":{"power_samples":[[[1,2],[987654321012346,4]]]}}})",
      R"({"devices":{"2":{"power_state":["bogus"]}}})",
      R"({"devices":{"0":[1,2]}})",
      R"({"devices":{"0":null}})",
      R"({"devices":{"9":[{}]}})",
      R"({"devices":{"x":[{}]}})",
      R"({"devices":{"1":[{"id":"d","vendor":"amd","index":1,"name":"n","pci_bus_id":"",)"
      R"("metrics":{},"sources":{},"absent":{},"engines":[],"processes":[]}]}})",
      R"({"devices":{"1":[{"id":"d"}]}})",
      R"({"schema":["gpustream/2"]})",
      R"({"schema":["gpustream/1"]})",
      R"({"schema":null})",
      R"({"extra":{"x":[1]}})",
      R"({"extra":[1],"other":null})",
      R"({"monotonic_ns":null,"node":null})",
      R"({"sequence":["x"]})",
      R"({"sequence":5})",
      R"({"sequence":{"a":[1]}})",
      R"({"probe":null})",
  };
  int refused = 0;
  for (const auto& text : patches) {
    const json::value patch = json::parse(text);
    std::optional<GpuSnapshot> want;
    try {
      json::value doc = parse_json(to_json_string(base));
      json_patch(doc, patch);
      want = snapshot_from_json(doc);
    } catch (const std::exception&) {}
    GpuSnapshot got = base;
    bool ok = true;
    try {
      gpustream::detail::patch_snapshot(got, patch.as_object());
    } catch (const JsonError&) {
      ok = false;
    }
    EXPECT_EQ(ok, want.has_value()) << text;
    if (ok && want) {
      EXPECT_EQ(got, *want) << text;
    }
    refused += ok ? 0 : 1;
  }
  EXPECT_GT(refused, 20);  // both forms are exercised
}

}  // namespace
}  // namespace gpustream::transport::test
