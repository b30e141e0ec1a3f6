// level_zero_api.hpp — the slice of the Level Zero / Sysman C ABI that gpustream uses, written
// by hand from oneapi-src/level-zero include/ze_api.h and include/zes_api.h (API 1.x): result
// codes, structure-type values, and the structs passed to the functions below. Only what the
// Intel probe calls is declared. The fake loader in tests/fakes/level_zero implements exactly
// these functions.
#pragma once

#include <cstdint>

namespace gpustream::ze {

using Result = std::uint32_t;  // ze_result_t
using Bool = std::uint8_t;     // ze_bool_t
using Handle = void*;          // every *_handle_t is an opaque pointer

inline constexpr Result kSuccess = 0;
inline constexpr Result kNotReady = 1;
inline constexpr Result kErrorDeviceLost = 0x70000001;
inline constexpr Result kErrorInsufficientPermissions = 0x70010000;
inline constexpr Result kErrorUninitialized = 0x78000001;
inline constexpr Result kErrorUnsupportedFeature = 0x78000003;

// zes_structure_type_t values.
inline constexpr std::uint32_t kStypePciProperties = 0x2;
inline constexpr std::uint32_t kStypeEngineProperties = 0x5;
inline constexpr std::uint32_t kStypeFreqProperties = 0x9;
inline constexpr std::uint32_t kStypeMemProperties = 0xb;
inline constexpr std::uint32_t kStypeTempProperties = 0x14;
inline constexpr std::uint32_t kStypeFreqState = 0x1b;
inline constexpr std::uint32_t kStypeMemState = 0x1e;

// zes_engine_group_t (the *_ALL groups; the *_SINGLE ones are per engine).
inline constexpr std::uint32_t kEngineGroupAll = 0;
inline constexpr std::uint32_t kEngineGroupComputeAll = 1;
inline constexpr std::uint32_t kEngineGroupMediaAll = 2;
inline constexpr std::uint32_t kEngineGroupCopyAll = 3;
inline constexpr std::uint32_t kEngineGroupRenderAll = 12;
inline constexpr std::uint32_t kEngineGroup3dAll = 13;

inline constexpr std::uint32_t kTempSensorsGlobal = 0;
inline constexpr std::uint32_t kTempSensorsGpu = 1;
inline constexpr std::uint32_t kFreqDomainGpu = 0;
inline constexpr std::uint32_t kFreqDomainMemory = 1;
inline constexpr std::uint32_t kMemLocDevice = 1;

struct PciAddress {
  std::uint32_t domain, bus, device, function;
};
struct PciSpeed {
  std::int32_t gen, width;
  std::int64_t max_bandwidth;
};
struct PciProperties {
  std::uint32_t stype = kStypePciProperties;
  void* next = nullptr;
  PciAddress address{};
  PciSpeed max_speed{};
  Bool have_bandwidth_counters = 0, have_packet_counters = 0, have_replay_counters = 0;
};
struct EngineProperties {
  std::uint32_t stype = kStypeEngineProperties;
  void* next = nullptr;
  std::uint32_t type = 0;
  Bool on_subdevice = 0;
  std::uint32_t subdevice_id = 0;
};
struct EngineStats {
  std::uint64_t active_time;  // us
  std::uint64_t timestamp;    // us
};
struct EnergyCounter {
  std::uint64_t energy;     // uJ
  std::uint64_t timestamp;  // us
};
struct TempProperties {
  std::uint32_t stype = kStypeTempProperties;
  void* next = nullptr;
  std::uint32_t type = 0;
  Bool on_subdevice = 0;
  std::uint32_t subdevice_id = 0;
  double max_temperature = 0;
  Bool critical_supported = 0, threshold1_supported = 0, threshold2_supported = 0;
};
struct FreqProperties {
  std::uint32_t stype = kStypeFreqProperties;
  void* next = nullptr;
  std::uint32_t type = 0;
  Bool on_subdevice = 0;
  std::uint32_t subdevice_id = 0;
  Bool can_control = 0, throttle_event_supported = 0;
  double min = 0, max = 0;
};
struct FreqState {
  std::uint32_t stype = kStypeFreqState;
  const void* next = nullptr;
  double current_voltage = -1, request = -1, tdp = -1, efficient = -1, actual = -1;
  std::uint32_t throttle_reasons = 0;
};
struct MemProperties {
  std::uint32_t stype = kStypeMemProperties;
  void* next = nullptr;
  std::uint32_t type = 0;
  Bool on_subdevice = 0;
  std::uint32_t subdevice_id = 0;
  std::uint32_t location = 0;
  std::uint64_t physical_size = 0;  // bytes, 0 = unknown
  std::int32_t bus_width = 0, num_channels = 0;
};
struct MemState {
  std::uint32_t stype = kStypeMemState;
  const void* next = nullptr;
  std::uint32_t health = 0;
  std::uint64_t free = 0;  // bytes
  std::uint64_t size = 0;  // bytes (deprecated)
};

// Function types, as looked up with DynamicLibrary.
using InitFn = Result(std::uint32_t flags);  // zeInit, zesInit
using DriverGetFn = Result(std::uint32_t* count, Handle* drivers);
using DeviceGetFn = Result(Handle driver, std::uint32_t* count, Handle* devices);
using EnumFn = Result(Handle device, std::uint32_t* count, Handle* out);
using PciGetPropertiesFn = Result(Handle device, PciProperties* props);
using EngineGetPropertiesFn = Result(Handle engine, EngineProperties* props);
using EngineGetActivityFn = Result(Handle engine, EngineStats* stats);
using GetCardPowerDomainFn = Result(Handle device, Handle* power);
using PowerGetEnergyCounterFn = Result(Handle power, EnergyCounter* energy);
using TemperatureGetPropertiesFn = Result(Handle sensor, TempProperties* props);
using TemperatureGetStateFn = Result(Handle sensor, double* celsius);
using FrequencyGetPropertiesFn = Result(Handle freq, FreqProperties* props);
using FrequencyGetStateFn = Result(Handle freq, FreqState* state);
using MemoryGetPropertiesFn = Result(Handle mem, MemProperties* props);
using MemoryGetStateFn = Result(Handle mem, MemState* state);

}  // namespace gpustream::ze
