// gpustream/probes/nvidia_formats.hpp — the NVIDIA probe's pure parsers, public so that tools
// and tests can use them without a GPU: nvmlProcessInfo buffers (with the stride detected at run
// time), clock event reasons, PCI bus ids, and `nvidia-smi --format=csv` output.
//
// Thread safety: every function is reentrant; nothing here keeps state.
// Cancellation: nothing blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/model.hpp"
#include "gpustream/probes/pci.hpp"

namespace gpustream::nvidia {

// ---- nvmlProcessInfo buffers ----------------------------------------------------------------

/// Entry sizes: nvmlProcessInfo_v1_t (16), nvmlProcessInfo_v2_t as declared (24), and the
/// 32-byte layout (v2 + usedGpuCcProtectedMemory) that R535+ drivers write from the _v3
/// functions without a version bump.
inline constexpr std::size_t kProcessInfoV1Stride = 16;
inline constexpr std::size_t kProcessInfoV2Stride = 24;
inline constexpr std::size_t kProcessInfoV3Stride = 32;
/// The byte a buffer is filled with before the call, so that the written length can be seen.
inline constexpr std::uint8_t kProcessInfoSentinel = 0xA5;

/// One process from a process-info buffer.
struct NvmlProcessEntry {
  std::uint32_t pid = 0;
  /// Absent when the driver wrote NVML_VALUE_NOT_AVAILABLE (all bits set).
  std::optional<std::uint64_t> used_gpu_memory_bytes;
  friend bool operator==(const NvmlProcessEntry&, const NvmlProcessEntry&) = default;
};

/// The stride (24 or 32) a driver used to write `count` entries into `buffer`, which was filled
/// with kProcessInfoSentinel beforehand and holds at least count * 32 bytes. A 32-byte writer
/// touches the last 8 bytes of entry count-1 in the 32-byte grid; a 24-byte writer stops at
/// count * 24 and leaves them as sentinel. Returns 24 when count is 0 or the buffer is short.
std::size_t detect_process_info_stride(std::span<const std::byte> buffer, std::size_t count);

/// Decodes `count` entries of `stride` bytes (16, 24 or 32): pid at offset 0, usedGpuMemory at
/// offset 8 in every layout. Stops early if the buffer is too short.
std::vector<NvmlProcessEntry> parse_process_infos(std::span<const std::byte> buffer,
                                                  std::size_t count, std::size_t stride);

// ---- small decoders -----------------------------------------------------------------------

/// Names of the set bits of nvmlClocksEventReasons / nvmlClocksThrottleReasons, in bit order:
/// gpu_idle, applications_clocks_setting, sw_power_cap, hw_slowdown, sync_boost,
/// sw_thermal_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown, display_clock_setting;
/// an unknown bit is named "0x<hex>".
std::vector<std::string> decode_clock_event_reasons(std::uint64_t bits);

/// "00000000:01:00.0" / "0000:01:00.0" / "00000000:3B:00.0" -> "0000:01:00.0" / "0000:3b:00.0":
/// the one canonical form of every probe (pci::normalize_bus_id); "" for anything else.
inline std::string normalize_pci_bus_id(std::string_view bus_id) {
  return pci::normalize_bus_id(bus_id);
}

// ---- nvidia-smi CSV -------------------------------------------------------------------------

/// One cell of `nvidia-smi --format=csv` output: a number (units such as "MiB", "W", "%",
/// "MHz", "C" dropped), or why there is none ("[N/A]", "[Not Supported]" -> unsupported,
/// "[Insufficient Permissions]" -> no_permission, "[GPU is lost]" -> lost, "[Unknown Error]" or
/// an unparsable cell -> tool_failed, an empty cell -> unsupported).
struct SmiValue {
  std::optional<double> value;
  Absence absence = Absence::unsupported;  // meaningful when !value
};
SmiValue parse_smi_value(std::string_view cell);

/// A CSV document split into rows of cells under canonical field names. When the first line is
/// a header ("index, memory.used [MiB], ..."), the columns are named by it (units stripped,
/// aliases such as gpu_name -> name, clocks.current.graphics -> clocks.gr canonicalized);
/// otherwise by `requested`, in order. The last column takes the rest of a line, so a process
/// name with commas stays whole when it is queried last.
struct SmiTable {
  std::vector<std::string> fields;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> problems;  // rows with the wrong number of cells, skipped
  /// Index of `field` (canonical or alias) in `fields`, or -1.
  int column(std::string_view field) const noexcept;
};
SmiTable parse_smi_csv(std::string_view text, std::span<const std::string_view> requested);

/// The canonical name of a query field ("gpu_name" -> "name", "gpu_bus_id" -> "pci.bus_id").
std::string_view canonical_smi_field(std::string_view field) noexcept;

/// Devices from `--query-gpu` output. Device id: gpu UUID, else PCI bus id, else
/// "nvidia-smi:<index>" (or the row number). Values are converted to base units (MiB -> bytes)
/// with Source::nvidia_smi; fields not in the table stay absent (unsupported). Rows that cannot
/// be used are described in `errors` (code "parse_error").
std::vector<DeviceSample> smi_devices_from_csv(std::string_view text,
                                               std::span<const std::string_view> requested,
                                               std::vector<SampleError>* errors = nullptr);

/// One line of `--query-compute-apps` output.
struct SmiComputeApp {
  std::string gpu_uuid;    // empty when not queried
  std::string gpu_bus_id;  // normalized; empty when not queried
  std::int64_t pid = 0;
  std::string process_name;
  std::optional<std::uint64_t> used_memory_bytes;  // absent for [N/A]
  friend bool operator==(const SmiComputeApp&, const SmiComputeApp&) = default;
};
std::vector<SmiComputeApp> smi_compute_apps_from_csv(std::string_view text,
                                                     std::span<const std::string_view> requested,
                                                     std::vector<SampleError>* errors = nullptr);

}  // namespace gpustream::nvidia
