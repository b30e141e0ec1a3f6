// The dcgm-exporter-compatible exposition (exposition/prometheus_dcgm.hpp): DCGM field names
// and units, dcgm-exporter's labels, absent values left out (never 0), vendors whose figure
// means something else left out, a fleet's node as Hostname, MIG instances as dcgm-exporter
// shows them, clock-event reasons and the last Xid; the text parses in `promtool`.
#include "exposition/prometheus_dcgm.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "exposition/dcgm_test_devices.hpp"
#include "gpustream/transport/prometheus.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::transport::test {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

DeviceSample nvidia_gpu(int index) {
  DeviceSample d;
  d.id = "GPU-" + std::to_string(index) + "aaa";
  d.vendor = Vendor::nvidia;
  d.index = index;
  d.name = "NVIDIA H100 80GB HBM3";
  d.pci_bus_id = "0000:1a:00.0";
  d.attributes["uuid"] = d.id;
  d.attributes["driver_version"] = "550.54.15";
  auto& m = d.metrics;
  m.set(Metric::utilization_percent, 87, Source::nvml);
  m.set(Metric::memory_utilization_percent, 40, Source::nvml);
  m.set(Metric::memory_used_bytes, 10 * kGiB, Source::nvml);
  m.set(Metric::memory_free_bytes, 70 * kGiB, Source::nvml);
  m.set(Metric::memory_total_bytes, 80 * kGiB, Source::nvml);
  m.set(Metric::temperature_celsius, 61, Source::nvml);
  m.set(Metric::power_watts, 312.5, Source::nvml);
  m.set(Metric::power_limit_watts, 700, Source::nvml);
  m.set(Metric::energy_joules, 123456.789, Source::nvml);
  d.energy_kind = EnergyKind::counter;
  m.set(Metric::clock_sm_mhz, 1980, Source::nvml);
  m.set(Metric::clock_memory_mhz, 2619, Source::nvml);
  m.set(Metric::tensor_activity_percent, 42, Source::nvml);
  return d;
}

std::string render(const std::vector<SnapshotPtr>& latest,
                   const std::vector<EventPtr>& events = {}) {
  return render_prometheus_dcgm(latest, events, {"gpu-host-1"});
}

EventPtr xid(std::string device, std::optional<std::uint64_t> number) {
  GpuEvent e;
  e.probe = "nvidia";
  e.device_id = std::move(device);
  e.kind = EventKind::xid;
  e.data = number;
  return std::make_shared<const GpuEvent>(std::move(e));
}

/// The sample lines of `name` (the family's samples, not its HELP/TYPE).
std::vector<std::string> lines_of(const std::string& text, const std::string& name) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(name + "{")) out.push_back(line);
  return out;
}

/// The one value of `name` in `text`; fails the test when there is not exactly one sample.
double value_of(const std::string& text, const std::string& name) {
  const auto l = lines_of(text, name);
  EXPECT_EQ(l.size(), 1U) << name << " in:\n" << text;
  if (l.size() != 1) return -1;
  return std::stod(l[0].substr(l[0].rfind(' ') + 1));
}

TEST(PrometheusDcgm, NvidiaFieldsInDcgmUnits) {
  const auto text = render({snapshot_of({nvidia_gpu(0)})});
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_GPU_UTIL"), 87);  // percent, not a ratio
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_MEM_COPY_UTIL"), 40);
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_FB_USED"), 10 * 1024);  // MiB
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_FB_FREE"), 70 * 1024);
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_FB_TOTAL"), 80 * 1024);
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_GPU_TEMP"), 61);
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_POWER_USAGE"), 312.5);  // W
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"), 700);
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), 123456789);  // mJ
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_SM_CLOCK"), 1980);                       // MHz
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_MEM_CLOCK"), 2619);
  EXPECT_DOUBLE_EQ(value_of(text, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), 0.42);  // a ratio
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"), std::string::npos);
  // gpustream's own device names are not written by this writer.
  EXPECT_EQ(text.find("gpustream_gpu_"), std::string::npos);
}

TEST(PrometheusDcgm, DcgmExporterLabels) {
  const auto text = render({snapshot_of({nvidia_gpu(0), nvidia_gpu(3)})});
  const auto l = lines_of(text, "DCGM_FI_DEV_GPU_UTIL");
  ASSERT_EQ(l.size(), 2U);
  EXPECT_EQ(l[1],
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"3\",UUID=\"GPU-3aaa\",pci_bus_id=\"00000000:1A:00.0\","
            "device=\"nvidia3\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-host-1\","
            "DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 87");
}

TEST(PrometheusDcgm, AbsentValuesAreLeftOutNeverZero) {
  DeviceSample d;
  d.id = "GPU-x";
  d.vendor = Vendor::nvidia;
  d.name = "T4";
  d.metrics.set(Metric::utilization_percent, 0, Source::nvml);  // a real 0 stays
  d.metrics.set_absent(Metric::memory_used_bytes, Absence::no_permission, Source::nvml);
  d.metrics.set_absent(Metric::tensor_activity_percent, Absence::unsupported, Source::nvml);
  d.throttle_reasons_absent = Absence::unsupported;
  const auto text = render({snapshot_of({d})});
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_GPU_UTIL"), 0);
  for (const char* name :
       {"DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_XID_ERRORS"})
    EXPECT_EQ(text.find(name), std::string::npos) << name << " in:\n" << text;
  // Unknown driver version and bus id: the labels are left out, not empty.
  EXPECT_EQ(text.find("DCGM_FI_DRIVER_VERSION"), std::string::npos);
  EXPECT_EQ(text.find("pci_bus_id"), std::string::npos);
  // Nothing at all: no family, not even its HELP line.
  EXPECT_EQ(render({snapshot_of({})}), "");
}

TEST(PrometheusDcgm, IntegratedEnergyIsNotTheDeviceCounter) {
  auto d = nvidia_gpu(0);
  d.energy_kind = EnergyKind::integrated;  // summed by gpustream from power since it started
  EXPECT_EQ(render({snapshot_of({d})}).find("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
            std::string::npos);
}

TEST(PrometheusDcgm, OtherVendorsOnlyWhereTheMeaningIsTheSame) {
  DeviceSample amd;
  amd.id = "0000:03:00.0";
  amd.vendor = Vendor::amd;
  amd.index = 1;
  amd.name = "AMD Instinct MI300X";
  amd.pci_bus_id = "0000:03:00.0";
  amd.metrics.set(Metric::utilization_percent, 55, Source::sysfs);
  amd.metrics.set(Metric::memory_used_bytes, 2 * kGiB, Source::sysfs);
  amd.metrics.set(Metric::graphics_activity_percent, 50, Source::sysfs);
  // Values whose DCGM field is an NVIDIA notion are not written for another vendor.
  amd.metrics.set(Metric::retired_pages_single_bit, 1, Source::sysfs);
  amd.metrics.set(Metric::tensor_activity_percent, 10, Source::sysfs);
  amd.throttle_reasons = {"sw_power_cap"};
  DeviceSample apple;
  apple.id = "apple-0";
  apple.vendor = Vendor::apple;
  apple.name = "Apple M3 Max";
  apple.metrics.set(Metric::utilization_percent, 12, Source::sysfs);
  apple.metrics.set(Metric::memory_used_bytes, 8 * kGiB, Source::sysfs);  // unified: host RAM
  DeviceSample intel;
  intel.id = "0000:00:02.0";
  intel.vendor = Vendor::intel;
  intel.index = 0;
  intel.name = "Intel Arc A770";
  intel.attributes["card"] = "card1";
  intel.metrics.set(Metric::temperature_celsius, 50, Source::sysfs);
  const auto text = render({snapshot_of({amd}), snapshot_of({apple}), snapshot_of({intel})});

  const auto util = lines_of(text, "DCGM_FI_DEV_GPU_UTIL");
  ASSERT_EQ(util.size(), 2U);
  EXPECT_NE(util[0].find("device=\"amd1\""), std::string::npos) << util[0];
  EXPECT_NE(util[0].find("UUID=\"0000:03:00.0\""), std::string::npos) << util[0];
  EXPECT_NE(util[0].find("pci_bus_id=\"0000:03:00.0\""), std::string::npos) << util[0];
  EXPECT_NE(util[1].find("device=\"apple0\""), std::string::npos) << util[1];
  EXPECT_DOUBLE_EQ(value_of(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE"), 0.5);
  EXPECT_NE(lines_of(text, "DCGM_FI_DEV_GPU_TEMP").at(0).find("device=\"card1\""),
            std::string::npos);
  const auto fb = lines_of(text, "DCGM_FI_DEV_FB_USED");  // AMD's, not Apple's unified memory
  ASSERT_EQ(fb.size(), 1U);
  EXPECT_NE(fb[0].find("amd1"), std::string::npos);
  for (const char* name : {"DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                           "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"})
    EXPECT_EQ(text.find(name), std::string::npos) << name << " in:\n" << text;
}

TEST(PrometheusDcgm, AFleetNodeIsTheHostname) {
  const auto text = render({snapshot_of({nvidia_gpu(0)}, "node-a"),
                            snapshot_of({nvidia_gpu(0)}, "node-b"), snapshot_of({nvidia_gpu(1)})});
  const auto l = lines_of(text, "DCGM_FI_DEV_POWER_USAGE");
  ASSERT_EQ(l.size(), 3U);
  EXPECT_NE(l[0].find("Hostname=\"node-a\""), std::string::npos) << l[0];
  EXPECT_NE(l[1].find("Hostname=\"node-b\""), std::string::npos) << l[1];
  EXPECT_NE(l[2].find("Hostname=\"gpu-host-1\""), std::string::npos) << l[2];
}

TEST(PrometheusDcgm, MigInstancesAsDcgmExporterShowsThem) {
  auto gpu = nvidia_gpu(2);
  const DeviceSample mig = mig_1g_10gb_of(gpu);
  const auto text = render({snapshot_of({gpu, mig})});
  const auto fb = lines_of(text, "DCGM_FI_DEV_FB_USED");
  ASSERT_EQ(fb.size(), 2U);
  EXPECT_EQ(fb[1],
            "DCGM_FI_DEV_FB_USED{gpu=\"2\",UUID=\"GPU-2aaa\",pci_bus_id=\"00000000:1A:00.0\","
            "device=\"nvidia2\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-host-1\","
            "DCGM_FI_DRIVER_VERSION=\"550.54.15\",GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"9\"} 1024");
}

TEST(PrometheusDcgm, ClockEventReasonsAsNvmlsBitMask) {
  auto d = nvidia_gpu(0);
  d.throttle_reasons = {"gpu_idle", "sw_power_cap", "0x200"};
  EXPECT_EQ(value_of(render({snapshot_of({d})}), "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"),
            0x1 | 0x4 | 0x200);
  d.throttle_reasons = {};  // read, and nothing holds the clocks down: a real 0
  EXPECT_EQ(value_of(render({snapshot_of({d})}), "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"), 0);
  d.throttle_reasons = {"a_reason_we_do_not_know"};  // the mask would be wrong: none
  EXPECT_EQ(render({snapshot_of({d})}).find("DCGM_FI_DEV_CLOCKS_EVENT_REASONS"), std::string::npos);
}

TEST(PrometheusDcgm, LastXidOfEachDevice) {
  GpuEvent ecc;
  ecc.device_id = "GPU-0aaa";
  ecc.kind = EventKind::ecc_double_bit;
  ecc.data = 5;
  const std::vector<EventPtr> events{xid("GPU-0aaa", 48), xid("GPU-0aaa", 79),
                                     std::make_shared<const GpuEvent>(ecc),
                                     xid("GPU-0aaa", std::nullopt),  // no number: not a value
                                     xid("GPU-gone", 13)};  // a device not in the snapshots
  const auto text = render({snapshot_of({nvidia_gpu(0), nvidia_gpu(1)})}, events);
  const auto l = lines_of(text, "DCGM_FI_DEV_XID_ERRORS");
  ASSERT_EQ(l.size(), 1U);
  EXPECT_NE(l[0].find("UUID=\"GPU-0aaa\""), std::string::npos);
  EXPECT_TRUE(l[0].ends_with(" 79")) << l[0];
}

TEST(PrometheusDcgm, NoPodLabelsUntilThePodIsKnown) {
  const auto d = nvidia_gpu(0);
  EXPECT_FALSE(dcgm_pod_of(d).has_value());
  const auto text = render({snapshot_of({d})});
  for (const char* label : {"pod=", "namespace=", "container="})
    EXPECT_EQ(text.find(label), std::string::npos) << label;
}

TEST(PrometheusDcgm, TheOnePodHoldingADeviceLabelsItsSeries) {
  auto held = nvidia_gpu(0);
  held.pods.push_back({"trainer-0", "ml", "pytorch"});
  auto shared = nvidia_gpu(1);  // time-sliced between two pods: no one pod's series
  shared.pods.push_back({"a", "ml", "c"});
  shared.pods.push_back({"b", "ml", "c"});
  const auto text = render({snapshot_of({held, shared})});
  const auto l = lines_of(text, "DCGM_FI_DEV_GPU_UTIL");
  ASSERT_EQ(l.size(), 2U);
  for (const auto& line : l) {
    const bool is_held = line.find("gpu=\"0\"") != std::string::npos;
    EXPECT_EQ(line.find("pod=\"trainer-0\"") != std::string::npos, is_held) << line;
    EXPECT_EQ(line.find("namespace=\"ml\"") != std::string::npos, is_held) << line;
    EXPECT_EQ(line.find("container=\"pytorch\"") != std::string::npos, is_held) << line;
  }
}

TEST(PrometheusDcgm, LabelValuesAreEscaped) {
  auto d = nvidia_gpu(0);
  d.name = "evil\"}\nDCGM_FI_DEV_GPU_UTIL{gpu=\"9\"} 1\\";
  const auto l = lines_of(render({snapshot_of({d})}), "DCGM_FI_DEV_GPU_UTIL");
  ASSERT_EQ(l.size(), 1U);  // the newline did not make a second sample
  EXPECT_NE(l[0].find(R"(modelName="evil\"}\nDCGM_FI_DEV_GPU_UTIL{gpu=\"9\"} 1\\")"),
            std::string::npos)
      << l[0];
}

/// Every field set on one device: exactly kDcgmFieldsPerDevice samples (the stated bound), and
/// promtool parses the text (its only complaints are dcgm-exporter's own naming).
TEST(PrometheusDcgm, EveryFieldOnceAndPromtoolParsesIt) {
  auto d = nvidia_gpu(0);
  for (std::size_t i = 0; i < kMetricCount; ++i)
    if (!d.metrics[static_cast<Metric>(i)].has_value())
      d.metrics.set(static_cast<Metric>(i), 1, Source::nvml);
  d.throttle_reasons = {"sw_power_cap"};
  const auto text = render({snapshot_of({d})}, {xid(d.id, 13)});
  std::size_t samples = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.starts_with("#")) ++samples;
  EXPECT_EQ(samples, kDcgmFieldsPerDevice) << text;
  // The size docs/operations.md states for a fully reported GPU (its labels as above).
  EXPECT_LT(text.size(), 16U * 1024) << text.size() << " bytes";
  std::printf("one fully reported GPU: %zu samples, %zu bytes\n", samples, text.size());

  gpustream::test::TempTree tmp;
  const auto file = tmp.file("metrics.txt", text);
  const std::string cmd = "/usr/bin/promtool check metrics < '" + file + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  for (std::size_t n = 0; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;)
    out.append(buf.data(), n);
  const int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status));
  // 0: clean; 3: lint problems only; anything else (1: a parse error, 127: no promtool) fails.
  ASSERT_TRUE(WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3)
      << "exit " << WEXITSTATUS(status) << " (install Debian's prometheus for promtool):\n"
      << out;
  // dcgm-exporter's own names: upper-case metric names, camelCase labels (modelName, UUID,
  // Hostname), counters without _total.
  const std::regex naming(
      R"(^DCGM_\w+ ((metric|label) names should be written in 'snake_case' not 'camelCase'|)"
      R"(counter metrics should have "_total" suffix)$)");
  std::istringstream lint(out);
  for (std::string line; std::getline(lint, line);)
    EXPECT_TRUE(std::regex_match(line, naming)) << line;
}

}  // namespace
}  // namespace gpustream::transport::test
