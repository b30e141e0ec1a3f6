// The decoder refuses what is not a valid gpustream/1 snapshot, with a JsonError naming the place,
// and accepts what a newer producer may add (unknown keys, unknown metric names).
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <functional>
#include <limits>

#include "gpustream/json.hpp"
#include "model/sample_snapshots.hpp"

namespace gpustream {
namespace {

namespace json = boost::json;
using Mutate = std::function<void(json::object&)>;

std::string error_of_text(std::string_view text) {
  try {
    snapshot_from_json_string(text);
  } catch (const JsonError& e) {
    return e.what();
  }
  return "<no error>";
}

/// The error from decoding the rich snapshot after `mutate`, both as a document and as text.
std::string error_after(const Mutate& mutate, bool also_as_text = true) {
  json::value doc = to_json(test::rich_snapshot());
  mutate(doc.as_object());
  std::string from_doc = "<no error>";
  try {
    snapshot_from_json(doc);
  } catch (const JsonError& e) {
    from_doc = e.what();
  }
  if (also_as_text) {
    EXPECT_EQ(error_of_text(json::serialize(doc)), from_doc) << "text and document paths differ";
  }
  return from_doc;
}

json::object& device0(json::object& o) { return o["devices"].as_array()[0].as_object(); }
json::object& process0(json::object& o) {
  return device0(o)["processes"].as_array()[0].as_object();
}

struct Case {
  const char* what;
  Mutate mutate;
  const char* message;  // the whole expected what()
};

void expect_cases(const std::vector<Case>& cases) {
  for (const auto& c : cases) EXPECT_EQ(error_after(c.mutate), c.message) << c.what;
}

TEST(JsonDecodeErrors, WrongTypes) {
  expect_cases({
      {"top level", [](json::object& o) { o["probe"] = 5; },
       "$.probe: expected a string, got number"},
      {"metric", [](json::object& o) { device0(o)["metrics"].as_object()["power_watts"] = "300"; },
       "$.devices[0].metrics.power_watts: expected a number, got string"},
      {"negative seq", [](json::object& o) { o["sequence"] = -1; },
       "$.sequence: expected an unsigned integer in [0, 2^64), got -1"},
      {"fractional time", [](json::object& o) { o["time_unix_ns"] = 1.5; },
       "$.time_unix_ns: expected an integer in [-2^63, 2^63), got 1.5"},
      {"index", [](json::object& o) { device0(o)["index"] = "0"; },
       "$.devices[0].index: expected an integer, got string"},
      {"devices", [](json::object& o) { o["devices"] = json::object{}; },
       "$.devices: expected an array, got object"},
      {"device", [](json::object& o) { o["devices"].as_array()[1] = nullptr; },
       "$.devices[1]: expected an object, got null"},
      {"process memory", [](json::object& o) { process0(o)["gpu_memory_bytes"] = -4096; },
       "$.devices[0].processes[0].gpu_memory_bytes: expected an unsigned integer in [0, 2^64), "
       "got -4096"},
      {"process gtt", [](json::object& o) { process0(o)["gtt_memory_bytes"] = -1; },
       "$.devices[0].processes[0].gtt_memory_bytes: expected an unsigned integer in [0, 2^64), "
       "got -1"},
      {"bool", [](json::object& o) { process0(o)["per_process_exact"] = "yes"; },
       "$.devices[0].processes[0].per_process_exact: expected true or false, got string"},
      {"throttle", [](json::object& o) { device0(o)["throttle_reasons"].as_array()[1] = 3; },
       "$.devices[0].throttle_reasons[1]: expected a string, got number"},
      {"attribute", [](json::object& o) { device0(o)["attributes"].as_object()["uuid"] = true; },
       "$.devices[0].attributes.uuid: expected a string, got bool"},
      {"host", [](json::object& o) { o["host"].as_object()["memory_total_bytes"] = "1G"; },
       "$.host.memory_total_bytes: expected an unsigned integer, got string"},
      {"error", [](json::object& o) { o["errors"].as_array()[1].as_object()["message"] = 1; },
       "$.errors[1].message: expected a string, got number"},
      {"engine",
       [](json::object& o) {
         device0(o)["engines"].as_array()[0].as_object()["utilization_percent"] = "x";
       },
       "$.devices[0].engines[0].utilization_percent: expected a number, got string"},
  });
}

TEST(JsonDecodeErrors, UnknownEnumNames) {
  expect_cases({
      {"vendor", [](json::object& o) { device0(o)["vendor"] = "nvidiaa"; },
       "$.devices[0].vendor: unknown value \"nvidiaa\""},
      {"source",
       [](json::object& o) { device0(o)["sources"].as_object()["power_watts"] = "nvml2"; },
       "$.devices[0].sources.power_watts: unknown value \"nvml2\""},
      {"absence", [](json::object& o) { device0(o)["absent"].as_object()["fan_rpm"] = "gone"; },
       "$.devices[0].absent.fan_rpm: unknown value \"gone\""},
      {"power state", [](json::object& o) { device0(o)["power_state"] = "asleep"; },
       "$.devices[0].power_state: unknown value \"asleep\""},
      {"energy kind", [](json::object& o) { device0(o)["energy_kind"] = "guess"; },
       "$.devices[0].energy_kind: unknown value \"guess\""},
      {"power kind", [](json::object& o) { device0(o)["power_kind"] = "peak"; },
       "$.devices[0].power_kind: unknown value \"peak\""},
      {"processes absent", [](json::object& o) { device0(o)["processes_absent"] = "gone"; },
       "$.devices[0].processes_absent: unknown value \"gone\""},
      {"throttle absent", [](json::object& o) { device0(o)["throttle_reasons_absent"] = "gone"; },
       "$.devices[0].throttle_reasons_absent: unknown value \"gone\""},
      {"engine absence",
       [](json::object& o) { device0(o)["engines"].as_array()[2].as_object()["absent"] = "later"; },
       "$.devices[0].engines[2].absent: unknown value \"later\""},
  });
}

TEST(JsonDecodeErrors, MissingRequiredKeys) {
  for (const char* key :
       {"schema", "probe", "sequence", "time_unix_ns", "sample_duration_ns", "devices", "errors"})
    EXPECT_EQ(error_after([&](json::object& o) { o.erase(key); }),
              "$." + std::string(key) + ": required key is missing");
  for (const char* key : {"id", "vendor", "index", "name", "pci_bus_id", "metrics", "sources",
                          "absent", "engines", "processes"})
    EXPECT_EQ(error_after([&](json::object& o) { device0(o).erase(key); }),
              "$.devices[0]." + std::string(key) + ": required key is missing");
  for (const char* key : {"pid", "name", "gpu_memory_bytes", "gpu_utilization_percent",
                          "host_rss_bytes", "per_process_exact"})
    EXPECT_EQ(error_after([&](json::object& o) { process0(o).erase(key); }),
              "$.devices[0].processes[0]." + std::string(key) + ": required key is missing");
  for (const char* key : {"name", "utilization_percent"})
    EXPECT_EQ(error_after([&](json::object& o) {
                device0(o)["engines"].as_array()[1].as_object().erase(key);
              }),
              "$.devices[0].engines[1]." + std::string(key) + ": required key is missing");
  for (const char* key : {"code", "message"})
    EXPECT_EQ(
        error_after([&](json::object& o) { o["errors"].as_array()[0].as_object().erase(key); }),
        "$.errors[0]." + std::string(key) + ": required key is missing");
}

TEST(JsonDecodeErrors, OptionalKeysMayBeLeftOutOrNull) {
  json::value doc = to_json(test::rich_snapshot());
  auto& o = doc.as_object();
  o.erase("monotonic_ns");
  o["host"] = nullptr;
  for (const char* key : {"power_state", "throttle_reasons", "attributes", "absent_sources"})
    device0(o).erase(key);
  device0(o)["energy_kind"] = nullptr;
  device0(o)["power_kind"] = nullptr;
  for (const char* key : {"container", "container_absent", "engines"}) process0(o).erase(key);
  GpuSnapshot s = snapshot_from_json(doc);
  EXPECT_EQ(s.monotonic_ns, 0);
  EXPECT_FALSE(s.host);
  EXPECT_EQ(s.devices[0].power_state, PowerState::unknown);
  EXPECT_FALSE(s.devices[0].energy_kind);
  EXPECT_FALSE(s.devices[0].power_kind);
  EXPECT_TRUE(s.devices[0].throttle_reasons.empty());
  EXPECT_TRUE(s.devices[0].attributes.empty());
  // Without absent_sources, the absent fan keeps its reason and loses its source.
  EXPECT_EQ(s.devices[0].metrics[Metric::fan_percent], Reading::missing(Absence::unsupported));
  EXPECT_TRUE(s.devices[0].processes[0].engines.empty());
}

TEST(JsonDecodeErrors, InconsistentMetrics) {
  expect_cases({
      {"throttle both",
       [](json::object& o) { device0(o)["throttle_reasons_absent"] = "unsupported"; },
       "$.devices[0].throttle_reasons_absent: throttle reasons both present and absent"},
      {"both", [](json::object& o) { device0(o)["absent"].as_object()["power_watts"] = "stale"; },
       "$.devices[0].absent.power_watts: metric is both present and absent"},
      {"source of absent",
       [](json::object& o) { device0(o)["sources"].as_object()["fan_rpm"] = "nvml"; },
       "$.devices[0].sources.fan_rpm: source given for a metric with no value"},
      {"absent source of present",
       [](json::object& o) { device0(o)["absent_sources"].as_object()["power_watts"] = "nvml"; },
       "$.devices[0].absent_sources.power_watts: source given for a metric not absent"},
      {"engine",
       [](json::object& o) { device0(o)["engines"].as_array()[0].as_object()["absent"] = "stale"; },
       "$.devices[0].engines[0].absent: engine has a value and an absence reason"},
  });
}

TEST(JsonDecodeErrors, SchemaMustBeOurs) {
  EXPECT_EQ(error_after([](json::object& o) { o["schema"] = "gpustream/2"; }),
            "$.schema: unsupported schema \"gpustream/2\" (this decoder reads \"gpustream/1\")");
  EXPECT_EQ(error_of_text("[]"), "$: expected an object, got array");
  EXPECT_EQ(error_of_text("null"), "$: expected an object, got null");
}

TEST(JsonDecodeErrors, EveryTruncationIsAnError) {
  const std::string text = to_json_string(test::rich_snapshot());
  for (std::size_t n = 0; n < text.size(); ++n) {
    const std::string e = error_of_text(std::string_view(text).substr(0, n));
    ASSERT_EQ(e.rfind("invalid JSON at byte ", 0), 0u) << "prefix " << n << ": " << e;
  }
}

TEST(JsonDecodeErrors, NotJsonAtAll) {
  for (const char* text : {"", "   ", "{", "{\"schema\":}", "{} {}", "{}x", "{'a':1}",
                           "{\"a\":NaN}", "{\"a\":Infinity}", "{\"a\":-Infinity}", "{\"a\":01}",
                           "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}", "// c\n{}"}) {
    const std::string e = error_of_text(text);
    EXPECT_EQ(e.rfind("invalid JSON at byte ", 0), 0u) << text << " -> " << e;
  }
}

TEST(JsonDecodeErrors, HugeNumbers) {
  std::string text = to_json_string(test::rich_snapshot());
  const auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  EXPECT_EQ(error_of_text(replace("\"sequence\":18446744073709551000",
                                  "\"sequence\":99999999999999999999999")),
            "$.sequence: expected an unsigned integer in [0, 2^64), got 1e+23");
  EXPECT_EQ(error_of_text(replace("\"index\":0", "\"index\":3000000000")),
            "$.devices[0].index: integer out of range: 3000000000");
  EXPECT_EQ(error_of_text(replace("\"pid\":4000", "\"pid\":9223372036854775808")),
            "$.devices[0].processes[0].pid: expected an integer in [-2^63, 2^63), got "
            "9223372036854775808");
  // A double too large to represent is refused by the parser; the message shows where.
  const std::string overflow =
      error_of_text(replace("\"power_watts\":312.457", "\"power_watts\":1e400"));
  EXPECT_EQ(overflow.rfind("invalid JSON at byte ", 0), 0u) << overflow;
  EXPECT_NE(overflow.find("power_watts"), std::string::npos) << overflow;
  // Tiny numbers underflow to zero or a subnormal, which is a valid double.
  const GpuSnapshot tiny =
      snapshot_from_json_string(replace("\"power_watts\":312.457", "\"power_watts\":1e-400"));
  EXPECT_EQ(tiny.devices[0].metrics[Metric::power_watts].value(), 0.0);
}

TEST(JsonDecodeErrors, NonFiniteNumberInADocumentBuiltInCode) {
  EXPECT_EQ(error_after(
                [](json::object& o) {
                  device0(o)["metrics"].as_object()["power_watts"] =
                      std::numeric_limits<double>::infinity();
                },
                /*also_as_text=*/false),
            "$.devices[0].metrics.power_watts: expected a finite number");
}

TEST(JsonDecodeErrors, TooDeepIsAnErrorNotACrash) {
  std::string deep(5000, '[');
  const std::string text = R"({"schema":"gpustream/1","x":)" + deep;
  EXPECT_EQ(error_of_text(text).rfind("invalid JSON at byte ", 0), 0u);
}

TEST(JsonDecode, UnknownKeysAndMetricNamesAreIgnored) {
  const GpuSnapshot s = test::rich_snapshot();
  json::value doc = to_json(s);
  auto& o = doc.as_object();
  o["added_later"] = json::object{{"nested", json::array{1, 2}}};
  device0(o)["added_later"] = "x";
  device0(o)["metrics"].as_object()["tensor_core_percent"] = 12.0;
  device0(o)["sources"].as_object()["tensor_core_percent"] = "some-new-source";
  device0(o)["absent"].as_object()["npu_percent"] = "some-new-reason";
  process0(o)["added_later"] = nullptr;
  o["host"].as_object()["added_later"] = 1;
  o["errors"].as_array()[0].as_object()["hint"] = "reboot";
  EXPECT_EQ(snapshot_from_json(doc), s);
  EXPECT_EQ(snapshot_from_json_string(json::serialize(doc)), s);
}

TEST(JsonDecode, MetricInNeitherObjectIsNotCollected) {
  json::value doc = to_json(test::rich_snapshot());
  device0(doc.as_object())["absent"].as_object().erase("fan_rpm");
  const GpuSnapshot s = snapshot_from_json(doc);
  EXPECT_EQ(s.devices[0].metrics[Metric::fan_rpm], Reading{});
  EXPECT_EQ(s.devices[0].metrics[Metric::fan_rpm].reason(), Absence::not_collected);
}

}  // namespace
}  // namespace gpustream
