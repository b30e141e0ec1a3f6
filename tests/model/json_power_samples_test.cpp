// DeviceSample::power_samples in gpustream/1: [monotonic_ns, watts] pairs after the metrics, left
// out when empty, exact through both encoders, and a reader that refuses what the model forbids
// (out of order, after the snapshot, negative or non-numeric watts, not a pair) and more than
// kMaxPowerSamplesPerDevice of them.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdint>
#include <limits>
#include <string>

#include "gpustream/json.hpp"

namespace gpustream {
namespace {

namespace json = boost::json;

GpuSnapshot with_samples(std::vector<PowerSample> samples) {
  GpuSnapshot s;
  s.probe = "nvidia";
  s.monotonic_ns = 5'000'000'000;
  DeviceSample d;
  d.id = "GPU-1";
  d.vendor = Vendor::nvidia;
  d.metrics.set(Metric::power_watts, 312.5, Source::nvml);
  d.power_samples = std::move(samples);
  s.devices.push_back(std::move(d));
  DeviceSample other;
  other.id = "GPU-2";
  s.devices.push_back(std::move(other));
  return s;
}

std::string what_of(const std::string& text) {
  try {
    snapshot_from_json_string(text);
  } catch (const JsonError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(JsonPowerSamples, PairsAfterTheMetricsExactThroughBothEncoders) {
  const auto s = with_samples({{4'940'000'000, 301.25},
                               {4'960'000'017, 309.5},
                               {4'980'000'000, 0.1 + 0.2},
                               {5'000'000'000, 1e-300}});
  const std::string text = to_json_string(s);
  EXPECT_NE(text.find(R"("absent":{)"), std::string::npos);
  EXPECT_LT(text.find(R"("absent":{)"), text.find(R"("power_samples")"));
  EXPECT_NE(text.find(R"("power_samples":[[4940000000,301.25],[4960000017,309.5],)"
                      R"([4980000000,0.30000000000000004],[5000000000,1e-300]],"throttle)"),
            std::string::npos)
      << text;
  EXPECT_EQ(snapshot_from_json_string(text), s);
  EXPECT_EQ(snapshot_from_json(to_json(s)), s);
  EXPECT_EQ(parse_json(text), to_json(s));
  EXPECT_EQ(device_from_json(to_json(s.devices[0])), s.devices[0]);
  // Left out where there are none.
  EXPECT_EQ(text.find("power_samples"), text.rfind("power_samples"));
  EXPECT_EQ(to_json_string(with_samples({})).find("power_samples"), std::string::npos);
  EXPECT_TRUE(
      snapshot_from_json_string(to_json_string(with_samples({}))).devices[0].power_samples.empty());
}

TEST(JsonPowerSamples, WholeWattsAreStillDoublesAndExtremeTimesRoundTrip) {
  constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
  const auto s = with_samples({{kMin, 250.0}, {kMin + 1, 0.0}, {-1, 1.5}, {0, 2.0}});
  const std::string text = to_json_string(s);
  EXPECT_NE(text.find(R"([[-9223372036854775808,250.0],[-9223372036854775807,0.0],[-1,1.5],)"
                      R"([0,2.0]])"),
            std::string::npos)
      << text;
  EXPECT_EQ(snapshot_from_json_string(text), s);
}

TEST(JsonPowerSamples, ANonFiniteReadingIsLeftOutNeverWritten) {
  const auto s =
      with_samples({{1, 10.0}, {2, std::numeric_limits<double>::quiet_NaN()}, {3, 30.0}});
  const auto back = snapshot_from_json_string(to_json_string(s));
  ASSERT_EQ(back.devices[0].power_samples.size(), 2u);
  EXPECT_EQ(back.devices[0].power_samples[1], (PowerSample{3, 30.0}));
  EXPECT_EQ(snapshot_from_json(to_json(s)), back);
}

TEST(JsonPowerSamples, TheReaderRefusesWhatTheModelForbids) {
  const std::string good = to_json_string(with_samples({{4'000'000'000, 1.0}}));
  const std::string list = R"([[4000000000,1.0]])";
  ASSERT_NE(good.find(list), std::string::npos);
  const auto with = [&](const std::string& replacement) {
    std::string t = good;
    t.replace(t.find(list), list.size(), replacement);
    return what_of(t);
  };
  EXPECT_EQ(with(list), "(accepted)");
  const struct {
    const char* list;
    const char* says;
  } cases[] = {
      {R"([[2,1.0],[1,1.0]])",
       "$.devices[0].power_samples[1][0]: power samples must be in strictly increasing"},
      {R"([[2,1.0],[2,1.5]])", "strictly increasing"},
      {R"([[5000000001,1.0]])", "$.devices[0].power_samples: a power sample after the snapshot"},
      {R"([[1,-0.5]])", "$.devices[0].power_samples[0][1]: negative power"},
      {R"([[1,"1"]])", "$.devices[0].power_samples[0][1]: expected a number, got string"},
      {R"([[1,null]])", "expected a number, got null"},
      {R"([[1.5,1.0]])", "$.devices[0].power_samples[0][0]: expected an integer"},
      {R"([[1]])", "$.devices[0].power_samples[0]: expected [monotonic_ns, watts]"},
      {R"([[1,1.0,2]])", "expected [monotonic_ns, watts]"},
      {R"([{"monotonic_ns":1,"watts":1.0}])", "$.devices[0].power_samples[0]: expected an array"},
      {R"({"1":1.0})", "$.devices[0].power_samples: expected an array, got object"},
  };
  for (const auto& c : cases) {
    const auto what = with(c.list);
    EXPECT_NE(what.find(c.says), std::string::npos) << c.list << " -> " << what;
  }
}

TEST(JsonPowerSamples, AtMostTheBoundPerDeviceWithTheLongestPairs) {
  // The worst input: pairs of the longest text there is, one past the bound, then at it.
  constexpr auto kMax = kMaxPowerSamplesPerDevice;
  static_assert(sizeof(PowerSample) == 16);  // kMax × 16 bytes = 64 KiB a device in memory
  const auto list = [](std::size_t n) {
    std::string t = "[";
    for (std::size_t i = 0; i < n; ++i)
      t += (i ? "," : "") + std::string("[-") +
           std::to_string(9'223'372'036'854'775'807LL - static_cast<long long>(i)) +
           ",1.7976931348623157e+308]";
    return t + "]";
  };
  EXPECT_EQ(list(1).size(), 2 + 46u);  // the longest pair: 46 bytes of text
  const std::string base = to_json_string(with_samples({{4'000'000'000, 1.0}}));
  const std::string one = R"([[4000000000,1.0]])";
  const auto doc = [&](std::size_t n) {
    std::string t = base;
    t.replace(t.find(one), one.size(), list(n));
    return t;
  };
  const auto over = what_of(doc(kMax + 1));
  EXPECT_NE(over.find("$.devices[0].power_samples: more than 4096 power samples (4097)"),
            std::string::npos)
      << over.substr(0, 200);
  const auto at = snapshot_from_json_string(doc(kMax));
  ASSERT_EQ(at.devices[0].power_samples.size(), kMax);
  EXPECT_LT(at.devices[0].power_samples.front().monotonic_ns, 0);
}

}  // namespace
}  // namespace gpustream
