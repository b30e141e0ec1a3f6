// nvml_api.hpp — the part of the NVML C ABI that the NVIDIA probe uses, written by hand from the
// public nvml.h (see ../shared/fixtures/nvidia/NVML_ABI_NOTES.md), and the typed table of
// functions looked up in libnvidia-ml.so.1 at run time.
//
// Required functions (missing: "NVML unusable: <symbol> missing from <file>"): init, shutdown,
// device count, handle by index, handle by UUID, UUID. Everything else is optional: a null
// pointer leaves its metric absent (unsupported). Versioned functions are looked up newest
// first.
//
// Thread safety: an NvmlApi is immutable after load(); its functions are NVML's (thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpustream/dynamic_library.hpp"

namespace gpustream::nvml {

using Return = int;  // nvmlReturn_t
struct DeviceSt;
using Device = DeviceSt*;  // nvmlDevice_t (opaque)

inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorUnknown = 999;

/// usedGpuMemory when the driver cannot tell (all bits set).
inline constexpr unsigned long long kValueNotAvailable = ~0ULL;

inline constexpr unsigned kTemperatureGpu = 0;
inline constexpr unsigned kClockGraphics = 0;
inline constexpr unsigned kClockSm = 1;
inline constexpr unsigned kClockMem = 2;

inline constexpr unsigned kDeviceNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned kDeviceUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
inline constexpr unsigned kDriverVersionBufferSize = 80;

struct Memory {  // nvmlMemory_t (v1), 24 bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct MemoryV2 {  // nvmlMemory_v2_t, 40 bytes
  unsigned version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
inline constexpr unsigned kMemoryV2Version = unsigned{sizeof(MemoryV2)} | (2U << 24);

struct Utilization {  // nvmlUtilization_t
  unsigned gpu;
  unsigned memory;
};

struct TemperatureV1 {  // nvmlTemperature_v1_t, 12 bytes
  unsigned version;
  unsigned sensor_type;
  int temperature;
};
inline constexpr unsigned kTemperatureV1Version = unsigned{sizeof(TemperatureV1)} | (1U << 24);

struct PciInfo {  // nvmlPciInfo_t as written by _v2/_v3, 68 bytes
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_sub_system_id;
  char bus_id[32];
};

struct ProcessUtilizationSample {  // nvmlProcessUtilizationSample_t, 32 bytes
  unsigned pid;
  unsigned long long time_stamp;  // CPU time stamp, microseconds
  unsigned sm_util;
  unsigned mem_util;
  unsigned enc_util;
  unsigned dec_util;
};

static_assert(sizeof(Memory) == 24 && sizeof(MemoryV2) == 40 && sizeof(Utilization) == 8);
static_assert(sizeof(TemperatureV1) == 12 && sizeof(PciInfo) == 68);
static_assert(sizeof(ProcessUtilizationSample) == 32);

// Function types, as declared in nvml.h.
using InitFn = Return();
using ShutdownFn = Return();
using ErrorStringFn = const char*(Return);
using StringFn = Return(char*, unsigned);
using CountFn = Return(unsigned*);
using HandleByIndexFn = Return(unsigned, Device*);
using HandleByUuidFn = Return(const char*, Device*);
using DeviceStringFn = Return(Device, char*, unsigned);
using PciFn = Return(Device, PciInfo*);
using MemoryFn = Return(Device, Memory*);
using MemoryV2Fn = Return(Device, MemoryV2*);
using UtilizationFn = Return(Device, Utilization*);
using TemperatureFn = Return(Device, unsigned, unsigned*);
using TemperatureVFn = Return(Device, TemperatureV1*);
using UintFn = Return(Device, unsigned*);
using UllFn = Return(Device, unsigned long long*);
using ClockFn = Return(Device, unsigned, unsigned*);
using ProcessesFn = Return(Device, unsigned*, void*);  // entry type depends on the version
using ProcessUtilizationFn = Return(Device, ProcessUtilizationSample*, unsigned*,
                                    unsigned long long);

// MIG, interconnect and health (nvml_api_health.cpp looks them up; every one optional).
inline constexpr unsigned kDeviceMigEnable = 1;       // NVML_DEVICE_MIG_ENABLE
inline constexpr unsigned kMaxMigDevices = 64;        // our bound on nvmlDeviceGetMaxMigDeviceCount
inline constexpr unsigned kPcieUtilTxBytes = 0;       // NVML_PCIE_UTIL_TX_BYTES
inline constexpr unsigned kPcieUtilRxBytes = 1;       // NVML_PCIE_UTIL_RX_BYTES
inline constexpr unsigned kMemoryErrorCorrected = 0;  // NVML_MEMORY_ERROR_TYPE_CORRECTED
inline constexpr unsigned kMemoryErrorUncorrected = 1;
inline constexpr unsigned kVolatileEcc = 0;               // NVML_VOLATILE_ECC
inline constexpr unsigned kAggregateEcc = 1;              // NVML_AGGREGATE_ECC
inline constexpr unsigned kRetiredMultipleSingleBit = 0;  // NVML_PAGE_RETIREMENT_CAUSE_...
inline constexpr unsigned kRetiredDoubleBit = 1;
inline constexpr unsigned kNvLinkMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS (12 before R520)
inline constexpr unsigned kFieldNvLinkThroughputDataTx =
    138;  // NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
inline constexpr unsigned kFieldNvLinkThroughputDataRx = 139;  // ..._DATA_RX (cumulative KiB)
// Power through nvmlDeviceGetFieldValues (R535+), milliwatts: the driver's 1 s average (Ampere
// and newer except GA100) and the instantaneous draw (every architecture).
inline constexpr unsigned kFieldPowerAverage = 185;  // NVML_FI_DEV_POWER_AVERAGE
inline constexpr unsigned kFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT
inline constexpr int kValueTypeDouble = 0;           // nvmlValueType_t
inline constexpr int kValueTypeUnsignedInt = 1;
inline constexpr int kValueTypeUnsignedLong = 2;
inline constexpr int kValueTypeUnsignedLongLong = 3;
inline constexpr int kValueTypeSignedLongLong = 4;
inline constexpr int kValueTypeSignedInt = 5;
inline constexpr int kValueTypeUnsignedShort = 6;

// nvmlDeviceArchitecture_t (an unsigned int) as nvmlDeviceGetArchitecture writes it.
inline constexpr unsigned kArchKepler = 2;  // NVML_DEVICE_ARCH_KEPLER
inline constexpr unsigned kArchMaxwell = 3;
inline constexpr unsigned kArchPascal = 4;
inline constexpr unsigned kArchVolta = 5;
inline constexpr unsigned kArchTuring = 6;
inline constexpr unsigned kArchAmpere = 7;
inline constexpr unsigned kArchAda = 8;
inline constexpr unsigned kArchHopper = 9;
inline constexpr unsigned kArchBlackwell = 10;
inline constexpr unsigned kArchUnknown = 0xffffffffU;  // NVML_DEVICE_ARCH_UNKNOWN

union Value {  // nvmlValue_t, 8 bytes
  double d_val;
  unsigned ui_val;
  unsigned long ul_val;
  unsigned long long ull_val;
  long long sll_val;
  int si_val;
  unsigned short us_val;
};

struct FieldValue {  // nvmlFieldValue_t, 40 bytes
  unsigned field_id;
  unsigned scope_id;  // for NVLink counters: the link
  long long timestamp;
  long long latency_usec;
  int value_type;  // nvmlValueType_t
  Return nvml_return;
  Value value;
};
static_assert(sizeof(Value) == 8 && sizeof(FieldValue) == 40);
static_assert(offsetof(FieldValue, value_type) == 24 && offsetof(FieldValue, value) == 32);

// The driver's sample ring (nvmlDeviceGetSamples, Kepler+): a sample's time stamp is a "CPU
// Timestamp in microseconds" (nvml.h says no more: which host clock is found per device,
// nvml_samples.cpp). Power samples are milliwatts, NVML_VALUE_TYPE_UNSIGNED_INT.
inline constexpr unsigned kTotalPowerSamples = 0;  // NVML_TOTAL_POWER_SAMPLES (nvmlSamplingType_t)
struct Sample {                                    // nvmlSample_t, 16 bytes
  unsigned long long time_stamp;                   // CPU time stamp, microseconds
  Value value;                                     // nvmlValue_t of the call's nvmlValueType_t
};
static_assert(sizeof(Sample) == 16 && offsetof(Sample, value) == 8);
// device, nvmlSamplingType_t, lastSeenTimeStamp, nvmlValueType_t*, sampleCount*, samples
using SamplesFn = Return(Device, unsigned, unsigned long long, int*, unsigned*, Sample*);

using MigModeFn = Return(Device, unsigned*, unsigned*);  // current, pending
using MigHandleByIndexFn = Return(Device, unsigned, Device*);
using MigParentFn = Return(Device, Device*);
using PcieThroughputFn = Return(Device, unsigned, unsigned*);  // counter, KB/s
using TotalEccFn = Return(Device, unsigned, unsigned, unsigned long long*);
using RetiredPagesFn = Return(Device, unsigned, unsigned*, unsigned long long*);
using RemappedRowsFn = Return(Device, unsigned*, unsigned*, unsigned*, unsigned*);
using NvLinkStateFn = Return(Device, unsigned, unsigned*);  // link, nvmlEnableState_t
using FieldValuesFn = Return(Device, int, FieldValue*);

// GPM, GPU performance monitoring (R525+, Hopper and newer; nvml_gpm.cpp). Layouts from nvml.h of
// NVML 13.3.29 (NVML_API_VERSION 13): both structs are at version 1. nvmlGpmMetricsGet_t's array
// is NVML_GPM_METRIC_MAX entries long (98 in CUDA 12.0 headers, 333 in 13.3, with the version
// still 1): the library reads and writes only the first numMetrics, and we allocate the 13.3
// size so that a library built from either header stays inside our buffer.
inline constexpr Return kErrorArgumentVersionMismatch = 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
inline constexpr unsigned kGpmSupportVersion = 1;            // NVML_GPM_SUPPORT_VERSION
inline constexpr unsigned kGpmMetricsGetVersion = 1;         // NVML_GPM_METRICS_GET_VERSION
inline constexpr unsigned kGpmMetricMax = 333;               // NVML_GPM_METRIC_MAX (13.3)
// nvmlGpmMetricId_t values gpustream reads.
inline constexpr unsigned kGpmGraphicsUtil = 1;   // NVML_GPM_METRIC_GRAPHICS_UTIL
inline constexpr unsigned kGpmSmUtil = 2;         // NVML_GPM_METRIC_SM_UTIL
inline constexpr unsigned kGpmSmOccupancy = 3;    // NVML_GPM_METRIC_SM_OCCUPANCY
inline constexpr unsigned kGpmAnyTensorUtil = 5;  // NVML_GPM_METRIC_ANY_TENSOR_UTIL
inline constexpr unsigned kGpmDramBwUtil = 10;    // NVML_GPM_METRIC_DRAM_BW_UTIL
inline constexpr unsigned kGpmFp64Util = 11;      // NVML_GPM_METRIC_FP64_UTIL
inline constexpr unsigned kGpmFp32Util = 12;      // NVML_GPM_METRIC_FP32_UTIL
inline constexpr unsigned kGpmFp16Util = 13;      // NVML_GPM_METRIC_FP16_UTIL

struct GpmSampleSt;
using GpmSample = GpmSampleSt*;  // nvmlGpmSample_t (opaque)

struct GpmSupport {  // nvmlGpmSupport_t (v1), 8 bytes
  unsigned version;
  unsigned is_supported_device;
};

struct GpmMetric {  // nvmlGpmMetric_t, 40 bytes
  unsigned metric_id;
  Return nvml_return;  // this metric's own status; value valid only when kSuccess
  double value;
  struct {
    char* short_name;
    char* long_name;
    char* unit;
  } metric_info;
};

struct GpmMetricsGet {  // nvmlGpmMetricsGet_t (v1)
  unsigned version;
  unsigned num_metrics;
  GpmSample sample1;
  GpmSample sample2;
  GpmMetric metrics[kGpmMetricMax];
};
static_assert(sizeof(GpmSupport) == 8 && sizeof(GpmMetric) == 40);
static_assert(offsetof(GpmMetric, value) == 8 && offsetof(GpmMetricsGet, metrics) == 24);
static_assert(sizeof(GpmMetricsGet) == 24 + 40 * kGpmMetricMax);

using GpmQuerySupportFn = Return(Device, GpmSupport*);
using GpmSampleAllocFn = Return(GpmSample*);
using GpmSampleFreeFn = Return(GpmSample);
using GpmSampleGetFn = Return(Device, GpmSample);
using GpmMigSampleGetFn = Return(Device, unsigned, GpmSample);  // the GPU, a GPU instance id
using GpmMetricsGetFn = Return(GpmMetricsGet*);

/// How the process-info functions that were found lay out one entry.
enum class ProcessLayout : std::uint8_t {
  v1,       // nvmlProcessInfo_v1_t: 16 bytes (pid, usedGpuMemory)
  v2_or_v3  // 24 bytes as declared, 32 bytes as R535+ drivers write: detected per call
};

/// The typed function table. Null pointers are functions the library does not export.
struct Api {
  InitFn* init = nullptr;
  ShutdownFn* shutdown = nullptr;
  ErrorStringFn* error_string = nullptr;
  StringFn* driver_version = nullptr;
  CountFn* device_count = nullptr;
  HandleByIndexFn* handle_by_index = nullptr;
  HandleByUuidFn* handle_by_uuid = nullptr;
  DeviceStringFn* name = nullptr;
  DeviceStringFn* uuid = nullptr;
  PciFn* pci_info = nullptr;
  bool pci_legacy = false;  // nvmlDeviceGetPciInfo (v1): bus id in the first 16 bytes
  MemoryV2Fn* memory_v2 = nullptr;
  MemoryFn* memory = nullptr;
  UtilizationFn* utilization = nullptr;
  TemperatureVFn* temperature_v = nullptr;
  TemperatureFn* temperature = nullptr;
  UintFn* power_usage = nullptr;
  UintFn* power_limit = nullptr;
  UllFn* total_energy = nullptr;
  ClockFn* clock_info = nullptr;
  UintFn* fan_speed = nullptr;
  UllFn* clock_reasons = nullptr;
  ProcessesFn* compute_processes = nullptr;
  ProcessesFn* graphics_processes = nullptr;
  ProcessLayout process_layout = ProcessLayout::v2_or_v3;
  ProcessUtilizationFn* process_utilization = nullptr;
  // MIG (R450+). Without nvmlDeviceGetMigMode there is no MIG at all.
  MigModeFn* mig_mode = nullptr;
  UintFn* max_mig_device_count = nullptr;
  MigHandleByIndexFn* mig_handle_by_index = nullptr;
  UintFn* gpu_instance_id = nullptr;
  UintFn* compute_instance_id = nullptr;
  UintFn* is_mig_device_handle = nullptr;
  MigParentFn* mig_parent = nullptr;
  // Interconnect and health.
  PcieThroughputFn* pcie_throughput = nullptr;
  UintFn* pcie_link_generation = nullptr;
  UintFn* pcie_link_generation_max = nullptr;
  UintFn* pcie_link_width = nullptr;
  UintFn* pcie_link_width_max = nullptr;
  TotalEccFn* total_ecc_errors = nullptr;
  RetiredPagesFn* retired_pages = nullptr;
  UintFn* retired_pages_pending = nullptr;
  RemappedRowsFn* remapped_rows = nullptr;
  NvLinkStateFn* nvlink_state = nullptr;
  FieldValuesFn* field_values = nullptr;
  UintFn* architecture = nullptr;  // nvmlDeviceGetArchitecture (R470+)
  // GPM (nvml_gpm.cpp): all five or none (gpm_missing names the first one missing).
  GpmQuerySupportFn* gpm_query_support = nullptr;
  GpmSampleAllocFn* gpm_sample_alloc = nullptr;
  GpmSampleFreeFn* gpm_sample_free = nullptr;
  GpmSampleGetFn* gpm_sample_get = nullptr;
  GpmMetricsGetFn* gpm_metrics_get = nullptr;
  std::string gpm_missing;
  // For MIG GPU instances; looked up only when the five are there (null: no GPM on MIG).
  GpmMigSampleGetFn* gpm_mig_sample_get = nullptr;
  SamplesFn* samples = nullptr;  // nvmlDeviceGetSamples (the power sample ring)
  /// The MIG functions missing from the library ("" when all are there), for the log line.
  std::string mig_missing;

  /// Names of the functions that were found, for `gpustream list`-style diagnostics
  /// ("nvmlInit_v2", "nvmlDeviceGetMemoryInfo_v2", ...).
  std::string init_name;
  std::string memory_name;
  std::string processes_name;

  /// Looks every function up. Throws DynamicLibraryError (errc::symbol_missing) whose message is
  /// "<symbol> missing from <file>" when a required function is not exported.
  static Api load(const DynamicLibrary& lib);

  /// Looks the optional MIG, interconnect and health functions up (nvml_api_health.cpp).
  void load_mig_and_health(const DynamicLibrary& lib);
  /// Looks the GPM functions up (nvml_gpm.cpp): all of them, or none.
  void load_gpm(const DynamicLibrary& lib);

  /// nvmlErrorString(rc) when available, else "NVML error <rc>".
  std::string describe(Return rc) const;
};

/// "NVML_ERROR_GPU_IS_LOST"-style name of a return code ("NVML_ERROR_<n>" when unknown).
std::string_view return_code_name(Return rc) noexcept;

}  // namespace gpustream::nvml
