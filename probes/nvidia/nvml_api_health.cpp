// The optional NVML functions of MIG, interconnect and health (nvml_api.hpp). A library without
// them is an older driver: no MIG, or those metrics absent `unsupported`.
#include "nvidia/nvml_api.hpp"

namespace gpustream::nvml {

void Api::load_mig_and_health(const DynamicLibrary& lib) {
  const auto mig = [&]<class F>(F*& slot, const char* name) {
    slot = lib.optional<F>(name);
    if (!slot) mig_missing += (mig_missing.empty() ? "" : ", ") + std::string(name);
  };
  mig(mig_mode, "nvmlDeviceGetMigMode");
  mig(max_mig_device_count, "nvmlDeviceGetMaxMigDeviceCount");
  mig(mig_handle_by_index, "nvmlDeviceGetMigDeviceHandleByIndex");
  mig(gpu_instance_id, "nvmlDeviceGetGpuInstanceId");
  mig(compute_instance_id, "nvmlDeviceGetComputeInstanceId");
  mig(is_mig_device_handle, "nvmlDeviceIsMigDeviceHandle");
  mig(mig_parent, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle");

  pcie_throughput = lib.optional<PcieThroughputFn>("nvmlDeviceGetPcieThroughput");
  pcie_link_generation = lib.optional<UintFn>("nvmlDeviceGetCurrPcieLinkGeneration");
  pcie_link_generation_max = lib.optional<UintFn>("nvmlDeviceGetMaxPcieLinkGeneration");
  pcie_link_width = lib.optional<UintFn>("nvmlDeviceGetCurrPcieLinkWidth");
  pcie_link_width_max = lib.optional<UintFn>("nvmlDeviceGetMaxPcieLinkWidth");
  total_ecc_errors = lib.optional<TotalEccFn>("nvmlDeviceGetTotalEccErrors");
  retired_pages = lib.optional<RetiredPagesFn>("nvmlDeviceGetRetiredPages");
  retired_pages_pending = lib.optional<UintFn>("nvmlDeviceGetRetiredPagesPendingStatus");
  remapped_rows = lib.optional<RemappedRowsFn>("nvmlDeviceGetRemappedRows");
  nvlink_state = lib.optional<NvLinkStateFn>("nvmlDeviceGetNvLinkState");
  field_values = lib.optional<FieldValuesFn>("nvmlDeviceGetFieldValues");
  architecture = lib.optional<UintFn>("nvmlDeviceGetArchitecture");
  samples = lib.optional<SamplesFn>("nvmlDeviceGetSamples");
}

}  // namespace gpustream::nvml
