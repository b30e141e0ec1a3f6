// The streams (TCP lines and WebSocket frames): hello, snapshots, subscribe, resume, gaps.
#include <set>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "gpustream/transport/protocol.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

namespace json = boost::json;

std::vector<std::uint64_t> range(std::uint64_t from, std::uint64_t to) {
  std::vector<std::uint64_t> v;
  for (auto i = from; i <= to; ++i) v.push_back(i);
  return v;
}

std::set<std::string> keys(const json::value& o) {
  std::set<std::string> out;
  for (const auto& kv : o.as_object()) out.emplace(kv.key());
  return out;
}

TEST(TransportStream, TcpSendsHelloThenEverySnapshot) {
  Fixture f;
  f.start();
  f.publish("sim", 2);
  auto c = connected_tcp(f);
  const auto hello = c->of_type("hello").at(0);
  EXPECT_EQ(hello.at("schema"), "gpustream/1");
  EXPECT_EQ(hello.at("server"), "gpustream/0.1.0");
  EXPECT_EQ(hello.at("last_sequence").to_number<int>(), 1);
  EXPECT_EQ(hello.at("history_capacity").to_number<int>(), 64);
  const auto& devices = hello.at("devices").as_array();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[1].at("id"), "sim-gpu1");
  EXPECT_EQ(devices[1].at("vendor"), "simulated");
  EXPECT_EQ(devices[1].at("probe"), "sim");
  EXPECT_EQ(devices[1].at("index").to_number<int>(), 1);
  EXPECT_EQ(devices[1].at("pci_bus_id"), "0000:02:00.0");
  ASSERT_EQ(hello.at("probes").as_array().size(), 1u);
  EXPECT_EQ(hello.at("probes").as_array()[0].at("name"), "sim");
  EXPECT_EQ(hello.at("probes").as_array()[0].at("state"), "unknown");

  for (int i = 0; i < 3; ++i) f.publish("sim", 2);
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 3; }));
  EXPECT_EQ(c->sequences(), range(2, 4));
  const auto snap = c->of_type("snapshot").at(0);
  EXPECT_EQ(snap.at("schema"), "gpustream/1");
  EXPECT_EQ(snap.at("probe"), "sim");
  EXPECT_EQ(snap.at("devices").as_array().size(), 2u);
  EXPECT_EQ(snap.begin()->key(), "type");  // "type" comes first
  EXPECT_TRUE(c->garbage().empty());
  EXPECT_TRUE(f.stop());
}

TEST(TransportStream, WebSocketSendsTheSameMessagesAsTcp) {
  Fixture f;
  ServerOptions o;
  f.start(o, [] {
    ProbeStats s;
    s.probe = "sim";
    s.state = ProbeState::backoff;
    s.reason = "tool failed";
    return std::vector<ProbeStats>{s};
  });
  f.publish("sim", 1);
  auto t = connected_tcp(f);
  auto w = connected_ws(f);
  f.publish("sim", 3);
  f.publish("other", 1);
  ASSERT_TRUE(f.run_until([&] { return t->count("snapshot") == 2 && w->count("snapshot") == 2; }));
  EXPECT_EQ(t->messages(), w->messages());
  const auto probes = w->of_type("hello").at(0).at("probes").as_array();
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_EQ(probes[0].at("state"), "backoff");
  EXPECT_EQ(probes[0].at("reason"), "tool failed");
  EXPECT_TRUE(f.stop());
}

TEST(TransportStream, SubscribeFiltersProbesAndDevices) {
  Fixture f;
  f.start();
  auto by_probe = connected_tcp(f);
  auto by_device = connected_ws(f);
  by_probe->send(R"({"type":"subscribe","probes":["b"]})");
  by_device->send(R"({"type":"subscribe","devices":["a-gpu1"]})");
  ASSERT_TRUE(f.run_until(
      [&] { return by_probe->count("subscribed") == 1 && by_device->count("subscribed") == 1; }));
  const auto ack = by_probe->of_type("subscribed").at(0);
  EXPECT_EQ(ack.at("probes"), json::parse(R"(["b"])"));
  EXPECT_TRUE(ack.at("since").is_null());
  EXPECT_TRUE(ack.at("max_rate_hz").is_null());

  f.publish("a", 2);
  f.publish("b", 2);
  f.publish("a", 1);  // has no a-gpu1
  f.publish("a", 2);
  ASSERT_TRUE(f.run_until([&] { return by_device->count("snapshot") == 2; }));
  ASSERT_TRUE(f.run_until([&] { return by_probe->count("snapshot") == 1; }));
  f.run_for(20ms);
  EXPECT_EQ(by_probe->sequences(), std::vector<std::uint64_t>{2});
  EXPECT_EQ(by_device->sequences(), (std::vector<std::uint64_t>{1, 4}));
  for (const auto& s : by_device->of_type("snapshot")) {
    const auto& devs = s.at("devices").as_array();
    ASSERT_EQ(devs.size(), 1u);
    EXPECT_EQ(devs[0].at("id"), "a-gpu1");
  }
  EXPECT_TRUE(f.stop());
}

TEST(TransportStream, FieldsProjectMetricsAndEachProjectionIsSerializedOnce) {
  Fixture f;
  f.start();
  std::vector<std::shared_ptr<Client>> plain, projected;
  for (int i = 0; i < 3; ++i) plain.push_back(i % 2 ? connected_ws(f) : connected_tcp(f));
  for (int i = 0; i < 2; ++i) {
    projected.push_back(i % 2 ? connected_ws(f) : connected_tcp(f));
    projected.back()->send(
        R"({"type":"subscribe","fields":["temperature_celsius","power_watts","fan_rpm"]})");
  }
  ASSERT_TRUE(f.run_until([&] {
    return projected[0]->count("subscribed") == 1 && projected[1]->count("subscribed") == 1;
  }));
  const auto before = f.server->counters().serializations;
  f.publish("sim", 2);
  const auto all = [&] {
    for (auto* v : {&plain, &projected})
      for (auto& c : *v)
        if (c->count("snapshot") != 1) return false;
    return true;
  };
  ASSERT_TRUE(f.run_until(all));
  EXPECT_EQ(f.server->counters().serializations - before, 2u);  // identity + one projection

  const auto dev = projected[0]->of_type("snapshot").at(0).at("devices").as_array().at(0);
  EXPECT_EQ(keys(dev.at("metrics")), (std::set<std::string>{"power_watts", "temperature_celsius"}));
  EXPECT_EQ(keys(dev.at("sources")), (std::set<std::string>{"power_watts", "temperature_celsius"}));
  EXPECT_EQ(keys(dev.at("absent")), (std::set<std::string>{"fan_rpm"}));
  EXPECT_EQ(dev.at("metrics").at("power_watts").as_double(), 123.25);
  EXPECT_EQ(dev.at("id"), "sim-gpu0");
  const auto full = plain[0]->of_type("snapshot").at(0).at("devices").as_array().at(0);
  EXPECT_GT(keys(full.at("metrics")).size(), 5u);
  EXPECT_EQ(projected[0]->messages().back(), projected[1]->messages().back());
  EXPECT_TRUE(f.stop());
}

TEST(TransportStream, ResumeWithSinceHasNoDuplicateAndNoHole) {
  Fixture f(64);
  ServerOptions o;
  o.limits.send_queue_messages = 8;  // the replay (16 and 20) must be paced, not dropped
  f.start(o);
  for (int i = 0; i < 10; ++i) f.publish();
  auto t = connected_tcp(f);
  auto w = connected_ws(f);
  t->send(R"({"type":"subscribe","since":4})");
  w->send(R"({"type":"subscribe","since":0})");
  ASSERT_TRUE(
      f.run_until([&] { return t->count("subscribed") == 1 && w->count("subscribed") == 1; }));
  // Snapshots published while the replay runs (or after it) arrive once, in order, after the
  // history.
  for (int i = 0; i < 5; ++i) f.publish();
  f.run_for(1ms);
  for (int i = 0; i < 5; ++i) f.publish();
  ASSERT_TRUE(f.run_until([&] { return t->count("snapshot") == 16 && w->count("snapshot") == 20; }))
      << ::testing::PrintToString(t->sequences()) << "\n"
      << ::testing::PrintToString(w->sequences());
  f.run_for(20ms);
  EXPECT_EQ(t->sequences(), range(5, 20));
  EXPECT_EQ(w->sequences(), range(1, 20));
  EXPECT_EQ(t->count("gap"), 0u);
  EXPECT_EQ(t->of_type("subscribed").at(0).at("since").to_number<int>(), 4);
  EXPECT_EQ(f.server->counters().snapshots_dropped, 0u);
  EXPECT_TRUE(f.stop());
}

TEST(TransportStream, ResumeFromTooFarBackSaysHowManyWereLost) {
  Fixture f(8);
  f.start();
  for (int i = 0; i < 20; ++i) f.publish();  // the history keeps 13..20
  auto c = connected_ws(f);
  c->send(R"({"type":"subscribe","since":3})");
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 8; }));
  const auto gaps = c->of_type("gap");
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_EQ(gaps[0].at("reason"), "history_too_old");
  EXPECT_EQ(gaps[0].at("after_sequence").to_number<int>(), 3);
  EXPECT_EQ(gaps[0].at("missed").to_number<int>(), 9);  // 4..12
  EXPECT_EQ(c->sequences(), range(13, 20));
  // The gap comes after the ack and before the first snapshot.
  std::vector<std::string> types;
  for (const auto& m : c->messages()) types.emplace_back(m.at("type").as_string());
  EXPECT_EQ(types[1], "subscribed");
  EXPECT_EQ(types[2], "gap");
  EXPECT_EQ(types[3], "snapshot");
  EXPECT_TRUE(f.stop());
}

TEST(TransportStream, SinceFromBeforeAServerRestartResumesFromTheStart) {
  Fixture f;
  f.start();
  for (int i = 0; i < 3; ++i) f.publish();
  auto c = connected_tcp(f);
  c->send(R"({"type":"subscribe","since":500})");
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 3; }));
  EXPECT_EQ(c->of_type("subscribed").at(0).at("since").to_number<int>(), 0);
  EXPECT_EQ(c->sequences(), range(1, 3));
  EXPECT_TRUE(f.stop());
}

TEST(TransportStream, MaxRateKeepsTheNewestSnapshotPerProbe) {
  Fixture f;
  f.start();
  auto c = connected_tcp(f);
  c->send(R"({"type":"subscribe","max_rate_hz":20})");
  ASSERT_TRUE(f.run_until([&] { return c->count("subscribed") == 1; }));
  EXPECT_EQ(c->of_type("subscribed").at(0).at("max_rate_hz").to_number<double>(), 20.0);
  // Five at once: the first goes out, 2..4 are replaced by 5, which goes out one period later.
  // b's 6 is due at once, but snapshots leave in sequence order (protocol.md): it waits behind
  // a's 5 (it went out first, before 5, until issue 11's soak found it).
  for (int i = 0; i < 5; ++i) f.publish("a");
  f.publish("b");
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 3; }));
  f.run_for(120ms);
  EXPECT_EQ(c->sequences(), (std::vector<std::uint64_t>{1, 5, 6}));
  EXPECT_EQ(c->count("gap"), 0u);  // rate limiting is documented, not a loss
  EXPECT_TRUE(f.stop());
}

// Issue 27 (7): the slots were keyed by probe only, so against a fleet (every node has a
// "sim" probe) one node's snapshots took every slot and the other nodes were never sent.
TEST(TransportStream, MaxRateKeepsTheNewestSnapshotPerNodeAndProbe) {
  Fixture f;
  f.start();
  auto c = connected_tcp(f);
  c->send(R"({"type":"subscribe","max_rate_hz":5})");
  ASSERT_TRUE(f.run_until([&] { return c->count("subscribed") == 1; }));
  // Three rounds of three nodes (sequences 1..9): each node's first goes out at once, its
  // third replaces its second and goes out one period later.
  for (int round = 0; round < 3; ++round)
    for (const char* node : {"n1", "n2", "n3"}) {
      auto s = make_snapshot("sim", 1);
      s.node = node;
      f.channel.publish(std::move(s));
    }
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 3; }));
  EXPECT_EQ(c->sequences(), (std::vector<std::uint64_t>{1, 2, 3}));
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 6; }));
  f.run_for(250ms);  // more than a period: nothing else is waiting
  EXPECT_EQ(c->sequences(), (std::vector<std::uint64_t>{1, 2, 3, 7, 8, 9}));
  EXPECT_TRUE(f.stop());
}

TEST(TransportStream, ABadSubscribeGetsAnErrorAndChangesNothing) {
  Fixture f;
  f.start();
  auto c = connected_ws(f);
  c->send(R"({"type":"subscribe","probes":["x"]})");
  c->send(R"({"type":"subscribe","fields":["no_such_metric"]})");
  c->send(R"({"type":"subscribe","max_rate_hz":-1})");
  c->send(R"({"type":"subscribe","since":"yesterday"})");
  c->send(R"({"type":"dance"})");
  ASSERT_TRUE(f.run_until([&] { return c->count("error") == 4; }));
  const auto errors = c->of_type("error");
  for (const auto& e : errors) EXPECT_EQ(e.at("code"), "bad_request");
  EXPECT_NE(std::string(errors[0].at("message").as_string()).find("no_such_metric"),
            std::string::npos);
  f.publish("x");
  f.publish("y");
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == 1; }));
  f.run_for(20ms);
  EXPECT_EQ(c->sequences(), std::vector<std::uint64_t>{1});  // still subscribed to "x" only
  EXPECT_EQ(f.server->counters().messages_rejected, 4u);
  EXPECT_TRUE(f.stop());
}

TEST(TransportStream, SubscribesPerConnectionAreLimited) {
  Fixture f;
  ServerOptions o;
  o.limits.max_subscribes_per_connection = 2;
  f.start(o);
  auto c = connected_tcp(f);
  for (int i = 0; i < 3; ++i) c->send(R"({"type":"subscribe"})");
  ASSERT_TRUE(f.run_until([&] { return c->count("error") == 1; }));
  EXPECT_EQ(c->count("subscribed"), 2u);
  EXPECT_EQ(c->of_type("error").at(0).at("code"), "limit");
  EXPECT_FALSE(c->ended());
  EXPECT_TRUE(f.stop());
}

TEST(TransportStream, TcpLinesTheFullSocketTookInPartArriveWholeOnceTheClientReads) {
  // The server writes each line at once when the socket has room (issue 32); a socket with
  // less room than a line takes part of it, and the rest follows asynchronously. A client that
  // pauses long enough for its socket to fill must still read every line whole, in order.
  Fixture f;
  ServerOptions o;
  o.limits.socket_send_buffer = 8 * 1024;
  o.limits.slow_client_timeout = std::chrono::minutes(10);
  o.limits.write_timeout = std::chrono::minutes(10);
  f.start(o);
  Client::Options paused;
  paused.read = false;
  paused.receive_buffer = 4096;
  auto c = Client::tcp(f, paused);
  c->connect();
  ASSERT_TRUE(f.run_until([&] { return c->connected(); }));
  f.run_for(std::chrono::milliseconds(50));  // the hello is written
  constexpr std::uint64_t kSnapshots = 6;
  for (std::uint64_t i = 0; i < kSnapshots; ++i) {
    f.publish("sim", 2, 40);  // tens of KB a line: more than both socket buffers
    f.run_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(f.server->counters().snapshots_dropped, 0u);
  c->start_reading();
  ASSERT_TRUE(f.run_until([&] { return c->count("snapshot") == kSnapshots; }));
  EXPECT_EQ(c->count("hello"), 1u);
  EXPECT_EQ(c->sequences(), range(1, kSnapshots));
  EXPECT_EQ(c->count("gap"), 0u);
  EXPECT_TRUE(c->garbage().empty());
  EXPECT_FALSE(c->ended());
  EXPECT_TRUE(f.stop());
}

}  // namespace
}  // namespace gpustream::transport::test
