// The doctor's host checks: meminfo, who reads the machine, whether /proc is the host's, and
// whether a container was given its GPUs.
#include <filesystem>
#include <string>
#include <vector>

#include "gpustream/probes/host_probe.hpp"
#include "gpustream/probes/readers.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream::doctor {
namespace {

using readers::join_path;

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

}  // namespace

void check_host(const CheckContext& c) {
  constexpr std::string_view p = "host";
  const auto& paths = c.options.paths;
  const auto meminfo = join_path(paths.procfs_root, "meminfo");
  if (auto text = readers::read_file(meminfo, machine::kMaxViewFileBytes)) {
    const auto mem = parse_meminfo(*text);
    if (mem.total_bytes)
      c.add(p, "meminfo", Status::ok,
            meminfo + " is readable (MemTotal " + std::to_string(*mem.total_bytes >> 20) + " MiB)");
    else
      c.add(p, "meminfo", Status::blocker, meminfo + " has no MemTotal line: not a Linux /proc?",
            "point --procfs-root at the host's /proc");
  } else {
    c.add(p, "meminfo", Status::blocker, text.error().message(),
          "point --procfs-root at a readable /proc (default /proc)");
  }

  const auto& id = c.identity;
  if (id.known) {
    std::string caps = id.cap_eff ? (id.has_cap(machine::kCapSysPtrace) ? "CAP_SYS_PTRACE: yes"
                                                                        : "CAP_SYS_PTRACE: no")
                                  : "CapEff unknown";
    std::string groups;
    for (auto g : id.groups) groups += (groups.empty() ? "" : ",") + std::to_string(g);
    c.add(p, "identity", Status::info,
          "uid " + std::to_string(id.uid) + ", gid " + std::to_string(id.gid) + ", groups [" +
              groups + "], " + caps + " (from " + join_path(paths.procfs_root, "self/status") +
              ")");
  } else {
    c.add(p, "identity", Status::warn,
          "cannot read uid, groups and capabilities from " +
              join_path(paths.procfs_root, "self/status") +
              ": device-node and fdinfo access cannot be judged",
          "point --procfs-root at a /proc where self/status is readable");
  }

  const auto view = machine::proc_view(c.options.root_dir, paths.procfs_root,
                                       [&c](std::string_view n) { return c.env(n); });
  const std::string evidence = join(view.container_evidence, ", ");
  if (view.in_container())
    c.add(p, "container", Status::info, "running in a container: " + evidence);
  constexpr std::string_view kProcFix =
      "docker run --pid=host -v /sys:/host/sys:ro --device /dev/dri ... serve --sysfs-root "
      "/host/sys (Kubernetes: hostPID: true); see docs/operations.md, \"Docker\"";
  if (view.host_pid_namespace == false) {
    c.add(p, "host_proc", Status::blocker,
          "pid 1 of " + paths.procfs_root + " is in " + view.pid1_namespace +
              ", not the host's PID namespace " + std::string(machine::kInitialPidNamespace) +
              ": GPU processes of the host and of other containers are invisible",
          std::string(kProcFix));
  } else if (view.host_pid_namespace == true) {
    c.add(p, "host_proc", Status::ok,
          paths.procfs_root + " is the host's (pid 1 in " + view.pid1_namespace + ")");
  } else if (view.in_container()) {
    c.add(p, "host_proc", Status::warn,
          "cannot read " + join_path(paths.procfs_root, "1/ns/pid") +
              " in this container: whether it shows the host's processes is unknown",
          std::string(kProcFix));
  } else {
    c.add(p, "host_proc", Status::info,
          "cannot read " + join_path(paths.procfs_root, "1/ns/pid") +
              " (no container detected: assuming the host's /proc)");
  }
  if (view.in_container() && c.drm.empty() &&
      !std::filesystem::exists(join_path(paths.devfs_root, "nvidiactl"))) {
    c.add(p, "container_devices", Status::warn,
          "no DRM node under " + join_path(paths.sysfs_root, "class/drm") + " and no " +
              join_path(paths.devfs_root, "nvidiactl") + " in this container: no GPU was passed in",
          "docker run --device /dev/dri -v /sys:/host/sys:ro ... (NVIDIA: --gpus all with the "
          "NVIDIA container runtime); see docs/operations.md, \"Docker\"");
  }
}

}  // namespace gpustream::doctor
