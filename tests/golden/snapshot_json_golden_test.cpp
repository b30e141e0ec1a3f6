// Golden outputs of the SDK's snapshot codec (gpustream/json.hpp): the text writer, the value
// form, and reading the golden text back.
#include <string>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "golden/golden.hpp"
#include "golden/golden_fixtures.hpp"
#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"

namespace gpustream::golden {
namespace {

std::string parts_of(const GpuSnapshot& s) {
  // Each device and the host through the per-part writers, one per line.
  std::string out;
  for (const auto& d : s.devices) {
    append_json(out, d);
    out += '\n';
  }
  if (s.host) {
    append_json(out, *s.host);
    out += '\n';
  }
  return out;
}

TEST(GoldenSnapshotJson, TextWriter) {
  for (const auto& [name, s] : decodable_snapshots()) {
    SCOPED_TRACE(name);
    const auto text = to_json_string(s);
    expect_golden("snapshot/" + name + ".json", text);
    std::string appended = "prefix:";
    append_json(appended, s);
    EXPECT_EQ(appended, "prefix:" + text);
  }
}

TEST(GoldenSnapshotJson, DeviceAndHostWriters) {
  for (const auto& [name, s] : decodable_snapshots()) {
    SCOPED_TRACE(name);
    expect_golden("snapshot/" + name + ".parts.jsonl", parts_of(s));
  }
}

TEST(GoldenSnapshotJson, ValueForm) {
  for (const auto& [name, s] : decodable_snapshots()) {
    SCOPED_TRACE(name);
    const auto v = to_json(s);
    // Boost.JSON's own serializer (what a caller that embeds the value gets) and the codec's
    // compact writer (doubles stay doubles).
    expect_golden("snapshot/" + name + ".value.json", boost::json::serialize(v));
    expect_golden("snapshot/" + name + ".value.compact.json", transport::to_compact_json(v));
  }
}

TEST(GoldenSnapshotJson, GuardedValuesAndBadUtf8) {
  const auto s = guarded_snapshot();
  const auto text = to_json_string(s);
  expect_golden("snapshot/guarded.json", text);
  expect_golden("snapshot/guarded.value.compact.json", transport::to_compact_json(to_json(s)));
  // What the guards made of it reads back and writes the same bytes again.
  EXPECT_EQ(to_json_string(snapshot_from_json_string(golden_text("snapshot/guarded.json"))),
            golden_text("snapshot/guarded.json"));
}

TEST(GoldenSnapshotJson, GoldenTextDecodesToTheFixtureAndReencodesIdentically) {
  for (const auto& [name, s] : decodable_snapshots()) {
    SCOPED_TRACE(name);
    const auto golden = golden_text("snapshot/" + name + ".json");
    const auto decoded = snapshot_from_json_string(golden);
    EXPECT_EQ(decoded, s);
    EXPECT_EQ(to_json_string(decoded), golden);
    const auto from_value = snapshot_from_json(parse_json(golden));
    EXPECT_EQ(to_json_string(from_value), golden);
    // The value form's text decodes to the same snapshot.
    EXPECT_EQ(snapshot_from_json_string(golden_text("snapshot/" + name + ".value.json")), s);
    // Each device and the host read back from their own lines.
    const auto parts = golden_text("snapshot/" + name + ".parts.jsonl");
    const auto lines = split_lines(parts);
    ASSERT_EQ(lines.size(), s.devices.size() + (s.host ? 1 : 0));
    for (std::size_t i = 0; i < s.devices.size(); ++i) {
      const auto d = device_from_json(parse_json(lines[i]));
      EXPECT_EQ(d, s.devices[i]);
      std::string again;
      append_json(again, d);
      EXPECT_EQ(again, lines[i]);
    }
    if (s.host) {
      const auto h = host_from_json(parse_json(lines.back()));
      EXPECT_EQ(h, *s.host);
    }
  }
}

TEST(GoldenSnapshotJson, ProbeStats) {
  std::string out;
  for (const auto& st : probe_stats()) out += transport::to_compact_json(to_json(st)) + "\n";
  expect_golden("snapshot/probe_stats.jsonl", out);
}

}  // namespace
}  // namespace gpustream::golden
