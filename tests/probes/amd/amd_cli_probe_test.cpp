#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "amd_fake_cli.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "probe_harness.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

using namespace amd_cli;
using test::ProbeHarness;
using test::TempTree;

constexpr double kMiB = 1048576.0;

std::string shared_fixture(const std::string& rel) {
  std::ifstream in(std::string(GPUSTREAM_SHARED_FIXTURES) + "/" + rel);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(AmdSmiParse, Rocm60BareNumbers) {
  auto m = parse_amd_smi_metric(R"([{"gpu": 0,
      "usage": {"gfx_usage": 42, "mem_usage": 7, "mm_ip_usage": [0]},
      "power": {"current_power": 55, "power_limit": 200},
      "clock": {"gfx": {"cur_clk": 1800, "max_clk": 2500}, "mem": {"cur_clk": 1000}}}])");
  ASSERT_EQ(m.count(0), 1u);
  EXPECT_EQ(m[0][Metric::utilization_percent].value(), 42.0);
  EXPECT_EQ(m[0][Metric::memory_utilization_percent].value(), 7.0);
  EXPECT_EQ(m[0][Metric::power_watts].value(), 55.0);
  EXPECT_EQ(m[0][Metric::clock_graphics_mhz].value(), 1800.0);
  EXPECT_EQ(m[0][Metric::clock_memory_mhz].value(), 1000.0);
  EXPECT_EQ(m[0][Metric::temperature_celsius].reason(), Absence::unsupported);
}

TEST(AmdSmiParse, ValueUnitObjectsGpuDataWrapperAndMiB) {
  auto m = parse_amd_smi_metric(R"({"gpu_data": [{"gpu": 1,
      "usage": {"gfx_activity": {"value": 3, "unit": "%"}, "umc_activity": "N/A"},
      "power": {"socket_power": {"value": 25000, "unit": "mW"}},
      "mem_usage": {"total_vram": {"value": 16368, "unit": "MB"},
                    "used_vram": {"value": 2, "unit": "GB"}},
      "clock": {"gfx_0": {"clk": {"value": 2, "unit": "GHz"}}}}]})");
  ASSERT_EQ(m.count(1), 1u);
  EXPECT_EQ(m[1][Metric::utilization_percent].value(), 3.0);
  EXPECT_FALSE(m[1][Metric::memory_utilization_percent]);
  EXPECT_DOUBLE_EQ(m[1][Metric::power_watts].value(), 25.0);
  EXPECT_EQ(m[1][Metric::memory_total_bytes].value(), 16368 * kMiB);  // "MB" is MiB
  EXPECT_EQ(m[1][Metric::memory_used_bytes].value(), 2 * 1024 * kMiB);
  EXPECT_EQ(m[1][Metric::clock_graphics_mhz].value(), 2000.0);
}

TEST(AmdSmiParse, AverageSocketPowerIsTheAverageCurrentIsPower) {
  auto m = parse_amd_smi_metric(R"([{"gpu": 0,
      "power": {"average_socket_power": {"value": 61, "unit": "W"}}},
      {"gpu": 1, "power": {"current_socket_power": {"value": 70, "unit": "W"},
                           "average_socket_power": {"value": 66, "unit": "W"}}}])");
  EXPECT_EQ(m[0][Metric::power_average_watts].value(), 61.0);
  EXPECT_FALSE(m[0][Metric::power_watts]);  // the probe's power::settle fills it (see below)
  EXPECT_EQ(m[1][Metric::power_watts].value(), 70.0);
  EXPECT_EQ(m[1][Metric::power_average_watts].value(), 66.0);
}

TEST(AmdSmiParse, NotAvailableAnywhereAndTextBeforeJson) {
  auto m = parse_amd_smi_metric(
      "'CTRL' + 'C' to stop watching output:\n"
      R"([{"timestamp": 1769014607, "gpu": 0, "usage": "N/A",
           "power": {"socket_power": "N/A"}, "clock": {"gfx_0": {"clk": "N/A"}},
           "temperature": {"edge": {"value": "N/A", "unit": "C"}}}])");
  ASSERT_EQ(m.count(0), 1u);
  for (auto metric : {Metric::utilization_percent, Metric::power_watts, Metric::clock_graphics_mhz,
                      Metric::temperature_celsius})
    EXPECT_FALSE(m[0][metric]) << to_string(metric);
}

// power.throttle_status: THROTTLED / UNTHROTTLED, "N/A" or another type is unknown, and a GPU
// whose amd-smi prints no such key is left out (that amd-smi does not say).
TEST(AmdSmiParse, ThrottleStatus) {
  std::map<int, ThrottleStatus> t;
  parse_amd_smi_metric(R"([{"gpu": 0, "power": {"throttle_status": "THROTTLED"}},
      {"gpu": 1, "power": {"throttle_status": "UNTHROTTLED"}},
      {"gpu": 2, "power": {"throttle_status": "N/A"}},
      {"gpu": 3, "power": {"throttle_status": 1}},
      {"gpu": 4, "power": {"socket_power": 5}},
      {"gpu": 5, "power": "N/A"}])",
                       &t);
  EXPECT_EQ(t, (std::map<int, ThrottleStatus>{{0, ThrottleStatus::throttled},
                                              {1, ThrottleStatus::unthrottled},
                                              {2, ThrottleStatus::unknown},
                                              {3, ThrottleStatus::unknown}}));
}

// Through the probe and the fake amd-smi: a throttled GPU says so, "N/A" is absent with a reason
// (never shown as "not throttled"), UNTHROTTLED is an empty list.
TEST(AmdCliProbeThrottle, ThrottleStatusReachesTheDevices) {
  TempTree tree;
  test::FakeAmdCli smi(tree, fakes::kFakeAmdSmi, "amd-smi");
  smi.copy_recorded("static.json");
  std::string metric = test::FakeAmdCli::recorded("metric.json");
  const std::string unthrottled = R"("throttle_status": "UNTHROTTLED")";
  auto at = metric.find(unthrottled);
  ASSERT_NE(at, std::string::npos);
  metric.replace(at, unthrottled.size(), R"("throttle_status": "THROTTLED")");
  at = metric.find(unthrottled, at);
  ASSERT_NE(at, std::string::npos);
  metric.replace(at, unthrottled.size(), R"("throttle_status": "N/A")");
  smi.set_output("metric.json", metric);
  smi.set_output("process.json", "[]");
  ProbeHarness harness;
  auto probe =
      make_amd_cli_probe(harness.executors(), {.tool = AmdTool::amd_smi, .path = smi.path()});
  const auto r = harness.sample(*probe);
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_EQ(r.snapshot.devices.size(), 4u);
  const auto& d = r.snapshot.devices;
  EXPECT_EQ(d[0].throttle_reasons, (std::vector<std::string>{"throttled"}));
  EXPECT_FALSE(d[0].throttle_reasons_absent);
  EXPECT_TRUE(d[1].throttle_reasons.empty());
  EXPECT_EQ(d[1].throttle_reasons_absent, Absence::unsupported);
  EXPECT_TRUE(d[2].throttle_reasons.empty());
  EXPECT_FALSE(d[2].throttle_reasons_absent);
}

TEST(AmdSmiParse, SharedFixtures) {
  const auto power =
      shared_fixture("amd_amdsmi/metric_power_json_changelog_rocm6.1.0_example.json");
  if (power.empty()) GTEST_SKIP() << "shared fixtures not present";
  EXPECT_EQ(parse_amd_smi_metric(power)[0][Metric::power_watts].value(), 10.0);
  std::map<int, ThrottleStatus> throttle;
  parse_amd_smi_metric(power, &throttle);
  EXPECT_EQ(throttle, (std::map<int, ThrottleStatus>{{0, ThrottleStatus::unthrottled}}));
  const auto procs = parse_amd_smi_process(
      shared_fixture("amd_amdsmi/process_json_changelog_rocm6.2.0_example.json"));
  ASSERT_EQ(procs.at(0).size(), 2u);
  EXPECT_EQ(procs.at(0)[1].process.pid, 420315);
  EXPECT_EQ(procs.at(0)[1].process.name, "rvs");
  EXPECT_EQ(procs.at(0)[1].process.gpu_memory_bytes, 0u);
  // The partial files stop mid-document: a clear error, not a crash.
  EXPECT_THROW(parse_amd_smi_metric(
                   shared_fixture("amd_amdsmi/metric_usage_json_w7700_beszel737.partial.json")),
               std::runtime_error);
}

TEST(AmdSmiParse, StaticBothGenerations) {
  auto s = parse_amd_smi_static(R"([{"gpu": 0, "asic": {"market_name": "MI210"},
      "bus": {"bdf": "0000:0a:00.0"}, "vram": {"vram_type": "HBM", "vram_size_mb": 65520}}])");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].bus_id, "0000:0a:00.0");
  EXPECT_EQ(s[0].name, "MI210");
  EXPECT_EQ(s[0].vram_total_bytes, 65520 * kMiB);
  auto w = parse_amd_smi_static(R"({"gpu_data": [{"gpu": 3, "bus": {"bdf": "0000:0b:00.0"},
      "vram": {"size": {"value": 32624, "unit": "MB"}}}]})");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].index, 3);
  EXPECT_EQ(w[0].vram_total_bytes, 32624 * kMiB);
  EXPECT_THROW(parse_amd_smi_static(""), std::runtime_error);
  EXPECT_THROW(parse_amd_smi_static("{\"gpu\": 0}"), std::runtime_error);
}

TEST(AmdSmiParse, ProcessShapes) {
  // ROCm 6.0/6.1: process_info directly in each element; "N/A" process.
  auto old = parse_amd_smi_process(R"([{"gpu": 0, "process_info": {"name": "a", "pid": 7,
      "mem_usage": 4096}}, {"gpu": 1, "process_info": "No running processes detected"}])");
  ASSERT_EQ(old.at(0).size(), 1u);
  EXPECT_EQ(old.at(0)[0].process.gpu_memory_bytes, 4096u);
  EXPECT_TRUE(old.at(1).empty());
  // amd-smi 26: memory_usage.vram_mem.
  auto n = parse_amd_smi_process(R"([{"gpu": 0, "process_list": [{"process_info": {"name": "b",
      "pid": 8, "mem_usage": {"value": 1, "unit": "B"},
      "memory_usage": {"vram_mem": {"value": 56000, "unit": "B"}}}}, "N/A"]}])");
  ASSERT_EQ(n.at(0).size(), 1u);
  EXPECT_EQ(n.at(0)[0].process.gpu_memory_bytes, 56000u);
}

TEST(RocmSmiParse, StringsRenamedKeysAndParens) {
  auto d = parse_rocm_smi(
      "WARNING: One or more commands failed\n"
      R"J({"card1": {"GPU ID": "0x7408", "Unique ID": "0xa32343daf897162a",
          "Temperature (Sensor edge) (C)": "56.0", "sclk clock speed:": "(1700Mhz)",
          "mclk clock speed:": "(1600Mhz)", "Average Graphics Package Power (W)": "144.0",
          "GPU use (%)": "100", "GPU memory use (%)": "N/A", "PCI Bus": "0000:0A:00.0",
          "VRAM Total Memory (B)": "68702699520", "VRAM Total Used Memory (B)": "11567104"},
          "card0": {"Fan Speed (%)": "45", "Temperature (Sensor edge) (c)": "77.0",
          "Card series": "Vega 10"}, "system": {"Driver version": "6.2"}})J");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].index, 0);
  EXPECT_EQ(d[0].name, "Vega 10");
  EXPECT_EQ(d[0].metrics[Metric::temperature_celsius].value(), 77.0);
  EXPECT_EQ(d[0].metrics[Metric::fan_percent].value(), 45.0);
  EXPECT_EQ(d[1].id, "amd:0000:0a:00.0");
  EXPECT_EQ(d[1].metrics[Metric::clock_graphics_mhz].value(), 1700.0);
  EXPECT_EQ(d[1].metrics[Metric::power_average_watts].value(), 144.0);
  // The average is the only figure: it is also the device's power draw, and says so.
  EXPECT_EQ(d[1].metrics[Metric::power_watts].value(), 144.0);
  EXPECT_EQ(d[1].power_kind, PowerKind::average);
  EXPECT_FALSE(d[0].metrics[Metric::power_watts]);
  EXPECT_FALSE(d[0].power_kind);
  EXPECT_EQ(d[1].metrics[Metric::memory_total_bytes].value(), 68702699520.0);
  EXPECT_FALSE(d[1].metrics[Metric::memory_utilization_percent]);
  EXPECT_EQ(d[1].attributes.at("unique_id"), "0xa32343daf897162a");
}

TEST(RocmSmiParse, CurrentSocketPowerIsInstantaneous) {
  auto d = parse_rocm_smi(R"J({"card0": {"Current Socket Graphics Package Power (W)": "312.0",
                                        "PCI Bus": "0000:0C:00.0"}})J");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].metrics[Metric::power_watts].value(), 312.0);
  EXPECT_FALSE(d[0].metrics[Metric::power_average_watts]);
  EXPECT_FALSE(d[0].power_kind);  // rocm-smi does not say; only an average is labelled
}

TEST(RocmSmiParse, EmptyOutputAndWarningOnlyAreErrors) {
  try {
    parse_rocm_smi("");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("driver"), std::string::npos);
  }
  EXPECT_THROW(parse_rocm_smi("WARNING: No JSON data to report\n"), std::runtime_error);
  EXPECT_THROW(parse_rocm_smi("{}"), std::runtime_error);
}

// A fake per probe, with the recorded outputs and a misbehaviour.
class AmdCli : public ::testing::Test {
 protected:
  std::shared_ptr<AmdProbe> probe(AmdTool t, const std::string& mode,
                                  std::chrono::milliseconds timeout = std::chrono::seconds{10}) {
    const bool amd = t == AmdTool::amd_smi;
    auto& cli = *fakes_.emplace_back(
        std::make_unique<test::FakeAmdCli>(tree_, amd ? fakes::kFakeAmdSmi : fakes::kFakeRocmSmi,
                                           mode + "-" + std::to_string(fakes_.size())));
    for (const char* f : {"static.json", "metric.json", "process.json", "rocm-smi.json"})
      cli.copy_recorded(f);
    cli.set_mode(mode);
    return make_amd_cli_probe(harness_.executors(),
                              {.tool = t, .path = cli.path(), .timeout = timeout});
  }
  TempTree tree_;
  std::vector<std::unique_ptr<test::FakeAmdCli>> fakes_;
  ProbeHarness harness_;
};

TEST_F(AmdCli, AmdSmiDetectAndSample) {
  auto p = probe(AmdTool::amd_smi, "normal");
  EXPECT_GE(p->min_interval(), std::chrono::milliseconds{2000});
  auto det = harness_.detect(*p);
  ASSERT_TRUE(det.available) << det.reason;
  ASSERT_EQ(det.devices.size(), 4u);
  EXPECT_EQ(det.devices[0].id, "amd:0000:03:00.0");
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_EQ(r.snapshot.devices.size(), 4u);
  const auto& d = r.snapshot.devices[1];
  EXPECT_EQ(d.metrics[Metric::utilization_percent].value(), 41.0);
  EXPECT_EQ(d.metrics[Metric::memory_used_bytes].value(), 1024 * kMiB);
  EXPECT_EQ(d.metrics[Metric::memory_free_bytes].value(), 23536 * kMiB);  // amd-smi's free_vram
  EXPECT_EQ(d.metrics[Metric::memory_free_bytes].source(), Source::amd_smi);
  EXPECT_EQ(d.metrics[Metric::energy_joules].value(), 123456.5);
  EXPECT_EQ(d.energy_kind, EnergyKind::counter);
  EXPECT_EQ(d.processes.size(), 13u);
  std::size_t procs = 0;
  for (const auto& dev : r.snapshot.devices) procs += dev.processes.size();
  EXPECT_EQ(procs, 50u);
}

TEST_F(AmdCli, AmdSmiAverageOnlyPowerIsPowerWatts) {
  auto p = probe(AmdTool::amd_smi, "normal");
  fakes_.back()->set_output(
      "metric.json",
      R"([{"gpu": 0, "power": {"average_socket_power": {"value": 58, "unit": "W"}}}])");
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_FALSE(r.snapshot.devices.empty());
  const auto& d = r.snapshot.devices[0];
  EXPECT_EQ(d.metrics[Metric::power_watts].value(), 58.0);
  EXPECT_EQ(d.metrics[Metric::power_watts].source(), Source::amd_smi);
  EXPECT_EQ(d.metrics[Metric::power_average_watts].value(), 58.0);
  EXPECT_EQ(d.power_kind, PowerKind::average);
}

TEST_F(AmdCli, RocmSmiSample) {
  auto p = probe(AmdTool::rocm_smi, "warning");
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_EQ(r.snapshot.devices.size(), 4u);
  EXPECT_EQ(r.snapshot.devices[2].id, "amd:0000:05:00.0");
  EXPECT_EQ(r.snapshot.devices[2].metrics[Metric::clock_graphics_mhz].value(), 2100.0);
  // The recorded output is ROCm 6.2's: memory activity is "GPU Memory Read/Write Activity (%)"
  // (2), never the allocated share "GPU Memory Allocated (VRAM%)" (4).
  for (const auto& d : r.snapshot.devices) {
    EXPECT_EQ(d.metrics[Metric::memory_utilization_percent].value(), 2.0) << d.id;
    EXPECT_EQ(d.metrics[Metric::memory_used_bytes].value(), 1073741824.0) << d.id;
  }
}

TEST_F(AmdCli, MisbehavingToolsGiveClearErrors) {
  const std::pair<std::string, std::string> cases[] = {{"crash", "SIGSEGV"},
                                                       {"garbage", "no JSON"},
                                                       {"partial", "invalid JSON"},
                                                       {"empty", "printed nothing"},
                                                       {"fail", "code 2"}};
  for (const auto& [mode, expected] : cases) {
    auto p = probe(AmdTool::amd_smi, mode);
    auto det = harness_.detect(*p);
    EXPECT_FALSE(det.available) << mode;
    EXPECT_NE(det.reason.find(expected), std::string::npos) << mode << ": " << det.reason;
    auto r = harness_.sample(*p);
    EXPECT_TRUE(r.ec) << mode;
  }
  auto rocm = probe(AmdTool::rocm_smi, "empty");
  auto det = harness_.detect(*rocm);
  EXPECT_FALSE(det.available);
  EXPECT_NE(det.reason.find("driver is probably not loaded"), std::string::npos) << det.reason;
}

TEST_F(AmdCli, FailureMessagesAreTheSameEveryRun) {
  // The fakes put a pid in their garbage and stderr and cut partial output at a pid-dependent
  // byte; the messages (the Scheduler's log-once key) must not follow.
  for (auto tool : {AmdTool::amd_smi, AmdTool::rocm_smi}) {
    for (const char* mode : {"garbage", "partial", "fail"}) {
      auto p = probe(tool, mode);
      auto a = harness_.sample(*p);
      auto b = harness_.sample(*p);
      ASSERT_TRUE(a.ec) << mode;
      ASSERT_EQ(a.snapshot.errors.size(), 1u) << mode;
      EXPECT_EQ(a.snapshot.errors, b.snapshot.errors) << mode;
      EXPECT_EQ(a.snapshot.errors[0].message.find("(pid "), std::string::npos)
          << a.snapshot.errors[0].message;
      auto d = harness_.detect(*p);
      EXPECT_EQ(d.reason, harness_.detect(*p).reason) << mode;
    }
  }
}

TEST_F(AmdCli, HangingToolIsKilledAtTimeout) {
  auto p = probe(AmdTool::amd_smi, "hang", std::chrono::milliseconds{300});
  auto det = harness_.detect(*p);
  EXPECT_FALSE(det.available);
  EXPECT_NE(det.reason.find("timed out"), std::string::npos) << det.reason;
}

TEST_F(AmdCli, SameDeviceIdsAsSysfs) {
  for (int i = 0; i < 4; ++i) {
    const std::string dev = "sys/class/drm/card" + std::to_string(i) + "/device/";
    tree_.file(dev + "vendor", "0x1002\n");
    tree_.file(dev + "uevent", "PCI_SLOT_NAME=0000:0" + std::to_string(i + 3) + ":00.0\n");
  }
  auto sysfs = make_amd_sysfs_probe(
      harness_.executors(), {.paths = {.sysfs_root = tree_.path("sys")}, .processes = false});
  auto a = harness_.detect(*sysfs);
  auto b = harness_.detect(*probe(AmdTool::amd_smi, "normal"));
  auto c = harness_.detect(*probe(AmdTool::rocm_smi, "normal"));
  ASSERT_EQ(a.devices.size(), 4u);
  ASSERT_EQ(b.devices.size(), 4u);
  ASSERT_EQ(c.devices.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a.devices[i].id, b.devices[i].id);
    EXPECT_EQ(a.devices[i].id, c.devices[i].id);
  }
}

}  // namespace
}  // namespace gpustream
