// gpustream/probes/machine_view.hpp — what the probes look at on a machine, as plain read-only
// queries: who we are (uid, groups, effective capabilities from <procfs>/self/status), the DRM
// nodes under <sysfs>/class/drm with their driver, PCI bus id and runtime power state, kernel
// modules, device-node access, whether the /proc we read is the host's, and the version a vendor
// tool prints. `gpustream doctor` is built on these; a support bundle can reuse them.
//
// Every file read is bounded in bytes (kMaxViewFileBytes), every tool run by a timeout and an
// output cap; nothing here writes, samples in a loop or keeps state.
//
// Thread safety: pure functions over the filesystem (and a child process for tool_version).
// Cancellation: none; each call is a few short blocking reads, or one bounded child run.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpustream::machine {

/// The most bytes read from any one file (status, cgroup, runtime_status, version files).
inline constexpr std::size_t kMaxViewFileBytes = 64 * 1024;

/// Capability numbers (linux/capability.h).
inline constexpr int kCapDacOverride = 1;
inline constexpr int kCapSysPtrace = 19;

/// The identity of the process that reads the machine, from <procfs>/self/status.
struct Identity {
  bool known = false;                    // the status file was read and had Uid/Gid lines
  std::int64_t pid = 0;                  // its Pid line
  std::uint32_t uid = 0;                 // effective uid
  std::uint32_t gid = 0;                 // effective gid
  std::vector<std::uint32_t> groups;     // supplementary groups
  std::optional<std::uint64_t> cap_eff;  // CapEff bit mask
  bool is_self = false;                  // the status is this very process's (pid == getpid())

  bool root() const noexcept { return known && uid == 0; }
  bool has_cap(int cap) const noexcept {
    return cap_eff && cap >= 0 && cap < 64 && ((*cap_eff >> cap) & 1U) != 0;
  }
  bool in_group(std::uint32_t g) const noexcept;
};

/// Reads <procfs_root>/self/status. `known` is false when it cannot be read or parsed.
Identity read_identity(const std::string& procfs_root);

/// One DRM node: <sysfs>/class/drm/cardN or renderDN (connectors such as card0-DP-1 are not).
struct DrmNode {
  std::string name;            // "card0", "renderD128"
  std::string driver;          // the kernel driver's name ("" unknown)
  std::string pci_bus_id;      // "0000:03:00.0" ("" unknown)
  std::string device_dir;      // <sysfs>/class/drm/<name>/device
  std::string runtime_status;  // device/power/runtime_status: "active", "suspended", ... ("")
  bool render = false;         // a renderD node
};

/// The DRM nodes, cards first then render nodes, each ascending by number.
std::vector<DrmNode> drm_nodes(const std::string& sysfs_root);

/// <sysfs_root>/module/<name> exists (the kernel module is loaded, or built in with parameters).
bool module_loaded(const std::string& sysfs_root, std::string_view name);

/// Whether a device node can be opened for reading and writing by `who`.
struct NodeAccess {
  std::string path;
  bool exists = false;
  bool allowed = false;
  std::string group;  // the node's group name (getgrgid), else its number
  std::string mode;   // "crw-rw----"
  std::string why;    // when not allowed: "mode crw-rw---- group render; uid 1000 is not in it"
};

/// Judged from the node's owner, group and mode bits against `who` (root: always allowed); when
/// `who` is this process (is_self), access(2) is asked as well, so ACLs (logind's uaccess) count.
NodeAccess node_access(const std::string& path, const Identity& who);

/// Whether the /proc that is read belongs to the host.
struct ProcView {
  std::vector<std::string> container_evidence;  // "/.dockerenv exists", "container=podman", ...
  std::string pid1_namespace;                   // readlink <procfs>/1/ns/pid ("" unreadable)
  /// True: pid 1 of this /proc is in the initial PID namespace (the host's); false: it is not;
  /// nullopt: unknown (the link is not readable).
  std::optional<bool> host_pid_namespace;
  bool in_container() const noexcept { return !container_evidence.empty(); }
};

/// The PID namespace every host's init lives in (PROC_PID_INIT_INO, include/linux/proc_ns.h).
inline constexpr std::string_view kInitialPidNamespace = "pid:[4026531836]";

/// Looks at <root_dir>/.dockerenv, <root_dir>/run/.containerenv, the `container` and
/// KUBERNETES_SERVICE_HOST variables (through `getenv`), <procfs>/1/cgroup and
/// <procfs>/1/ns/pid.
ProcView proc_view(const std::string& root_dir, const std::string& procfs_root,
                   const std::function<std::optional<std::string>(std::string_view)>& getenv);

/// What running a tool's version command showed.
struct ToolVersion {
  enum class State : std::uint8_t { ok, missing, failed, timed_out, garbage };
  State state = State::missing;
  std::string command;  // "vendor-smi --version"
  std::string version;  // the line that carries the version (state ok)
  std::string detail;   // what went wrong, in words, with a printable head of the output
};

/// Runs `argv` once with `timeout` and at most `max_output_bytes` of output kept. The version is
/// the first printable line with a "<digits>.<digits>" token (and containing `key` when given,
/// else any such line): "VENDOR-SMI version  : 550.54.14". Output with control bytes or without
/// such a line is `garbage`. Never throws.
ToolVersion tool_version(std::vector<std::string> argv, std::chrono::milliseconds timeout,
                         std::string_view key = {}, std::size_t max_output_bytes = 16 * 1024);

/// `s` with every byte outside printable ASCII as '?', cut at `max` bytes ("..." added).
std::string printable(std::string_view s, std::size_t max = 120);

/// The version in a library's real file name: realpath of the object that holds `symbol`
/// (dladdr), e.g. libvendor.so.550.54.14 -> "550.54.14", libloader.so.1.8.8 -> "1.8.8".
/// Also returns that path in `file`. "" when the name carries none.
std::string library_file_version(const void* symbol, std::string* file = nullptr);

}  // namespace gpustream::machine
