#include "amd/amd_smi_api.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace gpustream::amdsmi {

std::string_view to_string(Layout layout) noexcept { return layout == Layout::v26 ? "v26" : "v6"; }

std::optional<LibVersion> classify_version(const VersionRaw& raw, std::string* why) {
  LibVersion v;
  const auto first = raw.words[0];
  if (first == 23 || first == 24) {  // ROCm 6.0 .. 6.3: year.major.minor.release
    v.layout = Layout::v6;
    v.year = first;
    v.major = raw.words[1];
    v.minor = raw.words[2];
    v.release = raw.words[3];
    v.text = std::to_string(v.year) + "." + std::to_string(v.major) + "." + std::to_string(v.minor);
    return v;
  }
  if (first == 26) {  // ROCm 7.x: major.minor.release
    v.layout = Layout::v26;
    v.major = raw.words[0];
    v.minor = raw.words[1];
    v.release = raw.words[2];
    v.text =
        std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.release);
    return v;
  }
  if (why)
    *why = "AMD SMI library version " + std::to_string(first) + "." + std::to_string(raw.words[1]) +
           " is not one gpustream knows the struct layouts of "
           "(known: 23.x and 24.x from ROCm 6.0-6.3, 26.x from ROCm 7.x); not reading its structs";
  return std::nullopt;
}

bool power_limit_in_microwatts(const LibVersion& v) noexcept {
  if (v.layout != Layout::v6) return false;
  if (v.year != 24) return v.year > 24;  // 23.x: watts
  return v.major > 5 || (v.major == 5 && v.minor >= 2);
}

bool process_list_gives_pids(const LibVersion& v) noexcept {
  if (v.layout != Layout::v6) return false;
  return v.year == 23 || (v.year == 24 && (v.major < 5 || (v.major == 5 && v.minor == 0)));
}

std::size_t market_name_length(const LibVersion& v) noexcept {
  if (v.layout == Layout::v26) return 256;
  return (v.year == 24 && v.major >= 6) ? 256 : 64;
}

namespace {

// The driver's ASIC-independent throttler bits (Linux drivers/gpu/drm/amd/pm/swsmu/inc/
// amdgpu_smu.h, SMU_THROTTLER_*_BIT), which amdsmi passes on in indep_throttle_status.
struct ThrottleBit {
  unsigned bit;
  const char* name;
};
constexpr ThrottleBit kThrottleBits[] = {
    {0, "ppt0"},          {1, "ppt1"},          {2, "ppt2"},          {3, "ppt3"},
    {4, "spl"},           {5, "fppt"},          {6, "sppt"},          {7, "sppt_apu"},
    {16, "tdc_gfx"},      {17, "tdc_soc"},      {18, "tdc_mem"},      {19, "tdc_vdd"},
    {20, "tdc_cvip"},     {21, "edc_cpu"},      {22, "edc_gfx"},      {23, "apcc"},
    {32, "temp_gpu"},     {33, "temp_core"},    {34, "temp_mem"},     {35, "temp_edge"},
    {36, "temp_hotspot"}, {37, "temp_soc"},     {38, "temp_vr_gfx"},  {39, "temp_vr_soc"},
    {40, "temp_vr_mem0"}, {41, "temp_vr_mem1"}, {42, "temp_liquid0"}, {43, "temp_liquid1"},
    {44, "vrhot0"},       {45, "vrhot1"},       {46, "prochot_cpu"},  {47, "prochot_gfx"},
    {56, "ppm"},          {57, "fit"},
};

}  // namespace

std::vector<std::string> throttle_bit_names(std::uint64_t bits) {
  std::vector<std::string> out;
  for (unsigned bit = 0; bit < 64; ++bit) {
    if ((bits >> bit & 1U) == 0) continue;
    const auto* known = std::find_if(std::begin(kThrottleBits), std::end(kThrottleBits),
                                     [&](const ThrottleBit& t) { return t.bit == bit; });
    out.push_back(known != std::end(kThrottleBits) ? known->name : "bit" + std::to_string(bit));
  }
  return out;
}

std::optional<std::vector<std::string>> throttle_reasons(const GpuMetricsHead& m) {
  if (m.format_revision != 1) return std::nullopt;  // APU (2.x, 3.x) tables: not these fields
  if (m.content_revision >= 3 && m.indep_throttle_status != ~std::uint64_t{0})
    return throttle_bit_names(m.indep_throttle_status);
  if (m.throttle_status != ~std::uint32_t{0}) {
    // Only the ASIC-dependent word (tables before 1.3): its bits differ per ASIC.
    if (m.throttle_status == 0) return std::vector<std::string>{};
    return std::vector<std::string>{"throttled"};
  }
  return std::nullopt;
}

std::string format_bdf(std::uint64_t bdf) {
  const auto function = static_cast<unsigned>(bdf & 0x7U);
  const auto device = static_cast<unsigned>((bdf >> 3) & 0x1FU);
  const auto bus = static_cast<unsigned>((bdf >> 8) & 0xFFU);
  const auto domain = static_cast<unsigned long long>(bdf >> 16);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04llx:%02x:%02x.%x", domain, bus, device, function);
  return buf;
}

namespace {

template <class F>
F* need(const DynamicLibrary& lib, const char* name) {
  return lib.required<F>(name);
}

}  // namespace

Api Api::load(const DynamicLibrary& lib) {
  Api api;
  api.init = need<InitFn>(lib, "amdsmi_init");
  api.shut_down = need<ShutdownFn>(lib, "amdsmi_shut_down");
  api.lib_version = need<VersionFn>(lib, "amdsmi_get_lib_version");
  api.socket_handles = need<SocketHandlesFn>(lib, "amdsmi_get_socket_handles");
  api.processor_handles = need<ProcessorHandlesFn>(lib, "amdsmi_get_processor_handles");
  api.uuid = need<UuidFn>(lib, "amdsmi_get_gpu_device_uuid");
  api.bdf = need<BdfFn>(lib, "amdsmi_get_gpu_device_bdf");

  api.status_string = lib.optional<StatusStringFn>("amdsmi_status_code_to_string");
  api.handle_from_bdf = lib.optional<HandleFromBdfFn>("amdsmi_get_processor_handle_from_bdf");
  api.activity = lib.optional<ActivityFn>("amdsmi_get_gpu_activity");
  api.memory_total = lib.optional<MemoryFn>("amdsmi_get_gpu_memory_total");
  api.memory_usage = lib.optional<MemoryFn>("amdsmi_get_gpu_memory_usage");
  api.power_info = lib.optional<PowerInfoFn>("amdsmi_get_power_info");
  api.energy = lib.optional<EnergyFn>("amdsmi_get_energy_count");
  api.temp_metric = lib.optional<TempFn>("amdsmi_get_temp_metric");
  api.clock_info = lib.optional<ClockFn>("amdsmi_get_clock_info");
  api.fan_speed = lib.optional<FanFn>("amdsmi_get_gpu_fan_speed");
  api.fan_rpms = lib.optional<FanFn>("amdsmi_get_gpu_fan_rpms");
  api.process_list = lib.optional<ProcessListFn>("amdsmi_get_gpu_process_list");
  api.asic_info = lib.optional<AsicInfoFn>("amdsmi_get_gpu_asic_info");
  api.gpu_metrics = lib.optional<GpuMetricsFn>("amdsmi_get_gpu_metrics_info");
  api.process_info = lib.optional<ProcessInfoFn>("amdsmi_get_gpu_process_info");
  return api;
}

std::string Api::describe(Status rc) const {
  if (status_string) {
    const char* text = nullptr;
    if (status_string(rc, &text) == kSuccess && text && *text) return text;
  }
  return status_name(rc);
}

std::string status_name(Status rc) {
  switch (rc) {
    case 0:
      return "AMDSMI_STATUS_SUCCESS";
    case 1:
      return "AMDSMI_STATUS_INVAL";
    case 2:
      return "AMDSMI_STATUS_NOT_SUPPORTED";
    case 3:
      return "AMDSMI_STATUS_NOT_YET_IMPLEMENTED";
    case 4:
      return "AMDSMI_STATUS_FAIL_LOAD_MODULE";
    case 5:
      return "AMDSMI_STATUS_FAIL_LOAD_SYMBOL";
    case 6:
      return "AMDSMI_STATUS_DRM_ERROR";
    case 7:
      return "AMDSMI_STATUS_API_FAILED";
    case 8:
      return "AMDSMI_STATUS_TIMEOUT";
    case 9:
      return "AMDSMI_STATUS_RETRY";
    case 10:
      return "AMDSMI_STATUS_NO_PERM";
    case 11:
      return "AMDSMI_STATUS_INTERRUPT";
    case 12:
      return "AMDSMI_STATUS_IO";
    case 15:
      return "AMDSMI_STATUS_OUT_OF_RESOURCES";
    case 16:
      return "AMDSMI_STATUS_INTERNAL_EXCEPTION";
    case 18:
      return "AMDSMI_STATUS_INIT_ERROR";
    case 30:
      return "AMDSMI_STATUS_BUSY";
    case 31:
      return "AMDSMI_STATUS_NOT_FOUND";
    case 32:
      return "AMDSMI_STATUS_NOT_INIT";
    case 34:
      return "AMDSMI_STATUS_DRIVER_NOT_LOADED";
    case 40:
      return "AMDSMI_STATUS_NO_DATA";
    case 41:
      return "AMDSMI_STATUS_INSUFFICIENT_SIZE";
    case 0xFFFFFFFEu:
      return "AMDSMI_STATUS_MAP_ERROR";
    case 0xFFFFFFFFu:
      return "AMDSMI_STATUS_UNKNOWN_ERROR";
    default:
      return "AMDSMI_STATUS_" + std::to_string(rc);
  }
}

}  // namespace gpustream::amdsmi
