// The snapshot message's encoder (transport/src/wire/encoder.hpp): a projection keeps the
// snapshot's own fields — the fleet's node among them — and only the devices it selects.
#include "wire/encoder.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpustream/json.hpp"

namespace gpustream::transport::test {
namespace {

GpuSnapshot two_devices_of_a_node() {
  GpuSnapshot s;
  s.probe = "nvidia";
  s.node = "rack1-n2";
  s.sequence = 41;
  s.time_unix_ns = 1'700'000'000'000'000'000;
  s.monotonic_ns = 5'000'000'000;
  s.sample_duration_ns = 1'000'000;
  for (int i = 0; i < 2; ++i) {
    DeviceSample d;
    d.id = "GPU-" + std::to_string(i);
    d.index = i;
    d.metrics.set(Metric::utilization_percent, 10.0 * (i + 1), Source::nvml);
    s.devices.push_back(std::move(d));
  }
  s.errors.push_back({"tool_failed", "one probe call failed", "GPU-1"});
  return s;
}

TEST(SnapshotEncoder, ADeviceProjectionKeepsTheSnapshotsNodeAndOwnFields) {
  const auto s = two_devices_of_a_node();
  const auto sel = Projection::make({"GPU-1"}, {}).of(s);
  ASSERT_FALSE(sel.all_devices);
  const auto got =
      snapshot_from_json_string(snapshot_json_of_message(encode_snapshot_message(s, sel)));
  EXPECT_EQ(got.node, "rack1-n2");
  EXPECT_EQ(got.probe, s.probe);
  EXPECT_EQ(got.sequence, s.sequence);
  EXPECT_EQ(got.time_unix_ns, s.time_unix_ns);
  EXPECT_EQ(got.monotonic_ns, s.monotonic_ns);
  EXPECT_EQ(got.errors, s.errors);
  ASSERT_EQ(got.devices.size(), 1u);
  EXPECT_EQ(got.devices[0].id, "GPU-1");
}

TEST(SnapshotEncoder, WithoutAProjectionTheMessageIsTheWholeSnapshot) {
  const auto s = two_devices_of_a_node();
  const auto got =
      snapshot_from_json_string(snapshot_json_of_message(encode_snapshot_message(s, Selection{})));
  EXPECT_EQ(got.node, "rack1-n2");
  EXPECT_EQ(got.devices.size(), 2u);
}

}  // namespace
}  // namespace gpustream::transport::test
