// The schema description (gpustream/detail/schema.hpp) is what the codecs do: the document's
// keys are the table's, in its order; an if_set key is left out when unset; a reader needs the
// required keys and only them.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/detail/schema.hpp"
#include "gpustream/json.hpp"
#include "model/sample_snapshots.hpp"

namespace gpustream {
namespace {

namespace json = boost::json;
namespace schema = detail::schema;

/// The keys the table gives S's object, in order (a MetricSet and an engine's Reading are
/// several keys); `all`: also the if_set ones.
template <typename S>
std::vector<std::string> table_keys(bool all) {
  std::vector<std::string> keys;
  schema::for_each_field<S>([&](const auto& f) {
    using T = typename std::decay_t<decltype(f)>::Type;
    if (!all && f.emit == schema::Emit::if_set) return;
    keys.emplace_back(f.name);
    if constexpr (std::is_same_v<T, MetricSet>) {
      keys.insert(keys.end(), {"sources", "absent"});
      if (all) keys.emplace_back("absent_sources");
    } else if constexpr (std::is_same_v<T, Reading>) {
      keys.emplace_back("source");
      if (all) keys.emplace_back("absent");
    }
  });
  return keys;
}

std::vector<std::string> keys_of(const json::value& v) {
  std::vector<std::string> keys;
  for (const auto& kv : v.as_object()) keys.emplace_back(kv.key());
  return keys;
}

/// A device with every field set.
DeviceSample full_device() {
  DeviceSample d = test::rich_device(0);
  d.parent = "GPU-parent";
  d.mig = MigIdentity{1, 2, "1g.5gb"};
  d.partitioned = true;
  d.throttle_reasons.clear();
  d.throttle_reasons_absent = Absence::no_permission;
  d.processes_absent = Absence::unsupported;
  d.power_samples = {{1'000, 250.5}, {2'000, 251.0}};
  d.pods = {KubernetesPod{"train-0", "ml", "trainer"}};
  return d;
}

TEST(Schema, TheDocumentsKeysAreTheTablesInItsOrder) {
  const json::value device = to_json(full_device());
  EXPECT_EQ(keys_of(device), table_keys<DeviceSample>(true));
  const auto& processes = device.at("processes").as_array();
  EXPECT_EQ(
      keys_of(processes[1]),
      (std::vector<std::string>{"pid", "name", "gpu_memory_bytes", "gpu_utilization_percent",
                                "host_rss_bytes", "per_process_exact", "container", "engines"}));
  EXPECT_EQ(keys_of(processes[1].at("container")), table_keys<ProcessContainer>(true));
  EXPECT_EQ(keys_of(device.at("mig")), table_keys<MigIdentity>(true));
  EXPECT_EQ(keys_of(device.at("engines").at(3)), table_keys<EngineSample>(true));

  GpuSnapshot s = test::rich_snapshot();
  s.node = "node-1";
  std::vector<std::string> snapshot_keys = {"schema"};
  for (auto& k : table_keys<GpuSnapshot>(true)) snapshot_keys.push_back(k);
  EXPECT_EQ(keys_of(to_json(s)), snapshot_keys);
  EXPECT_EQ(keys_of(to_json(*s.host)), table_keys<HostSample>(true));
  EXPECT_EQ(keys_of(to_json(s).at("errors").at(0)), table_keys<SampleError>(true));
}

TEST(Schema, IfSetKeysAreLeftOutWhenUnset) {
  DeviceSample d;
  d.metrics.set(Metric::power_watts, 1.0, Source::nvml);
  d.engines = {{"copy", Reading::of(1.0, Source::nvml)}};
  d.processes = {ProcessSample{}};
  const json::value v = to_json(d);
  EXPECT_EQ(keys_of(v), table_keys<DeviceSample>(false));
  EXPECT_EQ(keys_of(v.at("processes").at(0)), table_keys<ProcessSample>(false));
  EXPECT_EQ(keys_of(v.at("engines").at(0)), table_keys<EngineSample>(false));
  GpuSnapshot s;
  std::vector<std::string> snapshot_keys = {"schema"};
  for (auto& k : table_keys<GpuSnapshot>(false)) snapshot_keys.push_back(k);
  EXPECT_EQ(keys_of(to_json(s)), snapshot_keys);
}

TEST(Schema, AReasonWrittenOnlyWhileItsFieldIsUnset) {
  ProcessSample p;
  p.container_absent = ContainerAbsent::host;
  DeviceSample d;
  d.processes = {p};
  EXPECT_TRUE(to_json(d).at("processes").at(0).as_object().contains("container_absent"));
  d.processes[0].container = ProcessContainer{"docker", "abc", "", ""};
  EXPECT_FALSE(to_json(d).at("processes").at(0).as_object().contains("container_absent"));
}

/// Each key of the device's table, removed from a full device's document: refused exactly when
/// the table says a reader needs it.
TEST(Schema, AReaderNeedsTheRequiredKeysAndOnlyThem) {
  const json::value full = to_json(full_device());
  schema::for_each_field<DeviceSample>([&](const auto& f) {
    json::value v = full;
    v.as_object().erase(f.name);
    bool refused = false;
    try {
      device_from_json(v);
    } catch (const JsonError&) {
      refused = true;
    }
    EXPECT_EQ(refused, f.need == schema::Need::required) << f.name;
  });
  schema::for_each_field<ProcessSample>([&](const auto& f) {
    json::value d = full;
    d.at("processes").at(0).as_object().erase(f.name);
    bool refused = false;
    try {
      device_from_json(d);
    } catch (const JsonError&) {
      refused = true;
    }
    EXPECT_EQ(refused, f.need == schema::Need::required) << f.name;
  });
}

TEST(Schema, ARefusedCombinationIsRefused) {
  json::value v = to_json(full_device());
  v.as_object()["throttle_reasons"] = json::array{"hw_slowdown"};
  try {
    device_from_json(v);
    FAIL() << "accepted";
  } catch (const JsonError& e) {
    EXPECT_STREQ(e.what(), "$.throttle_reasons_absent: throttle reasons both present and absent");
  }
}

}  // namespace
}  // namespace gpustream
