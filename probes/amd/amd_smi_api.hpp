// amd_smi_api.hpp — the part of the AMD SMI library's C ABI (libamd_smi.so) that the AMD library
// backend uses, written by hand from the public amdsmi.h of named releases, and the typed table of
// functions looked up at run time.
//
// Releases followed (ROCm/amdsmi include/amd_smi/amdsmi.h):
//  * layout v6: library 23.x and 24.x, i.e. ROCm 6.0.0 (23.4.0) through ROCm 6.3 (24.7.x); read at
//    tags rocm-6.0.0, rocm-6.1.0, rocm-6.2.0 and amd-staging 0ceca28 (24.7.0). The structs used
//    here are identical across those (6.0/6.1 name amdsmi_clk_info_t's first field cur_clk and
//    end it with sleep_clk: same size, same offsets of what is read). Two things do change
//    within 6.x and are chosen by version: amdsmi_get_gpu_process_list fills pids up to 24.5.0
//    (process_list_gives_pids) and power_limit's unit (power_limit_in_microwatts).
//  * layout v26: library 26.x (ROCm 7.x; header AMDSMI_LIB_VERSION_MAJOR 26, MINOR 1). There the
//    version struct loses its `year` (major comes first), AMDSMI_MAX_STRING_LENGTH grows from 64
//    to 256 (amdsmi_proc_info_t's name and container_name grow from 32 to 256 bytes and gain
//    cu_occupancy/evicted_time) and amdsmi_power_info_t gains a 64-bit socket_power and 64-bit
//    voltages (68 -> 192 bytes).
// Any other library version (e.g. 25.x, 27.x) is refused: its structs are never read.
//
// Required functions (missing: the library is unusable, "<symbol> missing from <file>"): init,
// shutdown, version, socket handles, processor handles, UUID, BDF. Everything else is optional:
// a missing one leaves its metric absent (unsupported).
//
// Thread safety: an Api is immutable after load(); its functions are the library's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/dynamic_library.hpp"

namespace gpustream::amdsmi {

using Status = std::uint32_t;   // amdsmi_status_t
using ProcessorHandle = void*;  // amdsmi_processor_handle (opaque)
using SocketHandle = void*;     // amdsmi_socket_handle (opaque)

inline constexpr Status kSuccess = 0;
inline constexpr Status kInval = 1;
inline constexpr Status kNotSupported = 2;
inline constexpr Status kNotYetImplemented = 3;
inline constexpr Status kNoPerm = 10;
inline constexpr Status kOutOfResources = 15;
inline constexpr Status kNotFound = 31;
inline constexpr Status kNotInit = 32;
inline constexpr Status kDriverNotLoaded = 34;
inline constexpr Status kNoData = 40;
inline constexpr Status kUnknownError = 0xFFFFFFFFu;

inline constexpr std::uint64_t kInitAmdGpus = 1U << 1;  // AMDSMI_INIT_AMD_GPUS

// amdsmi_memory_type_t
inline constexpr std::uint32_t kMemVram = 0;
inline constexpr std::uint32_t kMemGtt = 2;
// amdsmi_temperature_type_t
inline constexpr std::uint32_t kTempEdge = 0;
inline constexpr std::uint32_t kTempHotspot = 1;
inline constexpr std::uint32_t kTempVram = 2;
// amdsmi_temperature_metric_t
inline constexpr std::uint32_t kTempCurrent = 0;
// amdsmi_clk_type_t
inline constexpr std::uint32_t kClkGfx = 0;
inline constexpr std::uint32_t kClkMem = 4;
/// AMDSMI_MAX_FAN_SPEED: amdsmi_get_gpu_fan_speed answers 0..255.
inline constexpr double kMaxFanSpeed = 255.0;
/// AMDSMI_GPU_UUID_SIZE
inline constexpr unsigned kUuidSize = 38;

/// Which struct layouts the loaded library uses.
enum class Layout : std::uint8_t { v6, v26 };
std::string_view to_string(Layout layout) noexcept;

/// amdsmi_version_t as both known layouts write it, 24 bytes each: v6 {year, major, minor,
/// release, build}; v26 {major, minor, release, <padding>, build}. The word at offset 0 tells
/// which (a year <= 25 or a major >= 26); the pointer sits at offset 16 in both.
struct VersionRaw {
  std::uint32_t words[4];
  const char* build;
};
static_assert(sizeof(VersionRaw) == 24);

/// The library's version, and the layout chosen for it.
struct LibVersion {
  Layout layout = Layout::v6;
  unsigned year = 0;  // v6 only
  unsigned major = 0, minor = 0, release = 0;
  std::string text;  // "24.7.0" (v6: year.major.minor) or "26.1.0"
};

/// The layout for a raw version, or std::nullopt (and `why`) for a version gpustream does not
/// know. `raw` was zero-filled before the call.
std::optional<LibVersion> classify_version(const VersionRaw& raw, std::string* why);

struct EngineUsage {  // amdsmi_engine_usage_t, 64 bytes in v6 and v26
  std::uint32_t gfx_activity, umc_activity, mm_activity;  // %
  std::uint32_t reserved[13];
};
struct ClkInfo {                        // amdsmi_clk_info_t, 32 bytes in v6 and v26
  std::uint32_t clk, min_clk, max_clk;  // MHz
  std::uint8_t clk_locked, clk_deep_sleep;
  std::uint32_t reserved[4];
};
struct PowerInfoV6 {  // amdsmi_power_info_t (v6), 68 bytes; 0xFFFF: not available
  std::uint32_t current_socket_power, average_socket_power;  // W
  std::uint32_t gfx_voltage, soc_voltage, mem_voltage;       // mV
  std::uint32_t power_limit;
  std::uint32_t reserved[11];
};
struct PowerInfoV26 {          // amdsmi_power_info_t (v26), 192 bytes; UINT32_MAX: not available
  std::uint64_t socket_power;  // W
  std::uint32_t current_socket_power, average_socket_power;  // W
  std::uint64_t gfx_voltage, soc_voltage, mem_voltage;       // mV
  std::uint32_t power_limit;
  std::uint64_t reserved[18];
};
template <std::size_t kNameLength, std::size_t kTailWords>
struct ProcInfo {  // amdsmi_proc_info_t
  char name[kNameLength];
  std::uint32_t pid;
  std::uint64_t mem;  // bytes
  struct {
    std::uint64_t gfx, enc;  // ns of engine time since the process opened the device
    std::uint32_t reserved[12];
  } engine_usage;
  struct {
    std::uint64_t gtt_mem, cpu_mem, vram_mem;  // bytes
    std::uint32_t reserved[10];
  } memory_usage;
  char container_name[kNameLength];
  std::uint32_t tail[kTailWords];  // v6: reserved[4]; v26: cu_occupancy, evicted_time, reserved[10]
};
using ProcInfoV6 = ProcInfo<32, 4>;     // 224 bytes
using ProcInfoV26 = ProcInfo<256, 12>;  // 704 bytes

static_assert(sizeof(EngineUsage) == 64 && sizeof(ClkInfo) == 32);
static_assert(sizeof(PowerInfoV6) == 68 && sizeof(PowerInfoV26) == 192);
static_assert(sizeof(ProcInfoV6) == 224 && sizeof(ProcInfoV26) == 704);
static_assert(offsetof(ProcInfoV26, memory_usage) == 336 &&
              offsetof(ProcInfoV6, memory_usage) == 112);

/// The start of amdsmi_gpu_metrics_t (amdsmi_get_gpu_metrics_info): amd_metrics_table_header_t
/// and the fields of the driver's gpu_metrics v1.0 to v1.3. This part is the same in every release
/// gpustream knows: read in ROCm/amdsmi include/amd_smi/amdsmi.h at tags rocm-6.0.0 (23.4.0),
/// rocm-6.1.0 (24.5.0), rocm-6.2.0 (24.6.2), amd-staging 0ceca28 (24.7.0), and in
/// ROCm/rocm-systems projects/amdsmi/include/amd_smi/amdsmi.h at 019df164 (26.5.0). What follows
/// it differs (v1.4 and later fields, XCP statistics, an APU pointer in 26.x), so only this part is
/// declared and only this part is read. Fields a device's table lacks are their type's maximum.
struct GpuMetricsHead {
  std::uint16_t structure_size;                    // of the driver's table
  std::uint8_t format_revision, content_revision;  // 1.x: discrete GPU tables
  std::uint16_t temperature[6];                    // edge, hotspot, mem, vrgfx, vrsoc, vrmem (°C)
  std::uint16_t average_activity[3];               // gfx, umc, mm (%)
  std::uint16_t average_socket_power;              // W
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;  // ns
  std::uint16_t average_clock[7];      // MHz
  std::uint16_t current_clock[7];      // MHz
  std::uint32_t throttle_status;       // ASIC-dependent bits
  std::uint16_t current_fan_speed;     // RPM
  std::uint16_t pcie_link_width, pcie_link_speed;
  std::uint32_t gfx_activity_acc, mem_activity_acc;  // v1.1
  std::uint16_t temperature_hbm[4];
  std::uint64_t firmware_timestamp;                     // v1.2
  std::uint16_t voltage_soc, voltage_gfx, voltage_mem;  // v1.3, mV
  std::uint64_t indep_throttle_status;                  // ASIC-independent SMU_THROTTLER_* bits
};
static_assert(offsetof(GpuMetricsHead, energy_accumulator) == 24);
static_assert(offsetof(GpuMetricsHead, throttle_status) == 68);
static_assert(offsetof(GpuMetricsHead, gfx_activity_acc) == 80);
static_assert(offsetof(GpuMetricsHead, firmware_timestamp) == 96);
static_assert(offsetof(GpuMetricsHead, indep_throttle_status) == 112);
static_assert(sizeof(GpuMetricsHead) == 120);
/// sizeof(amdsmi_gpu_metrics_t) of the releases read (computed from the field lists above):
/// 352 (23.4), 424 (24.5, 24.6), 1832 (24.7), 4720 (26.5). The library writes its whole struct,
/// so the call gets a zeroed buffer more than three times the largest.
inline constexpr std::size_t kGpuMetricsBuffer = 16384;
static_assert(kGpuMetricsBuffer >= 3 * 4720);

/// The throttle reasons amdsmi_gpu_metrics_t gives (docs/probes.md): the names of the set bits of
/// indep_throttle_status (1.3+ tables), else "throttled" when the ASIC-dependent throttle_status is
/// not 0; empty: not throttled. std::nullopt when the table has neither (an APU's 2.x/3.x table, or
/// both fields at their maximum, amdsmi's "not available").
std::optional<std::vector<std::string>> throttle_reasons(const GpuMetricsHead& m);
/// "ppt0", "temp_hotspot", ... for each set SMU_THROTTLER bit; "bit<n>" for one without a name.
std::vector<std::string> throttle_bit_names(std::uint64_t bits);

/// Whether amdsmi_power_info_t's power_limit is in µW (else W) in this release. The library fills
/// it from hwmon power1_cap (µW) in smi_amdgpu_get_power_cap (src/amd_smi/amd_smi_utils.cc),
/// which divided by 10^6 up to 24.5.1 (tags rocm-6.0.0 = 23.4.0, rocm-6.1.0 = 24.5.0,
/// rocm-6.1.1 = 24.5.1: "Dividing by 1000000 to get measurement in Watts") and stopped in
/// 24.5.2 (commit c24d667 "SWDEV-450580 - Fix powercap set: API - Reverted to uW for power cap
/// limits"; tags rocm-6.1.2 = 24.5.2, rocm-6.2.0 = 24.6.2 and amd-staging 24.7.0 keep µW, and
/// their amdsmi.h documents amdsmi_power_cap_info_t's power_cap as "(uW)"). 26.x: watts.
bool power_limit_in_microwatts(const LibVersion& v) noexcept;

/// Whether amdsmi_get_gpu_process_list fills amdsmi_process_handle_t (uint32_t pids; each
/// process's amdsmi_proc_info_t then comes from amdsmi_get_gpu_process_info) instead of
/// amdsmi_proc_info_t entries: 23.x and 24.5.0 (tags rocm-6.0.0, rocm-6.1.0). From 24.5.1
/// (rocm-6.1.1) on the list holds amdsmi_proc_info_t, 224 bytes in every 6.x release.
bool process_list_gives_pids(const LibVersion& v) noexcept;

/// amdsmi_asic_info_t is read only for market_name (offset 0 in every known release: 64 bytes up
/// to library 24.5, 256 from 24.6 and in 26.x), into a buffer larger than any known release's.
inline constexpr std::size_t kAsicInfoBuffer = 2048;
std::size_t market_name_length(const LibVersion& v) noexcept;

/// amdsmi_bdf_t: function 3 bits, device 5, bus 8, domain 48, in one uint64_t.
std::string format_bdf(std::uint64_t bdf);

// Function types, as declared in amdsmi.h (enums are 32-bit ints in the C ABI).
using InitFn = Status(std::uint64_t);
using ShutdownFn = Status();
using VersionFn = Status(VersionRaw*);
using StatusStringFn = Status(Status, const char**);
using SocketHandlesFn = Status(std::uint32_t*, SocketHandle*);
using ProcessorHandlesFn = Status(SocketHandle, std::uint32_t*, ProcessorHandle*);
using UuidFn = Status(ProcessorHandle, unsigned*, char*);
using BdfFn = Status(ProcessorHandle, std::uint64_t*);  // amdsmi_bdf_t is one uint64_t
using HandleFromBdfFn = Status(std::uint64_t, ProcessorHandle*);
using ActivityFn = Status(ProcessorHandle, EngineUsage*);
using MemoryFn = Status(ProcessorHandle, std::uint32_t, std::uint64_t*);
using PowerInfoFn = Status(ProcessorHandle, void*);  // PowerInfoV6 or PowerInfoV26
using EnergyFn = Status(ProcessorHandle, std::uint64_t*, float*, std::uint64_t*);
using TempFn = Status(ProcessorHandle, std::uint32_t, std::uint32_t, std::int64_t*);
using ClockFn = Status(ProcessorHandle, std::uint32_t, ClkInfo*);
using FanFn = Status(ProcessorHandle, std::uint32_t, std::int64_t*);
using ProcessListFn = Status(ProcessorHandle, std::uint32_t*, void*);  // ProcInfoV6/V26 array
using AsicInfoFn = Status(ProcessorHandle, void*);
using ProcessInfoFn = Status(ProcessorHandle, std::uint32_t, ProcInfoV6*);  // 23.x, 24.5.0
using GpuMetricsFn = Status(ProcessorHandle, void*);  // amdsmi_gpu_metrics_t, kGpuMetricsBuffer

/// The typed function table. Null pointers are functions the library does not export.
struct Api {
  InitFn* init = nullptr;
  ShutdownFn* shut_down = nullptr;
  VersionFn* lib_version = nullptr;
  SocketHandlesFn* socket_handles = nullptr;
  ProcessorHandlesFn* processor_handles = nullptr;
  UuidFn* uuid = nullptr;
  BdfFn* bdf = nullptr;
  // Optional.
  StatusStringFn* status_string = nullptr;
  HandleFromBdfFn* handle_from_bdf = nullptr;
  ActivityFn* activity = nullptr;
  MemoryFn* memory_total = nullptr;
  MemoryFn* memory_usage = nullptr;
  PowerInfoFn* power_info = nullptr;
  EnergyFn* energy = nullptr;
  TempFn* temp_metric = nullptr;
  ClockFn* clock_info = nullptr;
  FanFn* fan_speed = nullptr;
  FanFn* fan_rpms = nullptr;
  ProcessListFn* process_list = nullptr;
  AsicInfoFn* asic_info = nullptr;
  GpuMetricsFn* gpu_metrics = nullptr;
  ProcessInfoFn* process_info = nullptr;

  /// Looks every function up. Throws DynamicLibraryError (errc::symbol_missing) whose message is
  /// "<symbol> missing from <file>" when a required function is not exported.
  static Api load(const DynamicLibrary& lib);

  /// amdsmi_status_code_to_string when available, else the status name.
  std::string describe(Status rc) const;
};

/// "AMDSMI_STATUS_NOT_SUPPORTED"-style name ("AMDSMI_STATUS_<n>" when unknown).
std::string status_name(Status rc);

}  // namespace gpustream::amdsmi
