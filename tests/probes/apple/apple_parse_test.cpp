// Parsing `macmon pipe` lines of every schema generation (v0.4–v0.8.1+).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "apple_test_util.hpp"
#include "gpustream/json.hpp"
#include "gpustream/probes/apple_probe.hpp"

namespace gpustream {
namespace {

using test::recorded_lines;

// What a line means once mapped: compared to show that two lines say the same thing.
GpuSnapshot mapped(const MacmonSample& s) {
  GpuSnapshot snap;
  fill_apple_snapshot(snap, s, std::nullopt);
  return snap;
}

TEST(MacmonParse, V04PairsInStructOrder) {
  const auto s = parse_macmon_line(recorded_lines("v0.4")[0]);
  EXPECT_EQ(s.schema, MacmonSchema::pairs);
  EXPECT_EQ(to_string(s.schema), "v0.4-v0.6");
  EXPECT_FALSE(s.timestamp_unix_ns);
  EXPECT_EQ(s.gpu.freq_mhz, 461.0);
  EXPECT_EQ(s.gpu.scaled_ratio, 0.021497859);  // read exactly, not within an ulp
  EXPECT_FALSE(s.gpu.active_ratio);
  EXPECT_EQ(s.ecpu.freq_mhz, 1181.0);
  EXPECT_EQ(s.pcpu.scaled_ratio, 0.015181795);
  EXPECT_FALSE(s.cpu.scaled_ratio);
  EXPECT_EQ(s.cpu_temp_celsius, 43.73614);
  EXPECT_EQ(s.gpu_temp_celsius, 36.95167);
  EXPECT_EQ(s.ram_total_bytes, 25769803776u);
  EXPECT_EQ(s.ram_used_bytes, 20985479168u);
  EXPECT_EQ(s.swap_total_bytes, 4294967296u);
  EXPECT_EQ(s.swap_used_bytes, 2602434560u);
  EXPECT_EQ(s.gpu_power_watts, 0.017451683);
  EXPECT_EQ(s.ane_power_watts, 0.0);
  EXPECT_EQ(s.all_power_watts, 0.22231553);
  EXPECT_EQ(s.sys_power_watts, 5.876533);
  EXPECT_EQ(s.ram_power_watts, 0.11635789);
  EXPECT_EQ(s.gpu_ram_power_watts, 0.0009615385);
  EXPECT_TRUE(s.fans.empty());
  EXPECT_TRUE(s.invalid_fields.empty());
}

TEST(MacmonParse, V06AddsTheTimestamp) {
  const auto s = parse_macmon_line(recorded_lines("v0.6")[0]);
  EXPECT_EQ(s.schema, MacmonSchema::pairs);
  EXPECT_EQ(s.timestamp_unix_ns, 1740429495'427569000);
  EXPECT_EQ(s.gpu_temp_celsius, 0.0);  // as printed; the mapping decides what a 0 means
}

TEST(MacmonParse, V07CpuUsagePctIsARatio) {
  const auto s = parse_macmon_line(recorded_lines("v0.7")[0]);
  EXPECT_EQ(s.schema, MacmonSchema::pairs_cpu_pct);
  EXPECT_EQ(to_string(s.schema), "v0.7");
  EXPECT_EQ(s.cpu.scaled_ratio, 0.1875);
  EXPECT_EQ(s.gpu.freq_mhz, 338.0);
  EXPECT_EQ(s.gpu.scaled_ratio, 0.125);
}

TEST(MacmonParse, V080FlatFieldsWinOverTheDeprecatedPairs) {
  const auto s = parse_macmon_line(recorded_lines("v0.8.0")[0]);
  EXPECT_EQ(s.schema, MacmonSchema::usage_ratio);
  EXPECT_EQ(s.gpu.freq_mhz, 900.0);
  EXPECT_EQ(s.gpu.scaled_ratio, 0.25);
  EXPECT_EQ(s.gpu.active_ratio, 0.5);
  EXPECT_EQ(s.cpu.scaled_ratio, 0.125);
  EXPECT_EQ(s.cpu.active_ratio, 0.25);
  ASSERT_EQ(s.fans.size(), 2u);
  EXPECT_EQ(s.fans[0].name, "fan0");
  EXPECT_EQ(s.fans[0].rpm, 1200.0);
  EXPECT_EQ(s.fans[0].max_rpm, 4900.0);
  EXPECT_FALSE(s.fans[1].max_rpm);  // null in macmon
  EXPECT_TRUE(s.invalid_fields.empty());

  // When the names disagree, the newest one is used.
  const auto mixed = parse_macmon_line(
      R"({"gpu_usage":[100,0.9],"gpu_usage_ratio":0.25,"gpu_freq_mhz":900,"cpu_usage_pct":0.5,)"
      R"("cpu_usage_ratio":0.125})");
  EXPECT_EQ(mixed.gpu.freq_mhz, 900.0);
  EXPECT_EQ(mixed.gpu.scaled_ratio, 0.25);
  EXPECT_EQ(mixed.cpu.scaled_ratio, 0.125);
}

TEST(MacmonParse, V081ScaledRatioWinsOverItsAliases) {
  const auto s = parse_macmon_line(recorded_lines("v0.8.1")[0]);
  EXPECT_EQ(s.schema, MacmonSchema::scaled_ratio);
  EXPECT_EQ(to_string(s.schema), "v0.8.1+");
  EXPECT_EQ(s.gpu.scaled_ratio, 0.375);
  EXPECT_EQ(s.gpu.active_ratio, 0.625);
  EXPECT_EQ(s.cpu.scaled_ratio, 0.15625);
  EXPECT_EQ(s.timestamp_unix_ns, 1773134100'123456789);

  const auto mixed =
      parse_macmon_line(R"({"gpu_usage":[1,0.99],"gpu_usage_ratio":0.5,"gpu_scaled_ratio":0.375,)"
                        R"("cpu_usage_pct":0.9,"cpu_scaled_ratio":0.0625})");
  EXPECT_EQ(mixed.schema, MacmonSchema::scaled_ratio);
  EXPECT_EQ(mixed.gpu.scaled_ratio, 0.375);
  EXPECT_EQ(mixed.gpu.freq_mhz, 1.0);  // no gpu_freq_mhz: from the alias pair
  EXPECT_EQ(mixed.cpu.scaled_ratio, 0.0625);
}

TEST(MacmonParse, KeysInAnyOrderMeanTheSame) {
  std::mt19937 rng(7);
  for (const char* schema : {"v0.4", "v0.6", "v0.7", "v0.8.0", "v0.8.1"}) {
    for (const auto& line : recorded_lines(schema)) {
      const auto original = parse_macmon_line(line);
      auto object = parse_json(line).as_object();
      std::vector<std::pair<std::string, boost::json::value>> items;
      for (auto& [k, v] : object) items.emplace_back(std::string(k), v);
      std::shuffle(items.begin(), items.end(), rng);
      std::reverse(items.begin(), items.end());
      boost::json::object shuffled;
      for (auto& [k, v] : items) shuffled[k] = v;
      const auto again = parse_macmon_line(boost::json::serialize(shuffled));
      EXPECT_EQ(again.schema, original.schema) << schema;
      EXPECT_EQ(mapped(again), mapped(original)) << schema << ": " << line;
    }
  }
}

TEST(MacmonParse, UnknownKeysAreIgnored) {
  const std::string line = recorded_lines("v0.8.1")[1];
  const std::string with_extras =
      R"({"future_metric":{"a":[1,2,{"b":null}]},"gpu_flux":"high","zzz":1e300,)" + line.substr(1);
  const auto s = parse_macmon_line(with_extras);
  EXPECT_TRUE(s.invalid_fields.empty());
  EXPECT_EQ(mapped(s), mapped(parse_macmon_line(line)));
}

TEST(MacmonParse, WrongTypesAreListedAndIgnoredNullsAreMissing) {
  const auto s = parse_macmon_line(
      R"({"gpu_power":"3 W","gpu_usage":[1,2,3],"temp":{"gpu_temp_avg":"hot","cpu_temp_avg":50},)"
      R"("memory":{"ram_total":-5,"ram_usage":1.5},"fans":[1,{"rpm":"x"}],"cpu_power":1.0,)"
      R"("ane_power":null,"timestamp":"yesterday"})");
  EXPECT_FALSE(s.gpu_power_watts);
  EXPECT_FALSE(s.gpu.freq_mhz);
  EXPECT_FALSE(s.gpu_temp_celsius);
  EXPECT_EQ(s.cpu_temp_celsius, 50.0);
  EXPECT_FALSE(s.ram_total_bytes);
  EXPECT_FALSE(s.ram_used_bytes);
  EXPECT_FALSE(s.ane_power_watts);
  EXPECT_FALSE(s.timestamp_unix_ns);
  EXPECT_EQ(s.cpu_power_watts, 1.0);
  ASSERT_EQ(s.fans.size(), 1u);
  EXPECT_EQ(s.fans[0].name, "fan0");
  EXPECT_FALSE(s.fans[0].rpm);
  const std::vector<std::string> expected = {
      "gpu_usage", "temp.gpu_temp_avg", "memory.ram_total", "memory.ram_usage", "gpu_power",
      "fans",      "fans.rpm",          "timestamp"};
  auto got = s.invalid_fields;
  auto want = expected;
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

TEST(MacmonParse, RejectsWhatIsNotAMacmonLine) {
  const std::string half = recorded_lines("v0.8.1")[0].substr(0, 300);
  for (const std::string& bad :
       {std::string("not json"), std::string("[1,2]"), std::string("{}"),
        std::string(R"({"pad":"xxxx"})"), std::string("\x01\x02\xff {{{"), half, std::string(""),
        std::string(R"({"gpu_power":1.0} trailing)")}) {
    EXPECT_THROW(parse_macmon_line(bad), JsonError) << bad;
  }
}

TEST(MacmonParse, SocInfoFromSocInfoLines) {
  const std::string soc =
      test::read_text(std::string(fakes::kFakeMacmonLines) + "/v0.8.1.soc.json");
  const auto s =
      parse_macmon_line(R"({"soc":)" + soc + "," + recorded_lines("v0.8.1")[0].substr(1));
  ASSERT_TRUE(s.soc);
  EXPECT_EQ(s.soc->chip_name, "Apple M4 Pro");
  EXPECT_EQ(s.soc->mac_model, "Mac16,8");
  EXPECT_EQ(s.soc->memory_gb, 24);
  EXPECT_EQ(s.soc->ecpu_cores, 4);
  EXPECT_EQ(s.soc->pcpu_cores, 10);
  EXPECT_EQ(s.soc->gpu_cores, 20);
}

TEST(MacmonParse, Rfc3339Timestamps) {
  EXPECT_EQ(parse_rfc3339_ns("2025-02-24T20:38:15Z"), 1740429495'000000000);
  EXPECT_EQ(parse_rfc3339_ns("2025-02-24T20:38:15.5+00:00"), 1740429495'500000000);
  EXPECT_EQ(parse_rfc3339_ns("2025-02-24T22:38:15.25+02:00"), 1740429495'250000000);
  EXPECT_EQ(parse_rfc3339_ns("2025-02-24T15:08:15-05:30"), 1740429495'000000000);
  EXPECT_EQ(parse_rfc3339_ns("2026-03-10t09:15:00.123456789123z"), 1773134100'123456789);
  EXPECT_EQ(parse_rfc3339_ns("2000-02-29 12:00:00Z"), 951825600'000000000);
  EXPECT_EQ(parse_rfc3339_ns("1969-12-31T23:59:59Z"), -1'000000000);
  for (const char* bad :
       {"", "2025-02-24", "2025-02-24T20:38:15", "2025-13-01T00:00:00Z", "2025-02-24T20:38:15.Z",
        "2025-02-24T20:38:15+0000", "2025-02-24T20:38:15Zjunk", "2025/02/24T20:38:15Z"}) {
    EXPECT_FALSE(parse_rfc3339_ns(bad)) << bad;
  }
}

// Issue 11, defect 8: nanoseconds since 1970 fit an int64 from 1677-09-21 to 2262-04-11; a
// timestamp outside that used to overflow (undefined behaviour). It is now rejected, and the
// line keeps every other field with "timestamp" listed as invalid.
TEST(MacmonParse, TimestampsOutsideTheNanosecondRangeAreRejected) {
  EXPECT_EQ(parse_rfc3339_ns("2262-04-11T23:47:16.854775807Z"),
            std::numeric_limits<std::int64_t>::max());
  EXPECT_FALSE(parse_rfc3339_ns("2262-04-11T23:47:16.854775808Z"));
  EXPECT_FALSE(parse_rfc3339_ns("2263-01-01T00:00:00Z"));
  EXPECT_FALSE(parse_rfc3339_ns("9999-12-31T23:59:59.999999999-23:59"));
  EXPECT_EQ(parse_rfc3339_ns("1677-09-21T00:12:43.145224192Z"),
            std::numeric_limits<std::int64_t>::min());
  EXPECT_FALSE(parse_rfc3339_ns("1677-09-21T00:12:43.145224191Z"));
  EXPECT_FALSE(parse_rfc3339_ns("0000-01-01T00:00:00+23:59"));

  const auto s = parse_macmon_line(
      R"({"gpu_usage": [1000, 0.5], "gpu_power": 2.5, "timestamp": "9999-01-01T00:00:00Z"})");
  EXPECT_FALSE(s.timestamp_unix_ns);
  EXPECT_EQ(s.invalid_fields, std::vector<std::string>{"timestamp"});
  EXPECT_EQ(s.gpu_power_watts, 2.5);
}

// The README examples of macmon itself (shared fixtures, with // comments and trailing commas).
std::optional<std::string> shared_fixture_as_line(const std::string& name) {
  const std::string path = std::string(GPUSTREAM_SHARED_FIXTURES) + "/apple_macmon/" + name;
  if (!std::filesystem::exists(path)) return std::nullopt;
  std::string text = test::read_text(path);
  text = std::regex_replace(text, std::regex("//[^\n]*"), "");
  text = std::regex_replace(text, std::regex(",(\\s*[}\\]])"), "$1");
  text = std::regex_replace(text, std::regex("\\s*\n\\s*"), "");
  return text;
}

TEST(MacmonParse, SharedReadmeExamplesOfEveryGeneration) {
  const auto v042 = shared_fixture_as_line("readme_example_v0.4.2.jsonc");
  const auto v060 = shared_fixture_as_line("readme_example_v0.6.0.jsonc");
  const auto v080 = shared_fixture_as_line("readme_example_v0.8.0.jsonc");
  if (!v042 || !v060 || !v080) GTEST_SKIP() << "../shared/fixtures is not there";
  const auto a = parse_macmon_line(*v042);
  const auto b = parse_macmon_line(*v060);
  const auto c = parse_macmon_line(*v080);
  EXPECT_EQ(a.schema, MacmonSchema::pairs);
  EXPECT_EQ(b.schema, MacmonSchema::pairs);
  EXPECT_EQ(c.schema, MacmonSchema::usage_ratio);
  EXPECT_EQ(b.timestamp_unix_ns, 1740429495'427569000);
  // The same machine state in three generations: the GPU reads the same through all of them.
  for (const auto* s : {&a, &b, &c}) {
    EXPECT_EQ(s->gpu.freq_mhz, 461.0);
    EXPECT_EQ(s->gpu.scaled_ratio, 0.021497859);
    EXPECT_EQ(s->gpu_power_watts, 0.017451683);
    EXPECT_EQ(s->ram_total_bytes, 25769803776u);
    EXPECT_TRUE(s->invalid_fields.empty());
  }
  EXPECT_EQ(c.gpu.active_ratio, 0.09);
  EXPECT_EQ(c.cpu.scaled_ratio, 0.036854);
  ASSERT_EQ(c.fans.size(), 2u);
  EXPECT_EQ(c.fans[1].max_rpm, 5200.0);
}

TEST(MacmonParse, RealPcpuPairsFromIssue46) {
  const std::string path =
      std::string(GPUSTREAM_SHARED_FIXTURES) + "/apple_macmon/real_jq_pcpu_usage_issue46.txt";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "../shared/fixtures is not there";
  std::istringstream in(test::read_text(path));
  int n = 0;
  for (std::string pair; std::getline(in, pair);) {
    if (pair.empty()) continue;
    const auto s = parse_macmon_line(R"({"cpu_power":1.0,"pcpu_usage":)" + pair + "}");
    const auto expected = parse_json(pair).as_array();
    EXPECT_EQ(s.pcpu.freq_mhz, expected[0].to_number<double>());
    EXPECT_EQ(s.pcpu.scaled_ratio, expected[1].as_double());
    ++n;
  }
  EXPECT_EQ(n, 7);
  const auto first = parse_macmon_line(R"({"pcpu_usage":[1812, 0.004728612024337053]})");
  EXPECT_EQ(first.pcpu.scaled_ratio, 0.004728612024337053);
}

}  // namespace
}  // namespace gpustream
