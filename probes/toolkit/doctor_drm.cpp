// The doctor's checks shared by the DRM probes and its tool-version finding.
#include <algorithm>
#include <set>

#include "gpustream/probes/readers.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream::doctor::detail {

using readers::join_path;

std::size_t check_drm_devices(const Context& c, std::string_view probe,
                              std::initializer_list<std::string_view> drivers) {
  const auto& paths = c.options.paths;
  const auto ours = [&](const machine::DrmNode& n) {
    return std::find(drivers.begin(), drivers.end(), n.driver) != drivers.end();
  };
  std::string names;
  for (auto d : drivers) names += (names.empty() ? "" : "/") + std::string(d);

  std::vector<std::string> loaded;
  for (auto d : drivers)
    if (machine::module_loaded(paths.sysfs_root, d)) loaded.emplace_back(d);
  std::set<std::string> devices;  // PCI bus ids (a node name where there is none)
  for (const auto& n : c.drm)
    if (ours(n)) devices.insert(n.pci_bus_id.empty() ? n.name : n.pci_bus_id);

  if (!loaded.empty()) {
    std::string l;
    for (const auto& d : loaded)
      l += (l.empty() ? "" : ", ") + join_path(paths.sysfs_root, "module/" + d);
    c.add(probe, "driver", Status::ok, "kernel driver loaded (" + l + ")");
  } else if (!devices.empty()) {
    c.add(probe, "driver", Status::ok,
          "driver bound to the devices (" + join_path(paths.sysfs_root, "class/drm") +
              "/*/device/driver); no " + join_path(paths.sysfs_root, "module/<driver>"));
  } else {
    c.add(probe, "driver", Status::info,
          "no " + names + " kernel driver (" + join_path(paths.sysfs_root, "module/<driver>") +
              " absent)");
  }
  if (devices.empty()) {
    c.add(probe, "drm_devices", Status::info,
          "no " + names + " device under " + join_path(paths.sysfs_root, "class/drm"));
    return 0;
  }
  std::string list;
  for (const auto& d : devices) list += (list.empty() ? "" : ", ") + d;
  c.add(probe, "drm_devices", Status::ok,
        std::to_string(devices.size()) + " device(s) under " +
            join_path(paths.sysfs_root, "class/drm") + ": " + list);

  // Render nodes: vendor libraries and tools and the open-event watch open them; a user outside
  // their group sees sysfs but not what needs the node.
  bool any_render = false;
  for (const auto& n : c.drm) {
    if (!ours(n) || !n.render) continue;
    any_render = true;
    const auto a = machine::node_access(join_path(paths.devfs_root, "dri/" + n.name), c.identity);
    if (!a.exists) {
      c.add(probe, "render_node_access", Status::warn,
            a.path + " is missing (sysfs has " + n.name + "): is /dev/dri passed in?",
            "docker run --device /dev/dri ... (or give --devfs-root)");
    } else if (a.allowed) {
      c.add(probe, "render_node_access", Status::ok,
            a.path + " can be opened (" + a.mode + " group " + a.group + ")");
    } else {
      c.add(probe, "render_node_access", Status::blocker, a.path + " cannot be opened: " + a.why,
            std::string(kGroupFix));
    }
  }
  if (!any_render)
    c.add(probe, "render_node_access", Status::info, "no render node for these devices");

  for (const auto& n : c.drm) {
    if (!ours(n) || n.render || n.runtime_status != "suspended") continue;
    const std::string bus = n.pci_bus_id.empty() ? "<bus id>" : n.pci_bus_id;
    c.add(probe, "runtime_suspended", Status::warn,
          n.name + " (" + bus + ") is runtime-suspended (" +
              join_path(n.device_dir, "power/runtime_status") +
              " = suspended): its metrics are absent (reason `suspended`) until it wakes; "
              "gpustream does not wake it",
          "nothing, if that is wanted; to keep it awake: echo on | sudo tee "
          "/sys/bus/pci/devices/" +
              bus + "/power/control");
  }

  // Per-process attribution reads every process's /proc/<pid>/fdinfo: another user's needs
  // root or CAP_SYS_PTRACE (the kernel's ptrace-read check).
  const auto& id = c.identity;
  if (!id.known) {
    c.add(probe, "fdinfo_access", Status::warn,
          "cannot tell whether other users' " + join_path(paths.procfs_root, "<pid>/fdinfo") +
              " is readable (" + join_path(paths.procfs_root, "self/status") + " unreadable)",
          std::string(kPtraceFix));
  } else if (id.root() || id.has_cap(machine::kCapSysPtrace)) {
    c.add(probe, "fdinfo_access", Status::ok,
          std::string("other users' /proc/<pid>/fdinfo is readable (") +
              (id.root() ? "uid 0" : "CAP_SYS_PTRACE") + "): per-process use is complete");
  } else {
    c.add(probe, "fdinfo_access", Status::blocker,
          "uid " + std::to_string(id.uid) +
              " without CAP_SYS_PTRACE (CapEff bit 19) cannot read other users' " +
              join_path(paths.procfs_root, "<pid>/fdinfo") +
              ": only its own processes are attributed to the GPUs",
          std::string(kPtraceFix));
  }
  return devices.size();
}

void add_tool_finding(const Context& c, std::string_view probe, std::string_view check,
                      const machine::ToolVersion& v, bool needed, const std::string& fix) {
  using State = machine::ToolVersion::State;
  switch (v.state) {
    case State::ok:
      c.add(probe, check, Status::ok, "`" + v.command + "`: " + v.version);
      return;
    case State::missing:
      c.add(probe, check, needed ? Status::blocker : Status::info,
            v.command.substr(0, v.command.find(' ')) + ": " + v.detail, needed ? fix : "");
      return;
    case State::timed_out:
    case State::failed:
    case State::garbage:
      c.add(probe, check, needed ? Status::blocker : Status::warn, v.detail, fix);
      return;
  }
}

}  // namespace gpustream::doctor::detail
