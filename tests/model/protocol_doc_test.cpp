// docs/protocol.md is the contract: its example must be exactly what the encoder writes, and its
// tables must name every metric, source and absence reason the model has.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fstream>
#include <sstream>

#include "gpustream/json.hpp"

namespace gpustream {
namespace {

std::string protocol_doc() {
  std::ifstream in(std::string(GPUSTREAM_SOURCE_DIR) + "/docs/protocol.md");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string first_json_block(const std::string& doc) {
  const auto begin = doc.find("```json\n");
  if (begin == std::string::npos) return {};
  const auto start = begin + 8;
  return doc.substr(start, doc.find("```", start) - start);
}

TEST(ProtocolDoc, ExampleIsWhatTheEncoderWrites) {
  const std::string doc = protocol_doc();
  ASSERT_FALSE(doc.empty()) << "docs/protocol.md not found";
  const std::string example = first_json_block(doc);
  ASSERT_FALSE(example.empty()) << "no ```json block";
  const GpuSnapshot s = snapshot_from_json_string(example);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].metrics[Metric::memory_used_bytes].value(), 34359738368.0);
  // Same keys, same values, same kinds of number (integer vs double) as our own output.
  EXPECT_EQ(parse_json(example), parse_json(to_json_string(s)));
  // And the same order: compacting the example gives our bytes.
  std::string compact;
  bool in_string = false;
  for (std::size_t i = 0; i < example.size(); ++i) {
    const char c = example[i];
    if (in_string) {
      compact.push_back(c);
      if (c == '\\')
        compact.push_back(example[++i]);
      else if (c == '"')
        in_string = false;
    } else if (c != ' ' && c != '\n') {  // whitespace between tokens is dropped
      compact.push_back(c);
      in_string = c == '"';
    }
  }
  EXPECT_EQ(compact, to_json_string(s));
}

TEST(ProtocolDoc, NamesEveryEnumValueAndTheWireSection) {
  const std::string doc = protocol_doc();
  const auto mentioned = [&](std::string_view name) {
    return doc.find("`" + std::string(name) + "`") != std::string::npos;
  };
  for (std::size_t i = 0; i < kMetricCount; ++i)
    EXPECT_TRUE(mentioned(to_string(static_cast<Metric>(i)))) << to_string(static_cast<Metric>(i));
  for (int i = 0; i < static_cast<int>(kSourceCount); ++i)
    EXPECT_TRUE(mentioned(to_string(static_cast<Source>(i)))) << i;
  for (int i = 0; i <= static_cast<int>(Absence::not_collected); ++i)
    EXPECT_TRUE(mentioned(to_string(static_cast<Absence>(i)))) << i;
  for (int i = 0; i <= static_cast<int>(Vendor::simulated); ++i)
    EXPECT_TRUE(mentioned(to_string(static_cast<Vendor>(i)))) << i;
  EXPECT_NE(doc.find("## Wire messages (TCP / WebSocket)"), std::string::npos);
}

}  // namespace
}  // namespace gpustream
