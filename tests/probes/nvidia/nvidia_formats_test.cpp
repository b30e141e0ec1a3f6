// The NVIDIA probe's pure parsers: process-info buffers in both layouts, clock event reasons,
// PCI bus ids, and nvidia-smi CSV (real recorded outputs, kept here and compared with
// ../shared/fixtures when that folder is present).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpustream/probes/nvidia_formats.hpp"

namespace gpustream::nvidia {
namespace {

/// A sentinel-filled buffer with room for `capacity` 32-byte entries, into which a "driver"
/// writes `pids.size()` entries of `stride` bytes (pid, usedGpuMemory, gpuInstanceId,
/// computeInstanceId[, usedGpuCcProtectedMemory = 0]).
std::vector<std::byte> driver_buffer(std::size_t stride, const std::vector<std::uint32_t>& pids,
                                     const std::vector<std::uint64_t>& memory,
                                     std::size_t capacity = 8) {
  std::vector<std::byte> buf(capacity * kProcessInfoV3Stride, std::byte{kProcessInfoSentinel});
  for (std::size_t i = 0; i < pids.size(); ++i) {
    unsigned char entry[32] = {};
    std::memcpy(entry, &pids[i], 4);
    std::memcpy(entry + 8, &memory[i], 8);
    const std::uint32_t no_mig = 0xFFFFFFFFu;
    if (stride >= 24) {
      std::memcpy(entry + 16, &no_mig, 4);
      std::memcpy(entry + 20, &no_mig, 4);
    }
    std::memcpy(buf.data() + i * stride, entry, stride);
  }
  return buf;
}

TEST(ProcessInfoBuffer, DetectsAndParsesBothLayouts) {
  const std::vector<std::uint32_t> pids = {1234, 5678, 42};
  const std::vector<std::uint64_t> memory = {1ull << 30, ~0ull, 8192};
  for (std::size_t stride : {kProcessInfoV2Stride, kProcessInfoV3Stride}) {
    SCOPED_TRACE(stride);
    const auto buf = driver_buffer(stride, pids, memory);
    ASSERT_EQ(detect_process_info_stride(buf, pids.size()), stride);
    const auto entries = parse_process_infos(buf, pids.size(), stride);
    ASSERT_EQ(entries.size(), 3u);
    EXPECT_EQ(entries[0], (NvmlProcessEntry{1234, 1ull << 30}));
    EXPECT_EQ(entries[1], (NvmlProcessEntry{5678, std::nullopt}));  // NVML_VALUE_NOT_AVAILABLE
    EXPECT_EQ(entries[2], (NvmlProcessEntry{42, 8192}));
  }
}

TEST(ProcessInfoBuffer, OneEntryIsEnoughToTell) {
  EXPECT_EQ(detect_process_info_stride(driver_buffer(24, {7}, {1}), 1), 24u);
  EXPECT_EQ(detect_process_info_stride(driver_buffer(32, {7}, {1}), 1), 32u);
}

TEST(ProcessInfoBuffer, AssumingTheHeaderSizeGarblesR535Output) {
  // The trap: 32-byte entries read with the declared 24-byte stride.
  const auto buf = driver_buffer(32, {1234, 5678}, {4096, 8192});
  const auto wrong = parse_process_infos(buf, 2, kProcessInfoV2Stride);
  EXPECT_NE(wrong[1].pid, 5678u);
}

TEST(ProcessInfoBuffer, EdgeCases) {
  EXPECT_EQ(detect_process_info_stride({}, 0), kProcessInfoV2Stride);
  const auto buf = driver_buffer(32, {1, 2}, {3, 4}, 2);
  EXPECT_EQ(detect_process_info_stride(std::span(buf).first(40), 2), kProcessInfoV2Stride);
  EXPECT_EQ(parse_process_infos(std::span(buf).first(40), 2, 32).size(), 1u);  // stops short
  // Legacy 16-byte entries.
  std::vector<std::byte> v1(32);
  const std::uint32_t pid = 99;
  const std::uint64_t mem = 5;
  std::memcpy(v1.data() + 16, &pid, 4);
  std::memcpy(v1.data() + 24, &mem, 8);
  EXPECT_EQ(parse_process_infos(v1, 2, kProcessInfoV1Stride)[1], (NvmlProcessEntry{99, 5}));
}

TEST(ClockEventReasons, DecodesBitsByName) {
  EXPECT_TRUE(decode_clock_event_reasons(0).empty());
  EXPECT_EQ(decode_clock_event_reasons(0x1), std::vector<std::string>{"gpu_idle"});
  EXPECT_EQ(decode_clock_event_reasons(0x44),
            (std::vector<std::string>{"sw_power_cap", "hw_thermal_slowdown"}));
  EXPECT_EQ(decode_clock_event_reasons(0x1A8),
            (std::vector<std::string>{"hw_slowdown", "sw_thermal_slowdown",
                                      "hw_power_brake_slowdown", "display_clock_setting"}));
  EXPECT_EQ(decode_clock_event_reasons(0x1002),
            (std::vector<std::string>{"applications_clocks_setting", "0x1000"}));
}

TEST(PciBusId, NvidiaFormsGoThroughTheOneCanonicalForm) {  // see pci_test.cpp
  EXPECT_EQ(normalize_pci_bus_id("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(normalize_pci_bus_id("[N/A]"), "");
}

// ---- nvidia-smi CSV ---------------------------------------------------------------------

// Copies of ../shared/fixtures/nvidia/smi_csv (see its README for where they came from).
constexpr const char* kQueryGpu3090A6000 =
    "index, name, memory.used [MiB], utilization.gpu [%], power.draw [W]\n"
    "0, NVIDIA GeForce RTX 3090, 1 MiB, 0 %, 30.73 W\n"
    "1, NVIDIA RTX A6000, 38742 MiB, 100 %, 297.75 W\n";
constexpr const char* kQueryGpuOldNotSupported = "2004, 2004, 0, 44, [Not Supported], 0, 0\n";
constexpr const char* kComputeApps =
    "pid, used_gpu_memory [MiB]\n80613, 92908 MiB\n80614, 92908 MiB\n";
constexpr const char* kComputeAppsEmpty = "pid, used_gpu_memory [MiB]\n";

TEST(SmiFixtures, OurCopiesMatchTheSharedFixtures) {
  const std::filesystem::path dir =
      std::filesystem::path(GPUSTREAM_SHARED_FIXTURES) / "nvidia" / "smi_csv";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no " << dir;
  const auto read = [&](const char* name) {
    std::ifstream in(dir / name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(read("query_gpu_index_name_mem_util_power_csv_3090_a6000.csv"), kQueryGpu3090A6000);
  EXPECT_EQ(read("query_gpu_noheader_nounits_old_NotSupported_i3pystatus776.csv"),
            kQueryGpuOldNotSupported);
  EXPECT_EQ(read("compute_apps_pid_used_memory_csv_driver590.48.01_2xRTXPRO6000.csv"),
            kComputeApps);
  EXPECT_EQ(read("compute_apps_pid_used_memory_csv_empty_driver590.48.01.csv"), kComputeAppsEmpty);
}

TEST(SmiValue, NumbersUnitsAndReasons) {
  EXPECT_EQ(parse_smi_value("30.73 W").value, 30.73);
  EXPECT_EQ(parse_smi_value(" 38742 MiB").value, 38742);
  EXPECT_EQ(parse_smi_value("100 %").value, 100);
  EXPECT_EQ(parse_smi_value("1410 MHz").value, 1410);
  EXPECT_EQ(parse_smi_value("2 GiB").value, 2048);
  EXPECT_EQ(parse_smi_value("44").value, 44);
  for (const char* na : {"[N/A]", "N/A", "[Not Supported]", ""}) {
    const auto v = parse_smi_value(na);
    EXPECT_FALSE(v.value) << na;
    EXPECT_EQ(v.absence, Absence::unsupported) << na;
  }
  EXPECT_EQ(parse_smi_value("[Insufficient Permissions]").absence, Absence::no_permission);
  EXPECT_EQ(parse_smi_value("[GPU is lost]").absence, Absence::lost);
  EXPECT_EQ(parse_smi_value("[Unknown Error]").absence, Absence::tool_failed);
  EXPECT_EQ(parse_smi_value("12 parsecs").absence, Absence::tool_failed);
  EXPECT_FALSE(parse_smi_value("12 parsecs").value);
}

TEST(SmiCsv, RecordedOutputWithHeaderAndUnits) {
  std::vector<SampleError> errors;
  // The probe asked for other fields: the header says which columns came back.
  const std::string_view asked[] = {"index", "uuid", "memory.total"};
  const auto devices = smi_devices_from_csv(kQueryGpu3090A6000, asked, &errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(devices.size(), 2u);
  const auto& a6000 = devices[1];
  EXPECT_EQ(a6000.index, 1);
  EXPECT_EQ(a6000.id, "nvidia-smi:1");  // no UUID, no bus id in this output
  EXPECT_EQ(a6000.name, "NVIDIA RTX A6000");
  EXPECT_EQ(a6000.metrics[Metric::memory_used_bytes],
            Reading::of(38742.0 * 1024 * 1024, Source::nvidia_smi));
  EXPECT_EQ(a6000.metrics[Metric::utilization_percent], Reading::of(100, Source::nvidia_smi));
  EXPECT_EQ(a6000.metrics[Metric::power_watts], Reading::of(297.75, Source::nvidia_smi));
  EXPECT_EQ(a6000.metrics[Metric::memory_total_bytes],
            Reading::missing(Absence::unsupported, Source::nvidia_smi));
  EXPECT_EQ(devices[0].metrics[Metric::memory_used_bytes].get(), 1024.0 * 1024);
  EXPECT_EQ(devices[0].metrics[Metric::utilization_percent].get(), 0.0);  // a real 0 %
}

TEST(SmiCsv, RecordedNoHeaderOutputWithNotSupported) {
  const std::string_view asked[] = {"memory.total",      "memory.free", "memory.used",
                                    "temperature.gpu",   "fan.speed",   "utilization.gpu",
                                    "utilization.memory"};
  std::vector<SampleError> errors;
  const auto devices = smi_devices_from_csv(kQueryGpuOldNotSupported, asked, &errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(devices.size(), 1u);
  const auto& m = devices[0].metrics;
  EXPECT_EQ(m[Metric::memory_total_bytes].get(), 2004.0 * 1024 * 1024);
  EXPECT_EQ(m[Metric::memory_used_bytes].get(), 0.0);
  EXPECT_EQ(m[Metric::temperature_celsius].get(), 44.0);
  EXPECT_EQ(m[Metric::fan_percent], Reading::missing(Absence::unsupported, Source::nvidia_smi));
  EXPECT_EQ(devices[0].id, "nvidia-smi:0");
}

TEST(SmiCsv, FullQueryOutput) {
  const std::string_view asked[] = {"index",
                                    "uuid",
                                    "name",
                                    "pci.bus_id",
                                    "memory.used",
                                    "power.draw",
                                    "clocks_throttle_reasons.active"};
  const auto devices = smi_devices_from_csv(
      "0, GPU-1234, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81000, [N/A], 0x0000000000000004\n"
      "\n"
      "1, GPU-5678, NVIDIA H100 80GB HBM3, 00000000:2A:00.0, [Insufficient Permissions], 120.5, "
      "0x0000000000000000\n",
      asked);
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].id, "GPU-1234");
  EXPECT_EQ(devices[0].pci_bus_id, "0000:18:00.0");
  EXPECT_EQ(devices[0].metrics[Metric::power_watts],
            Reading::missing(Absence::unsupported, Source::nvidia_smi));
  EXPECT_EQ(devices[0].throttle_reasons, std::vector<std::string>{"sw_power_cap"});
  EXPECT_EQ(devices[1].metrics[Metric::memory_used_bytes],
            Reading::missing(Absence::no_permission, Source::nvidia_smi));
  EXPECT_EQ(devices[1].metrics[Metric::power_watts].get(), 120.5);
}

TEST(SmiCsv, BadRowsAreReportedAndSkipped) {
  std::vector<SampleError> errors;
  const std::string_view asked[] = {"index", "uuid", "memory.used"};
  const auto devices = smi_devices_from_csv(
      "0, GPU-1, 100\nNo devices were found\n1, GPU-2, lots\n", asked, &errors);
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[1].metrics[Metric::memory_used_bytes].reason(), Absence::tool_failed);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].code, "parse_error");
  EXPECT_TRUE(smi_devices_from_csv("", asked).empty());
}

TEST(SmiCsv, ComputeApps) {
  std::vector<SampleError> errors;
  const std::string_view asked[] = {"gpu_uuid", "pid", "used_gpu_memory", "process_name"};
  auto apps = smi_compute_apps_from_csv(kComputeApps, asked, &errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(apps.size(), 2u);
  EXPECT_EQ(apps[0].pid, 80613);
  EXPECT_EQ(apps[0].used_memory_bytes, 92908ull << 20);
  EXPECT_TRUE(apps[0].gpu_uuid.empty());  // this recording has no gpu_uuid column
  EXPECT_TRUE(smi_compute_apps_from_csv(kComputeAppsEmpty, asked).empty());
  EXPECT_TRUE(smi_compute_apps_from_csv("", asked).empty());

  apps = smi_compute_apps_from_csv(
      "GPU-1, 4242, 1024, /usr/bin/python3 -m serve, with, commas\nGPU-2, 77, [N/A], a\n", asked);
  ASSERT_EQ(apps.size(), 2u);
  EXPECT_EQ(apps[0].gpu_uuid, "GPU-1");
  EXPECT_EQ(apps[0].process_name, "/usr/bin/python3 -m serve, with, commas");
  EXPECT_EQ(apps[0].used_memory_bytes, 1024ull << 20);
  EXPECT_FALSE(apps[1].used_memory_bytes);
}

// Issue 11, defect 7: from_chars reads "inf", "nan" and "infinity"; none is a value of any
// nvidia-smi field, and a non-finite or huge value must never be cast to an integer.
TEST(SmiValue, NonFiniteCellsAreUnparsable) {
  for (const char* cell : {"inf", "-inf", "nan", "NaN W", "infinity MiB", "INF %"}) {
    const auto v = parse_smi_value(cell);
    EXPECT_FALSE(v.value) << cell;
    EXPECT_EQ(v.absence, Absence::tool_failed) << cell;
  }
  EXPECT_FALSE(parse_smi_value("1e999 MiB").value);  // out of range
}

TEST(SmiCsv, NonFiniteOrOutOfRangeValuesMakeOnlyThatFieldAbsent) {
  std::vector<SampleError> errors;
  const std::string_view asked[] = {"index", "uuid", "memory.used", "power.draw"};
  const auto devices = smi_devices_from_csv(
      "0, GPU-1, inf, 50\n99999999999, GPU-2, 10, nan\n-4, GPU-3, 1, 2\n", asked, &errors);
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(devices[0].metrics[Metric::memory_used_bytes].reason(), Absence::tool_failed);
  EXPECT_EQ(devices[0].metrics[Metric::power_watts].get(), 50.0);
  EXPECT_EQ(devices[1].index, 1);  // an index out of int range: the row number
  EXPECT_EQ(devices[1].metrics[Metric::power_watts].reason(), Absence::tool_failed);
  EXPECT_EQ(devices[2].index, 2);  // a negative index: the row number
  EXPECT_EQ(errors.size(), 2u);

  const std::string_view apps_asked[] = {"pid", "used_gpu_memory"};
  const auto apps = smi_compute_apps_from_csv("10, inf\n11, nan\n12, 1e300\n13, -1\n14, 3\n",
                                              apps_asked, &errors);
  ASSERT_EQ(apps.size(), 5u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_FALSE(apps[i].used_memory_bytes) << apps[i].pid;
  EXPECT_EQ(apps[4].used_memory_bytes, 3ull << 20);
}

}  // namespace
}  // namespace gpustream::nvidia
