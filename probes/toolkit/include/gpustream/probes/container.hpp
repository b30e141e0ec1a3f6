// container.hpp — which container a process belongs to, from its /proc/<pid>/cgroup.
//
// Both cgroup versions: v2's single "0::/path" line, and v1's "N:controllers:/path" lines (the
// first line whose path names a container wins; the memory/pids/cpu hierarchies all carry it).
// The runtimes, by the path shapes they create (systemd and cgroupfs cgroup drivers):
//
//   docker      /docker/<id>                    /system.slice/docker-<id>.scope
//   containerd  /kubepods/<qos>/pod<uid>/<id>
//   .../kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope
//               /system.slice/containerd.service/... (not a container: containerd itself)
//   cri-o       .../crio-<id>.scope             (crio-conmon-<id>.scope is conmon, not a container)
//   podman      /machine.slice/libpod-<id>.scope, user@N.service/.../libpod-<id>.scope,
//               /libpod_parent/libpod-<id>
//
// Kubernetes: the pod UID comes from the `pod<uid>` element (systemd writes it with `_` for `-`;
// it is given back with `-`) and the QoS class from the slice: kubepods-besteffort /
// kubepods-burstable, and no QoS element for guaranteed pods. A container id is 64 hex digits;
// anything else is not taken for one.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gpustream/model.hpp"

namespace gpustream::probes {

/// The container (gpustream::ProcessContainer, model.hpp).
using ContainerInfo = ProcessContainer;

/// A container, or why there is none: `host` (the host's cgroups), `unrecognized` (a runtime's
/// or the kubelet's mark that no shape above matches), `malformed` (not the cgroup format).
struct ContainerResult {
  std::optional<ContainerInfo> container;
  ContainerAbsent absent = ContainerAbsent::host;  // meaningful only without `container`
};

/// Parses the text of /proc/<pid>/cgroup. At most the first 64 KiB are read; longer text is
/// `malformed` (a real file is a few hundred bytes).
ContainerResult parse_cgroup(std::string_view text);

/// Parses one cgroup path ("/kubepods.slice/..."); nullopt when it names no container or pod.
std::optional<ContainerInfo> container_from_cgroup_path(std::string_view path);

}  // namespace gpustream::probes
