// MIG identity and the interconnect/health metrics in the model: the JSON codec round trip (text
// and document encoders agree, optional keys left out when unset, bad values refused), and the
// planner placing work on MIG instances and never on their partitioned GPU.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/planner.hpp"
#include "model/sample_snapshots.hpp"

namespace gpustream {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

DeviceSample gpu(std::string id, double total, double free) {
  DeviceSample d;
  d.id = std::move(id);
  d.vendor = Vendor::nvidia;
  d.name = "A100";
  d.metrics.set(Metric::memory_total_bytes, total, Source::nvml);
  d.metrics.set(Metric::memory_free_bytes, free, Source::nvml);
  d.metrics.fill_absent(Absence::unsupported, Source::nvml);
  return d;
}

DeviceSample instance(std::string id, const std::string& parent, unsigned gi, double free) {
  auto d = gpu(std::move(id), 10 * kGiB, free);
  d.parent = parent;
  d.mig = MigIdentity{gi, 0, "1g.10gb"};
  d.name = "A100 MIG 1g.10gb";
  return d;
}

GpuSnapshot mig_snapshot() {
  GpuSnapshot s;
  s.probe = "nvidia";
  auto a = gpu("GPU-a", 80 * kGiB, 60 * kGiB);
  a.partitioned = true;
  a.attributes["mig_mode"] = "enabled";
  a.metrics.set(Metric::pcie_rx_bytes_per_second, 123456789.0, Source::nvml);
  a.metrics.set(Metric::pcie_link_generation, 4, Source::nvml);
  a.metrics.set(Metric::ecc_uncorrected_aggregate, 2, Source::nvml);
  a.metrics.set_absent(Metric::nvlink_rx_bytes_per_second, Absence::not_yet_seeded, Source::nvml);
  s.devices.push_back(a);
  s.devices.push_back(instance("MIG-1", "GPU-a", 1, 9 * kGiB));
  s.devices.push_back(instance("MIG-2", "GPU-a", 4294967295u, 2 * kGiB));  // uint32 max
  s.devices.push_back(gpu("GPU-b", 24 * kGiB, 12 * kGiB));
  return s;
}

TEST(MigJson, RoundTripsThroughTextAndDocument) {
  const auto s = mig_snapshot();
  EXPECT_EQ(snapshot_from_json_string(to_json_string(s)), s);
  EXPECT_EQ(snapshot_from_json(to_json(s)), s);
  EXPECT_EQ(parse_json(to_json_string(s)), to_json(s));  // both encoders write the same
}

TEST(MigJson, KeysAreWrittenOnlyWhenSet) {
  const auto s = mig_snapshot();
  const auto v = parse_json(to_json_string(s));
  const auto& devices = v.at("devices").as_array();
  const auto& a = devices[0].as_object();
  EXPECT_EQ(a.at("partitioned"), true);
  EXPECT_FALSE(a.contains("parent"));
  EXPECT_FALSE(a.contains("mig"));
  const auto& i = devices[1].as_object();
  EXPECT_EQ(i.at("parent"), "GPU-a");
  EXPECT_EQ(i.at("mig"), parse_json(R"({"gpu_instance_id":1,"compute_instance_id":0,)"
                                    R"("profile":"1g.10gb"})"));
  EXPECT_FALSE(i.contains("partitioned"));
  EXPECT_EQ(a.at("metrics").at("pcie_rx_bytes_per_second"), 123456789.0);
  EXPECT_EQ(a.at("absent").at("nvlink_rx_bytes_per_second"), "not_yet_seeded");
}

TEST(MigJson, OlderDocumentsWithoutTheKeysStillRead) {
  // A document from a producer that knows neither MIG nor the new metrics.
  auto v = parse_json(to_json_string(mig_snapshot()));
  auto& d = v.as_object()["devices"].as_array()[1].as_object();
  d.erase("parent");
  d.erase("mig");
  const auto s = snapshot_from_json(v);
  EXPECT_TRUE(s.devices[1].parent.empty());
  EXPECT_FALSE(s.devices[1].mig);
}

TEST(MigJson, BadMigValuesAreRefusedWithTheirPlace) {
  const auto bad = [](const std::string& mig) {
    auto v = parse_json(to_json_string(mig_snapshot()));
    v.as_object()["devices"].as_array()[1].as_object()["mig"] = parse_json(mig);
    try {
      snapshot_from_json(v);
    } catch (const JsonError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(bad(R"({"gpu_instance_id":-1,"compute_instance_id":0,"profile":"x"})")
                .find("$.devices[1].mig.gpu_instance_id"),
            std::string::npos);
  EXPECT_NE(bad(R"({"gpu_instance_id":4294967296,"compute_instance_id":0,"profile":"x"})")
                .find("out of range"),
            std::string::npos);
  EXPECT_NE(bad(R"({"gpu_instance_id":1,"profile":"x"})").find("compute_instance_id"),
            std::string::npos);
  EXPECT_NE(bad(R"("1g.5gb")").find("$.devices[1].mig"), std::string::npos);
}

TEST(MigPlanner, InstancesAreCandidatesAndThePartitionedGpuNever) {
  const auto s = std::make_shared<GpuSnapshot>(mig_snapshot());
  // 5 GiB: MIG-1 (9 GiB free) and GPU-b (12 GiB); not MIG-2 (2 GiB), never GPU-a (60 GiB).
  const auto all = fits({s}, 5ULL << 30);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].device_id, "GPU-b");
  EXPECT_EQ(all[0].parent, "");
  EXPECT_EQ(all[1].device_id, "MIG-1");
  EXPECT_EQ(all[1].parent, "GPU-a");
  // 20 GiB fits only the partitioned GPU's total, which no allocation can get: nothing.
  EXPECT_FALSE(best_device({s}, 20ULL << 30));
}

}  // namespace
}  // namespace gpustream
