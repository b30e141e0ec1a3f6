// doctor_checks.hpp — what the per-probe checks of `gpustream doctor` share (private to probes/):
// each probe folder has its checks, its registry row's `doctor` column; probes/doctor.cpp runs
// them in registry order. Knows no probe.
#pragma once

#include <functional>
#include <future>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/probes/doctor.hpp"
#include "gpustream/probes/machine_view.hpp"

namespace gpustream::doctor {

/// What every check needs: the options, who reads the machine, its DRM nodes, the findings.
struct CheckContext {
  const Options& options;
  machine::Identity identity;
  std::vector<machine::DrmNode> drm;
  std::vector<Finding>& out;
  /// Work left running after its timeout (Report::pending).
  std::vector<std::shared_future<void>>& pending;

  std::optional<std::string> env(std::string_view name) const;
  void add(std::string_view probe, std::string_view check, Status status, std::string detail,
           std::string fix = {}) const;
};

namespace detail {

using Context = CheckContext;

/// The fix for a device node that cannot be opened (the render/video groups).
inline constexpr std::string_view kGroupFix =
    "sudo usermod -aG render,video $USER   # then log out and in again";
/// The fix for other users' /proc/<pid>/fdinfo.
inline constexpr std::string_view kPtraceFix =
    "run as root, or: sudo setcap cap_sys_ptrace+ep \"$(command -v gpustream)\", or run the "
    "packaged service (systemctl enable --now gpustream; it has "
    "AmbientCapabilities=CAP_SYS_PTRACE)";

/// The checks the DRM probes share, for the nodes whose driver is one of
/// `drivers`: the kernel module, the devices, render-node access, runtime suspend, and other
/// users' fdinfo. Returns how many PCI devices were found.
std::size_t check_drm_devices(const Context& c, std::string_view probe,
                              std::initializer_list<std::string_view> drivers);

/// A finding for a vendor tool's version run: ok with the version, or what went wrong;
/// `needed` makes a missing or failing tool a blocker (else info for missing, warn otherwise).
void add_tool_finding(const Context& c, std::string_view probe, std::string_view check,
                      const machine::ToolVersion& v, bool needed, const std::string& fix);

/// Runs `check` on its own thread with a Context of its own (the same options and identity) and
/// waits for it at most options.tool_timeout: a vendor library call cannot be interrupted. In
/// time: its findings are appended to `c` and true is returned (an exception it throws becomes a
/// warn finding `probe`/`check_name`). Late: it is left running (anything it holds, e.g. an open
/// library, stays alive until it returns), its completion goes to c.pending, false is returned.
bool run_bounded(const Context& c, std::string_view probe, std::string_view check_name,
                 std::function<void(const Context&)> check);

}  // namespace detail
}  // namespace gpustream::doctor
