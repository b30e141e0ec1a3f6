#include "amd/amdgpu_gpu_metrics.hpp"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <optional>

#include "gpustream/probes/readers.hpp"

namespace gpustream::amdgpu {
namespace {

using u8 = std::uint8_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;

// The driver's tables, field for field in kernel order, grouped into arrays where consecutive
// fields share a type. Only the header and the activity fields are read; the rest is declared so
// the compiler computes each table's size and offsets, which are checked against the sizes
// worked out by hand from kgd_pp_interface.h.
struct Header {
  u16 structure_size;
  u8 format_revision, content_revision;
};

struct V1_0 {
  Header header;
  u64 system_clock_counter;
  u16 temperature[6];
  u16 gfx_activity, umc_activity, mm_activity;
  u16 socket_power;
  u32 energy_accumulator;
  u16 average_clock[7], current_clock[7];
  u32 throttle_status;
  u16 fan_speed;
  u8 pcie_link_width, pcie_link_speed;
};
struct V1_1 {
  Header header;
  u16 temperature[6];
  u16 gfx_activity, umc_activity, mm_activity;
  u16 socket_power;
  u64 energy_accumulator, system_clock_counter;
  u16 average_clock[7], current_clock[7];
  u32 throttle_status;
  u16 fan_speed, pcie_link[2], padding;
  u32 activity_acc[2];
  u16 temperature_hbm[4];
};
// 1.2 and 1.3 extend 1.1 (and 2.2 to 2.4 extend 2.1) at the end; composed, not derived, so each
// stays a standard-layout struct.
struct V1_2 {
  V1_1 v1_1;
  u64 firmware_timestamp;
};
struct V1_3 {
  V1_2 v1_2;
  u16 voltage[3], padding1;
  u64 indep_throttle_status;
};
struct V1_4 {
  Header header;
  u16 temperature[3], socket_power;
  u16 gfx_activity, umc_activity;
  u16 vcn_activity[4];
  u64 energy_accumulator, system_clock_counter;
  u32 throttle_status, gfxclk_lock_status;
  u16 pcie_link[2], xgmi_link[2];
  u32 activity_acc[2];
  u64 pcie_bandwidth[2], pcie_counts[3];
  u64 xgmi_data_acc[16];
  u64 firmware_timestamp;
  u16 current_clock[21], padding;
};
struct V1_5 {
  Header header;
  u16 temperature[3], socket_power;
  u16 gfx_activity, umc_activity;
  u16 vcn_activity[4], jpeg_activity[32];
  u64 energy_accumulator, system_clock_counter;
  u32 throttle_status, gfxclk_lock_status;
  u16 pcie_link[2], xgmi_link[2];
  u32 activity_acc[2];
  u64 pcie_bandwidth[2], pcie_counts[3];
  u32 pcie_nak[2];
  u64 xgmi_data_acc[16];
  u64 firmware_timestamp;
  u16 current_clock[21], padding;
};
struct V2_0 {
  Header header;
  u64 system_clock_counter;
  u16 temperature[12];  // gfx, soc, core[8], l3[2]
  u16 gfx_activity, mm_activity;
  u16 power[12];  // socket, cpu, soc, gfx, core[8]
  u16 average_clock[6], current_clock[16];
  u32 throttle_status;
  u16 fan_pwm, padding;
};
struct V2_1 {
  Header header;
  u16 temperature[12];
  u16 gfx_activity, mm_activity;
  u64 system_clock_counter;
  u16 power[12];
  u16 average_clock[6], current_clock[16];
  u32 throttle_status;
  u16 fan_pwm, padding[3];
};
struct V2_2 {
  V2_1 v2_1;
  u64 indep_throttle_status;
};
struct V2_3 {
  V2_2 v2_2;
  u16 average_temperature[12];
};
struct V2_4 {
  V2_3 v2_3;
  u16 average_voltage[3], average_current[3];
};
struct V3_0 {
  Header header;
  u16 temperature[19];  // gfx, soc, core[16], skin
  u16 gfx_activity, vcn_activity, ipu_activity[8], core_c0_activity[16];
  u16 bandwidth[4];  // dram reads/writes, ipu reads/writes (MB/s)
  u64 system_clock_counter;
  u32 socket_power;
  u16 ipu_power;
  u32 apu_power, gfx_power, dgpu_power, all_core_power;
  u16 core_power[16], sys_power, stapm_limit[2];
  u16 average_clock[8], current_coreclk[16], max_freq[2];
  u32 throttle_residency[7], time_filter;
};

// The sizes and activity offsets worked out by hand from the kernel's structs.
static_assert(sizeof(Header) == 4);
static_assert(sizeof(V1_0) == 80 && offsetof(V1_0, gfx_activity) == 28);
static_assert(sizeof(V1_1) == 96 && offsetof(V1_1, gfx_activity) == 16);
static_assert(sizeof(V1_2) == 104 && sizeof(V1_3) == 120);
static_assert(offsetof(V1_3, indep_throttle_status) == 112 && offsetof(V1_3, v1_2) == 0);
static_assert(sizeof(V1_4) == 288 && offsetof(V1_4, gfx_activity) == 12);
static_assert(offsetof(V1_4, firmware_timestamp) == 232);
static_assert(sizeof(V1_5) == 360 && offsetof(V1_5, gfx_activity) == 12);
static_assert(offsetof(V1_5, firmware_timestamp) == 304);
static_assert(sizeof(V2_0) == 120 && offsetof(V2_0, gfx_activity) == 40);
static_assert(sizeof(V2_1) == 120 && offsetof(V2_1, gfx_activity) == 28);
static_assert(sizeof(V2_2) == 128 && sizeof(V2_3) == 152 && sizeof(V2_4) == 168);
static_assert(offsetof(V2_4, v2_3) == 0 && offsetof(V2_3, average_temperature) == 128);
static_assert(sizeof(V3_0) == 264 && offsetof(V3_0, gfx_activity) == 42);
static_assert(offsetof(V3_0, system_clock_counter) == 104);

constexpr u16 kNotAvailable = 0xFFFF;

/// How one known revision is read.
struct Layout {
  u8 format, content;
  std::size_t size;
  std::optional<std::size_t> gfx;  // offset of average_gfx_activity, when it is read
  std::optional<std::size_t> umc;  // offset of average_umc_activity, when the table has it
  double scale;                    // to percent
  const char* gfx_refused;         // why graphics activity is not read (gfx empty)
};

/// A discrete GPU's table (whole percents); `Prefix` holds the activity fields.
template <class T, class Prefix = T>
constexpr Layout dgpu(u8 content) {
  return {1,   content, sizeof(T), offsetof(Prefix, gfx_activity), offsetof(Prefix, umc_activity),
          1.0, nullptr};
}
/// An APU's 2.x table (1/100 %, no memory controller figure).
template <class T, class Prefix = T>
constexpr Layout apu(u8 content) {
  return {2, content, sizeof(T), offsetof(Prefix, gfx_activity), std::nullopt, 0.01, nullptr};
}

const Layout kLayouts[] = {
    dgpu<V1_0>(0),
    dgpu<V1_1>(1),
    dgpu<V1_2, V1_1>(2),
    dgpu<V1_3, V1_1>(3),
    dgpu<V1_4>(4),
    dgpu<V1_5>(5),
    apu<V2_0>(0),
    apu<V2_1>(1),
    apu<V2_2, V2_1>(2),
    apu<V2_3, V2_1>(3),
    apu<V2_4, V2_1>(4),
    {3, 0, sizeof(V3_0), std::nullopt, std::nullopt, 1.0,
     "gpu_metrics 3.0: the unit of average_gfx_activity differs between firmware (percent or "
     "1/100 %) and the table does not say which; graphics activity not read"},
};

u16 u16_at(std::string_view bytes, std::size_t offset) {
  u16 v = 0;
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

std::string revision_text(unsigned format, unsigned content) {
  return std::to_string(format) + "." + std::to_string(content);
}

void refuse_all(GpuMetricsActivity& out, Absence why, Source source, std::string problem) {
  out.graphics = Reading::missing(why, source);
  out.memory_controller = Reading::missing(why, source);
  out.problem = std::move(problem);
}

/// One activity field of the table, noting why it was refused.
Reading activity(std::string_view bytes, std::size_t offset, double scale, Source source,
                 const char* field, const std::string& revision, std::string& problem) {
  auto r = activity_percent(u16_at(bytes, offset), scale, source);
  if (!r && r.reason() == Absence::tool_failed && problem.empty())
    problem = "gpu_metrics " + revision + ": " + field + " beyond 100 %: not read";
  return r;
}

}  // namespace

Reading activity_percent(std::uint16_t raw, double scale, Source source) noexcept {
  if (raw == kNotAvailable) return Reading::missing(Absence::unsupported, source);
  const double percent = raw * scale;
  if (percent > 100.0) return Reading::missing(Absence::tool_failed, source);
  return Reading::of(percent, source);
}

GpuMetricsActivity parse_gpu_metrics(std::string_view bytes, Source source) {
  GpuMetricsActivity out;
  if (bytes.size() > kGpuMetricsMaxBytes) {
    refuse_all(
        out, Absence::tool_failed, source,
        "gpu_metrics larger than " + std::to_string(kGpuMetricsMaxBytes) + " bytes: not read");
    return out;
  }
  if (bytes.size() < sizeof(Header)) {
    refuse_all(out, Absence::tool_failed, source,
               "gpu_metrics shorter than its 4-byte header (" + std::to_string(bytes.size()) +
                   " bytes read)");
    return out;
  }
  Header h{};
  std::memcpy(&h, bytes.data(), sizeof h);
  out.revision = revision_text(h.format_revision, h.content_revision);
  const Layout* layout = nullptr;
  for (const auto& l : kLayouts)
    if (l.format == h.format_revision && l.content == h.content_revision) layout = &l;
  if (!layout) {
    refuse_all(out, Absence::unsupported, source,
               "gpu_metrics revision " + out.revision +
                   " has a layout gpustream does not know (known: 1.0-1.5, 2.0-2.4, 3.0); "
                   "not read");
    return out;
  }
  if (h.structure_size != layout->size) {
    refuse_all(out, Absence::tool_failed, source,
               "gpu_metrics " + out.revision + " says structure_size " +
                   std::to_string(h.structure_size) + ", its layout has " +
                   std::to_string(layout->size) + " bytes: not read");
    return out;
  }
  if (bytes.size() < layout->size) {
    refuse_all(out, Absence::tool_failed, source,
               "gpu_metrics " + out.revision + " short read: " + std::to_string(bytes.size()) +
                   " of " + std::to_string(layout->size) + " bytes");
    return out;
  }
  // Bytes after the table (a page-sized read) are not part of it and are ignored.
  if (layout->gfx) {
    out.graphics = activity(bytes, *layout->gfx, layout->scale, source, "average_gfx_activity",
                            out.revision, out.problem);
  } else {
    out.graphics = Reading::missing(Absence::unsupported, source);
    out.problem = layout->gfx_refused;
  }
  out.memory_controller = layout->umc ? activity(bytes, *layout->umc, layout->scale, source,
                                                 "average_umc_activity", out.revision, out.problem)
                                      : Reading::missing(Absence::unsupported, source);
  return out;
}

GpuMetricsActivity read_gpu_metrics(const std::string& path) {
  auto bytes = readers::read_file(path, kGpuMetricsMaxBytes);
  if (bytes) return parse_gpu_metrics(*bytes, Source::sysfs);
  GpuMetricsActivity out;
  const auto& e = bytes.error();
  if (e.not_found()) {
    refuse_all(out, Absence::unsupported, Source::sysfs, "");
  } else if (e.code == std::errc::file_too_large) {
    refuse_all(
        out, Absence::tool_failed, Source::sysfs,
        "gpu_metrics larger than " + std::to_string(kGpuMetricsMaxBytes) + " bytes: not read");
  } else if (e.code == std::errc::permission_denied ||
             e.code == std::errc::operation_not_permitted) {
    refuse_all(out, Absence::no_permission, Source::sysfs, e.message());
  } else {
    refuse_all(out, Absence::tool_failed, Source::sysfs, e.message());
  }
  return out;
}

}  // namespace gpustream::amdgpu
