// The doctor's NVIDIA checks: kernel module, /dev/nvidia* nodes, NVML (loaded through the
// probe's own function table, initialized once, versions read after init, shut down again) and
// the nvidia-smi fallback.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/probes/readers.hpp"
#include "gpustream/probes/sysfs.hpp"
#include "nvidia/nvml_api.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream::doctor::detail {
namespace {

using readers::join_path;
constexpr std::string_view p = "nvidia";

struct NvmlResult {
  bool usable = false;  // initialized and enumerated
  unsigned devices = 0;
};

std::string read_string(nvml::StringFn* fn) {
  if (!fn) return {};
  char buf[nvml::kDriverVersionBufferSize] = {};
  if (fn(buf, sizeof buf) != nvml::kSuccess) return {};
  buf[sizeof buf - 1] = '\0';
  return machine::printable(buf, sizeof buf);
}

/// The activity metrics (NVML GPM, Hopper and newer): which GPUs have them, asked as the probe
/// asks (architecture, then nvmlGpmQueryDeviceSupport with struct version 1). NVML initialized.
void check_gpm(const Context& c, const nvml::Api& api, unsigned count) {
  if (!api.gpm_missing.empty()) {
    c.add(p, "activity", Status::info,
          "activity metrics unsupported: " + api.gpm_missing +
              " missing from the library (NVML GPM needs a driver from R525)");
    return;
  }
  std::string detail;
  unsigned supported = 0;
  count = std::min(count, 64U);
  for (unsigned i = 0; i < count; ++i) {
    nvml::Device h = nullptr;
    std::string why;
    unsigned arch = nvml::kArchUnknown;
    nvml::GpmSupport support{nvml::kGpmSupportVersion, 0};
    if (const auto rc = api.handle_by_index(i, &h); rc != nvml::kSuccess) {
      why = "nvmlDeviceGetHandleByIndex returned " + std::string(nvml::return_code_name(rc));
    } else if (api.architecture && api.architecture(h, &arch) == nvml::kSuccess &&
               arch < nvml::kArchHopper) {
      why = "before Hopper";
    } else if (const auto q = api.gpm_query_support(h, &support); q != nvml::kSuccess) {
      why = "nvmlGpmQueryDeviceSupport returned " + std::string(nvml::return_code_name(q));
    } else if (!support.is_supported_device) {
      why = "the device has no GPM";
    }
    if (why.empty()) ++supported;
    detail += (i ? "; " : "") + std::string("GPU ") + std::to_string(i) + ": " +
              (why.empty() ? "supported" : "unsupported (" + why + ")");
  }
  c.add(p, "activity", supported > 0 ? Status::ok : Status::info,
        "activity metrics (NVML GPM) on " + std::to_string(supported) + " of " +
            std::to_string(count) + " GPU(s)" + (detail.empty() ? "" : ": " + detail));
}

NvmlResult check_nvml(const Context& c, bool hardware) {
  NvmlResult res;
  const auto lib_path = nvidia_options_from_config(c.options.config()).nvml_library;
  std::string error;
  auto lib = DynamicLibrary::open(lib_path, &error);
  const std::string fix =
      "install the NVIDIA driver's NVML (libnvidia-ml.so.1, e.g. sudo apt install "
      "libnvidia-ml1 / nvidia-utils-<version>), or give --nvml-library PATH";
  if (!lib) {
    c.add(p, "nvml", hardware ? Status::warn : Status::info, machine::printable(error, 300),
          hardware ? fix : "");
    return res;
  }
  nvml::Api api;
  try {
    api = nvml::Api::load(*lib);
  } catch (const DynamicLibraryError& e) {
    c.add(p, "nvml", hardware ? Status::blocker : Status::warn, "NVML unusable: " + e.message(),
          fix);
    return res;
  }
  std::string file;
  const std::string file_version =
      machine::library_file_version(reinterpret_cast<const void*>(api.init), &file);
  const nvml::Return rc = api.init();
  if (rc != nvml::kSuccess) {
    std::string why = api.init_name + " returned " + std::string(nvml::return_code_name(rc)) +
                      " (" + machine::printable(api.describe(rc), 80) + ")";
    std::string rc_fix;
    switch (rc) {
      case 9:  // DRIVER_NOT_LOADED
        rc_fix = "sudo modprobe nvidia   # or install the NVIDIA driver";
        break;
      case 4:  // NO_PERMISSION
        rc_fix =
            "let this user open /dev/nvidia* (options nvidia NVreg_DeviceFileMode=0666 in "
            "/etc/modprobe.d/nvidia.conf, then reload the module), or run as root";
        break;
      case 18:  // LIB_RM_VERSION_MISMATCH
        rc_fix =
            "reboot (or reload the nvidia module) so that the kernel module and "
            "libnvidia-ml are the same driver version";
        break;
      default:
        rc_fix = "check `dmesg | grep -i nvrm` and the NVIDIA driver installation";
    }
    c.add(p, "nvml", hardware ? Status::blocker : Status::info, file + ": " + why,
          hardware ? rc_fix : "");
    return res;
  }
  // Versions after init, as NVML requires.
  const std::string driver = read_string(api.driver_version);
  const std::string version =
      read_string(lib->optional<nvml::StringFn>("nvmlSystemGetNVMLVersion"));
  unsigned count = 0;
  const nvml::Return crc = api.device_count(&count);
  if (crc == nvml::kSuccess) check_gpm(c, api, count);
  api.shutdown();
  std::string detail = file + (file_version.empty() ? "" : " (file version " + file_version + ")") +
                       ": NVML " + (version.empty() ? "version unknown" : version) + ", driver " +
                       (driver.empty() ? "unknown" : driver) + ", " + api.init_name;
  if (crc != nvml::kSuccess) {
    c.add(p, "nvml", Status::blocker,
          detail + "; nvmlDeviceGetCount returned " + std::string(nvml::return_code_name(crc)),
          "check `dmesg | grep -i nvrm`; a GPU that fell off the bus needs a reset or reboot");
    return res;
  }
  res.usable = true;
  res.devices = count;
  // An optional function whose absence changes what a user gets (issue #29).
  const std::string ring = api.samples ? "" : "; no nvmlDeviceGetSamples: power_samples stay empty";
  c.add(p, "nvml", count > 0 ? Status::ok : Status::info,
        detail + "; " + std::to_string(count) + " GPU(s)" + ring);
  return res;
}

/// check_nvml on its own thread, waited for at most options.tool_timeout: an NVML call cannot be
/// interrupted, so one that hangs (a stuck driver) is left running, with the library kept open,
/// and its completion is handed to the caller (Report::pending).
NvmlResult check_nvml_bounded(const Context& c, bool hardware) {
  auto result = std::make_shared<NvmlResult>();
  const bool in_time = run_bounded(c, p, "nvml", [result, hardware](const Context& local) {
    *result = check_nvml(local, hardware);
  });
  if (!in_time) {
    c.add(p, "nvml", hardware ? Status::blocker : Status::warn,
          nvidia_options_from_config(c.options.config()).nvml_library +
              ": NVML did not answer within " + std::to_string(c.options.tool_timeout.count()) +
              " ms (a call such as nvmlInit is stuck; it is left to finish)",
          "check `dmesg | grep -i nvrm` (a GPU that fell off the bus, a stuck driver); then "
          "reload the nvidia module or reboot");
    return {};
  }
  return *result;
}

}  // namespace

void check_nvidia(const Context& c) {
  const auto& paths = c.options.paths;
  const bool module = machine::module_loaded(paths.sysfs_root, "nvidia");
  std::string module_detail = join_path(paths.sysfs_root, "module/nvidia");
  if (auto v = readers::read_file(join_path(paths.procfs_root, "driver/nvidia/version"), 4096)) {
    const auto line = readers::trim(std::string_view(*v).substr(0, v->find('\n')));
    module_detail += "; " + machine::printable(line, 160);
  }
  c.add(p, "driver", module ? Status::ok : Status::info,
        module ? "kernel module loaded (" + module_detail + ")"
               : "no NVIDIA kernel module (" + join_path(paths.sysfs_root, "module/nvidia") +
                     " absent)");

  // Device nodes: /dev/nvidiactl and /dev/nvidia<N>.
  std::vector<std::string> nodes;
  if (std::filesystem::exists(join_path(paths.devfs_root, "nvidiactl")))
    nodes.push_back(join_path(paths.devfs_root, "nvidiactl"));
  for (const auto& e : sysfs::numbered_entries(paths.devfs_root, "nvidia"))
    nodes.push_back(join_path(paths.devfs_root, e.name));
  const bool hardware = module || !nodes.empty();
  if (nodes.empty()) {
    c.add(p, "device_nodes", module ? Status::blocker : Status::info,
          "no " + join_path(paths.devfs_root, "nvidia*") + " node",
          module ? "sudo nvidia-modprobe -u -c=0   # in a container: --gpus all with the NVIDIA "
                   "container runtime"
                 : "");
  }
  for (const auto& n : nodes) {
    const auto a = machine::node_access(n, c.identity);
    if (a.allowed)
      c.add(p, "device_nodes", Status::ok, n + " can be opened (" + a.mode + ")");
    else
      c.add(p, "device_nodes", Status::blocker, n + " cannot be opened: " + a.why,
            "options nvidia NVreg_DeviceFileMode=0666   # in /etc/modprobe.d/nvidia.conf, then "
            "reload the module (or: " +
                std::string(kGroupFix) + ")");
  }

  const auto nvml = check_nvml_bounded(c, hardware);
  const auto smi = machine::tool_version(
      {nvidia_options_from_config(c.options.config()).nvidia_smi, "--version"},
      c.options.tool_timeout);
  // nvidia-smi matters when NVML does not answer on a machine that has NVIDIA hardware.
  const bool needed = !nvml.usable && hardware;
  add_tool_finding(c, p, "nvidia_smi", smi, needed,
                   "install the NVIDIA driver's utilities (sudo apt install nvidia-smi or "
                   "nvidia-utils-<version>), or give --nvidia-smi PATH");
  if (!nvml.usable && hardware && smi.state == machine::ToolVersion::State::ok)
    c.add(p, "fallback", Status::warn,
          "NVML does not answer: nvidia-smi is the source (at most one sample per second, "
          "per-process memory device-wide, no per-process utilization)",
          "install libnvidia-ml.so.1 (it comes with the driver) or give --nvml-library PATH");
}

}  // namespace gpustream::doctor::detail
