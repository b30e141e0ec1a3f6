// The SDK's one JSON text writer (gpustream/detail/json_text.hpp): any boost::json::value with
// the codec's rules, and the snapshot with a message's "type" and a projection's metrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gpustream/detail/json_text.hpp"
#include "gpustream/json.hpp"
#include "model/sample_snapshots.hpp"

namespace gpustream {
namespace {

namespace json = boost::json;

std::string text_of(const json::value& v) {
  std::string out;
  detail::append_json_value(out, v);
  return out;
}

TEST(JsonText, DoublesStayDoublesAndIntegersAreExact) {
  EXPECT_EQ(text_of(json::value(64.0)), "64.0");
  EXPECT_EQ(text_of(json::value(-0.0)), "-0.0");
  EXPECT_EQ(text_of(json::value(1e100)), "1e+100");
  EXPECT_EQ(text_of(json::value(0.1 + 0.2)), "0.30000000000000004");
  EXPECT_EQ(text_of(json::value(std::numeric_limits<std::int64_t>::min())), "-9223372036854775808");
  EXPECT_EQ(text_of(json::value(std::numeric_limits<std::uint64_t>::max())),
            "18446744073709551615");
  EXPECT_EQ(text_of(json::value(std::nan(""))), "null");
  EXPECT_EQ(text_of(json::value(-std::numeric_limits<double>::infinity())), "null");
}

TEST(JsonText, EscapesAndRepairsStringsAndKeys) {
  const json::object o{{"k\"\\\n\x01", "tab\there \xc3\x28 \xe2\x82\xac /"}};
  EXPECT_EQ(text_of(o), "{\"k\\\"\\\\\\n\\u0001\":\"tab\\there \xef\xbf\xbd( \xe2\x82\xac /\"}");
}

// DEL and the C1 controls (U+0080..U+009F: U+009B is a terminal's CSI) are escaped, so a JSON
// line on a terminal cannot drive it; the rest of U+0080..U+00FF and longer sequences are kept,
// and the text decodes to the same string.
TEST(JsonText, EscapesDelAndC1ControlsAndKeepsOtherCharacters) {
  const std::string raw =
      "a\x7f b\xc2\x9b[31m c\xc2\x80\xc2\x9f d\xc2\xa0\xc2\xbf \xc3\xa9\xe2\x82\xac";
  const std::string text = text_of(json::value(raw));
  EXPECT_EQ(text,
            "\"a\\u007f b\\u009b[31m c\\u0080\\u009f d\xc2\xa0\xc2\xbf \xc3\xa9\xe2\x82\xac\"");
  EXPECT_EQ(json::parse(text).as_string(), raw);
}

TEST(JsonText, KeepsMemberOrderAndNesting) {
  const json::object o{{"z", json::array{1, nullptr, true, false, "s"}}, {"a", json::object{}}};
  EXPECT_EQ(text_of(o), R"({"z":[1,null,true,false,"s"],"a":{}})");
}

TEST(JsonText, AppendsToWhatIsThere) {
  std::string out = "head:";
  detail::append_json_value(out, json::value(1.5));
  EXPECT_EQ(out, "head:1.5");
}

TEST(JsonText, SnapshotWithATypeIsTheCodecsDocumentWithTheTypeFirst) {
  const GpuSnapshot s = test::rich_snapshot();
  std::string message;
  detail::append_snapshot_json(message, s, {"snapshot"});
  EXPECT_EQ(message, "{\"type\":\"snapshot\"," + to_json_string(s).substr(1));
  std::string plain;
  detail::append_snapshot_json(plain, s, {});
  EXPECT_EQ(plain, to_json_string(s));
}

/// The codec's document with every metric outside `fields` removed from the four metric objects
/// of each device, "absent_sources" left out when it ends empty: what a projection means.
json::value projected_document(const GpuSnapshot& s, const std::vector<Metric>& fields) {
  json::value v = to_json(s);
  for (auto& d : v.at("devices").as_array()) {
    json::object kept;
    for (const auto& kv : d.as_object()) {
      const std::string_view key = kv.key();
      if (key != "metrics" && key != "sources" && key != "absent" && key != "absent_sources") {
        kept.emplace(key, kv.value());
        continue;
      }
      json::object part;
      for (const auto& m : kv.value().as_object()) {
        const auto metric = metric_from_string(m.key());
        if (metric && std::find(fields.begin(), fields.end(), *metric) != fields.end())
          part.emplace(m.key(), m.value());
      }
      if (key != "absent_sources" || !part.empty()) kept.emplace(key, std::move(part));
    }
    d = std::move(kept);
  }
  return v;
}

TEST(JsonText, AProjectionIsTheDocumentWithTheOtherMetricsLeftOut) {
  GpuSnapshot s = test::rich_snapshot();
  // Two attribute keys that are not UTF-8 repair to one key: the document holds the first.
  s.devices[1].attributes = {{"k\xff", "a"}, {"k\xfe", "b"}, {"z", "c"}};
  s.host->metrics = {{"m\xff", 1.0}, {"m\xfe", 2.0}};
  const std::vector<std::vector<Metric>> projections = {
      {Metric::power_watts},
      {Metric::memory_used_bytes, Metric::fan_percent, Metric::fan_rpm, Metric::gtt_total_bytes},
      {Metric::fan_percent},
      {Metric::remapped_rows_failed}};
  for (const auto& fields : projections) {
    std::string text;
    detail::append_snapshot_json(text, s, {"", &fields});
    EXPECT_EQ(text, text_of(projected_document(s, fields)));
  }
  // Without a projection a repaired key is written as often as it was given (in byte order).
  EXPECT_NE(to_json_string(s).find("\"k\xef\xbf\xbd\":\"b\",\"k\xef\xbf\xbd\":\"a\""),
            std::string::npos);
}

}  // namespace
}  // namespace gpustream
