#include "nvidia/nvml_api.hpp"

namespace gpustream::nvml {
namespace {

/// The first of `names` (newest first); a missing one is reported by its newest name.
template <class F>
DynamicLibrary::Found<F> need(const DynamicLibrary& lib, std::initializer_list<const char*> names) {
  if (auto found = lib.first_of<F>(names)) return found;
  throw DynamicLibraryError(errc::symbol_missing,
                            std::string(*names.begin()) + " missing from " + lib.path());
}

}  // namespace

Api Api::load(const DynamicLibrary& lib) {
  Api api;
  // Required: without these there is no device to talk to.
  const auto init = need<InitFn>(lib, {"nvmlInit_v2", "nvmlInit"});
  api.init = init.function;
  api.init_name = std::string(init.name);
  api.shutdown = lib.required<ShutdownFn>("nvmlShutdown");
  api.device_count = need<CountFn>(lib, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}).function;
  api.handle_by_index =
      need<HandleByIndexFn>(lib, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"})
          .function;
  api.handle_by_uuid = lib.required<HandleByUuidFn>("nvmlDeviceGetHandleByUUID");
  api.uuid = lib.required<DeviceStringFn>("nvmlDeviceGetUUID");

  // Optional: each one missing leaves its metric absent.
  api.error_string = lib.optional<ErrorStringFn>("nvmlErrorString");
  api.driver_version = lib.optional<StringFn>("nvmlSystemGetDriverVersion");
  api.name = lib.optional<DeviceStringFn>("nvmlDeviceGetName");
  if (auto pci = lib.first_of<PciFn>({"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"})) {
    api.pci_info = pci.function;
  } else if (auto v1 = lib.optional<PciFn>("nvmlDeviceGetPciInfo")) {
    api.pci_info = v1;
    api.pci_legacy = true;
  }
  api.memory_v2 = lib.optional<MemoryV2Fn>("nvmlDeviceGetMemoryInfo_v2");
  api.memory = lib.optional<MemoryFn>("nvmlDeviceGetMemoryInfo");
  api.memory_name = api.memory_v2 ? "nvmlDeviceGetMemoryInfo_v2"
                    : api.memory  ? "nvmlDeviceGetMemoryInfo"
                                  : "";
  api.utilization = lib.optional<UtilizationFn>("nvmlDeviceGetUtilizationRates");
  api.temperature_v = lib.optional<TemperatureVFn>("nvmlDeviceGetTemperatureV");
  api.temperature = lib.optional<TemperatureFn>("nvmlDeviceGetTemperature");
  api.power_usage = lib.optional<UintFn>("nvmlDeviceGetPowerUsage");
  api.power_limit =
      lib.first_of<UintFn>({"nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"})
          .function;
  api.total_energy = lib.optional<UllFn>("nvmlDeviceGetTotalEnergyConsumption");
  api.clock_info = lib.optional<ClockFn>("nvmlDeviceGetClockInfo");
  api.fan_speed = lib.optional<UintFn>("nvmlDeviceGetFanSpeed");
  api.clock_reasons = lib.first_of<UllFn>({"nvmlDeviceGetCurrentClocksEventReasons",
                                           "nvmlDeviceGetCurrentClocksThrottleReasons"})
                          .function;

  const auto compute = lib.first_of<ProcessesFn>({"nvmlDeviceGetComputeRunningProcesses_v3",
                                                  "nvmlDeviceGetComputeRunningProcesses_v2",
                                                  "nvmlDeviceGetComputeRunningProcesses"});
  api.compute_processes = compute.function;
  api.processes_name = std::string(compute.name);
  api.process_layout = compute.name == "nvmlDeviceGetComputeRunningProcesses"
                           ? ProcessLayout::v1
                           : ProcessLayout::v2_or_v3;
  // Graphics processes must use the same entry layout as the compute ones.
  switch (api.process_layout) {
    case ProcessLayout::v1:
      api.graphics_processes = lib.optional<ProcessesFn>("nvmlDeviceGetGraphicsRunningProcesses");
      break;
    case ProcessLayout::v2_or_v3:
      api.graphics_processes =
          compute.name == "nvmlDeviceGetComputeRunningProcesses_v3"
              ? lib.optional<ProcessesFn>("nvmlDeviceGetGraphicsRunningProcesses_v3")
              : lib.optional<ProcessesFn>("nvmlDeviceGetGraphicsRunningProcesses_v2");
      break;
  }
  api.process_utilization = lib.optional<ProcessUtilizationFn>("nvmlDeviceGetProcessUtilization");
  api.load_mig_and_health(lib);
  api.load_gpm(lib);
  return api;
}

std::string Api::describe(Return rc) const {
  if (error_string) {
    if (const char* s = error_string(rc); s && *s) return s;
  }
  return std::string(return_code_name(rc));
}

std::string_view return_code_name(Return rc) noexcept {
  switch (rc) {
    case 0:
      return "NVML_SUCCESS";
    case 1:
      return "NVML_ERROR_UNINITIALIZED";
    case 2:
      return "NVML_ERROR_INVALID_ARGUMENT";
    case 3:
      return "NVML_ERROR_NOT_SUPPORTED";
    case 4:
      return "NVML_ERROR_NO_PERMISSION";
    case 5:
      return "NVML_ERROR_ALREADY_INITIALIZED";
    case 6:
      return "NVML_ERROR_NOT_FOUND";
    case 7:
      return "NVML_ERROR_INSUFFICIENT_SIZE";
    case 8:
      return "NVML_ERROR_INSUFFICIENT_POWER";
    case 9:
      return "NVML_ERROR_DRIVER_NOT_LOADED";
    case 10:
      return "NVML_ERROR_TIMEOUT";
    case 11:
      return "NVML_ERROR_IRQ_ISSUE";
    case 12:
      return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case 13:
      return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case 14:
      return "NVML_ERROR_CORRUPTED_INFOROM";
    case 15:
      return "NVML_ERROR_GPU_IS_LOST";
    case 16:
      return "NVML_ERROR_RESET_REQUIRED";
    case 17:
      return "NVML_ERROR_OPERATING_SYSTEM";
    case 18:
      return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case 19:
      return "NVML_ERROR_IN_USE";
    case 20:
      return "NVML_ERROR_MEMORY";
    case 21:
      return "NVML_ERROR_NO_DATA";
    case 25:
      return "NVML_ERROR_ARGUMENT_VERSION_MISMATCH";
    case 999:
      return "NVML_ERROR_UNKNOWN";
    default:
      return "NVML_ERROR_OTHER";
  }
}

}  // namespace gpustream::nvml
