// The doctor's AMD checks: amdgpu in sysfs, the AMD SMI library (loaded, initialized, its version
// judged and its GPUs counted by the library backend's own code, then shut down again), the
// amd-smi / rocm-smi CLIs, and the source the "amd" row would take (auto: library, then sysfs,
// then amd-smi; as amd_probe_factory.cpp chooses).
#include <memory>

#include "amd/amd_smi_backend.hpp"
#include "gpustream/dynamic_library.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream::doctor::detail {
namespace {

using amd_lib_detail::InitFailure;
constexpr std::string_view p = "amd";
constexpr std::string_view kLibraryCheck = "amd_smi_library";
constexpr std::size_t kMaxListedGpus = 8;

constexpr std::string_view kInstallLibraryFix =
    "install the AMD SMI library (ROCm: sudo apt install amd-smi-lib), or give "
    "--amd-smi-library PATH (config amd.library)";
constexpr std::string_view kReleaseFix =
    "install a ROCm release whose AMD SMI library gpustream knows (ROCm 6.0-6.3: library 23.x or "
    "24.x; ROCm 7.x: 26.x) and give --amd-smi-library PATH to its libamd_smi.so; meanwhile "
    "--amd-source sysfs";

/// The "amd" section as the probe reads it (amd_settings), with the probe's defaults.
struct AmdPaths {
  std::string source;  // as written ("cli" kept)
  std::string library;
  std::string amd_smi;
  std::string rocm_smi;
};

AmdPaths amd_paths(const Context& c) {
  const auto s = amd_settings(c.options.config());
  return {s.source, s.library.value_or(AmdSmiLibProbeOptions{}.library),
          s.amd_smi.value_or("amd-smi"), s.rocm_smi.value_or("rocm-smi")};
}

struct LibraryResult {
  bool usable = false;  // initialized, a known version, at least one GPU: auto takes it
  std::string summary;  // usable: "<file> 26.1.0, 2 GPU(s)"; else why auto passes it over
};

std::string init_fix(const InitFailure& f) {
  if (f.step == InitFailure::Step::unknown_version) return std::string(kReleaseFix);
  switch (f.rc) {
    case amdsmi::kDriverNotLoaded:
      return "sudo modprobe amdgpu   # or install the amdgpu driver (ROCm: amdgpu-dkms)";
    case amdsmi::kNoPerm:
      return std::string(kGroupFix);
    default:
      return "check `sudo dmesg | grep -i amdgpu`, and that the AMD SMI library comes from the "
             "ROCm release of the installed driver";
  }
}

/// `needed`: amd.source is library, so any failure is a blocker; else a failure is a warn when
/// the machine has AMD hardware (auto passes the library over) and information when it has none.
LibraryResult check_library(const Context& c, bool needed, bool hardware) {
  using amd_lib_detail::AmdSmiBackend;
  const auto path = amd_paths(c).library;
  const Status failed = needed ? Status::blocker : hardware ? Status::warn : Status::info;
  LibraryResult res;
  std::unique_ptr<AmdSmiBackend> backend;
  try {
    // The backend's own loader: the process-wide AmdSmiLibrary (function table, host guard),
    // lazy, so that the detect below is one init and one shutdown.
    backend = std::make_unique<AmdSmiBackend>(
        amd_lib_detail::AmdSmiOptions{.library = path,
                                      .mode = LibrarySessionMode::lazy,
                                      .procfs_root = c.options.paths.procfs_root,
                                      .processes = false});
  } catch (const DynamicLibraryError& e) {
    const bool missing = e.code() == make_error_code(errc::library_missing);
    res.summary = machine::printable(e.message(), 300);
    if (missing)
      c.add(p, kLibraryCheck, needed ? Status::blocker : Status::info, res.summary,
            needed || hardware ? std::string(kInstallLibraryFix) : "");
    else
      c.add(p, kLibraryCheck, failed, "AMD SMI library unusable: " + res.summary,
            std::string(kReleaseFix));
    return res;
  }
  const auto d = backend->detect();  // lazy: init, version, enumeration, shutdown
  const auto& lib = backend->library();
  std::string file;
  const auto file_version =
      machine::library_file_version(reinterpret_cast<const void*>(lib.api().init), &file);
  if (file.empty()) file = path;
  if (!file_version.empty()) file += " (file version " + file_version + ")";
  const std::string guard =
      lib.host_owned() ? "; this program uses the library itself: not shut down" : "";
  if (auto f = lib.last_init_failure()) {
    res.summary = machine::printable(f->message, 300);
    c.add(p, kLibraryCheck, failed, file + ": " + res.summary + guard, init_fix(*f));
    return res;
  }
  const auto version = lib.version();
  std::string detail =
      file + ": AMD SMI library " + (version ? version->text : "?") +
      (version ? " (struct layout " + std::string(to_string(version->layout)) + ", known)" : "") +
      ", amdsmi_init(AMDSMI_INIT_AMD_GPUS)";
  if (!d.available) {
    res.summary = machine::printable(d.reason, 300);
    c.add(p, kLibraryCheck,
          needed && hardware ? Status::blocker
          : hardware         ? Status::warn
                             : Status::info,
          detail + "; " + res.summary + guard,
          hardware ? "check `sudo dmesg | grep -i amdgpu` and render_node_access above" : "");
    return res;
  }
  std::string gpus;
  for (std::size_t i = 0; i < d.devices.size() && i < kMaxListedGpus; ++i)
    gpus += (i ? ", " : "") + d.devices[i].pci_bus_id;
  if (d.devices.size() > kMaxListedGpus) gpus += ", ...";
  c.add(p, kLibraryCheck, Status::ok,
        detail + "; " + std::to_string(d.devices.size()) + " GPU(s): " + gpus +
            (guard.empty() ? "; shut down again" : guard));
  res.usable = true;
  res.summary = lib.path() + " " + (version ? version->text : "") + ", " +
                std::to_string(d.devices.size()) + " GPU(s)";
  return res;
}

/// check_library bounded by options.tool_timeout (run_bounded): a hung amdsmi_init is a finding.
LibraryResult check_library_bounded(const Context& c, bool needed, bool hardware) {
  auto result = std::make_shared<LibraryResult>();
  const bool in_time =
      run_bounded(c, p, kLibraryCheck, [result, needed, hardware](const Context& local) {
        *result = check_library(local, needed, hardware);
      });
  if (in_time) return *result;
  const std::string why = amd_paths(c).library + ": the AMD SMI library did not answer within " +
                          std::to_string(c.options.tool_timeout.count()) +
                          " ms (a call such as amdsmi_init is stuck; it is left to finish)";
  c.add(p, kLibraryCheck,
        needed     ? Status::blocker
        : hardware ? Status::warn
                   : Status::info,
        why, "check `sudo dmesg | grep -i amdgpu` (a GPU that fell off the bus, a stuck driver)");
  return {false, why};
}

}  // namespace

void check_amd(const Context& c) {
  const auto& o = c.options;
  const auto paths = amd_paths(c);
  const std::string source = paths.source == "cli" ? "amd-smi" : paths.source;
  const std::size_t devices = check_drm_devices(c, p, {"amdgpu"});
  const bool hardware = devices > 0 || machine::module_loaded(o.paths.sysfs_root, "amdgpu");

  LibraryResult lib;
  if (source == "auto" || source == "library")
    lib = check_library_bounded(c, source == "library", hardware);
  else
    c.add(p, kLibraryCheck, Status::info,
          "not looked at: amd.source is " + paths.source + " (auto and library use it)");

  const std::string fix_smi =
      "install amd-smi (ROCm: sudo apt install amd-smi-lib), or give --amd-smi PATH";
  const std::string fix_rocm =
      "install rocm-smi (sudo apt install rocm-smi), or give --rocm-smi PATH";
  const auto amd_smi = machine::tool_version({paths.amd_smi, "version"}, o.tool_timeout);
  add_tool_finding(c, p, "amd_smi", amd_smi, source == "amd-smi", fix_smi);
  const auto rocm_smi = machine::tool_version({paths.rocm_smi, "--version"}, o.tool_timeout);
  add_tool_finding(c, p, "rocm_smi", rocm_smi, source == "rocm-smi", fix_rocm);

  if (source != "auto") {
    if (source == "sysfs" && devices == 0)
      c.add(p, "source", Status::info,
            "amd.source is sysfs and sysfs has no amdgpu device: the probe reports none");
    else
      c.add(p, "source", Status::info,
            "amd.source is " + paths.source + " (configured): the probe uses that source only");
    return;
  }
  // auto, in the factory's order: the library when it loads and finds GPUs, else sysfs when it
  // shows an amdgpu device (the DRM checks above), else amd-smi.
  if (lib.usable) {
    c.add(p, "source", Status::info, "auto takes the library (" + lib.summary + ")");
    return;
  }
  const std::string passed = "passed over library: " + lib.summary;
  if (devices > 0) {
    c.add(p, "source", Status::info, "auto takes sysfs (" + passed + ")");
    return;
  }
  const std::string no_sysfs = "sysfs: no amdgpu device under " + o.paths.sysfs_root + "/class/drm";
  if (amd_smi.state == machine::ToolVersion::State::ok) {
    c.add(p, "source", Status::info, "auto takes amd-smi (" + passed + "; " + no_sysfs + ")");
  } else if (hardware) {
    c.add(p, "source", Status::blocker,
          "amdgpu is loaded but the AMD probe has no source: " + passed + "; " + no_sysfs +
              "; amd-smi does not answer",
          std::string(kInstallLibraryFix) + ", or mount the host's /sys (--sysfs-root), or " +
              fix_smi);
  } else {
    c.add(p, "source", Status::info,
          "no AMD source answers (" + passed + "; " + no_sysfs +
              "; amd-smi does not answer): no AMD GPU here");
  }
}

}  // namespace gpustream::doctor::detail
