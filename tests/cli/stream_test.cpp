// cli/stream.cpp: watch --container (only_container, the Printer's filter).
#include "stream.hpp"

#include <gtest/gtest.h>

#include <string>

#include "gpustream/json.hpp"

namespace gpustream::cli {
namespace {

const std::string kId = "4f1c2b9d8e7a6f5c4b3a29180716253443526170819a0b1c2d3e4f5a6b7c8d9e";
const std::string kPod = "5b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";

ProcessSample process(std::int64_t pid, std::optional<ProcessContainer> c) {
  ProcessSample p;
  p.pid = pid;
  p.name = "p" + std::to_string(pid);
  p.container = std::move(c);
  if (!p.container) p.container_absent = ContainerAbsent::host;
  return p;
}

GpuSnapshot two_gpus() {
  GpuSnapshot s;
  s.probe = "amd";
  s.devices.resize(2);
  s.devices[0].id = "gpu0";
  s.devices[0].processes = {process(1, ProcessContainer{"containerd", kId, kPod, "burstable"}),
                            process(2, std::nullopt)};
  s.devices[1].id = "gpu1";
  s.devices[1].processes = {process(3, std::nullopt),
                            process(4, ProcessContainer{"docker", std::string(64, 'b'), "", ""})};
  return s;
}

TEST(WatchContainer, AnIdPrefixOrThePodUidSelectsTheProcesses) {
  const auto p = process(1, ProcessContainer{"containerd", kId, kPod, "burstable"});
  EXPECT_TRUE(in_container(p, kId));
  EXPECT_TRUE(in_container(p, kId.substr(0, 12)));
  EXPECT_TRUE(in_container(p, kId.substr(0, 4)));
  EXPECT_FALSE(in_container(p, kId.substr(0, 3)));  // too short to mean one container
  EXPECT_TRUE(in_container(p, kPod));
  EXPECT_FALSE(in_container(p, kPod.substr(0, 8)));  // a pod is named by its whole UID
  EXPECT_FALSE(in_container(p, "bbbb"));
  EXPECT_FALSE(in_container(process(2, std::nullopt), "host"));
}

TEST(WatchContainer, OnlyTheContainersProcessesAndTheirDevicesAreShown) {
  const auto out = only_container(two_gpus(), kId.substr(0, 12));
  ASSERT_EQ(out.devices.size(), 1u);
  EXPECT_EQ(out.devices[0].id, "gpu0");
  ASSERT_EQ(out.devices[0].processes.size(), 1u);
  EXPECT_EQ(out.devices[0].processes[0].pid, 1);

  const auto other = only_container(two_gpus(), "bbbbbbbb");
  ASSERT_EQ(other.devices.size(), 1u);
  EXPECT_EQ(other.devices[0].id, "gpu1");
  EXPECT_TRUE(only_container(two_gpus(), "cccc").devices.empty());
}

TEST(WatchContainer, ThePrinterFiltersAndWithoutAFilterShowsEverything) {
  Printer all(true, false);
  Printer one(true, false, kPod);
  const auto everything = snapshot_from_json_string(all.render(two_gpus()));
  EXPECT_EQ(everything.devices.size(), 2u);
  const auto filtered = snapshot_from_json_string(one.render(two_gpus()));
  ASSERT_EQ(filtered.devices.size(), 1u);
  ASSERT_EQ(filtered.devices[0].processes.size(), 1u);
  ASSERT_TRUE(filtered.devices[0].processes[0].container.has_value());
  EXPECT_EQ(filtered.devices[0].processes[0].container->qos, "burstable");
}

}  // namespace
}  // namespace gpustream::cli
