// amdgpu_gpu_metrics.hpp — the activity figures of the kernel's binary sysfs `gpu_metrics` table
// (/sys/class/drm/cardN/device/gpu_metrics), read only in the revisions whose layout is known.
//
// The table starts with a 4-byte header {uint16 structure_size, uint8 format_revision, uint8
// content_revision}; the rest is one of the driver's structs gpu_metrics_v<format>_<content>
// (Linux drivers/gpu/drm/amd/include/kgd_pp_interface.h). Format 1 is a discrete GPU's table,
// formats 2 and 3 an APU's. The layouts gpustream knows, with their size (natural alignment, as
// the kernel compiles them; each is checked at compile time in the .cpp):
//
//   revision   bytes                     graphics activity     memory controller (UMC)
//   1.0 .. 1.3 80, 96, 104, 120          average_gfx_activity  average_umc_activity (%)
//   1.4, 1.5   288, 360 (MI300)          idem                  idem
//   2.0 .. 2.4 120, 120, 128, 152, 168   average_gfx_activity  none (APU)
//   3.0        264                       not read (see below)  none (APU)
// (Discrete Navi and MI100/MI200 boards give 1.3 in current kernels.)
//
// What is refused, with the reason (GpuMetricsActivity::problem):
//  * any other revision (1.6 and later: the kernel changed 1.6's layout under the same number and
//    added per-partition statistics; 1.9 is attribute-encoded; 2.5+, 3.1+): `unsupported`;
//  * a file shorter than the header or than its structure_size, a structure_size other than the
//    revision's size, a file larger than kGpuMetricsMaxBytes: `tool_failed`.
// A field at its type's maximum (0xFFFF: the firmware does not provide it) is absent
// `unsupported`; a value beyond 100 % is absent `tool_failed`.
//
// Units: 1.x tables carry whole percents. In 2.x tables the drivers copy the firmware's figure,
// which is in 1/100 % (the 2.4 struct says "unit: centi"; the Renoir, Van Gogh and SMU 13.0.x APU
// drivers' own sensors divide that same figure by 100); gpustream divides by 100. 3.0's header
// says "% [0-100]" while smu_v14_0_0 fills it with the firmware's 1/100 % figure and later
// firmware (smu 15) with percent: its unit is not knowable from the table, so 3.0 gives no
// graphics activity (absent `unsupported`, the reason says why).
//
// Thread safety: pure functions. Cancellation: none (one short file read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpustream/model.hpp"

namespace gpustream::amdgpu {

/// The most a gpu_metrics read takes: 16384 bytes. The largest table read is 360 bytes (1.5) and
/// the kernel hands out at most one page; a file beyond this is refused, not truncated.
inline constexpr std::size_t kGpuMetricsMaxBytes = 16384;

/// The activity figures of one table, each a percentage (0..100) or an absence with its reason.
struct GpuMetricsActivity {
  std::string revision;       // "1.3" as the header says; empty when there was no header
  Reading graphics;           // average_gfx_activity -> graphics_activity_percent
  Reading memory_controller;  // average_umc_activity -> dram_activity_percent
  /// Why the table or a field was refused; empty when everything present was read. The text
  /// depends only on the revision and sizes, never on a changing value, so a caller can log it
  /// once.
  std::string problem;
};

/// One activity field of a gpu_metrics table (raw * scale = percent): absent `unsupported` at the
/// not-available sentinel 0xFFFF, absent `tool_failed` beyond 100 %. Also used for the same
/// fields of the AMD SMI library's amdsmi_gpu_metrics_t.
Reading activity_percent(std::uint16_t raw, double scale, Source source) noexcept;

/// Parses the bytes of a gpu_metrics file. Never throws; `source` labels the readings.
GpuMetricsActivity parse_gpu_metrics(std::string_view bytes, Source source = Source::sysfs);

/// Reads `path` (at most kGpuMetricsMaxBytes) and parses it. A missing file (a kernel or ASIC
/// without gpu_metrics) gives both absent `unsupported` and no problem; an unreadable one
/// `no_permission`.
GpuMetricsActivity read_gpu_metrics(const std::string& path);

}  // namespace gpustream::amdgpu
