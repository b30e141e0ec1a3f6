// Golden outputs of the wire protocol (gpustream/transport/protocol.hpp, protocol_event.hpp and
// the projection encoder): every server message from fixed inputs, and the messages read back.
//
// A message as the encoders return it is what a TCP client receives (one line); a WebSocket
// client receives the same bytes without the final '\n' (protocol.hpp), checked here too.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "golden/golden.hpp"
#include "golden/golden_fixtures.hpp"
#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"
#include "gpustream/transport/protocol_event.hpp"
#include "wire/encoder.hpp"  // transport/src/wire: the projection encoder (Projection, Selection)

namespace gpustream::golden {
namespace {

using transport::Projection;

struct NamedProjection {
  std::string name;
  Projection projection;
};

std::vector<NamedProjection> projections() {
  const std::string gpu = "GPU-8f6c2b1e-0000-4a5b-9c1d-123456789abc";
  const std::string mig = "MIG-4f1e0000-1111-5222-8333-444455556666";
  const std::string sim = simulated_device_id(7, 1);
  return {
      {"plain", Projection{}},
      {"fields", Projection::make({}, {Metric::power_watts, Metric::memory_used_bytes,
                                       Metric::fan_rpm, Metric::nvlink_rx_bytes_per_second})},
      {"devices", Projection::make({mig, sim, "no-such-device"}, {})},
      {"devices_fields",
       Projection::make({gpu, sim}, {Metric::utilization_percent, Metric::remapped_rows_failed})},
      {"fields_none_present", Projection::make({}, {Metric::gtt_total_bytes})},
  };
}

std::string frame_of(const std::string& message) {
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(message.back(), '\n');
  return message.substr(0, message.size() - 1);
}

TEST(GoldenWire, SnapshotMessagesAndProjections) {
  auto snaps = decodable_snapshots();
  snaps.push_back({"guarded", guarded_snapshot()});
  for (const auto& [name, s] : snaps) {
    for (const auto& [pname, projection] : projections()) {
      SCOPED_TRACE(name + " / " + pname);
      const auto sel = projection.of(s);
      // A selection that keeps no device sends nothing: record that it is so.
      std::string out = "any=" + std::string(sel.any ? "true" : "false") + " key=" + sel.key + "\n";
      if (sel.any) {
        const auto msg = transport::encode_snapshot_message(s, sel);
        out += msg;
        EXPECT_EQ(frame_of(msg) + "\n", msg);
      }
      expect_golden("wire/snapshot." + name + "." + pname + ".txt", out);
    }
  }
}

TEST(GoldenWire, PlainSnapshotMessageIsTheCodecTextWithTypeFirst) {
  for (const auto& [name, s] : decodable_snapshots()) {
    SCOPED_TRACE(name);
    const auto msg = transport::encode_snapshot_message(s, Projection{}.of(s));
    expect_golden("wire/snapshot_message." + name + ".txt",
                  transport::snapshot_message(to_json_string(s)));
    EXPECT_EQ(msg, transport::snapshot_message(to_json_string(s)));
    // The /api/v1/snapshot element: the message unspliced.
    EXPECT_EQ(transport::snapshot_json_of_message(msg), golden_text("snapshot/" + name + ".json"));
    // A client reads the golden message back into the snapshot.
    const auto parsed = transport::parse_server_message(
        frame_of(golden_text("wire/snapshot_message." + name + ".txt")));
    ASSERT_EQ(parsed.kind, transport::ServerMessage::Kind::snapshot);
    EXPECT_EQ(parsed.snapshot, s);
  }
}

transport::Hello hello(bool with_requests) {
  transport::Hello h;
  h.instance = "3f2a9c7e5b1d4e6f";
  h.last_sequence = 42;
  h.history_capacity = 1024;
  h.probes = {{"nvidia", "available", ""},
              {"amd", "backoff", "amd-smi exited with status 1"},
              {"simulated", "unknown", ""}};
  auto latest = as_latest({full_snapshot(), failed_snapshot(), simulated_snapshots()[1]});
  h.devices = transport::devices_of(latest);
  if (with_requests)
    h.requests = std::vector<std::string>(std::begin(transport::kClientRequests),
                                          std::end(transport::kClientRequests));
  return h;
}

TEST(GoldenWire, Hello) {
  for (const bool requests : {true, false}) {
    const std::string file = requests ? "wire/hello.txt" : "wire/hello.no_requests.txt";
    const auto h = hello(requests);
    expect_golden(file, transport::hello_message(h));
    const auto parsed = transport::parse_server_message(frame_of(golden_text(file)));
    ASSERT_EQ(parsed.kind, transport::ServerMessage::Kind::hello);
    EXPECT_EQ(transport::hello_message(parsed.hello), golden_text(file));
  }
}

TEST(GoldenWire, DevicesJson) {
  // The devices of /api/v1/devices and hello, each as its own object.
  auto latest = as_latest(
      {full_snapshot(), failed_snapshot(), extremes_snapshot(), simulated_snapshots()[0]});
  std::string out;
  for (const auto& d : transport::devices_of(latest))
    out += transport::to_compact_json(transport::to_json(d)) + "\n";
  expect_golden("wire/devices.jsonl", out);
  for (const auto& line : split_lines(golden_text("wire/devices.jsonl"))) {
    const auto d = transport::device_info_from_json(parse_json(line));
    EXPECT_EQ(transport::to_compact_json(transport::to_json(d)), line);
  }
}

TEST(GoldenWire, GapSubscribedErrorMessages) {
  std::string out;
  out += transport::gap_message({41, 3, std::string(kGapDroppedSlowSubscriber)});
  out += transport::gap_message(
      {0, std::numeric_limits<std::uint64_t>::max(), std::string(kGapHistoryTooOld)});
  transport::Subscribed sub;
  sub.request.probes = {"nvidia", "amd"};
  sub.request.devices = {"GPU-1", "dev \"q\""};
  sub.request.fields = {Metric::power_watts, Metric::utilization_percent};
  sub.request.max_rate_hz = 2.5;
  sub.request.since = 40;
  sub.unknown_probes = {"amd"};
  sub.unknown_devices = {"dev \"q\""};
  out += transport::subscribed_message(sub);
  out += transport::subscribed_message(transport::Subscribed{});
  out += transport::error_message(transport::kErrBadRequest, "expected an object, got \"x\"\n");
  out += transport::error_message(transport::kErrLimit, "too many fit requests", "fit-7");
  out += transport::error_message(transport::kErrSlowClient, "bad \xff byte");
  expect_golden("wire/gap_subscribed_error.txt", out);

  // Read back: each decodes to what was encoded (the same bytes once re-encoded).
  const auto lines = split_lines(golden_text("wire/gap_subscribed_error.txt"));
  ASSERT_EQ(lines.size(), 7u);
  const auto g = transport::parse_server_message(lines[0]);
  ASSERT_EQ(g.kind, transport::ServerMessage::Kind::gap);
  EXPECT_EQ(transport::gap_message(g.gap), std::string(lines[0]) + "\n");
  const auto s = transport::parse_server_message(lines[2]);
  ASSERT_EQ(s.kind, transport::ServerMessage::Kind::subscribed);
  EXPECT_EQ(transport::subscribed_message(s.subscribed), std::string(lines[2]) + "\n");
  const auto e = transport::parse_server_message(lines[5]);
  ASSERT_EQ(e.kind, transport::ServerMessage::Kind::error);
  EXPECT_EQ(e.error.id, "fit-7");
  EXPECT_EQ(transport::error_message(e.error.code, e.error.message, e.error.id),
            std::string(lines[5]) + "\n");
}

TEST(GoldenWire, ClientMessages) {
  std::string out;
  transport::SubscribeRequest r;
  out += transport::encode_subscribe(r) + "\n";
  r.probes = {"nvidia"};
  r.devices = {"GPU-1", "MIG-\u00e9"};
  r.fields = {Metric::memory_free_bytes, Metric::power_watts};
  r.max_rate_hz = 0.5;
  r.since = std::numeric_limits<std::uint64_t>::max();
  out += transport::encode_subscribe(r) + "\n";
  out += transport::encode_fit({1ULL << 33, 4, "q1"}) + "\n";
  out += transport::encode_fit({0, transport::kFitDefaultLimit, ""}) + "\n";
  expect_golden("wire/client_messages.txt", out);
  const auto lines = split_lines(golden_text("wire/client_messages.txt"));
  ASSERT_EQ(lines.size(), 4u);
  const auto sub = transport::parse_client_message(lines[1]);
  ASSERT_EQ(sub.kind, transport::ClientMessage::Kind::subscribe);
  EXPECT_EQ(sub.subscribe, r);
  const auto fit = transport::parse_client_message(lines[2]);
  ASSERT_EQ(fit.kind, transport::ClientMessage::Kind::fit);
  EXPECT_EQ(fit.fit, (transport::FitRequest{1ULL << 33, 4, "q1"}));
}

TEST(GoldenWire, FitResultAndFitJson) {
  auto latest = as_latest({full_snapshot(), extremes_snapshot(), simulated_snapshots()[1]});
  const auto fits = transport::local_fits(latest, 1ULL << 20, kWall + 2 * kSecond);
  std::string out;
  out += transport::fit_result_message("q1", 1ULL << 20, fits, 16);
  out += transport::fit_result_message("", 1ULL << 20, fits, 1);
  out += transport::fit_result_message("none", std::numeric_limits<std::uint64_t>::max(),
                                       std::vector<transport::FitEntry>{}, 16);
  out += transport::fit_json(fits, 1ULL << 20);
  expect_golden("wire/fit.txt", out);
  const auto lines = split_lines(golden_text("wire/fit.txt"));
  ASSERT_EQ(lines.size(), 4u);
  const auto parsed = transport::parse_server_message(lines[0]);
  ASSERT_EQ(parsed.kind, transport::ServerMessage::Kind::fit_result);
  EXPECT_EQ(parsed.fit.fits, fits);
}

TEST(GoldenWire, EventMessages) {
  std::string out;
  std::string objects;
  for (const auto& e : events()) {
    out += transport::event_message(e);
    objects += transport::to_compact_json(transport::event_to_json(e)) + "\n";
  }
  expect_golden("wire/events.txt", out);
  expect_golden("wire/events.objects.jsonl", objects);
  const auto lines = split_lines(golden_text("wire/events.txt"));
  const auto evs = events();
  ASSERT_EQ(lines.size(), evs.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(transport::parse_event_message(lines[i]), evs[i]);
    EXPECT_EQ(transport::parse_if_event_message(lines[i]), evs[i]);
  }
}

}  // namespace
}  // namespace gpustream::golden
