// The wire protocol's pure functions, the Prometheus renderer and listen addresses (no network).
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/address.hpp"
#include "gpustream/transport/prometheus.hpp"
#include "gpustream/transport/protocol.hpp"
#include "support/temp_tree.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

namespace json = boost::json;

TEST(TransportProtocol, ParsesAFullSubscribe) {
  const auto m = parse_client_message(
      R"({"type":"subscribe","probes":["nvidia"],"devices":["GPU-1","GPU-2"],)"
      R"("fields":["power_watts","utilization_percent"],"max_rate_hz":2.5,"since":17,"x":1})");
  ASSERT_EQ(m.kind, ClientMessage::Kind::subscribe);
  EXPECT_EQ(m.subscribe.probes, std::vector<std::string>{"nvidia"});
  EXPECT_EQ(m.subscribe.devices, (std::vector<std::string>{"GPU-1", "GPU-2"}));
  EXPECT_EQ(m.subscribe.fields,
            (std::vector<Metric>{Metric::power_watts, Metric::utilization_percent}));
  EXPECT_EQ(m.subscribe.max_rate_hz, 2.5);
  EXPECT_EQ(m.subscribe.since, 17u);
  // What a client encodes, the server parses back the same.
  EXPECT_EQ(parse_client_message(encode_subscribe(m.subscribe)).subscribe, m.subscribe);
}

TEST(TransportProtocol, AnEmptySubscribeMeansEverything) {
  const auto m = parse_client_message(R"({"type":"subscribe","since":null})");
  EXPECT_EQ(m.subscribe, SubscribeRequest{});
  EXPECT_EQ(encode_subscribe({}), R"({"type":"subscribe"})");
}

TEST(TransportProtocol, RejectsWhatItCannotUse) {
  for (const char* bad : {
           "",
           "nope",
           "[]",
           "{}",
           R"({"type":1})",
           R"({"type":"unsubscribe"})",
           R"({"type":"subscribe","probes":"nvidia"})",
           R"({"type":"subscribe","probes":[1]})",
           R"({"type":"subscribe","fields":["watts"]})",
           R"({"type":"subscribe","max_rate_hz":0})",
           R"({"type":"subscribe","max_rate_hz":1e9})",
           R"({"type":"subscribe","since":-1})",
           R"({"type":"subscribe","since":1.5})",
           R"({"type":"auth"})",
       }) {
    try {
      parse_client_message(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.code(), "bad_request") << bad;
      EXPECT_FALSE(std::string(e.what()).empty());
    }
  }
  std::string many = R"({"type":"subscribe","devices":[)";
  for (std::size_t i = 0; i <= kMaxSubscribeListSize; ++i) many += (i ? ",\"d\"" : "\"d\"");
  many += "]}";
  EXPECT_THROW(parse_client_message(many), ProtocolError);
}

TEST(TransportProtocol, BuildsServerMessages) {
  const auto snap = make_snapshot("sim", 1);
  const auto msg = snapshot_message(to_json_string(snap));
  ASSERT_EQ(msg.back(), '\n');
  EXPECT_EQ(msg.rfind("{\"type\":\"snapshot\",\"schema\":", 0), 0u);
  auto v = json::parse(msg);
  v.as_object().erase("type");
  EXPECT_EQ(snapshot_from_json(v), snap);

  EXPECT_EQ(gap_message({4, 2, "dropped_slow_subscriber"}),
            R"({"type":"gap","after_sequence":4,"missed":2,"reason":"dropped_slow_subscriber"})"
            "\n");
  EXPECT_EQ(error_message("bad_request", "a \"quoted\"\nthing"),
            R"({"type":"error","code":"bad_request","message":"a \"quoted\"\nthing"})"
            "\n");
  SubscribeRequest r;
  r.fields = {Metric::power_watts};
  r.max_rate_hz = 0.5;
  r.since = 3;
  EXPECT_EQ(subscribed_message({r, {}, {"gpu-x"}}),
            R"({"type":"subscribed","since":3,"probes":[],"devices":[],"fields":["power_watts"],)"
            R"("max_rate_hz":0.5,"unknown":{"probes":[],"devices":["gpu-x"]}})"
            "\n");
  Hello h;
  h.instance = "00c0ffee00c0ffee";
  h.last_sequence = 7;
  h.history_capacity = 1024;
  h.probes = {{"sim", "available", ""}};
  const auto hello = json::parse(hello_message(h));
  EXPECT_EQ(hello.at("type"), "hello");
  EXPECT_EQ(hello.at("instance"), "00c0ffee00c0ffee");
  EXPECT_EQ(hello.at("last_sequence").to_number<int>(), 7);
  EXPECT_FALSE(hello.at("probes").as_array()[0].as_object().contains("reason"));
}

TEST(TransportProtocol, CompactJsonWritesShortestDoubles) {
  EXPECT_EQ(to_compact_json(json::parse(R"({"a":[0.1,2.0,-3,1e300,"\u0001"],"b":null})")),
            R"({"a":[0.1,2.0,-3,1e+300,"\u0001"],"b":null})");
}

TEST(TransportPrometheus, EscapesLabelValuesAndLeavesOutWhatIsMissing) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), R"(a\"b\\c\nd)");
  auto s = make_snapshot("sim", 1);
  s.devices[0].metrics.set_absent(Metric::power_watts, Absence::no_permission);
  const auto text = render_prometheus({std::make_shared<const GpuSnapshot>(s)}, {}, nullptr);
  EXPECT_EQ(text.find("gpustream_gpu_power_watts"), std::string::npos);
  EXPECT_NE(text.find("# TYPE gpustream_gpu_temperature_celsius gauge\n"), std::string::npos);
  EXPECT_EQ(text.find("gpustream_server_"), std::string::npos);
  EXPECT_EQ(text.find("gpustream_probe_"), std::string::npos);
  EXPECT_EQ(render_prometheus({}, {}, nullptr), "");
}

TEST(TransportAddress, RedactsCredentialsOfEveryUrl) {
  EXPECT_EQ(redact_url_credentials("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
  EXPECT_EQ(redact_url_credentials("nats://alice:s3cret@10.0.0.5:4222"),
            "nats://***@10.0.0.5:4222");
  EXPECT_EQ(redact_url_credentials("tls://tok@a:1,nats://b:2,nats://u:p@c:3"),
            "tls://***@a:1,nats://b:2,nats://***@c:3");
  EXPECT_EQ(redact_url_credentials("u:p@host:4222"), "***@host:4222");
}

TEST(TransportAddress, ParsesListenAddresses) {
  EXPECT_EQ(to_string(parse_listen_address("127.0.0.1:9400")), "127.0.0.1:9400");
  EXPECT_EQ(to_string(parse_listen_address("localhost:0")), "127.0.0.1:0");
  EXPECT_EQ(to_string(parse_listen_address("[::1]:80")), "[::1]:80");
  EXPECT_EQ(to_string(parse_listen_address("0.0.0.0:9400")), "0.0.0.0:9400");
  for (const char* bad : {"", "9400", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536",
                          "example.com:80", "::1:80", "[::1]", "1.2.3.4:x"})
    EXPECT_THROW(parse_listen_address(bad), std::invalid_argument) << bad;
  EXPECT_TRUE(is_loopback(parse_listen_address("127.1.2.3:1").address()));
  EXPECT_TRUE(is_loopback(parse_listen_address("[::ffff:127.0.0.1]:1").address()));
  EXPECT_FALSE(is_loopback(parse_listen_address("0.0.0.0:1").address()));
}

}  // namespace
}  // namespace gpustream::transport::test

namespace gpustream::transport::test {
namespace {

// One encoder and one decoder per message type: what the server writes, the client reads back.
TEST(TransportProtocol, EveryServerMessageDecodesToWhatWasEncoded) {
  Hello h;
  h.instance = "5c0e2f9a7d31b604";
  h.last_sequence = 41;
  h.history_capacity = 1024;
  h.probes = {{"sim", "available", ""}, {"nvidia", "unavailable", "no \xc3 driver"}};
  h.devices = {{"GPU-1", "nvidia", "A100", "nvidia", 3, "0000:01:00.0"}};
  auto m = parse_server_message(hello_message(h));
  ASSERT_EQ(m.kind, ServerMessage::Kind::hello);
  EXPECT_EQ(m.hello.schema, "gpustream/1");
  EXPECT_EQ(m.hello.server, kServerName);
  EXPECT_EQ(m.hello.instance, h.instance);
  EXPECT_EQ(m.hello.last_sequence, 41u);
  EXPECT_EQ(m.hello.history_capacity, 1024u);
  ASSERT_EQ(m.hello.probes.size(), 2u);
  EXPECT_EQ(m.hello.probes[1].reason, "no \xef\xbf\xbd driver");  // repaired, not passed on
  ASSERT_EQ(m.hello.devices.size(), 1u);
  EXPECT_EQ(m.hello.devices[0].index, 3);
  EXPECT_EQ(m.hello.devices[0].pci_bus_id, "0000:01:00.0");

  const auto snap = make_snapshot("sim", 2);
  m = parse_server_message(snapshot_message(to_json_string(snap)));
  ASSERT_EQ(m.kind, ServerMessage::Kind::snapshot);
  EXPECT_EQ(m.snapshot, snap);

  m = parse_server_message(gap_message({4, 2, "history_too_old"}));
  ASSERT_EQ(m.kind, ServerMessage::Kind::gap);
  EXPECT_EQ(m.gap, (Gap{4, 2, "history_too_old"}));

  Subscribed s;
  s.request.probes = {"sim"};
  s.request.fields = {Metric::power_watts};
  s.request.max_rate_hz = 2.5;
  s.request.since = 7;
  s.unknown_devices = {"GPU-x"};
  m = parse_server_message(subscribed_message(s));
  ASSERT_EQ(m.kind, ServerMessage::Kind::subscribed);
  EXPECT_EQ(m.subscribed.request, s.request);
  EXPECT_EQ(m.subscribed.unknown_devices, s.unknown_devices);
  EXPECT_TRUE(m.subscribed.unknown_probes.empty());

  m = parse_server_message(error_message(kErrLimit, "too many"));
  ASSERT_EQ(m.kind, ServerMessage::Kind::error);
  EXPECT_EQ(m.error.code, "limit");
  EXPECT_EQ(m.error.message, "too many");

  EXPECT_EQ(parse_server_message(R"({"type":"news","x":1})").kind, ServerMessage::Kind::other);
  EXPECT_THROW(parse_server_message(R"({"type":"gap","missed":1})"), JsonError);
  EXPECT_THROW(parse_server_message("[1]"), JsonError);
  EXPECT_THROW(parse_server_message(R"({"type":"hello","schema":"gpustream/1"})"), JsonError);
}

TEST(TransportProtocol, ClientTextThatIsNotUtf8IsNamedAsSuch) {
  try {
    parse_client_message("{\"type\":\"subscribe\",\"probes\":[\"\xc3\"]}");
    FAIL() << "accepted";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.code(), kErrBadRequest);
    EXPECT_NE(std::string(e.what()).find("UTF-8"), std::string::npos) << e.what();
  }
}

TEST(TransportProtocol, CompactJsonRepairsInvalidUtf8) {
  const auto text = to_compact_json(json::value("cut \xe2\x82"));
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_EQ(text, "\"cut \xef\xbf\xbd\xef\xbf\xbd\"");  // one U+FFFD per bad byte
}

}  // namespace
}  // namespace gpustream::transport::test
