// doctor_machine.hpp — a generated machine (sys/, proc/, dev/, a root folder) and the doctor's
// options on it, for the doctor tests of each probe folder
// (tests/probes/<vendor>/*_doctor_test.cpp) and of the runner (doctor_test.cpp).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "gpustream/probes/doctor.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::doctor_test {

using doctor::Finding;
using doctor::Status;
using test::TempTree;

inline constexpr std::uint64_t kPtraceBit = std::uint64_t{1} << 19;

/// A generated machine: sys/, proc/, dev/ and a root folder, and the doctor's options on it.
class Machine {
 public:
  Machine() {
    tree_.file("proc/meminfo", "MemTotal:       16318784 kB\nMemAvailable:    8000000 kB\n");
    host_proc();
    identity(0, {}, 0);
    tree_.dir("root");
    tree_.dir("dev");
    tree_.dir("sys/class/drm");
    options.paths = {.sysfs_root = tree_.path("sys"),
                     .procfs_root = tree_.path("proc"),
                     .devfs_root = tree_.path("dev")};
    options.root_dir = tree_.path("root");
    options.probe_settings.set("nvidia", "library", tree_.path("no/libnvidia-ml.so.1"));
    options.probe_settings.set("nvidia", "nvidia_smi", tree_.path("no/nvidia-smi"));
    options.probe_settings.set("amd", "amd_smi", tree_.path("no/amd-smi"));
    options.probe_settings.set("amd", "rocm_smi", tree_.path("no/rocm-smi"));
    options.probe_settings.set("amd", "library", tree_.path("no/libamd_smi.so"));
    options.probe_settings.set("intel", "level_zero_library", "");
    options.tool_timeout = std::chrono::milliseconds{2000};
    options.getenv = [this](std::string_view n) -> std::optional<std::string> {
      const auto it = env.find(std::string(n));
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
  }

  TempTree& tree() { return tree_; }

  /// <proc>/self/status of a process with this uid (gid = uid), groups and CapEff.
  void identity(std::uint32_t uid, const std::vector<std::uint32_t>& groups, std::uint64_t caps) {
    std::string g;
    for (auto x : groups) g += std::to_string(x) + " ";
    char cap[32];
    std::snprintf(cap, sizeof cap, "%016llx", static_cast<unsigned long long>(caps));
    const auto u = std::to_string(uid);
    tree_.file("proc/self/status", "Name:\tgpustream\nPid:\t4242\nUid:\t" + u + "\t" + u + "\t" +
                                       u + "\t" + u + "\nGid:\t" + u + "\t" + u + "\t" + u + "\t" +
                                       u + "\nGroups:\t" + g + "\nCapEff:\t" + cap + "\n");
  }
  void host_proc() { tree_.symlink("proc/1/ns/pid", "pid:[4026531836]"); }
  void container_proc() {
    tree_.remove("proc/1/ns/pid");
    tree_.symlink("proc/1/ns/pid", "pid:[4026532513]");
  }

  /// A PCI GPU bound to `driver` with card<N> and renderD<128+N> (a file with mode 0660 and this
  /// process's group).
  void gpu(const std::string& bus, const std::string& driver, int n,
           const std::string& runtime = "active") {
    const std::string dev = "sys/devices/pci0000:00/" + bus;
    tree_.file(dev + "/uevent", "DRIVER=" + driver + "\nPCI_SLOT_NAME=" + bus + "\n");
    tree_.file(dev + "/power/runtime_status", runtime + "\n");
    tree_.dir("sys/module/" + driver);
    for (const auto& node : {"card" + std::to_string(n), "renderD" + std::to_string(128 + n)}) {
      tree_.dir("sys/class/drm/" + node);
      tree_.symlink("sys/class/drm/" + node + "/device", tree_.path(dev));
    }
    const auto render = tree_.file("dev/dri/renderD" + std::to_string(128 + n), "");
    ::chmod(render.c_str(), 0660);
  }

  doctor::Report run() const { return doctor::run(options); }

  doctor::Options options;
  std::map<std::string, std::string> env;

 private:
  TempTree tree_;
};

inline std::uint32_t my_gid() { return static_cast<std::uint32_t>(::getegid()); }

inline const Finding* find(const doctor::Report& r, std::string_view probe,
                           std::string_view check) {
  for (const auto& f : r.findings)
    if (f.probe == probe && f.check == check) return &f;
  return nullptr;
}

inline const Finding* find(const doctor::Report& r, std::string_view probe, std::string_view check,
                           Status status) {
  for (const auto& f : r.findings)
    if (f.probe == probe && f.check == check && f.status == status) return &f;
  return nullptr;
}

inline std::string dump(const doctor::Report& r) { return doctor::to_text(r); }

}  // namespace gpustream::doctor_test
