// amd_smi_api.hpp — the part of the AMD SMI library's C ABI (libamd_smi.so) that the AMD library
// backend uses, written by hand from the public amdsmi.h of named releases, and the typed table of
// functions looked up at run time.
//
// Releases followed (ROCm/amdsmi include/amd_smi/amdsmi.h):
//  * layout v6: library 23.x and 24.x, i.e. ROCm 6.0.0 (23.4.0) through ROCm 6.3 (24.7.x); read at
//    tags rocm-6.0.0, rocm-6.1.0, rocm-6.2.0 and amd-staging 0ceca28 (24.7.0). The structs used
//    here are identical across those (6.0/6.1 name amdsmi_clk_info_t's first field cur_clk and
//    end it with sleep_clk: same size, same offsets of what is read).
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

  /// Looks every function up. Throws DynamicLibraryError (errc::symbol_missing) whose message is
  /// "<symbol> missing from <file>" when a required function is not exported.
  static Api load(const DynamicLibrary& lib);

  /// amdsmi_status_code_to_string when available, else the status name.
  std::string describe(Status rc) const;
};

/// "AMDSMI_STATUS_NOT_SUPPORTED"-style name ("AMDSMI_STATUS_<n>" when unknown).
std::string status_name(Status rc);

}  // namespace gpustream::amdsmi
