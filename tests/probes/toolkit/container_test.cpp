// The container of a process from /proc/<pid>/cgroup, for the path shapes each runtime creates
// (cgroup v2 and v1, systemd and cgroupfs drivers), written from the runtimes' documented
// naming: docker (libcontainer's "docker-<id>.scope" / "/docker/<id>"), containerd's CRI plugin
// ("cri-containerd-<id>.scope"), CRI-O ("crio-<id>.scope", "crio-conmon-<id>.scope"), podman
// ("libpod-<id>.scope", "/libpod_parent/libpod-<id>"), and the kubelet's pod slices.
#include "gpustream/probes/container.hpp"

#include <gtest/gtest.h>

#include <string>

namespace gpustream::probes {
namespace {

const std::string kId = "3f9a1c2b7d4e5f60718293a4b5c6d7e8f90123456789abcdef0123456789abcd";
const std::string kPod = "5b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";
std::string pod_underscored() {
  std::string s = kPod;
  for (char& c : s) {
    if (c == '-') c = '_';
  }
  return s;
}

ContainerInfo expect_container(const std::string& cgroup_text) {
  const ContainerResult r = parse_cgroup(cgroup_text);
  EXPECT_TRUE(r.container.has_value()) << cgroup_text;
  return r.container.value_or(ContainerInfo{});
}

TEST(Container, DockerSystemdDriverV2) {
  const auto c = expect_container("0::/system.slice/docker-" + kId + ".scope\n");
  EXPECT_EQ(c, (ContainerInfo{"docker", kId, "", ""}));
}

TEST(Container, DockerCgroupfsDriverV1TakesTheFirstLineThatNamesIt) {
  const std::string text = "13:misc:/\n12:rdma:/\n11:memory:/docker/" + kId +
                           "\n10:cpu,cpuacct:/docker/" + kId + "\n1:name=systemd:/docker/" + kId +
                           "\n0::/\n";
  EXPECT_EQ(expect_container(text), (ContainerInfo{"docker", kId, "", ""}));
}

TEST(Container, ContainerdUnderKubernetesWithEachQosClass) {
  const std::string pod = pod_underscored();
  EXPECT_EQ(expect_container("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                             pod + ".slice/cri-containerd-" + kId + ".scope\n"),
            (ContainerInfo{"containerd", kId, kPod, "burstable"}));
  EXPECT_EQ(
      expect_container("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
                       pod + ".slice/cri-containerd-" + kId + ".scope\n"),
      (ContainerInfo{"containerd", kId, kPod, "besteffort"}));
  // Guaranteed pods sit directly under kubepods.slice, with no QoS slice.
  EXPECT_EQ(expect_container("0::/kubepods.slice/kubepods-pod" + pod + ".slice/cri-containerd-" +
                             kId + ".scope\n"),
            (ContainerInfo{"containerd", kId, kPod, "guaranteed"}));
}

TEST(Container, CriOAndItsMonitor) {
  const std::string pod = pod_underscored();
  EXPECT_EQ(
      expect_container("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
                       pod + ".slice/crio-" + kId + ".scope\n"),
      (ContainerInfo{"cri-o", kId, kPod, "besteffort"}));
  // conmon, CRI-O's per-container monitor, runs in the pod's slice but is not the container:
  // only the pod is known.
  EXPECT_EQ(
      expect_container("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
                       pod + ".slice/crio-conmon-" + kId + ".scope\n"),
      (ContainerInfo{"kubernetes", "", kPod, "besteffort"}));
}

TEST(Container, KubeletCgroupfsDriverV1) {
  const std::string text = "5:memory:/kubepods/burstable/pod" + kPod + "/" + kId + "\n";
  EXPECT_EQ(expect_container(text), (ContainerInfo{"kubernetes", kId, kPod, "burstable"}));
  EXPECT_EQ(expect_container("5:memory:/kubepods/pod" + kPod + "/" + kId + "\n"),
            (ContainerInfo{"kubernetes", kId, kPod, "guaranteed"}));
}

TEST(Container, PodmanRootfulRootlessAndCgroupfs) {
  EXPECT_EQ(expect_container("0::/machine.slice/libpod-" + kId + ".scope\n"),
            (ContainerInfo{"podman", kId, "", ""}));
  EXPECT_EQ(expect_container("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" +
                             kId + ".scope/container\n"),
            (ContainerInfo{"podman", kId, "", ""}));
  EXPECT_EQ(expect_container("0::/libpod_parent/libpod-" + kId + "\n"),
            (ContainerInfo{"podman", kId, "", ""}));
}

TEST(Container, HostProcessesAndTheRuntimesOwnDaemonsAreHost) {
  for (const std::string text :
       {"0::/init.scope\n", "0::/system.slice/containerd.service\n",
        "0::/system.slice/docker.service\n", "0::/user.slice/user-1000.slice/session-3.scope\n",
        "0::/\n", "12:memory:/user.slice\n0::/user.slice\n"}) {
    const ContainerResult r = parse_cgroup(text);
    EXPECT_FALSE(r.container.has_value()) << text;
    EXPECT_EQ(r.absent, ContainerAbsent::host) << text;
  }
}

TEST(Container, AContainerMarkWithoutAShapeWeKnowIsUnrecognizedNotHost) {
  // A truncated id, and a runtime prefix with an id that is not 64 hex digits.
  for (const std::string text : {"0::/system.slice/docker-3f9a1c2b.scope\n",
                                 "0::/kubepods.slice/kubepods-burstable.slice/odd\n",
                                 "0::/machine.slice/libpod-NOTHEX.scope\n"}) {
    const ContainerResult r = parse_cgroup(text);
    EXPECT_FALSE(r.container.has_value()) << text;
    EXPECT_EQ(r.absent, ContainerAbsent::unrecognized) << text;
  }
}

TEST(Container, MalformedTextIsSaidToBe) {
  for (const std::string text : {"", "\n\n", "no colons here\n", "0:/only-one-colon\n"}) {
    const ContainerResult r = parse_cgroup(text);
    EXPECT_FALSE(r.container.has_value()) << text;
    EXPECT_EQ(r.absent, ContainerAbsent::malformed) << text;
  }
}

TEST(Container, TheWorstInputIsBoundedInBytes) {
  // Longer than any real cgroup file: refused without being scanned.
  std::string huge = "0::/";
  huge.append(70 * 1024, 'a');
  const ContainerResult r = parse_cgroup(huge);
  EXPECT_FALSE(r.container.has_value());
  EXPECT_EQ(r.absent, ContainerAbsent::malformed);
  // Just under the bound, a container at the very end is still found.
  std::string big = "0::/";
  big.append(60 * 1024, 'a');
  big += "\n0::/docker/" + kId + "\n";
  EXPECT_EQ(expect_container(big).id, kId);
}

TEST(Container, PodUidMustBeAUid) {
  EXPECT_FALSE(container_from_cgroup_path("/kubepods/burstable/podnot-a-uid").has_value());
  EXPECT_FALSE(container_from_cgroup_path("/kubepods/burstable/pod" + kPod + "x").has_value());
}

}  // namespace
}  // namespace gpustream::probes
