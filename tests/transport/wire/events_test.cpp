// GPU events on the wire: the `event` message (JSON round trip, old decoders ignore it), the
// /metrics counters (checked by promtool), subscription filters, and a storm against a client
// that does not read (bounded, counted). A vendor's events end to end: events_nvidia_test.cpp.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>

#include <gtest/gtest.h>

#include "gpustream/json.hpp"
#include "gpustream/transport/prometheus_events.hpp"
#include "gpustream/transport/protocol.hpp"
#include "gpustream/transport/protocol_event.hpp"
#include "support/temp_tree.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

constexpr const char* kEventsUuid0 = "GPU-aaaaaaaa-1111-2222-3333-444444444444";

GpuEvent sample_event() {
  GpuEvent e;
  e.sequence = 7;
  e.time_unix_ns = 1764135600123456789;
  e.probe = "nvidia";
  e.device_id = kEventsUuid0;
  e.kind = EventKind::xid;
  e.data = 79;
  return e;
}

TEST(EventMessage, JsonRoundTrip) {
  const auto e = sample_event();
  const auto text = event_message(e);
  EXPECT_EQ(text,
            "{\"type\":\"event\",\"sequence\":7,\"time_unix_ns\":1764135600123456789,"
            "\"probe\":\"nvidia\",\"device\":\"" +
                std::string(kEventsUuid0) + "\",\"kind\":\"xid\",\"data\":79}\n");
  EXPECT_EQ(parse_event_message(text), e);
  auto no_data = e;
  no_data.kind = EventKind::ecc_double_bit;
  no_data.data.reset();
  const auto t2 = event_message(no_data);
  EXPECT_EQ(t2.find("\"data\""), std::string::npos);
  EXPECT_EQ(parse_event_message(t2), no_data);
}

TEST(EventMessage, NewerKindsReadAsOtherAndGarbageIsAnError) {
  auto text = event_message(sample_event());
  text.replace(text.find("\"xid\""), 5, "\"gpu_fell_asleep\"");
  EXPECT_EQ(parse_event_message(text).kind, EventKind::other);
  EXPECT_THROW(parse_event_message("{\"type\":\"event\"}"), JsonError);
  EXPECT_THROW(parse_event_message("[1]"), JsonError);
  EXPECT_THROW(parse_event_message("{\"type\":\"event\",\"sequence\":-1}"), JsonError);
}

TEST(EventMessage, OldDecodersIgnoreIt) {
  // A client of the previous version decodes it as a type it does not know, to be ignored.
  EXPECT_EQ(parse_server_message(event_message(sample_event())).kind, ServerMessage::Kind::other);
}

/// Runs `promtool check metrics` on `text`: its exit code and output.
std::pair<int, std::string> promtool(const std::string& text) {
  gpustream::test::TempTree tmp;
  const auto file = tmp.file("metrics.txt", text);
  const std::string cmd = "/usr/bin/promtool check metrics < '" + file + "' 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(EventMetrics, CountersPassPromtool) {
  EventTotals t;
  t.by_kind[{kEventsUuid0, EventKind::xid}] = 3;
  t.by_kind[{kEventsUuid0, EventKind::ecc_single_bit}] = 1;
  t.by_xid[{kEventsUuid0, "79"}] = 2;
  t.by_xid[{kEventsUuid0, "other"}] = 1;
  t.counters = {4, 0};
  ServerCounters c;
  c.events_sent = 8;
  const auto text = render_event_metrics(t, &c);
  EXPECT_NE(text.find("gpustream_gpu_events_total{device=\"" + std::string(kEventsUuid0) +
                      "\",kind=\"xid\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpustream_gpu_xid_errors_total{device=\"" + std::string(kEventsUuid0) +
                      "\",xid=\"79\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpustream_server_events_sent_total 8\n"), std::string::npos);
  ASSERT_EQ(::access("/usr/bin/promtool", X_OK), 0)
      << "/usr/bin/promtool is missing: install the Debian package 'prometheus'";
  const auto [rc, out] = promtool(text);
  EXPECT_EQ(rc, 0) << out << "\non:\n" << text;
  EXPECT_EQ(out, "") << text;
}

TEST(EventsOnTheWire, SubscriptionFiltersEventsByDevice) {
  Fixture f;
  f.start();
  auto c = connected_tcp(f);
  c->send(R"({"type":"subscribe","devices":["GPU-other"]})");
  ASSERT_TRUE(f.run_until([&] { return c->count("subscribed") == 1; }));
  auto e = sample_event();
  f.channel.events().publish(e);  // GPU-aaaa...: not selected
  e.device_id = "GPU-other";
  f.channel.events().publish(e);
  ASSERT_TRUE(f.run_until([&] { return c->count("event") == 1; }));
  f.run_for(std::chrono::milliseconds{20});
  ASSERT_EQ(c->count("event"), 1U);
  EXPECT_EQ(c->of_type("event")[0].at("device").as_string(), "GPU-other");
  EXPECT_EQ(c->of_type("event")[0].at("sequence").to_number<std::uint64_t>(), 2U);
  EXPECT_TRUE(f.stop());
}

// The worst input for a client's queue: a storm of events to a client that does not read.
// What is queued stays within the queue's bound; the rest is counted as dropped.
TEST(EventsOnTheWire, StormToAClientThatDoesNotReadIsBounded) {
  Fixture f;
  ServerOptions o;
  o.limits.send_queue_messages = 16;
  o.limits.socket_send_buffer = 4096;
  f.start(o);
  Client::Options co;
  co.read = false;
  co.receive_buffer = 4096;
  auto slow = Client::ws(f, co);
  slow->connect();
  ASSERT_TRUE(f.run_until([&] { return slow->connected(); }));
  constexpr std::uint64_t kStorm = 20000;
  auto e = sample_event();
  e.device_id = std::string(200, 'g');
  for (std::uint64_t i = 0; i < kStorm; ++i) f.channel.events().publish(e);
  // The server's own subscription is bounded too: what it did not take is counted there.
  const auto behind = [&] { return f.channel.events().counters().dropped; };
  ASSERT_TRUE(
      f.run_until([&] { return f.server->counters().events_received + behind() == kStorm; }));
  const auto c = f.server->counters();
  EXPECT_LE(c.events_received, f.channel.events().limits().queue + 1);
  EXPECT_EQ(c.events_sent + c.events_dropped, c.events_received);
  EXPECT_GT(c.events_dropped, 0U);
  // At most the queue's bound, plus what the socket buffers and the one write in flight took.
  EXPECT_LT(c.events_sent, kStorm / 10);
  f.server->stop();
}

}  // namespace
}  // namespace gpustream::transport::test
