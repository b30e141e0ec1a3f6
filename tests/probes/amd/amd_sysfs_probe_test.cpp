#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "gpu_metrics_tables.hpp"
#include "gpustream/measurement.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/registry.hpp"
#include "probe_harness.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

using test::ProbeHarness;
using test::TempTree;

struct CardSpec {
  int index = 0;
  std::string bus = "0000:03:00.0";
  std::string vendor = "0x1002";
  bool hwmon = true;
  bool suspended = false;
};

// sys/class/drm/cardN/device/... laid out as amdgpu exposes it.
void add_card(TempTree& t, const CardSpec& c) {
  const std::string dev = "sys/class/drm/card" + std::to_string(c.index) + "/device/";
  t.file(dev + "vendor", c.vendor + "\n");
  t.file(dev + "device", "0x73bf\n");
  t.file(dev + "uevent", "DRIVER=amdgpu\nPCI_CLASS=30000\nPCI_SLOT_NAME=" + c.bus + "\n");
  t.file(dev + "power/runtime_status", c.suspended ? "suspended\n" : "active\n");
  t.file(dev + "gpu_busy_percent", "37\n");
  t.file(dev + "mem_busy_percent", "12\n");
  t.file(dev + "mem_info_vram_total", "17163091968\n");
  t.file(dev + "mem_info_vram_used", "1073741824\n");
  t.file(dev + "mem_info_gtt_total", "8589934592\n");
  t.file(dev + "mem_info_gtt_used", "33554432\n");
  t.file(dev + "pp_dpm_sclk", "0: 500Mhz\n1: 2105Mhz *\n2: 2500Mhz\n");
  t.file(dev + "pp_dpm_mclk", "0: 96Mhz\n3: 1000Mhz *\n");
  t.file(dev + "unique_id", "8d7a1f3e02b1c4d5\n");
  // A pcie_bw the probe must never read: unreadable when we are not root.
  t.file(dev + "pcie_bw", "0 0 128\n");
  if (c.hwmon) {
    const std::string h = dev + "hwmon/hwmon" + std::to_string(3 + c.index) + "/";
    t.file(h + "temp1_input", "45000\n");
    t.file(h + "temp1_label", "edge\n");
    t.file(h + "temp2_input", "51000\n");
    t.file(h + "temp2_label", "junction\n");
    t.file(h + "power1_average", "87000000\n");
    t.file(h + "fan1_input", "1450\n");
    t.file(h + "freq1_input", "2105000000\n");
    t.file(h + "freq1_label", "sclk\n");
  }
}

std::string fdinfo(std::uint64_t client, std::string_view pdev, std::uint64_t vram_kib,
                   std::uint64_t gfx_ns, bool legacy = false) {
  std::string s = "pos:\t0\ndrm-driver:\tamdgpu\ndrm-client-id:\t" + std::to_string(client) +
                  "\ndrm-pdev:\t" + std::string(pdev) + "\n";
  s += legacy ? "drm-memory-vram:\t" : "drm-resident-vram:\t";
  s += std::to_string(vram_kib) + " KiB\ndrm-engine-gfx:\t" + std::to_string(gfx_ns) + " ns\n";
  return s;
}

void add_fd(TempTree& t, int pid, int fd, std::string_view node, const std::string& info) {
  const std::string base = "proc/" + std::to_string(pid);
  t.file(base + "/comm", "proc" + std::to_string(pid) + "\n");
  t.symlink(base + "/fd/" + std::to_string(fd), node);
  t.file(base + "/fdinfo/" + std::to_string(fd), info);
}

class AmdSysfs : public ::testing::Test {
 protected:
  std::shared_ptr<AmdSysfsProbe> probe() {
    return make_amd_sysfs_probe(harness_.executors(), {.paths = {.sysfs_root = tree_.path("sys"),
                                                                 .procfs_root = tree_.path("proc"),
                                                                 .devfs_root = tree_.path("dev")}});
  }
  TempTree tree_;
  ProbeHarness harness_;
};

TEST_F(AmdSysfs, OneCardMetricsAndUnits) {
  add_card(tree_, {});
  tree_.dir("proc");
  auto p = probe();
  auto det = harness_.detect(*p);
  ASSERT_TRUE(det.available) << det.reason;
  ASSERT_EQ(det.devices.size(), 1u);
  EXPECT_EQ(det.devices[0].id, "amd:0000:03:00.0");
  EXPECT_EQ(det.devices[0].pci_bus_id, "0000:03:00.0");
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_EQ(r.snapshot.devices.size(), 1u);
  const auto& d = r.snapshot.devices[0];
  EXPECT_EQ(d.id, "amd:0000:03:00.0");
  EXPECT_EQ(d.power_state, PowerState::active);
  const auto& m = d.metrics;
  EXPECT_EQ(m[Metric::utilization_percent].value(), 37.0);
  EXPECT_EQ(m[Metric::memory_utilization_percent].value(), 12.0);
  EXPECT_EQ(m[Metric::memory_total_bytes].value(), 17163091968.0);
  EXPECT_EQ(m[Metric::memory_used_bytes].value(), 1073741824.0);
  EXPECT_EQ(m[Metric::gtt_used_bytes].value(), 33554432.0);
  EXPECT_DOUBLE_EQ(m[Metric::temperature_celsius].value(), 45.0);
  // Only power1_average (most consumer boards): it is the device's power draw, and says so.
  EXPECT_DOUBLE_EQ(m[Metric::power_average_watts].value(), 87.0);
  EXPECT_DOUBLE_EQ(m[Metric::power_watts].value(), 87.0);
  EXPECT_EQ(m[Metric::power_watts].source(), Source::sysfs);
  EXPECT_EQ(d.power_kind, PowerKind::average);
  EXPECT_EQ(m[Metric::fan_rpm].value(), 1450.0);
  EXPECT_DOUBLE_EQ(m[Metric::clock_graphics_mhz].value(), 2105.0);
  EXPECT_DOUBLE_EQ(m[Metric::clock_memory_mhz].value(), 1000.0);  // from pp_dpm_mclk
  EXPECT_EQ(d.attributes.at("unique_id"), "8d7a1f3e02b1c4d5");
  EXPECT_EQ(d.attributes.count("temperature_junction_celsius"), 1u);
}

TEST_F(AmdSysfs, InstantPowerPreferredAverageKeptAsExtra) {
  add_card(tree_, {});
  tree_.file("sys/class/drm/card0/device/hwmon/hwmon3/power1_input", "91500000\n");
  tree_.dir("proc");
  auto p = probe();
  auto r = harness_.sample(*p);
  ASSERT_EQ(r.snapshot.devices.size(), 1u);
  const auto& d = r.snapshot.devices[0];
  EXPECT_DOUBLE_EQ(d.metrics[Metric::power_watts].value(), 91.5);
  EXPECT_DOUBLE_EQ(d.metrics[Metric::power_average_watts].value(), 87.0);
  EXPECT_EQ(d.power_kind, PowerKind::instant);
}

TEST_F(AmdSysfs, NoPowerFileLeavesPowerAbsentWithItsReason) {
  add_card(tree_, {});
  tree_.remove("sys/class/drm/card0/device/hwmon/hwmon3/power1_average");
  tree_.dir("proc");
  auto p = probe();
  auto r = harness_.sample(*p);
  ASSERT_EQ(r.snapshot.devices.size(), 1u);
  const auto& d = r.snapshot.devices[0];
  EXPECT_FALSE(d.metrics[Metric::power_watts]);
  EXPECT_EQ(d.metrics[Metric::power_watts].reason(), Absence::unsupported);
  EXPECT_FALSE(d.power_kind);
}

// A MeasurementWindow over an average-only board reports energy (integrated from power_watts).
TEST_F(AmdSysfs, MeasurementWindowGivesEnergyOnAnAverageOnlyBoard) {
  add_card(tree_, {});
  tree_.dir("proc");
  auto p = probe();
  MeasurementWindow window;
  window.begin();
  auto first = harness_.sample(*p).snapshot;
  tree_.file("sys/class/drm/card0/device/hwmon/hwmon3/power1_average", "93000000\n");
  auto second = harness_.sample(*p).snapshot;
  window.add(first);
  window.add(second);
  const auto summary = window.end();
  const auto* dev = summary.find("amd:0000:03:00.0");
  ASSERT_NE(dev, nullptr);
  ASSERT_TRUE(dev->energy_joules);
  EXPECT_EQ(dev->energy_kind, EnergyKind::integrated);
  ASSERT_GT(second.monotonic_ns, first.monotonic_ns);
  const double seconds = static_cast<double>(second.monotonic_ns - first.monotonic_ns) / 1e9;
  EXPECT_NEAR(*dev->energy_joules, (87.0 + 93.0) / 2 * seconds, 1e-9);
}

TEST_F(AmdSysfs, FourCardsSkipsOtherVendorsAndMissingHwmon) {
  for (int i = 0; i < 4; ++i)
    add_card(tree_,
             {.index = i, .bus = "0000:0" + std::to_string(i + 3) + ":00.0", .hwmon = i != 2});
  add_card(tree_, {.index = 4, .bus = "0000:00:02.0", .vendor = "0x8086"});
  tree_.dir("proc");
  auto p = probe();
  auto det = harness_.detect(*p);
  ASSERT_EQ(det.devices.size(), 4u);
  auto r = harness_.sample(*p);
  ASSERT_EQ(r.snapshot.devices.size(), 4u);
  EXPECT_EQ(r.snapshot.devices[3].id, "amd:0000:06:00.0");
  const auto& no_hwmon = r.snapshot.devices[2].metrics;
  EXPECT_FALSE(no_hwmon[Metric::temperature_celsius]);
  EXPECT_EQ(no_hwmon[Metric::temperature_celsius].reason(), Absence::unsupported);
  EXPECT_DOUBLE_EQ(no_hwmon[Metric::clock_graphics_mhz].value(), 2105.0);  // pp_dpm_sclk
  EXPECT_EQ(no_hwmon[Metric::utilization_percent].value(), 37.0);
}

TEST_F(AmdSysfs, SuspendedCardIsNotRead) {
  add_card(tree_, {.suspended = true});
  tree_.dir("proc");
  // Files that would wake the device; they must not even be opened (unreadable proves it when
  // not root; as root the values would show up, which the assertions below catch too).
  tree_.remove("sys/class/drm/card0/device/gpu_busy_percent");
  tree_.dir("sys/class/drm/card0/device/gpu_busy_percent");  // a read would fail differently
  auto p = probe();
  auto r = harness_.sample(*p);
  ASSERT_EQ(r.snapshot.devices.size(), 1u);
  const auto& d = r.snapshot.devices[0];
  EXPECT_EQ(d.power_state, PowerState::suspended);
  EXPECT_EQ(d.metrics[Metric::memory_used_bytes].reason(), Absence::suspended);
  EXPECT_EQ(d.metrics[Metric::utilization_percent].reason(), Absence::suspended);
  EXPECT_FALSE(d.metrics[Metric::temperature_celsius]);
}

TEST_F(AmdSysfs, NoAmdCardIsUnavailable) {
  add_card(tree_, {.vendor = "0x10de"});
  auto p = probe();
  auto det = harness_.detect(*p);
  EXPECT_FALSE(det.available);
  EXPECT_NE(det.reason.find("no amdgpu device"), std::string::npos);
}

TEST_F(AmdSysfs, ProcessesDedupSumAndEngineDeltas) {
  add_card(tree_, {.index = 0, .bus = "0000:03:00.0"});
  add_card(tree_, {.index = 1, .bus = "0000:04:00.0"});
  // pid 100: client 1 twice (dup'd fd) + client 2 on card0; legacy keys on card1.
  add_fd(tree_, 100, 3, "/dev/dri/renderD128", fdinfo(1, "0000:03:00.0", 1024, 1'000'000));
  add_fd(tree_, 100, 4, "/dev/dri/renderD128", fdinfo(1, "0000:03:00.0", 1024, 1'000'000));
  add_fd(tree_, 100, 5, "/dev/dri/card0", fdinfo(2, "0000:03:00.0", 2048, 0));
  add_fd(tree_, 100, 6, "/dev/dri/renderD129", fdinfo(9, "0000:04:00.0", 512, 0, true));
  // pid 200: an i915 client, ignored.
  add_fd(tree_, 200, 3, "/dev/dri/renderD130",
         "drm-driver:\ti915\ndrm-client-id:\t1\ndrm-pdev:\t0000:00:02.0\n");
  auto p = probe();
  harness_.detect(*p);
  auto first = harness_.sample(*p).snapshot;
  ASSERT_EQ(first.devices.size(), 2u);
  ASSERT_EQ(first.devices[0].processes.size(), 1u);
  const auto& p0 = first.devices[0].processes[0];
  EXPECT_EQ(p0.pid, 100);
  EXPECT_EQ(p0.name, "proc100");
  EXPECT_EQ(p0.gpu_memory_bytes, (1024u + 2048u) * 1024);  // client 1 counted once
  EXPECT_FALSE(p0.gpu_utilization_percent);                // first sample only seeds
  ASSERT_EQ(p0.engines.size(), 1u);
  EXPECT_EQ(p0.engines[0].utilization_percent.reason(), Absence::not_yet_seeded);
  ASSERT_EQ(first.devices[1].processes.size(), 1u);
  EXPECT_EQ(first.devices[1].processes[0].gpu_memory_bytes, 512u * 1024);

  // Advance the busy counters a lot: the percentage is positive and capped at 100.
  add_fd(tree_, 100, 3, "/dev/dri/renderD128", fdinfo(1, "0000:03:00.0", 1024, 1'000'000'000'000));
  auto second = harness_.sample(*p).snapshot;
  const auto& p1 = second.devices[0].processes.at(0);
  ASSERT_TRUE(p1.gpu_utilization_percent);
  EXPECT_GT(*p1.gpu_utilization_percent, 0.0);
  EXPECT_LE(*p1.gpu_utilization_percent, 100.0);
  EXPECT_TRUE(p1.engines.at(0).utilization_percent.has_value());
}

constexpr const char* kRecordedAmdgpuFdinfo = R"(pos:	0
flags:	02100002
mnt_id:	24
ino:	1204
drm-driver:	amdgpu
drm-client-id:	30
drm-pdev:	0000:04:00.0
pasid:	32785
drm-total-cpu:	0
drm-shared-cpu:	0
drm-active-cpu:	0
drm-resident-cpu:	0
drm-total-gtt:	22 MiB
drm-shared-gtt:	0
drm-active-gtt:	10 MiB
drm-resident-gtt:	22 MiB
drm-total-vram:	544428 KiB
drm-shared-vram:	13584 KiB
drm-active-vram:	260356 KiB
drm-resident-vram:	544428 KiB
drm-memory-vram:	544428 KiB
drm-memory-gtt: 	22528 KiB
drm-memory-cpu: 	0 KiB
amd-memory-visible-vram:	544428 KiB
amd-evicted-vram:	0 KiB
amd-evicted-visible-vram:	0 KiB
amd-requested-vram:	544428 KiB
amd-requested-visible-vram:	90112 KiB
amd-requested-gtt:	22528 KiB
drm-engine-gfx:	39456116802 ns
)";

// Per-process GTT: drm-resident-gtt, else the legacy drm-memory-gtt, summed over distinct
// clients; a client that reports no GTT region leaves it unknown, not 0.
TEST_F(AmdSysfs, ProcessGttFromFdinfo) {
  add_card(tree_, {.index = 0, .bus = "0000:04:00.0"});
  add_card(tree_, {.index = 1, .bus = "0000:05:00.0"});
  // pid 100: the recorded amdgpu fdinfo of ../shared/fixtures/amd_fdinfo/
  // amdgpu_fdinfo_drm_print_memory_stats_patch.txt, verbatim (drm-resident-gtt 22 MiB,
  // drm-memory-gtt 22528 KiB).
  add_fd(tree_, 100, 3, "/dev/dri/renderD128", kRecordedAmdgpuFdinfo);
  // pid 200: two clients with only the legacy keys (older kernels): 4 + 6 MiB.
  const auto legacy = [](int client, int gtt_kib) {
    return "drm-driver:\tamdgpu\ndrm-client-id:\t" + std::to_string(client) +
           "\ndrm-pdev:\t0000:04:00.0\ndrm-memory-vram:\t1024 KiB\ndrm-memory-gtt: \t" +
           std::to_string(gtt_kib) + " KiB\n";
  };
  add_fd(tree_, 200, 3, "/dev/dri/renderD128", legacy(40, 4096));
  add_fd(tree_, 200, 4, "/dev/dri/renderD128", legacy(41, 6144));
  // pid 300: no GTT line at all.
  add_fd(tree_, 300, 3, "/dev/dri/renderD129", fdinfo(7, "0000:05:00.0", 512, 0));
  auto p = probe();
  auto snap = harness_.sample(*p).snapshot;
  ASSERT_EQ(snap.devices.size(), 2u);
  const auto& on0 = snap.devices[0].processes;
  ASSERT_EQ(on0.size(), 2u);
  EXPECT_EQ(on0[0].pid, 100);
  EXPECT_EQ(on0[0].gtt_memory_bytes, 22ULL << 20);
  EXPECT_EQ(on0[0].gpu_memory_bytes, 544428ULL * 1024);  // GTT is not in the VRAM figure
  EXPECT_EQ(on0[1].pid, 200);
  EXPECT_EQ(on0[1].gtt_memory_bytes, (4096ULL + 6144ULL) * 1024);
  ASSERT_EQ(snap.devices[1].processes.size(), 1u);
  EXPECT_FALSE(snap.devices[1].processes[0].gtt_memory_bytes);
  EXPECT_EQ(snap.devices[1].processes[0].gpu_memory_bytes, 512u * 1024);
}

// Every process carries its name and host RSS from /proc/<pid>/comm and statm, like NVIDIA's.
TEST_F(AmdSysfs, ProcessesCarryNameAndHostRssFromProcfs) {
  add_card(tree_, {});
  add_fd(tree_, 100, 3, "/dev/dri/renderD128", fdinfo(1, "0000:03:00.0", 1024, 0));
  add_fd(tree_, 200, 3, "/dev/dri/renderD128", fdinfo(2, "0000:03:00.0", 1024, 0));
  tree_.file("proc/100/statm", "5000 1234 300 10 0 900 0\n");
  tree_.file("proc/200/statm", "0 0 0 0 0 0 0\n");  // no address space: unknown, not 0
  auto p = probe();
  auto snap = harness_.sample(*p).snapshot;
  ASSERT_EQ(snap.devices.size(), 1u);
  const auto& procs = snap.devices[0].processes;
  ASSERT_EQ(procs.size(), 2u);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(procs[0].pid, 100);
  EXPECT_EQ(procs[0].name, "proc100");
  EXPECT_EQ(procs[0].host_rss_bytes, 1234 * page);
  EXPECT_EQ(procs[1].pid, 200);
  EXPECT_FALSE(procs[1].host_rss_bytes);
}

TEST_F(AmdSysfs, ClientBoundErrorDoesNotChangeWithTheCount) {
  add_card(tree_, {});
  for (int pid = 100; pid < 104; ++pid)
    add_fd(tree_, pid, 3, "/dev/dri/renderD128",
           fdinfo(static_cast<std::uint64_t>(pid), "0000:03:00.0", 1, 0));
  auto p = make_amd_sysfs_probe(harness_.executors(), {.paths = {.sysfs_root = tree_.path("sys"),
                                                                 .procfs_root = tree_.path("proc"),
                                                                 .devfs_root = tree_.path("dev")},
                                                       .max_clients = 2});
  auto first = harness_.sample(*p).snapshot;
  add_fd(tree_, 104, 3, "/dev/dri/renderD128", fdinfo(104, "0000:03:00.0", 1, 0));
  auto second = harness_.sample(*p).snapshot;  // 3 over the bound instead of 2
  ASSERT_EQ(first.errors.size(), 1u);
  EXPECT_EQ(first.errors[0].code, "clients_capped");
  EXPECT_NE(first.errors[0].message.find("more than 2 DRM clients"), std::string::npos);
  EXPECT_EQ(first.devices.at(0).processes.size(), 2u);
  EXPECT_EQ(first.errors, second.errors);  // one log line, however many are over the bound
}

TEST_F(AmdSysfs, TruncatedFdinfoDoesNotFailTheSample) {
  add_card(tree_, {});
  add_fd(tree_, 300, 3, "/dev/dri/renderD128",
         "drm-driver:\tamdgpu\ndrm-client-id:\t4\ndrm-pdev:\t0000:03:00.0\ndrm-resident-vr");
  auto p = probe();
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  ASSERT_EQ(r.snapshot.devices.size(), 1u);
  ASSERT_EQ(r.snapshot.devices[0].processes.size(), 1u);
  EXPECT_FALSE(r.snapshot.devices[0].processes[0].gpu_memory_bytes);
}

// Activity from the binary gpu_metrics table (amdgpu_gpu_metrics.hpp), per card.
TEST_F(AmdSysfs, ActivityFromGpuMetricsOfADiscreteAndAnApuCard) {
  add_card(tree_, {.index = 0, .bus = "0000:03:00.0"});
  add_card(tree_, {.index = 1, .bus = "0000:c4:00.0"});
  add_card(tree_, {.index = 2, .bus = "0000:05:00.0"});
  // A Navi board's 1.3 table; a Radeon 780M-class APU's 2.1 table (1/100 %); no table at all.
  tree_.file("sys/class/drm/card0/device/gpu_metrics",
             test::gpu_metrics_bytes({.content = 3, .gfx = 97, .umc = 41, .media = 0}));
  tree_.file("sys/class/drm/card1/device/gpu_metrics",
             test::gpu_metrics_bytes({.format = 2, .content = 1, .gfx = 1250, .media = 300}));
  tree_.dir("proc");
  auto p = probe();
  auto r = harness_.sample(*p);
  ASSERT_EQ(r.snapshot.devices.size(), 3u);
  const auto& navi = r.snapshot.devices[0].metrics;
  EXPECT_DOUBLE_EQ(navi[Metric::graphics_activity_percent].value(), 97.0);
  EXPECT_EQ(navi[Metric::graphics_activity_percent].source(), Source::sysfs);
  EXPECT_DOUBLE_EQ(navi[Metric::dram_activity_percent].value(), 41.0);
  const auto& apu = r.snapshot.devices[1].metrics;
  EXPECT_DOUBLE_EQ(apu[Metric::graphics_activity_percent].value(), 12.5);
  EXPECT_EQ(apu[Metric::dram_activity_percent].reason(), Absence::unsupported);
  for (const auto& d : r.snapshot.devices) {
    // NVIDIA-only figures are absent on every AMD card.
    EXPECT_EQ(d.metrics[Metric::sm_activity_percent].reason(), Absence::unsupported);
    EXPECT_EQ(d.metrics[Metric::tensor_activity_percent].reason(), Absence::unsupported);
  }
  const auto& none = r.snapshot.devices[2].metrics;
  EXPECT_EQ(none[Metric::graphics_activity_percent].reason(), Absence::unsupported);
  EXPECT_EQ(none[Metric::dram_activity_percent].reason(), Absence::unsupported);
  EXPECT_TRUE(r.snapshot.errors.empty());
}

TEST_F(AmdSysfs, RefusedGpuMetricsTablesAreAbsentWithTheirReason) {
  add_card(tree_, {.index = 0, .bus = "0000:03:00.0"});
  add_card(tree_, {.index = 1, .bus = "0000:04:00.0"});
  add_card(tree_, {.index = 2, .bus = "0000:05:00.0"});
  // An unknown revision; a 1.3 table cut short; a 1.3 table whose gfx figure is not available.
  tree_.file("sys/class/drm/card0/device/gpu_metrics", test::gpu_metrics_unknown(1, 9, 512));
  tree_.file("sys/class/drm/card1/device/gpu_metrics",
             test::gpu_metrics_bytes({.content = 3, .gfx = 50, .length = 60}));
  tree_.file("sys/class/drm/card2/device/gpu_metrics",
             test::gpu_metrics_bytes({.content = 3, .gfx = 0xFFFF, .umc = 7}));
  tree_.dir("proc");
  auto p = probe();
  for (int round = 0; round < 2; ++round) {
    auto r = harness_.sample(*p);
    ASSERT_EQ(r.snapshot.devices.size(), 3u);
    const auto& unknown = r.snapshot.devices[0].metrics;
    EXPECT_EQ(unknown[Metric::graphics_activity_percent].reason(), Absence::unsupported);
    EXPECT_EQ(unknown[Metric::dram_activity_percent].reason(), Absence::unsupported);
    const auto& cut = r.snapshot.devices[1].metrics;
    EXPECT_EQ(cut[Metric::graphics_activity_percent].reason(), Absence::tool_failed);
    EXPECT_EQ(cut[Metric::dram_activity_percent].reason(), Absence::tool_failed);
    const auto& sentinel = r.snapshot.devices[2].metrics;
    EXPECT_EQ(sentinel[Metric::graphics_activity_percent].reason(), Absence::unsupported);
    EXPECT_DOUBLE_EQ(sentinel[Metric::dram_activity_percent].value(), 7.0);
    // The other metrics of the refused cards are unaffected.
    EXPECT_EQ(r.snapshot.devices[1].metrics[Metric::utilization_percent].value(), 37.0);
    // Only the malformed table is an error (each sample, the same message); the unknown
    // revision is a device gpustream cannot read.
    ASSERT_EQ(r.snapshot.errors.size(), 1u) << round;
    EXPECT_EQ(r.snapshot.errors[0].code, "gpu_metrics_invalid");
    EXPECT_EQ(r.snapshot.errors[0].device, "amd:0000:04:00.0");
    EXPECT_EQ(r.snapshot.errors[0].message, "gpu_metrics 1.3 short read: 60 of 120 bytes");
  }
}

TEST_F(AmdSysfs, SuspendedCardDoesNotReadGpuMetrics) {
  add_card(tree_, {.suspended = true});
  tree_.file("sys/class/drm/card0/device/gpu_metrics", test::gpu_metrics_bytes({.gfx = 10}));
  tree_.dir("proc");
  auto p = probe();
  auto r = harness_.sample(*p);
  ASSERT_EQ(r.snapshot.devices.size(), 1u);
  EXPECT_EQ(r.snapshot.devices[0].metrics[Metric::graphics_activity_percent].reason(),
            Absence::suspended);
}

TEST(AmdHelpers, DpmCurrentLevelAndDeviceId) {
  EXPECT_EQ(parse_dpm_current_mhz("0: 500Mhz\n1: 1800Mhz *\n"), 1800.0);
  EXPECT_EQ(parse_dpm_current_mhz("0: 96MHz *\n"), 96.0);
  EXPECT_FALSE(parse_dpm_current_mhz("0: 500Mhz\n1: 1800Mhz\n"));
  EXPECT_FALSE(parse_dpm_current_mhz(""));
  EXPECT_EQ(amd_device_id("0000:0A:00.0"), "amd:0000:0a:00.0");
}

TEST(AmdFactory, SourceSetting) {
  ProbeHarness h;
  Config c;
  EXPECT_TRUE(make_amd_probe_from_config(c, h.executors()));
  c.probe_settings["amd"] = ProbeSettings::Section{{"source", "sysfs"}};
  EXPECT_EQ(make_amd_probe_from_config(c, h.executors())->name(), "amd");
  c.probe_settings["amd"] = ProbeSettings::Section{{"source", "nvml"}};
  EXPECT_THROW(make_amd_probe_from_config(c, h.executors()), std::invalid_argument);
}

}  // namespace
}  // namespace gpustream
