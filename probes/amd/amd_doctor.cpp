// The doctor's AMD checks: amdgpu in sysfs (the fast path) and the amd-smi / rocm-smi CLIs.
#include "common/doctor_checks.hpp"

namespace gpustream::doctor::detail {

void check_amd(const Context& c) {
  constexpr std::string_view p = "amd";
  const auto& o = c.options;
  const std::size_t devices = check_drm_devices(c, p, {"amdgpu"});
  // auto uses sysfs when it has amdgpu devices, else amd-smi; a named source is the only one.
  const bool sysfs_source = o.amd_source == "sysfs" || (o.amd_source == "auto" && devices > 0);
  if (o.amd_source == "sysfs" && devices == 0)
    c.add(p, "source", Status::info,
          "amd.source is sysfs and sysfs has no amdgpu device: the probe reports none");
  const std::string fix_smi =
      "install amd-smi (ROCm: sudo apt install amd-smi-lib), or give --amd-smi PATH";
  const std::string fix_rocm =
      "install rocm-smi (sudo apt install rocm-smi), or give --rocm-smi PATH";
  const auto amd_smi = machine::tool_version({o.amd_smi, "version"}, o.tool_timeout);
  add_tool_finding(c, p, "amd_smi", amd_smi, o.amd_source == "amd-smi", fix_smi);
  const auto rocm_smi = machine::tool_version({o.rocm_smi, "--version"}, o.tool_timeout);
  add_tool_finding(c, p, "rocm_smi", rocm_smi, o.amd_source == "rocm-smi", fix_rocm);
  if (!sysfs_source && o.amd_source == "auto" && amd_smi.state != machine::ToolVersion::State::ok &&
      machine::module_loaded(o.paths.sysfs_root, "amdgpu"))
    c.add(p, "source", Status::blocker,
          "amdgpu is loaded but sysfs shows no amdgpu device and amd-smi does not answer: the "
          "AMD probe has no source",
          "mount the host's /sys (--sysfs-root), or " + fix_smi);
}

}  // namespace gpustream::doctor::detail
