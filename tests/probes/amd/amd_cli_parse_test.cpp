// Hostile values in amd-smi / rocm-smi JSON (issue 11, defect 7): a value that is not a finite
// number in range makes that one field absent (or that one process entry skipped); it is never
// cast to an integer, and it never costs the rest of the sample.
//
// And what each rocm-smi header means, on every rocm-smi generation whose real output is
// recorded in ../shared/fixtures/captures (issue 29): memory activity is "GPU memory use (%)"
// up to ROCm 6.1 and "GPU Memory Read/Write Activity (%)" from 6.2; 6.2's "GPU Memory
// Allocated (VRAM%)" is the share of VRAM allocated and is never memory activity.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "gpustream/probes/amd_probe.hpp"

namespace gpustream {
namespace {

using namespace amd_cli;

TEST(AmdSmiParseHostile, NonIntegerGpuIndexFallsBackToThePosition) {
  // Each of these used to throw from boost::json's to_number<int>, past the probe's handler.
  const std::string metric = R"([
      {"gpu": 1.5, "usage": {"gfx_activity": 10}},
      {"gpu": 1e300, "usage": {"gfx_activity": 11}},
      {"gpu": -1, "usage": {"gfx_activity": 12}},
      {"gpu": 18446744073709551615, "usage": {"gfx_activity": 13}},
      {"gpu": 7, "usage": {"gfx_activity": 14}}])";
  std::map<int, MetricSet> m;
  ASSERT_NO_THROW(m = parse_amd_smi_metric(metric));
  ASSERT_EQ(m.size(), 5u);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(m.at(i)[Metric::utilization_percent].value(), 10.0 + i) << "position " << i;
  EXPECT_EQ(m.at(7)[Metric::utilization_percent].value(), 14.0);

  std::vector<StaticInfo> s;
  ASSERT_NO_THROW(s = parse_amd_smi_static(R"([{"gpu": 2.25, "bus": {"bdf": "0000:03:00.0"}}])"));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].index, 0);
  EXPECT_EQ(s[0].bus_id, "0000:03:00.0");

  std::map<int, std::vector<ProcessUsage>> p;
  ASSERT_NO_THROW(p = parse_amd_smi_process(
                      R"([{"gpu": 0.5, "process_list": [{"process_info": {"pid": 9}}]}])"));
  ASSERT_EQ(p.at(0).size(), 1u);
  EXPECT_EQ(p.at(0)[0].process.pid, 9);
}

TEST(AmdSmiParseHostile, BusyTimeThatIsNotAFiniteCountIsLeftOut) {
  const auto p = parse_amd_smi_process(R"([{"gpu": 0, "process_list": [{"process_info": {
      "pid": 42, "name": "x",
      "usage": {"gfx": {"value": "inf", "unit": "ns"},
                "enc": {"value": "nan", "unit": "ns"},
                "dec": {"value": -5, "unit": "ns"},
                "compute": {"value": 1e300, "unit": "s"},
                "jpeg": {"value": "-inf", "unit": "ms"},
                "dma": {"value": 7, "unit": "us"}}}}]}])");
  ASSERT_EQ(p.at(0).size(), 1u);
  const auto& busy = p.at(0)[0].engine_busy_ns;
  EXPECT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy.at("dma"), 7000u);
}

TEST(AmdSmiParseHostile, PidThatIsNotAWholePositiveNumberSkipsOnlyThatProcess) {
  const auto p = parse_amd_smi_process(R"([{"gpu": 0, "process_list": [
      {"process_info": {"pid": "inf", "name": "a"}},
      {"process_info": {"pid": "nan", "name": "b"}},
      {"process_info": {"pid": -3, "name": "c"}},
      {"process_info": {"pid": 1e300, "name": "d"}},
      {"process_info": {"pid": 0, "name": "e"}},
      {"process_info": {"pid": 42, "name": "good"}}]}])");
  ASSERT_EQ(p.at(0).size(), 1u);
  EXPECT_EQ(p.at(0)[0].process.pid, 42);
  EXPECT_EQ(p.at(0)[0].process.name, "good");
}

TEST(AmdSmiParseHostile, VramThatIsNotAFiniteCountIsAbsent) {
  const auto p = parse_amd_smi_process(R"([{"gpu": 0, "process_list": [
      {"process_info": {"pid": 1, "memory_usage": {"vram_mem": {"value": "inf", "unit": "B"}}}},
      {"process_info": {"pid": 2, "memory_usage": {"vram_mem": {"value": -1, "unit": "MB"}}}},
      {"process_info": {"pid": 3, "memory_usage": {"vram_mem": {"value": 1e300, "unit": "MB"}}}},
      {"process_info": {"pid": 4, "memory_usage": {"vram_mem": {"value": 2, "unit": "MB"}}}}]}])");
  ASSERT_EQ(p.at(0).size(), 4u);
  for (int i = 0; i < 3; ++i)
    EXPECT_FALSE(p.at(0)[i].process.gpu_memory_bytes) << "pid " << p.at(0)[i].process.pid;
  EXPECT_EQ(p.at(0)[3].process.gpu_memory_bytes, 2u * 1048576u);
}

// memory_usage.gtt_mem (SCHEMA_NOTES.md: 6.0/6.1 bare numbers, amd-smi 26 {"value","unit"} in
// "B"): a known 0 stays 0; the 6.2.0 form with only mem_usage, "N/A" and non-finite values leave
// it unknown.
TEST(AmdSmiParse, ProcessGttMemory) {
  const auto p = parse_amd_smi_process(R"([{"gpu": 0, "process_list": [
      {"process_info": {"pid": 1, "memory_usage": {"gtt_mem": 22528, "vram_mem": 4096}}},
      {"process_info": {"pid": 2, "memory_usage": {"gtt_mem": {"value": 23068672, "unit": "B"},
                                                    "vram_mem": {"value": 0, "unit": "B"}}}},
      {"process_info": {"pid": 3, "memory_usage": {"gtt_mem": {"value": 3, "unit": "MB"}}}},
      {"process_info": {"pid": 4, "memory_usage": {"gtt_mem": {"value": 0, "unit": "B"}}}},
      {"process_info": {"pid": 5, "mem_usage": {"value": 0, "unit": "B"}}},
      {"process_info": {"pid": 6, "memory_usage": {"gtt_mem": "N/A"}}},
      {"process_info": {"pid": 7, "memory_usage": {"gtt_mem": {"value": "inf", "unit": "B"}}}}]}])");
  ASSERT_EQ(p.at(0).size(), 7u);
  const auto gtt = [&](std::size_t i) { return p.at(0)[i].process.gtt_memory_bytes; };
  EXPECT_EQ(gtt(0), 22528u);
  EXPECT_EQ(gtt(1), 23068672u);
  EXPECT_EQ(p.at(0)[1].process.gpu_memory_bytes, 0u);
  EXPECT_EQ(gtt(2), 3u * 1048576u);
  EXPECT_EQ(gtt(3), 0u);
  for (std::size_t i = 4; i < 7; ++i) EXPECT_FALSE(gtt(i)) << "pid " << p.at(0)[i].process.pid;
}

TEST(AmdSmiParseHostile, NonFiniteMetricIsAbsentAndTheOthersStay) {
  auto m = parse_amd_smi_metric(R"([{"gpu": 0,
      "usage": {"gfx_activity": "inf", "umc_activity": "nan"},
      "mem_usage": {"total_vram": {"value": 1e305, "unit": "MB"}, "used_vram": 3},
      "temperature": {"edge": {"value": "-inf", "unit": "C"}},
      "power": {"socket_power": 55}}])");
  for (auto metric : {Metric::utilization_percent, Metric::memory_utilization_percent,
                      Metric::memory_total_bytes, Metric::temperature_celsius}) {
    EXPECT_FALSE(m[0][metric]) << to_string(metric);
    EXPECT_EQ(m[0][metric].reason(), Absence::unsupported) << to_string(metric);
  }
  EXPECT_EQ(m[0][Metric::power_watts].value(), 55.0);
  EXPECT_EQ(m[0][Metric::memory_used_bytes].value(), 3.0 * 1048576.0);

  const auto s = parse_amd_smi_static(R"([{"gpu": 0, "vram": {"size": "inf"}}])");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_FALSE(s[0].vram_total_bytes);
}

TEST(RocmSmiParseHostile, NonFiniteValuesAndOutOfRangeCardsAreLeftOut) {
  const auto d = parse_rocm_smi(R"js({
      "card0": {"GPU use (%)": "inf", "Temperature (Sensor edge) (C)": "nan",
                "sclk clock speed:": "(1700Mhz)"},
      "card99999999999": {"GPU use (%)": "5"},
      "card-1": {"GPU use (%)": "6"}})js");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].index, 0);
  EXPECT_FALSE(d[0].metrics[Metric::utilization_percent]);
  EXPECT_FALSE(d[0].metrics[Metric::temperature_celsius]);
  EXPECT_EQ(d[0].metrics[Metric::clock_graphics_mhz].value(), 1700.0);
}

// ---- rocm-smi: what each header means, generation by generation (issue 29) ----------------

// Real outputs, as recorded (../shared/fixtures/captures/turn3, PROVENANCE.md), inlined so the
// suite runs without that folder.

// rocm-smi-lib 6.2.4 on a Radeon 780M (systeminformation PR #960, closed): only the allocated
// VRAM share (87 %) of `--showmemuse`, no Read/Write Activity, no VRAM byte figures.
constexpr const char* kRocm624Radeon780M = R"js({
    "card0": {
        "Device Name": "Phoenix3",
        "Device ID": "0x1900",
        "Device Rev": "0x01",
        "Subsystem ID": "0xe001",
        "GUID": "45560",
        "Unique ID": "N/A",
        "VBIOS version": "113-PHXGENERIC-001",
        "Temperature (Sensor edge) (C)": "31.0",
        "fclk clock speed:": "(400Mhz)",
        "fclk clock level:": "0",
        "mclk clock speed:": "(400Mhz)",
        "mclk clock level:": "0",
        "sclk clock speed:": "(800Mhz)",
        "sclk clock level:": "0",
        "socclk clock speed:": "(400Mhz)",
        "socclk clock level:": "0",
        "Performance Level": "auto",
        "Current Socket Graphics Package Power (W)": "7.222",
        "GPU use (%)": "19",
        "GPU Memory Allocated (VRAM%)": "87",
        "Memory Activity": "N/A",
        "PCIe Replay Count": "0",
        "Serial Number": "N/A",
        "Voltage (mV)": "752",
        "PCI Bus": "0000:C4:00.0",
        "ASD firmware version": "0x210000e7",
        "ME firmware version": "40",
        "MEC firmware version": "40",
        "MES firmware version": "0x0000006e",
        "MES KIQ firmware version": "0x00000073",
        "PFP firmware version": "48"
}})js";

// An RX 7900 XTX (OpenLinkHub PR #27): both 6.2 headers, allocated 14 %, activity 2 % (a part
// of the keys, as recorded).
constexpr const char* kRocm62Rx7900Xtx = R"js({
  "card0": {
    "Device Name": "Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]",
    "Device ID": "0x744c",
    "Temperature (Sensor edge) (C)": "46.0",
    "Temperature (Sensor junction) (C)": "52.0",
    "mclk clock speed:": "(96Mhz)",
    "sclk clock speed:": "(34Mhz)",
    "Performance Level": "auto",
    "Max Graphics Package Power (W)": "220.0",
    "Average Graphics Package Power (W)": "17.0",
    "GPU use (%)": "1",
    "GPU Memory Allocated (VRAM%)": "14",
    "GPU Memory Read/Write Activity (%)": "2",
    "Memory Activity": "N/A",
    "Avg. Memory Bandwidth": "0",
    "GPU memory vendor": "samsung",
    "PCIe Replay Count": "0",
    "Serial Number": "N/A",
    "Voltage (mV)": "58"
}})js";

// `rocm-smi -a --json` on an MI250X, ROCm 5.x keys (wandb PR #5449; a part of the keys, as
// recorded): "GPU memory use (%)" is the busy share; "Memory Activity" is a cumulative counter,
// not a percentage.
constexpr const char* kRocm5Mi250x =
    R"js({"card0": {"GPU ID": "0x7408", "Unique ID": "0xa32343daf897162a", "VBIOS version": )js"
    R"js("113-D65201-046", "Temperature (Sensor edge) (C)": "56.0", "Temperature (Sensor )js"
    R"js(junction) (C)": "61.0", "mclk clock speed:": "(1600Mhz)", "sclk clock speed:": )js"
    R"js("(1700Mhz)", "Max Graphics Package Power (W)": "560.0", "Average Graphics Package )js"
    R"js(Power (W)": "144.0", "GPU use (%)": "100", "GFX Activity": "324450778", "GPU memory )js"
    R"js(use (%)": "0", "Memory Activity": "87110708", "GPU memory vendor": "hynix"}})js";

// ROCm 7.2.3, `rocm-smi ... --showmemuse --showmeminfo vram --csv` on 4x RX 7900 XTX
// (llama-swap PR #775): the header and card0's row, trailing spaces as recorded. The CSV
// columns are the JSON keys (the same formatter).
constexpr const char* kRocm723CsvHeader =
    "device,Device Name,Device ID,Device Rev,Subsystem ID,GUID,Temperature (Sensor edge) "
    "(C),Temperature (Sensor junction) (C),Temperature (Sensor memory) (C),Average Graphics "
    "Package Power (W),GPU use (%),GPU Memory Allocated (VRAM%),GPU Memory Read/Write Activity "
    "(%),Memory Activity,Avg. Memory Bandwidth,VRAM Total Memory (B),VRAM Total Used Memory "
    "(B),Card Series,Card Model,Card Vendor,Card SKU,Node ID,GFX Version  ";
constexpr const char* kRocm723CsvCard0 =
    "card0,Radeon RX 7900 XTX,0x744c,0xc8,0x2422,47413,31.0,37.0,42.0,19.0,0,0,0,N/A,0,"
    "25753026560,27947008,Radeon RX 7900 XTX,0x744c,Advanced Micro Devices Inc. "
    "[AMD/ATI],EXT95849,1,gfx1100  ";

// The rows of a `rocm-smi --csv` output as the `--json` object the same run would print.
std::string csv_as_json(const std::string& csv) {
  std::istringstream in(csv);
  const auto split = [](std::string line) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    std::vector<std::string> cells;
    std::istringstream l(line);
    for (std::string cell; std::getline(l, cell, ',');) cells.push_back(cell);
    return cells;
  };
  std::string line;
  std::getline(in, line);
  const auto header = split(line);
  boost::json::object cards;
  while (std::getline(in, line)) {
    const auto cells = split(line);
    if (cells.size() != header.size()) continue;  // a row cut short (none in the recorded one)
    boost::json::object card;
    for (std::size_t i = 1; i < cells.size(); ++i) card[header[i]] = cells[i];
    cards[cells[0]] = std::move(card);
  }
  return boost::json::serialize(cards);
}

std::optional<std::string> shared_capture(const std::string& rel) {
  const auto path = std::filesystem::path(GPUSTREAM_SHARED_FIXTURES) / "captures" / rel;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// No metric of the device carries `v` (a header read as something it is not).
void expect_no_metric_equal_to(const DeviceSample& d, double v) {
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto m = static_cast<Metric>(i);
    if (d.metrics[m]) EXPECT_NE(d.metrics[m].value(), v) << to_string(m);
  }
}

TEST(RocmSmiGenerations, Rocm62AllocatedVramShareAloneIsNotMemoryActivity) {
  const auto d = parse_rocm_smi(kRocm624Radeon780M);
  ASSERT_EQ(d.size(), 1u);
  const auto& m = d[0].metrics;
  // 87 % is allocated VRAM on an idle iGPU: no memory activity was printed, so none is reported.
  EXPECT_FALSE(m[Metric::memory_utilization_percent]);
  EXPECT_EQ(m[Metric::memory_utilization_percent].reason(), Absence::unsupported);
  // Nor is the share turned into bytes: the output has no VRAM figures to scale it by.
  EXPECT_FALSE(m[Metric::memory_used_bytes]);
  EXPECT_FALSE(m[Metric::memory_total_bytes]);
  expect_no_metric_equal_to(d[0], 87.0);
  // The rest of the output reads as before.
  EXPECT_EQ(d[0].pci_bus_id, "0000:c4:00.0");
  EXPECT_EQ(m[Metric::utilization_percent].value(), 19.0);
  EXPECT_EQ(m[Metric::temperature_celsius].value(), 31.0);
  EXPECT_EQ(m[Metric::power_watts].value(), 7.222);
  EXPECT_FALSE(m[Metric::power_average_watts]);
  EXPECT_EQ(m[Metric::clock_graphics_mhz].value(), 800.0);
  EXPECT_EQ(m[Metric::clock_memory_mhz].value(), 400.0);
}

TEST(RocmSmiGenerations, Rocm62ReadWriteActivityIsMemoryActivity) {
  const auto d = parse_rocm_smi(kRocm62Rx7900Xtx);
  ASSERT_EQ(d.size(), 1u);
  const auto& m = d[0].metrics;
  EXPECT_EQ(m[Metric::memory_utilization_percent].value(), 2.0);  // not the allocated 14
  EXPECT_EQ(m[Metric::memory_utilization_percent].source(), Source::rocm_smi);
  expect_no_metric_equal_to(d[0], 14.0);
  EXPECT_EQ(m[Metric::utilization_percent].value(), 1.0);
  EXPECT_EQ(m[Metric::temperature_celsius].value(), 46.0);
  EXPECT_EQ(m[Metric::power_average_watts].value(), 17.0);
  EXPECT_EQ(m[Metric::power_watts].value(), 17.0);
  EXPECT_EQ(d[0].power_kind, PowerKind::average);
  EXPECT_EQ(m[Metric::clock_graphics_mhz].value(), 34.0);
  EXPECT_EQ(m[Metric::clock_memory_mhz].value(), 96.0);
  // The key order of the object does not matter: the activity is found by its name alone.
  const auto reordered = parse_rocm_smi(
      R"js({"card0": {"GPU Memory Read/Write Activity (%)": "9",
                      "GPU Memory Allocated (VRAM%)": "61"}})js");
  EXPECT_EQ(reordered[0].metrics[Metric::memory_utilization_percent].value(), 9.0);
  // "N/A" activity beside a share is absent, not the share.
  const auto na = parse_rocm_smi(
      R"js({"card0": {"GPU Memory Allocated (VRAM%)": "20",
                      "GPU Memory Read/Write Activity (%)": "N/A"}})js");
  EXPECT_FALSE(na[0].metrics[Metric::memory_utilization_percent]);
}

TEST(RocmSmiGenerations, BeforeRocm62GpuMemoryUseIsMemoryActivity) {
  const auto d = parse_rocm_smi(kRocm5Mi250x);
  ASSERT_EQ(d.size(), 1u);
  const auto& m = d[0].metrics;
  ASSERT_TRUE(m[Metric::memory_utilization_percent]);
  EXPECT_EQ(m[Metric::memory_utilization_percent].value(), 0.0);
  expect_no_metric_equal_to(d[0], 87110708.0);  // "Memory Activity" is a counter
  EXPECT_EQ(m[Metric::utilization_percent].value(), 100.0);
  EXPECT_EQ(m[Metric::power_average_watts].value(), 144.0);
  EXPECT_EQ(m[Metric::clock_graphics_mhz].value(), 1700.0);
  EXPECT_EQ(m[Metric::clock_memory_mhz].value(), 1600.0);
}

TEST(RocmSmiGenerations, Rocm72HeadersReadAsIn62) {
  const auto d =
      parse_rocm_smi(csv_as_json(std::string(kRocm723CsvHeader) + "\n" + kRocm723CsvCard0));
  ASSERT_EQ(d.size(), 1u);
  const auto& m = d[0].metrics;
  EXPECT_EQ(d[0].name, "Radeon RX 7900 XTX");
  ASSERT_TRUE(m[Metric::memory_utilization_percent]);  // Read/Write Activity "0"
  EXPECT_EQ(m[Metric::memory_utilization_percent].value(), 0.0);
  EXPECT_EQ(m[Metric::memory_used_bytes].value(), 27947008.0);
  EXPECT_EQ(m[Metric::memory_total_bytes].value(), 25753026560.0);
  EXPECT_EQ(m[Metric::power_average_watts].value(), 19.0);
}

// Every recorded rocm-smi output in the shared folder, each against the value its headers mean
// (EXPECTED.md of captures/turn3 for the held-out ones): memory activity where the output has
// it, absent where it has only the allocated share or nothing.
TEST(RocmSmiGenerations, SharedCapturesOfEveryGeneration) {
  if (!std::filesystem::exists(std::filesystem::path(GPUSTREAM_SHARED_FIXTURES) / "captures"))
    GTEST_SKIP() << "../shared/fixtures/captures is not there";
  struct Case {
    const char* file;
    std::size_t cards;
    std::optional<double> activity;  // every card's memory_utilization_percent
    std::optional<double> used;      // card0's memory_used_bytes
  };
  const Case cases[] = {
      // rocm-smi 1.4.1 (2023): "GPU memory use (%)".
      {"amd_rocmsmi/rocmsmi1.4.1_showmemuse_json_2xRX6800_rocmsmilib_pr120.json", 2, 0.0, {}},
      // ROCm 5.x `-a`: "GPU memory use (%)" 0, "Memory Activity" a counter.
      {"turn3/amd_rocmsmi/rocmsmi_a_json_mi250x_rocm5.x_wandb_pr5449.closed.json", 1, 0.0, {}},
      // 2019 `-f -t -P`, product name only, `--showuse --showmeminfo vram`: no memory activity.
      {"amd_rocmsmi/rocmsmi_f_t_P_json_2019_rainbowminer749.json", 1, {}, {}},
      {"amd_rocmsmi/rocmsmi_showproductname_json_mi250x_rocmsmilib159.json", 1, {}, {}},
      {"amd_rocmsmi/rocmsmi_showproductname_showuse_showmeminfo_vram_json_rx7900xt_marimo9237.json",
       1,
       {},
       27856896.0},
      {"amd_rocmsmi/"
       "rocmsmi_showtemp_showuse_showpower_showmeminfo_vram_json_7900xtx_beszel414.json",
       1,
       {},
       794341376.0},
      {"amd_rocmsmi/rocmsmi_json_radeon680M_igpu_beszel_test.secondary.json", 1, {}, 445550592.0},
      // rocm-smi-lib 6.2.4: only "GPU Memory Allocated (VRAM%)" 87.
      {"turn3/amd_rocmsmi/rocmsmi_json_rocmsmilib6.2.4_radeon780M_sysinfo960.closed.json",
       1,
       {},
       {}},
      // 6.2+: "GPU Memory Read/Write Activity (%)" 2 beside "Allocated (VRAM%)" 14.
      {"turn3/amd_rocmsmi/rocmsmi_json_7900xtx_openlinkhub_pr27.closed.json", 1, 2.0, {}},
  };
  for (const auto& c : cases) {
    const auto text = shared_capture(c.file);
    ASSERT_TRUE(text) << c.file << " is missing from ../shared/fixtures/captures";
    const auto d = parse_rocm_smi(*text);
    ASSERT_EQ(d.size(), c.cards) << c.file;
    for (const auto& card : d) {
      const auto& r = card.metrics[Metric::memory_utilization_percent];
      EXPECT_EQ(r.get(), c.activity) << c.file << " card" << card.index;
    }
    EXPECT_EQ(d[0].metrics[Metric::memory_used_bytes].get(), c.used) << c.file;
  }
  // ROCm 7.2.3 (CSV only): three cards, every header of 6.2.
  const auto csv = shared_capture(
      "amd_rocmsmi/"
      "rocmsmi_rocm7.2.3_i_P_t_f_u_showmemuse_showmeminfo_vram_showproductname_csv_4x7900xtx_"
      "llamaswap775.trimmed.csv");
  ASSERT_TRUE(csv);
  const auto d = parse_rocm_smi(csv_as_json(*csv));
  ASSERT_EQ(d.size(), 3u);
  for (const auto& card : d) {
    EXPECT_EQ(card.metrics[Metric::memory_utilization_percent].get(), 0.0) << card.index;
    EXPECT_EQ(card.metrics[Metric::memory_used_bytes].get(), 27947008.0) << card.index;
  }
}

}  // namespace
}  // namespace gpustream
