// The doctor's Intel checks: i915/xe in sysfs, and the Level Zero loader through the probe's
// own augment (one init and enumeration), its file version and the driver's API version.
#include <cstdint>
#include <cstdio>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/probes/intel_probe.hpp"
#include "intel/level_zero.hpp"
#include "intel/level_zero_api.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream::doctor::detail {
namespace {

constexpr std::string_view p = "intel";

using DriverGetApiVersionFn = ze::Result(void*, std::uint32_t*);

/// zeDriverGetApiVersion of the first driver, after zeInit: "1.17"; "" when not available.
std::string api_version(const DynamicLibrary& lib) {
  auto* init = lib.optional<ze::InitFn>("zeInit");
  auto* driver_get = lib.optional<ze::DriverGetFn>("zeDriverGet");
  auto* get_version = lib.optional<DriverGetApiVersionFn>("zeDriverGetApiVersion");
  if (!init || !driver_get || !get_version || init(0) != ze::kSuccess) return {};
  std::uint32_t n = 1;
  void* driver = nullptr;
  if (driver_get(&n, &driver) != ze::kSuccess || n == 0 || !driver) return {};
  std::uint32_t v = 0;
  if (get_version(driver, &v) != ze::kSuccess) return {};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%u.%u", v >> 16, v & 0xffffU);  // ZE_MAKE_VERSION
  return buf;
}

}  // namespace

void check_intel(const Context& c) {
  const std::size_t devices = check_drm_devices(c, p, {"i915", "xe"});
  const auto path = intel_options_from_config(c.options.config()).level_zero_library;
  if (path.empty()) {
    c.add(p, "level_zero", Status::info, "Level Zero disabled (intel.level_zero_library is \"\")");
    return;
  }
  const std::string install =
      "sudo apt install libze1 libze-intel-gpu1   # Level Zero loader and Intel's driver; or "
      "give --level-zero-library PATH";
  std::string error;
  auto lib = DynamicLibrary::open(path, &error);
  if (!lib) {
    c.add(p, "level_zero", Status::info,
          machine::printable(error, 300) +
              (devices > 0 ? " (optional: sysfs and fdinfo still give most metrics; Level Zero "
                             "adds compute engines, energy and memory)"
                           : ""),
          devices > 0 ? install : "");
    return;
  }
  const bool has_zes =
      lib->symbol("zesInit") && lib->symbol("zesDriverGet") && lib->symbol("zesDeviceGet");
  std::string file;
  const void* any = lib->symbol("zeInit") ? lib->symbol("zeInit") : lib->symbol("zesInit");
  const std::string file_version = machine::library_file_version(any, &file);
  LevelZeroAugment augment(path, LibrarySessionMode::persistent);
  const std::string status = augment.refresh();
  const bool works = !augment.devices().empty();
  const std::string api = works ? api_version(*lib) : std::string{};
  std::string detail = (file.empty() ? path : file) +
                       (file_version.empty() ? "" : " (loader " + file_version + ")") +
                       (has_zes ? ", zesInit" : ", no zesInit (legacy loader)") +
                       (api.empty() ? "" : ", API " + api) + ": " + machine::printable(status, 300);
  if (works)
    c.add(p, "level_zero", Status::ok, std::move(detail));
  else
    c.add(p, "level_zero", devices > 0 ? Status::warn : Status::info, std::move(detail),
          devices > 0 ? install : "");

  if (!has_zes) {
    const auto env = c.env("ZES_ENABLE_SYSMAN");
    if (env && *env == "1") {
      c.add(p, "zes_enable_sysman", Status::ok,
            "this loader has no zesInit and ZES_ENABLE_SYSMAN=1 is set");
    } else {
      c.add(p, "zes_enable_sysman", devices > 0 ? Status::warn : Status::info,
            "this loader has no zesInit: Sysman answers only when ZES_ENABLE_SYSMAN=1 is in the "
            "environment before zeInit (the gpustream command sets it for itself; a program "
            "embedding the SDK must have it)",
            "export ZES_ENABLE_SYSMAN=1");
    }
  }
}

}  // namespace gpustream::doctor::detail
