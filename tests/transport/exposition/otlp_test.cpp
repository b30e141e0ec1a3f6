// The OTLP ExportMetricsServiceRequest JSON (docs/operations.md, "OTLP"): the fields of the
// protobuf JSON mapping, the semantic-convention names, units and attributes, cumulative sums.
#include <set>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "gpustream/transport/otlp.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

namespace json = boost::json;

SnapshotPtr snap(GpuSnapshot s, std::uint64_t sequence, std::int64_t time_ns = 0) {
  s.sequence = sequence;
  if (time_ns) s.time_unix_ns = time_ns;
  return std::make_shared<const GpuSnapshot>(std::move(s));
}

OtlpResource resource() { return {"gpu-box", "gpu-box:42", "0.1.0"}; }

json::object parse(const std::string& text) {
  EXPECT_FALSE(text.empty());
  return json::parse(text).as_object();
}

std::map<std::string, std::string> attributes(const json::value& list) {
  std::map<std::string, std::string> out;
  for (const auto& a : list.as_array()) {
    const auto& o = a.as_object();
    EXPECT_EQ(o.size(), 2u);
    out[std::string(o.at("key").as_string())] =
        std::string(o.at("value").as_object().at("stringValue").as_string());
  }
  return out;
}

/// name → metric object, of the first resource's first scope.
std::map<std::string, json::object> metrics_of(const json::object& req, std::size_t resource = 0) {
  std::map<std::string, json::object> out;
  const auto& rm = req.at("resourceMetrics").as_array().at(resource).as_object();
  for (const auto& m :
       rm.at("scopeMetrics").as_array().at(0).as_object().at("metrics").as_array()) {
    const auto& o = m.as_object();
    EXPECT_TRUE(out.emplace(std::string(o.at("name").as_string()), o).second)
        << "two metrics named " << o.at("name");
  }
  return out;
}

const json::array& points(const json::object& metric) {
  const auto* body = metric.if_contains("gauge");
  if (!body) body = &metric.at("sum");
  return body->as_object().at("dataPoints").as_array();
}

TEST(OtlpJson, ResourceScopeAndSchema) {
  OtlpEncoderState state;
  const auto req =
      parse(encode_otlp_metrics({snap(make_snapshot("sim", 2), 1)}, resource(), state));
  ASSERT_EQ(req.size(), 1u);
  const auto& rms = req.at("resourceMetrics").as_array();
  ASSERT_EQ(rms.size(), 1u);
  const auto& rm = rms[0].as_object();
  const auto attrs = attributes(rm.at("resource").as_object().at("attributes"));
  EXPECT_EQ(attrs.at("host.name"), "gpu-box");
  EXPECT_EQ(attrs.at("service.name"), "gpustream");
  EXPECT_EQ(attrs.at("service.instance.id"), "gpu-box:42");
  EXPECT_EQ(attrs.at("service.version"), "0.1.0");
  EXPECT_EQ(rm.at("schemaUrl").as_string(), kOtlpSchemaUrl);
  const auto& sm = rm.at("scopeMetrics").as_array().at(0).as_object();
  EXPECT_EQ(sm.at("scope").as_object().at("name").as_string(), "gpustream");
  EXPECT_FALSE(sm.at("scope").as_object().at("version").as_string().empty());
  EXPECT_EQ(sm.at("schemaUrl").as_string(), kOtlpSchemaUrl);
}

TEST(OtlpJson, SemanticConventionNamesUnitsAndAttributes) {
  OtlpEncoderState state;
  const auto m =
      metrics_of(parse(encode_otlp_metrics({snap(make_snapshot("sim", 2), 1)}, resource(), state)));
  struct Want {
    std::string name, unit, kind;
  };
  for (const auto& w : std::vector<Want>{{"hw.gpu.utilization", "1", "gauge"},
                                         {"hw.gpu.memory.usage", "By", "sum"},
                                         {"hw.gpu.memory.limit", "By", "sum"},
                                         {"hw.power", "W", "gauge"},
                                         {"hw.energy", "J", "sum"},
                                         {"hw.temperature", "Cel", "gauge"},
                                         {"gpustream.gpu.clock_graphics", "MHz", "gauge"},
                                         {"gpustream.gpu.fan", "1", "gauge"}}) {
    ASSERT_TRUE(m.contains(w.name)) << w.name;
    const auto& metric = m.at(w.name);
    EXPECT_EQ(metric.at("unit").as_string(), w.unit) << w.name;
    EXPECT_TRUE(metric.contains(w.kind)) << w.name;
    EXPECT_FALSE(metric.at("description").as_string().empty()) << w.name;
    ASSERT_EQ(points(metric).size(), 2u) << w.name;
    std::set<std::string> ids;
    for (const auto& p : points(metric)) {
      const auto& po = p.as_object();
      const auto a = attributes(po.at("attributes"));
      ids.insert(a.at("hw.id"));
      EXPECT_EQ(a.at("hw.type"), "gpu") << w.name;
      EXPECT_EQ(a.at("hw.vendor"), "simulated") << w.name;
      EXPECT_EQ(a.at("hw.name").rfind("Simulated GPU ", 0), 0u) << w.name;
      EXPECT_EQ(a.at("gpustream.probe"), "sim") << w.name;
      EXPECT_EQ(a.contains("hw.gpu.task"), w.name == "hw.gpu.utilization") << w.name;
      // 64-bit integers are decimal strings in the JSON mapping.
      EXPECT_EQ(po.at("timeUnixNano").as_string(), "1700000000000000000") << w.name;
      EXPECT_NE(po.contains("asInt"), po.contains("asDouble")) << w.name;
    }
    EXPECT_EQ(ids, (std::set<std::string>{"sim-gpu0", "sim-gpu1"})) << w.name;
  }
  // Values in the convention's units: a ratio, whole bytes as asInt strings.
  const auto& util = points(m.at("hw.gpu.utilization"));
  EXPECT_DOUBLE_EQ(util[0].as_object().at("asDouble").as_double(), 0.425);
  EXPECT_EQ(attributes(util[0].as_object().at("attributes")).at("hw.gpu.task"), "general");
  const auto& used = points(m.at("hw.gpu.memory.usage"))[0].as_object();
  EXPECT_EQ(used.at("asInt").as_string(), "1073741824");
  const auto& limit = m.at("hw.gpu.memory.limit").at("sum").as_object();
  EXPECT_EQ(limit.at("isMonotonic").as_bool(), false);          // an UpDownCounter
  EXPECT_EQ(limit.at("aggregationTemporality").as_int64(), 2);  // CUMULATIVE
  EXPECT_DOUBLE_EQ(points(m.at("hw.power"))[0].as_object().at("asDouble").as_double(), 123.25);
}

TEST(OtlpJson, AbsentMetricsAreNotSent) {
  OtlpEncoderState state;
  auto s = make_snapshot("sim", 2);
  s.devices[1].metrics.set_absent(Metric::power_watts, Absence::no_permission);
  for (auto& d : s.devices) d.metrics.set_absent(Metric::temperature_celsius, Absence::lost);
  const auto m = metrics_of(parse(encode_otlp_metrics({snap(s, 1)}, resource(), state)));
  EXPECT_FALSE(m.contains("hw.temperature"));      // absent everywhere: no metric at all
  ASSERT_EQ(points(m.at("hw.power")).size(), 1u);  // one device's point, never a 0
  EXPECT_EQ(attributes(points(m.at("hw.power"))[0].as_object().at("attributes")).at("hw.id"),
            "sim-gpu0");
  EXPECT_FALSE(m.contains("gpustream.gpu.clock_sm"));
  EXPECT_FALSE(m.contains("gpustream.gpu.pcie_rx"));
  // A snapshot with no value at all is no export.
  auto empty = make_snapshot("sim", 1);
  empty.devices[0].metrics = {};
  OtlpEncoderState fresh;
  EXPECT_EQ(encode_otlp_metrics({snap(empty, 1)}, resource(), fresh), "");
}

TEST(OtlpJson, EnergyIsAMonotonicCumulativeSumWithAStartTime) {
  OtlpEncoderState state;
  constexpr std::int64_t t0 = 1'700'000'000'000'000'000;
  constexpr std::int64_t s = 1'000'000'000;
  auto energy_point = [&](double joules, std::uint64_t seq, std::int64_t t) {
    auto g = make_snapshot("sim", 1);
    g.devices[0].metrics.set(Metric::energy_joules, joules, Source::simulated);
    const auto m = metrics_of(parse(encode_otlp_metrics({snap(g, seq, t)}, resource(), state)));
    const auto& sum = m.at("hw.energy").at("sum").as_object();
    EXPECT_EQ(sum.at("isMonotonic").as_bool(), true);
    EXPECT_EQ(sum.at("aggregationTemporality").as_int64(), 2);
    const auto& p = sum.at("dataPoints").as_array().at(0).as_object();
    EXPECT_DOUBLE_EQ(p.at("asDouble").to_number<double>(), joules);  // 100 is written "100"
    EXPECT_EQ(p.at("timeUnixNano").as_string(), std::to_string(t));
    return std::stoll(std::string(p.at("startTimeUnixNano").as_string()));
  };
  EXPECT_EQ(energy_point(100, 1, t0), t0);                // first seen: starts now
  EXPECT_EQ(energy_point(150, 2, t0 + s), t0);            // the same series goes on
  EXPECT_EQ(energy_point(150, 3, t0 + 2 * s), t0);        // flat is still monotonic
  EXPECT_EQ(energy_point(7, 4, t0 + 3 * s), t0 + 2 * s);  // went down (reset): a new start
  EXPECT_EQ(energy_point(9, 5, t0 + 4 * s), t0 + 2 * s);
}

TEST(OtlpJson, ASnapshotIsSentOnceAndForgottenSeriesRestart) {
  OtlpEncoderState state;
  const auto a = snap(make_snapshot("sim", 2), 1);
  EXPECT_FALSE(encode_otlp_metrics({a}, resource(), state).empty());
  EXPECT_EQ(encode_otlp_metrics({a}, resource(), state), "");  // nothing new
  EXPECT_EQ(state.sums.size(), 6u);  // energy + memory usage/limit of two devices
  // The probe's snapshot is gone from the latest cache: its series are forgotten (bounded).
  EXPECT_EQ(encode_otlp_metrics({}, resource(), state), "");
  EXPECT_TRUE(state.sums.empty());
  EXPECT_TRUE(state.sent.empty());
  // A device missing from the next snapshot of its probe is forgotten too.
  EXPECT_FALSE(encode_otlp_metrics({a}, resource(), state).empty());
  EXPECT_FALSE(encode_otlp_metrics({snap(make_snapshot("sim", 1), 2)}, resource(), state).empty());
  EXPECT_EQ(state.sums.size(), 3u);
}

TEST(OtlpJson, EveryMetricHasOneNameAndAUnit) {
  auto s = make_snapshot("sim", 1);
  for (std::size_t i = 0; i < kMetricCount; ++i)
    s.devices[0].metrics.set(static_cast<Metric>(i), 1, Source::simulated);
  OtlpEncoderState state;
  const auto m = metrics_of(parse(encode_otlp_metrics({snap(s, 1)}, resource(), state)));
  EXPECT_EQ(m.size(), kMetricCount);
  for (const auto& [name, metric] : m) {
    EXPECT_TRUE(name.starts_with("hw.") || name.starts_with("gpustream.gpu.")) << name;
    EXPECT_FALSE(metric.at("unit").as_string().empty()) << name;
    EXPECT_EQ(points(metric).size(), 1u) << name;
  }
}

TEST(OtlpJson, FleetNodesAreResourcesOfTheirOwn) {
  auto a = make_snapshot("sim", 1);
  a.node = "node-a";
  auto b = make_snapshot("sim", 2);
  b.node = "node-b";
  OtlpEncoderState state;
  const auto req = parse(encode_otlp_metrics({snap(a, 1), snap(b, 2)}, resource(), state));
  const auto& rms = req.at("resourceMetrics").as_array();
  ASSERT_EQ(rms.size(), 2u);
  std::map<std::string, std::size_t> points_by_host;
  for (std::size_t r = 0; r < 2; ++r) {
    const auto attrs = attributes(rms[r].as_object().at("resource").as_object().at("attributes"));
    points_by_host[attrs.at("host.name")] = points(metrics_of(req, r).at("hw.power")).size();
    EXPECT_EQ(attrs.at("service.instance.id"), attrs.at("host.name"));
  }
  EXPECT_EQ(points_by_host, (std::map<std::string, std::size_t>{{"node-a", 1}, {"node-b", 2}}));
}

TEST(OtlpJson, NamesThatNeedEscapingStayValidJson) {
  auto s = make_snapshot("sim", 1);
  s.devices[0].name = "Odd \"GPU\" \\ name\nline\t\x01 \xff";
  OtlpEncoderState state;
  const auto m = metrics_of(parse(encode_otlp_metrics({snap(s, 1)}, resource(), state)));
  const auto name =
      attributes(points(m.at("hw.power"))[0].as_object().at("attributes")).at("hw.name");
  EXPECT_EQ(name.rfind("Odd \"GPU\" \\ name\nline\t\x01 ", 0), 0u);
}

TEST(OtlpOptions, UrlsAndHeaders) {
  const auto t = parse_otlp_url("http://127.0.0.1:4318/v1/metrics");
  EXPECT_EQ(t.host, "127.0.0.1");
  EXPECT_EQ(t.port, "4318");
  EXPECT_EQ(t.path, "/v1/metrics");
  EXPECT_EQ(parse_otlp_url("http://collector").port, "80");
  EXPECT_EQ(parse_otlp_url("http://collector").path, "/v1/metrics");
  EXPECT_EQ(parse_otlp_url("http://[::1]:4318/x").host, "::1");
  EXPECT_FALSE(t.tls);
  const auto secure = parse_otlp_url("https://collector:4318/v1/metrics");
  EXPECT_TRUE(secure.tls);
  EXPECT_EQ(secure.host, "collector");
  EXPECT_EQ(secure.port, "4318");
  EXPECT_EQ(parse_otlp_url("https://collector").port, "443");
  EXPECT_EQ(parse_otlp_url("https://[::1]/v1/metrics").host, "::1");
  EXPECT_THROW(parse_otlp_url("https://"), std::invalid_argument);
  EXPECT_THROW(parse_otlp_url("ftp://collector/"), std::invalid_argument);
  EXPECT_THROW(parse_otlp_url("collector:4318"), std::invalid_argument);
  EXPECT_THROW(parse_otlp_url("http://:4318/"), std::invalid_argument);
  EXPECT_THROW(parse_otlp_url("http://h:port/"), std::invalid_argument);
  EXPECT_THROW(parse_otlp_url("http://h:1/a b"), std::invalid_argument);
  try {
    parse_otlp_url("http://user:secret@h:1/");
    ADD_FAILURE() << "credentials in the URL accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_otlp_header("Authorization: Bearer abc"),
            (std::pair<std::string, std::string>{"Authorization", "Bearer abc"}));
  EXPECT_EQ(parse_otlp_header("X-Scope-OrgID:team-a ").second, "team-a");
  EXPECT_THROW(parse_otlp_header("no colon"), std::invalid_argument);
  EXPECT_THROW(parse_otlp_header(": v"), std::invalid_argument);
  EXPECT_THROW(parse_otlp_header("Bad Name: v"), std::invalid_argument);
  EXPECT_THROW(parse_otlp_header("Content-Encoding: br"), std::invalid_argument);
  try {
    parse_otlp_header("Authorization: Bearer se\r\ncret");
    ADD_FAILURE() << "a CR LF in a header value accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).find("cret"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpustream::transport::test
