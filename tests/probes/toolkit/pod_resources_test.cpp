// probes/toolkit/pod_resources.cpp: the kubelet's device ids as keys, the bounded map, its join
// with the snapshot (devices, and processes whose generated /proc/<pid>/cgroup is a pod's), and
// KubeletWatcher's refresh and backoff driven through a scripted KubeletLister (the gRPC lister
// against a fake kubelet is tests/probes/kubelet/).
#include "gpustream/probes/pod_resources.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "gpustream/model.hpp"
#include "gpustream/probes/process_table.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::probes {
namespace {

using std::chrono::milliseconds;

const KubernetesPod kTrainer{"train-0", "ml", "trainer"};
const KubernetesPod kServer{"infer-1", "serving", "server"};

TEST(PodResources, DeviceKeysAsThePluginsNameThem) {
  EXPECT_EQ(device_key("nvidia.com/gpu", "GPU-8c4a5f8e-0000-1111-2222-333344445555"),
            "GPU-8c4a5f8e-0000-1111-2222-333344445555");
  // Time-slicing and MPS replicas: "<uuid>::<n>" is the GPU itself.
  EXPECT_EQ(device_key("nvidia.com/gpu", "GPU-8c4a5f8e::3"), "GPU-8c4a5f8e");
  EXPECT_EQ(device_key("nvidia.com/mig-1g.10gb", "MIG-2a3b4c5d-6e7f-5000-8000-0123456789ab"),
            "MIG-2a3b4c5d-6e7f-5000-8000-0123456789ab");
  // AMD: PCI bus ids, in any case and domain width.
  EXPECT_EQ(device_key("amd.com/gpu", "0000:C1:00.0"), "pci:0000:c1:00.0");
  EXPECT_EQ(device_key("amd.com/gpu", "00000000:c1:00.0"), "pci:0000:c1:00.0");
  EXPECT_EQ(device_key("amd.com/gpu", "c1:00.0"), "pci:0000:c1:00.0");
  // Intel: card<N>-<share>.
  EXPECT_EQ(device_key("gpu.intel.com/i915", "card1-0"), "card1");
  EXPECT_EQ(device_key("gpu.intel.com/xe", "card0-3"), "card0");
  EXPECT_EQ(device_key("nvidia.com/gpu", "weird::x"), "weird::x") << "no guess at other shapes";

  EXPECT_TRUE(is_gpu_resource("nvidia.com/gpu"));
  EXPECT_TRUE(is_gpu_resource("nvidia.com/mig-3g.40gb"));
  EXPECT_TRUE(is_gpu_resource("amd.com/gpu"));
  EXPECT_TRUE(is_gpu_resource("gpu.intel.com/i915"));
  EXPECT_TRUE(is_gpu_resource("gpu.intel.com/xe"));
  EXPECT_FALSE(is_gpu_resource("intel.com/sriov_netdevice"));
  EXPECT_FALSE(is_gpu_resource("gpu.intel.com/millicores"));
  EXPECT_FALSE(is_gpu_resource("nvidia.com/gpu.shared-nope"));
}

TEST(PodResources, DevicesMatchByIdPciBusIdOrDrmCard) {
  PodResourceMap map;
  EXPECT_TRUE(map.add("nvidia.com/gpu", "GPU-a", kTrainer));
  EXPECT_TRUE(map.add("nvidia.com/mig-1g.10gb", "MIG-m", kServer));
  EXPECT_TRUE(map.add("amd.com/gpu", "0000:c1:00.0", kServer));
  EXPECT_TRUE(map.add("gpu.intel.com/i915", "card1-0", kTrainer));
  EXPECT_TRUE(map.add("example.com/nic", "eth0", kTrainer)) << "not a GPU: skipped, not refused";
  map.finish();
  EXPECT_EQ(map.holds(), 4u);
  EXPECT_EQ(map.refused(), 0u);

  std::vector<DeviceSample> d(6);
  d[0].id = "GPU-a";
  d[1].id = "MIG-m";
  d[1].parent = "GPU-p";
  d[1].pci_bus_id = "00000000:C1:00.0";  // its GPU's bus id: a MIG instance does not take it
  d[2].id = "amd-0";
  d[2].pci_bus_id = "0000:C1:00.0";
  d[3].id = "intel-0";
  d[3].attributes["card"] = "card1";
  d[4].id = "GPU-b";
  d[5].id = "intel-1";
  d[5].attributes["card"] = "card0";
  apply_pods(&map, d);
  EXPECT_EQ(d[0].pods, std::vector{kTrainer});
  EXPECT_EQ(d[1].pods, std::vector{kServer});
  EXPECT_EQ(d[2].pods, std::vector{kServer});
  EXPECT_EQ(d[3].pods, std::vector{kTrainer});
  EXPECT_TRUE(d[4].pods.empty());
  EXPECT_TRUE(d[5].pods.empty());
}

TEST(PodResources, ProcessesInPodsGetTheirDevicesHolderOrAReason) {
  PodResourceMap map;
  map.add("nvidia.com/gpu", "GPU-a", kTrainer);
  map.add("nvidia.com/gpu", "GPU-shared::0", kTrainer);
  map.add("nvidia.com/gpu", "GPU-shared::1", kServer);
  map.add("nvidia.com/gpu", "GPU-shared::2", kServer);  // a second replica, same holder
  map.finish();
  const ProcessContainer in_pod{"containerd", std::string(64, 'c'), "uid-1", "burstable"};
  std::vector<DeviceSample> d(3);
  d[0].id = "GPU-a";
  d[1].id = "GPU-shared";
  d[2].id = "GPU-free";
  for (auto& dev : d) {
    dev.processes.push_back({.pid = 1, .container = in_pod});
    dev.processes.push_back({.pid = 2, .container_absent = ContainerAbsent::host});
  }
  apply_pods(&map, d);
  EXPECT_EQ(d[0].processes[0].pod, kTrainer);
  EXPECT_EQ(d[0].processes[0].pod_absent, PodAbsent::none);
  EXPECT_EQ(d[1].pods, (std::vector{kTrainer, kServer})) << "sorted by namespace, pod, container";
  EXPECT_FALSE(d[1].processes[0].pod);
  EXPECT_EQ(d[1].processes[0].pod_absent, PodAbsent::ambiguous);
  EXPECT_EQ(d[2].processes[0].pod_absent, PodAbsent::not_assigned);
  for (const auto& dev : d) {  // a host process is never given a pod, nor a reason
    EXPECT_FALSE(dev.processes[1].pod);
    EXPECT_EQ(dev.processes[1].pod_absent, PodAbsent::none);
  }

  apply_pods(nullptr, d);  // the kubelet did not answer: what was there is gone
  EXPECT_TRUE(d[0].pods.empty());
  EXPECT_FALSE(d[0].processes[0].pod);
  EXPECT_EQ(d[0].processes[0].pod_absent, PodAbsent::kubelet_unavailable);
  EXPECT_EQ(d[0].processes[1].pod_absent, PodAbsent::none);
}

TEST(PodResources, HostileNamesAreRefusedAndTheHoldsBounded) {
  PodResourceMap map(3);
  EXPECT_FALSE(map.add("nvidia.com/gpu", std::string(254, 'g'), kTrainer));
  EXPECT_FALSE(map.add("nvidia.com/gpu", "GPU-x", {std::string(254, 'p'), "ns", "c"}));
  EXPECT_FALSE(map.add("nvidia.com/gpu", "GPU-x", {"p", "n s", "c"}));
  EXPECT_FALSE(map.add("nvidia.com/gpu", "GPU-x", {"p", "ns", "c\n"}));
  EXPECT_FALSE(map.add("nvidia.com/gpu", "GPU-x", {"p", "", "c"}));
  EXPECT_FALSE(map.add("nvidia.com/gpu", "", kTrainer));
  EXPECT_EQ(map.refused(), 6u);
  EXPECT_TRUE(map.add("nvidia.com/gpu", std::string(253, 'g'), {std::string(253, 'p'), "n", "c"}));
  for (int i = 0; i < 1000; ++i) map.add("nvidia.com/gpu", "GPU-" + std::to_string(i), kTrainer);
  EXPECT_EQ(map.holds(), 3u);
  EXPECT_EQ(map.devices(), 3u);
  EXPECT_EQ(map.bounded(), 998u);
}

TEST(PodResources, JoinedWithTheCgroupsOfAGeneratedProcfs) {
  // Two processes on one GPU: one in a pod's cgroup (v2, systemd driver), one on the host.
  test::TempTree tree;
  const std::string uid = "6f1c2a3b-0000-4c6a-9d9e-1234567890ab";
  std::string uid_ = uid;
  for (auto& c : uid_)
    if (c == '-') c = '_';
  const std::string id(64, 'e');
  tree.file("proc/100/comm", "python\n");
  tree.file("proc/100/statm", "900 250 1 1 0 1 0\n");
  tree.file("proc/100/cgroup",
            "0::/kubepods.slice/kubepods-burstable.slice/"
            "kubepods-burstable-pod" +
                uid_ + ".slice/cri-containerd-" + id + ".scope\n");
  tree.file("proc/200/comm", "Xorg\n");
  tree.file("proc/200/statm", "900 250 1 1 0 1 0\n");
  tree.file("proc/200/cgroup", "0::/system.slice/display-manager.service\n");
  std::vector<DeviceSample> d(1);
  d[0].id = "GPU-a";
  d[0].processes = {{.pid = 100}, {.pid = 200}};
  proc::ProcessTable table(tree.path("proc"));
  table.fill(d);
  ASSERT_TRUE(d[0].processes[0].container);
  ASSERT_EQ(d[0].processes[0].container->pod_uid, uid);

  PodResourceMap map;
  map.add("nvidia.com/gpu", "GPU-a", kTrainer);
  map.finish();
  apply_pods(&map, d);
  EXPECT_EQ(d[0].processes[0].pod, kTrainer);
  EXPECT_EQ(d[0].processes[0].container->id, id) << "the cgroup's attribution stays";
  EXPECT_FALSE(d[0].processes[1].pod);
  EXPECT_EQ(d[0].processes[1].pod_absent, PodAbsent::none);
}

/// A KubeletLister that answers from a script, one entry per call.
class ScriptedLister final : public KubeletLister {
 public:
  explicit ScriptedLister(std::deque<KubeletListResult>* script) : script_(script) {}
  KubeletListResult list() override {
    if (script_->empty()) return {nullptr, "failed", "script ran out"};
    auto r = std::move(script_->front());
    script_->pop_front();
    return r;
  }

 private:
  std::deque<KubeletListResult>* script_;
};

KubeletListResult answer(const std::string& gpu, const KubernetesPod& who) {
  auto map = std::make_shared<PodResourceMap>();
  map->add("nvidia.com/gpu", gpu, who);
  map->set_pods(1);
  return {map, "", ""};
}

TEST(KubeletWatcher, RefreshesBacksOffOnFailureAndDropsTheMap) {
  std::deque<KubeletListResult> script;
  script.push_back(answer("GPU-a", kTrainer));
  script.push_back({nullptr, "deadline", "no answer in 2 s"});
  script.push_back({nullptr, "deadline", "no answer in 2 s"});
  script.push_back({nullptr, "socket_missing", "gone"});
  script.push_back({nullptr, "malformed", "garbage"});
  script.push_back({nullptr, "malformed", "garbage"});
  script.push_back({nullptr, "malformed", "garbage"});
  script.push_back({nullptr, "malformed", "garbage"});
  script.push_back(answer("GPU-a", kServer));  // a new pod holds the GPU
  KubeletWatcher w(std::make_unique<ScriptedLister>(&script), {.refresh = milliseconds(10000),
                                                               .backoff_min = milliseconds(1000),
                                                               .backoff_max = milliseconds(8000)});
  GpuSnapshot s;
  s.devices.resize(1);
  s.devices[0].id = "GPU-a";
  s.devices[0].processes.push_back(
      {.pid = 1, .container = ProcessContainer{"containerd", "", "uid", ""}});

  w.annotate(s);  // before the first answer: unavailable
  EXPECT_EQ(s.devices[0].processes[0].pod_absent, PodAbsent::kubelet_unavailable);

  EXPECT_EQ(w.refresh_once(), milliseconds(10000));
  w.annotate(s);
  EXPECT_EQ(s.devices[0].processes[0].pod, kTrainer);
  EXPECT_EQ(s.devices[0].pods, std::vector{kTrainer});

  // Failures: 1 s, doubling, up to 8 s; the map is dropped at the first.
  const std::vector<long> delays{1000, 2000, 4000, 8000, 8000, 8000, 8000};
  for (long want : delays) EXPECT_EQ(w.refresh_once().count(), want);
  w.annotate(s);
  EXPECT_FALSE(s.devices[0].processes[0].pod);
  EXPECT_EQ(s.devices[0].processes[0].pod_absent, PodAbsent::kubelet_unavailable);
  EXPECT_TRUE(s.devices[0].pods.empty());
  auto st = w.stats();
  EXPECT_FALSE(st.available);
  EXPECT_EQ(st.errors, 7u);
  EXPECT_EQ(st.errors_by_reason["deadline"], 2u);
  EXPECT_EQ(st.errors_by_reason["socket_missing"], 1u);
  EXPECT_EQ(st.errors_by_reason["malformed"], 4u);
  EXPECT_EQ(st.last_error, "malformed");

  // Back: the refresh interval again, and the new holder.
  EXPECT_EQ(w.refresh_once(), milliseconds(10000));
  w.annotate(s);
  EXPECT_EQ(s.devices[0].processes[0].pod, kServer);
  st = w.stats();
  EXPECT_TRUE(st.available);
  EXPECT_EQ(st.refreshes, 2u);
  EXPECT_EQ(st.pods, 1u);
  EXPECT_EQ(st.devices, 1u);
  EXPECT_EQ(st.last_error, "");
  // The next failure starts the backoff from its minimum again.
  EXPECT_EQ(w.refresh_once(), milliseconds(1000));
}

TEST(KubeletWatcher, ItsThreadAsksAtOnceAndStops) {
  std::deque<KubeletListResult> script;
  script.push_back(answer("GPU-a", kTrainer));
  KubeletWatcher w(std::make_unique<ScriptedLister>(&script), {.refresh = milliseconds(3600000)});
  w.start();
  // The first List runs at start; wait for it without a time bound on the assertion.
  while (w.stats().refreshes == 0) std::this_thread::yield();
  EXPECT_TRUE(w.current());
  w.stop();  // wakes the hour-long wait: returns now
  w.stop();  // idempotent
}

}  // namespace
}  // namespace gpustream::probes
