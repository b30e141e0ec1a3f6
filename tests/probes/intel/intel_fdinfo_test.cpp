// IntelGpuProbe per-engine and per-process accounting from generated /proc trees, through the
// shared DRM fdinfo walker.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "gpustream/json.hpp"
#include "gpustream/planner.hpp"
#include "gpustream/probes/intel_probe.hpp"
#include "intel_trees.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::i915_fdinfo;
using test::IntelTree;
using test::xe_fdinfo;

constexpr const char* kI915 = "0000:03:00.0";
constexpr const char* kXe = "0000:04:00.0";

class IntelFdinfoTest : public test::IntelProbeTest {
 protected:
  IntelFdinfoTest() {
    t_.i915_discrete();
    t_.xe_discrete_two_tiles();
    t_.plain_process(1);
    now_ns_ = 5'000'000'000;
  }
  static const EngineSample* engine(const std::vector<EngineSample>& v, const std::string& n) {
    for (const auto& e : v)
      if (e.name == n) return &e;
    return nullptr;
  }
  static const ProcessSample* process(const DeviceSample& d, std::int64_t pid) {
    for (const auto& p : d.processes)
      if (p.pid == pid) return &p;
    return nullptr;
  }
};

TEST_F(IntelFdinfoTest, I915EngineNanosecondsOverWallTimeFirstSampleSeeds) {
  t_.client(100, "blender", 4, "renderD129", i915_fdinfo(kI915, 39, 1'000'000'000, 0));
  auto probe = make_probe();
  auto snap = sample(*probe);
  {
    const auto& d = dev(snap, kI915);
    const auto* render = engine(d.engines, "render");
    ASSERT_NE(render, nullptr);
    EXPECT_EQ(render->utilization_percent.reason(), Absence::not_yet_seeded);
    EXPECT_EQ(d.metrics[Metric::utilization_percent].reason(), Absence::not_yet_seeded);
    ASSERT_EQ(d.processes.size(), 1u);
    EXPECT_EQ(d.processes[0].name, "blender");
    EXPECT_FALSE(d.processes[0].gpu_utilization_percent.has_value());
  }
  // 1 s later: render +0.5 s busy, video +1 s across 2 engines.
  t_.client(100, "blender", 4, "renderD129", i915_fdinfo(kI915, 39, 1'500'000'000, 1'000'000'000));
  now_ns_ += 1'000'000'000;
  snap = sample(*probe);
  const auto& d = dev(snap, kI915);
  EXPECT_DOUBLE_EQ(engine(d.engines, "render")->utilization_percent.value(), 50.0);
  EXPECT_DOUBLE_EQ(engine(d.engines, "video")->utilization_percent.value(), 50.0);
  EXPECT_DOUBLE_EQ(engine(d.engines, "copy")->utilization_percent.value(), 0.0);
  EXPECT_EQ(engine(d.engines, "render")->utilization_percent.source(), Source::fdinfo);
  EXPECT_DOUBLE_EQ(d.metrics[Metric::utilization_percent].value(), 50.0);
  const auto* p = process(d, 100);
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(*p->gpu_utilization_percent, 50.0);
  EXPECT_DOUBLE_EQ(engine(p->engines, "render")->utilization_percent.value(), 50.0);
  // The other device has no client: idle, once seeded.
  EXPECT_DOUBLE_EQ(dev(snap, kXe).metrics[Metric::utilization_percent].value(), 0.0);
}

TEST_F(IntelFdinfoTest, XeCyclesOverTotalCyclesDividedByCapacity) {
  t_.client(200, "llama", 5, "renderD130", xe_fdinfo(kXe, 3, 1000, 0, 100000));
  auto probe = make_probe();
  sample(*probe);
  t_.client(200, "llama", 5, "renderD130", xe_fdinfo(kXe, 3, 1250, 2000, 101000));
  now_ns_ += 1'000'000'000;
  const auto snap = sample(*probe);
  const auto& d = dev(snap, kXe);
  EXPECT_DOUBLE_EQ(engine(d.engines, "render")->utilization_percent.value(), 25.0);
  EXPECT_DOUBLE_EQ(engine(d.engines, "compute")->utilization_percent.value(), 50.0);  // /4
  EXPECT_DOUBLE_EQ(engine(d.engines, "copy")->utilization_percent.value(), 0.0);
  EXPECT_EQ(engine(d.engines, "rcs"), nullptr);  // xe class names are normalized
}

TEST_F(IntelFdinfoTest, MemoryIsResidentRegionsSummedOverDistinctClientsWithUnits) {
  // pid 300: two fds on client 39 (count once) and a second client 40 on the same card.
  t_.client(300, "game", 4, "card1", i915_fdinfo(kI915, 39, 0, 0, "2 MiB"));
  t_.client(300, "game", 5, "renderD129", i915_fdinfo(kI915, 39, 0, 0, "2 MiB"));
  t_.client(300, "game", 6, "renderD129", i915_fdinfo(kI915, 40, 0, 0, "1024 KiB"));
  // pid 301: an xe client: gtt 192 KiB + vram0 23992 KiB + vram1 2 MiB.
  t_.client(301, "torch", 3, "renderD130", xe_fdinfo(kXe, 7, 0, 0, 10));
  auto probe = make_probe();
  const auto snap = sample(*probe);
  const auto* game = process(dev(snap, kI915), 300);
  ASSERT_NE(game, nullptr);
  // (2 MiB + 1 MiB stolen) for client 39, (1 MiB + 1 MiB stolen) for client 40.
  EXPECT_EQ(*game->gpu_memory_bytes, (3u + 2u) * 1024u * 1024u);
  const auto* torch = process(dev(snap, kXe), 301);
  ASSERT_NE(torch, nullptr);
  EXPECT_EQ(*torch->gpu_memory_bytes, (192u + 23992u + 2048u) * 1024u);
  EXPECT_EQ(process(dev(snap, kXe), 300), nullptr);
}

TEST_F(IntelFdinfoTest, ForeignDriversAreNeverCountedAndOutputIsSortedByPid) {
  t_.client(900, "z", 3, "renderD129", i915_fdinfo(kI915, 1, 0));
  t_.client(20, "a", 3, "renderD129", i915_fdinfo(kI915, 2, 0));
  t_.client(300, "m", 3, "renderD129", i915_fdinfo(kI915, 3, 0));
  t_.client(400, "amd", 3, "renderD128",
            "drm-driver:\tamdgpu\ndrm-client-id:\t9\ndrm-pdev:\t0000:03:00.0\n"
            "drm-memory-vram:\t1000 KiB\ndrm-engine-gfx:\t5 ns\n");
  t_.client(401, "nv", 3, "card0", "drm-driver:\tnouveau\ndrm-pdev:\t0000:04:00.0\n");
  auto probe = make_probe();
  const auto snap = sample(*probe);
  std::vector<std::int64_t> pids;
  for (const auto& p : dev(snap, kI915).processes) pids.push_back(p.pid);
  EXPECT_EQ(pids, (std::vector<std::int64_t>{20, 300, 900}));
  EXPECT_TRUE(dev(snap, kXe).processes.empty());
  EXPECT_EQ(engine(dev(snap, kI915).engines, "gfx"), nullptr);
}

TEST_F(IntelFdinfoTest, AClientThatExitsOrRestartsNeverGivesANegativeOrSpikingValue) {
  t_.client(100, "a", 4, "renderD129", i915_fdinfo(kI915, 39, 9'000'000'000));
  t_.client(101, "b", 4, "renderD129", i915_fdinfo(kI915, 41, 9'000'000'000));
  auto probe = make_probe();
  sample(*probe);
  // pid 100 exits; pid 101 restarts its client (counters back near 0 under the same id).
  t_.tree().remove("proc/100");
  t_.client(101, "b", 4, "renderD129", i915_fdinfo(kI915, 41, 100'000'000));
  now_ns_ += 1'000'000'000;
  auto snap = sample(*probe);
  {
    const auto& d = dev(snap, kI915);
    const auto r = engine(d.engines, "render")->utilization_percent;
    ASSERT_TRUE(r.has_value());
    EXPECT_DOUBLE_EQ(r.value(), 0.0);
    EXPECT_EQ(process(d, 100), nullptr);
  }
  t_.client(101, "b", 4, "renderD129", i915_fdinfo(kI915, 41, 350'000'000));
  now_ns_ += 1'000'000'000;
  snap = sample(*probe);
  EXPECT_DOUBLE_EQ(engine(dev(snap, kI915).engines, "render")->utilization_percent.value(), 25.0);
}

TEST_F(IntelFdinfoTest, TruncatedFdinfoAndUnreadableProcessesNeverFailTheSample) {
  t_.client(100, "ok", 4, "renderD129", i915_fdinfo(kI915, 39, 0));
  t_.client(102, "cut", 4, "renderD129",
            "drm-driver:\ti915\ndrm-client-id:\t77\ndrm-pdev:\t0000:03:00.0\n"
            "drm-resident-system0:\t4 KiB\ndrm-engine-render:\t12");
  t_.client(103, "private", 4, "renderD129", i915_fdinfo(kI915, 78, 0));
  const bool unreadable = t_.tree().unreadable_file("proc/103/fdinfo/4", i915_fdinfo(kI915, 78, 0));
  auto probe = make_probe();
  auto r = harness_.sample(*probe);
  ASSERT_FALSE(r.ec);
  const auto& d = dev(r.snapshot, kI915);
  ASSERT_NE(process(d, 100), nullptr);
  const auto* cut = process(d, 102);
  ASSERT_NE(cut, nullptr);
  EXPECT_EQ(*cut->gpu_memory_bytes, 4096u);
  const auto stats = probe->last_walk_stats();
  EXPECT_GE(stats.truncated, 1u);
  if (unreadable) {  // only when not running with CAP_DAC_OVERRIDE
    EXPECT_EQ(process(d, 103), nullptr);
    EXPECT_GE(stats.permission_skipped, 1u);
  }
}

TEST_F(IntelFdinfoTest, ClientBoundIsCountedAndReported) {
  for (int pid = 10; pid < 20; ++pid)
    t_.client(pid, "p", 3, "renderD129", i915_fdinfo(kI915, static_cast<std::uint64_t>(pid), 0));
  IntelProbeOptions o;
  o.paths.sysfs_root = t_.sys();
  o.paths.procfs_root = t_.proc();
  o.level_zero_library = "";
  o.max_clients = 4;
  auto probe = make_intel_probe(harness_.executors(), o);
  const auto snap = sample(*probe);
  EXPECT_EQ(probe->last_walk_stats().processes, 11u);  // every process is examined (incl. pid 1)
  EXPECT_EQ(probe->last_walk_stats().clients_capped, 6u);
  ASSERT_FALSE(snap.errors.empty());
  EXPECT_EQ(snap.errors[0].code, "clients_capped");
  EXPECT_EQ(snap.errors[0].message, "more than 4 DRM clients: the others are not reported");
  EXPECT_EQ(dev(snap, kI915).processes.size(), 4u);
}

TEST_F(IntelFdinfoTest, ProcessOpeningAGpuLaterIsReportedWithinFreshness) {
  auto probe = make_probe();       // process_freshness 5 s
  clock_step_ns_ = 1'000'000'000;  // a sample a second
  sample(*probe);
  // pid 1 (seen without a GPU) opens the i915 render node.
  t_.client(1, "bash", 7, "renderD129", i915_fdinfo(kI915, 5, 1000));
  int found_at = 0;
  for (int i = 1; i <= 6 && !found_at; ++i)
    if (process(dev(sample(*probe), kI915), 1)) found_at = i;
  EXPECT_GT(found_at, 0);
  EXPECT_LE(found_at, 5);
}

TEST_F(IntelFdinfoTest, ReusedPidDoesNotInheritCountersOrName) {
  t_.client(100, "old", 4, "renderD129", i915_fdinfo(kI915, 39, 1'000'000'000));
  auto probe = make_probe();
  sample(*probe);
  now_ns_ += 1'000'000'000;
  auto snap = sample(*probe);
  ASSERT_TRUE(process(dev(snap, kI915), 100));
  EXPECT_TRUE(process(dev(snap, kI915), 100)->gpu_utilization_percent);  // seeded
  // The process exits; another one gets pid 100, the same fd and (in this fake) client id.
  t_.remove_process(100);
  t_.client(100, "new", 4, "renderD129", i915_fdinfo(kI915, 39, 1'500'000'000));
  now_ns_ += 1'000'000'000;
  snap = sample(*probe);
  const auto* p = process(dev(snap, kI915), 100);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->name, "new");
  EXPECT_FALSE(p->gpu_utilization_percent);  // seeds again instead of a 50 % from the old one
}

TEST_F(IntelFdinfoTest, RenderNodeOnlyDeviceGetsItsClients) {
  t_.pci_device("0000:0c:00.0", "xe", -1, 140, 0x8086, 0xe20b);
  t_.client(500, "headless", 3, "renderD140", xe_fdinfo("0000:0c:00.0", 1, 0, 0, 1));
  auto probe = make_probe();
  const auto snap = sample(*probe);
  const auto& d = dev(snap, "0000:0c:00.0");
  EXPECT_EQ(d.attributes.at("render_node"), "renderD140");
  ASSERT_EQ(d.processes.size(), 1u);
  EXPECT_EQ(d.processes[0].pid, 500);
}

}  // namespace
}  // namespace gpustream

namespace gpustream {
namespace {

// Every process carries its name and host RSS from /proc/<pid>/comm and statm, like NVIDIA's.
TEST_F(IntelFdinfoTest, ProcessesCarryNameAndHostRssFromProcfs) {
  t_.client(100, "blender", 4, "renderD129", i915_fdinfo(kI915, 39, 0, 0));
  t_.client(200, "ffmpeg", 5, "renderD130", xe_fdinfo(kXe, 7, 0, 0, 0));
  t_.tree().file("proc/100/statm", "5000 1234 300 10 0 900 0\n");
  // pid 200 has no statm (a process we may not inspect, or one exiting): RSS stays unknown.
  auto probe = make_probe();
  const auto snap = sample(*probe);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto* blender = process(dev(snap, kI915), 100);
  ASSERT_NE(blender, nullptr);
  EXPECT_EQ(blender->name, "blender");
  EXPECT_EQ(blender->host_rss_bytes, 1234 * page);
  const auto* ffmpeg = process(dev(snap, kXe), 200);
  ASSERT_NE(ffmpeg, nullptr);
  EXPECT_EQ(ffmpeg->name, "ffmpeg");
  EXPECT_FALSE(ffmpeg->host_rss_bytes);
  // The RSS is current at every sample.
  t_.tree().file("proc/100/statm", "5000 2000 300 10 0 900 0\n");
  const auto again = sample(*probe);
  EXPECT_EQ(process(dev(again, kI915), 100)->host_rss_bytes, 2000 * page);
}

// ---- fdinfo without memory keys: memory unknown, never 0 (issue 29) -----------------------

// Real fdinfo texts (../shared/fixtures/captures, PROVENANCE.md), inlined so the suite runs
// without that folder; SharedCapturesGiveMemoryOnlyWhereTheKernelPrintsIt reads the files.

// i915's first fdinfo ("drm/i915: Expose client engine utilisation via fdinfo", 2022): engines
// only, before i915 printed memory stats.
constexpr const char* kI915EngineOnly =
    "pos:    0\nflags:  0100002\nmnt_id: 21\ndrm-driver: i915\ndrm-pdev:   0000:00:02.0\n"
    "drm-client-id:      7\ndrm-engine-render:  9288864723 ns\ndrm-engine-copy:    2035071108 ns\n"
    "drm-engine-video:   0 ns\ndrm-engine-video-enhance:   0 ns\n";
// i915 with memory regions (the proc_pid_fdinfo(5) man page): 6044 KiB resident in system0.
constexpr const char* kI915Regions =
    "pos:    0\nflags:  02100002\nmnt_id: 26\nino:    284\ndrm-driver:     i915\n"
    "drm-client-id:  39\ndrm-pdev:       0000:00:02.0\ndrm-total-system0:      6044 KiB\n"
    "drm-shared-system0:     0\ndrm-active-system0:     0\ndrm-resident-system0:   6044 KiB\n"
    "drm-purgeable-system0:  1688 KiB\ndrm-total-stolen-system0:       0\n"
    "drm-shared-stolen-system0:      0\ndrm-active-stolen-system0:      0\n"
    "drm-resident-stolen-system0:    0\ndrm-purgeable-stolen-system0:   0\n"
    "drm-engine-render:      346249 ns\ndrm-engine-copy:        0 ns\ndrm-engine-video:       0 "
    "ns\n"
    "drm-engine-capacity-video:      2\ndrm-engine-video-enhance:       0 ns\n";
// xe on Lunar Lake (secondary: a public test's "verbatim shape captured from the production
// Lunar Lake box"): cycles only, no memory keys.
constexpr const char* kXeLunarLake =
    "pos:\t0\ndrm-driver:\txe\ndrm-client-id:\t339\ndrm-pdev:\t0000:00:02.0\n"
    "drm-cycles-rcs:\t0\ndrm-total-cycles-rcs:\t8077280786690\n"
    "drm-cycles-vcs:\t1202534501\ndrm-total-cycles-vcs:\t8077280786690\n"
    "drm-cycles-vecs:\t1098801757\ndrm-total-cycles-vecs:\t8077280786690\n"
    "drm-cycles-bcs:\t0\ndrm-total-cycles-bcs:\t8077280786690\n"
    "drm-cycles-ccs:\t0\ndrm-total-cycles-ccs:\t8077280786690\n";

class IntelFdinfoMemoryTest : public test::IntelProbeTest {
 protected:
  IntelFdinfoMemoryTest() {
    t_.plain_process(1);
    now_ns_ = 5'000'000'000;
  }
  /// Two samples a second apart (the second has engine values), the second returned.
  GpuSnapshot two_samples() {
    auto probe = make_probe();
    sample(*probe);
    now_ns_ += 1'000'000'000;
    return sample(*probe);
  }
  static const ProcessSample& process(const DeviceSample& d, std::int64_t pid) {
    for (const auto& p : d.processes)
      if (p.pid == pid) return p;
    throw std::runtime_error("no process " + std::to_string(pid));
  }
  // The process as it goes on the wire: its gpu_memory_bytes is null, not 0.
  static boost::json::value wire_memory(const GpuSnapshot& s, std::int64_t pid) {
    const auto doc = to_json(s);
    for (const auto& d : doc.at("devices").as_array())
      for (const auto& p : d.at("processes").as_array())
        if (p.at("pid").to_number<std::int64_t>() == pid) return p.at("gpu_memory_bytes");
    throw std::runtime_error("no process " + std::to_string(pid) + " on the wire");
  }
};

TEST_F(IntelFdinfoMemoryTest, I915BeforeMemoryStatsGivesNoMemoryFigureNotZero) {
  t_.i915_integrated();
  t_.client(3300, "glxgears", 5, "renderD128", kI915EngineOnly);
  t_.client(3200, "firefox", 6, "renderD128", kI915Regions);
  const auto snap = two_samples();
  const auto& d = dev(snap, "0000:00:02.0");
  const auto& old_kernel = process(d, 3300);
  EXPECT_FALSE(old_kernel.gpu_memory_bytes);
  EXPECT_TRUE(wire_memory(snap, 3300).is_null());
  // Still a process of the device, with its engines (the keys it has).
  EXPECT_EQ(old_kernel.name, "glxgears");
  ASSERT_TRUE(old_kernel.gpu_utilization_percent);
  EXPECT_EQ(*old_kernel.gpu_utilization_percent, 0.0);  // the counters did not move
  // A kernel with memory stats beside it: 6044 KiB + 0 stolen.
  EXPECT_EQ(process(d, 3200).gpu_memory_bytes, std::optional<std::uint64_t>(6044u * 1024u));
  EXPECT_EQ(wire_memory(snap, 3200).to_number<std::uint64_t>(), 6044u * 1024u);
}

TEST_F(IntelFdinfoMemoryTest, XeWithoutMemoryKeysGivesNoMemoryFigureNotZero) {
  t_.xe_integrated();
  t_.client(3400, "ffmpeg", 4, "renderD128", kXeLunarLake);
  const auto snap = two_samples();
  const auto& p = process(dev(snap, "0000:00:02.0"), 3400);
  EXPECT_FALSE(p.gpu_memory_bytes);
  EXPECT_TRUE(wire_memory(snap, 3400).is_null());
  EXPECT_FALSE(p.engines.empty());
}

// One client without memory keys makes the process's sum unknown: the keys it lacks may hold
// memory, and a partial sum would understate it.
TEST_F(IntelFdinfoMemoryTest, AClientWithoutMemoryKeysMakesTheProcessSumUnknown) {
  t_.i915_integrated();
  t_.client(3500, "mixed", 4, "renderD128", kI915Regions);     // client 39, 6044 KiB
  t_.client(3500, "mixed", 5, "renderD128", kI915EngineOnly);  // client 7, nothing said
  const auto snap = two_samples();
  EXPECT_FALSE(process(dev(snap, "0000:00:02.0"), 3500).gpu_memory_bytes);
}

// What a process learns of itself (Telemetry::my_process): absent, with the reason, not 0.
TEST_F(IntelFdinfoMemoryTest, MyProcessSaysTheMemoryIsUnknownAndWhy) {
  t_.i915_integrated();
  t_.client(3300, "me", 5, "renderD128", kI915EngineOnly);
  t_.tree().symlink("proc/self", "3300");
  const auto snap = std::make_shared<const GpuSnapshot>(two_samples());
  const auto me = my_process_usage({snap}, t_.proc());
  EXPECT_EQ(me.pid, 3300);
  ASSERT_EQ(me.devices.size(), 1u);
  EXPECT_FALSE(me.devices[0].gpu_memory_bytes);
  EXPECT_EQ(me.devices[0].absent, Absence::unsupported);
  EXPECT_NE(me.devices[0].reason.find("not its memory"), std::string::npos) << me.devices[0].reason;
}

std::optional<std::string> shared_capture(const std::string& rel) {
  std::ifstream in(std::filesystem::path(GPUSTREAM_SHARED_FIXTURES) / "captures" / rel);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The recorded files themselves (EXPECTED.md of captures/turn3: fd_i915_engine_only,
// fd_i915_man_page_regions, fd_xe_lunar_lake, fd_xe_kernel_doc).
TEST_F(IntelFdinfoMemoryTest, SharedCapturesGiveMemoryOnlyWhereTheKernelPrintsIt) {
  if (!std::filesystem::exists(std::filesystem::path(GPUSTREAM_SHARED_FIXTURES) / "captures"))
    GTEST_SKIP() << "../shared/fixtures/captures is not there";
  const auto engine_only =
      shared_capture("intel/fdinfo/i915_fdinfo_first_commit_msg_engine_only.txt");
  const auto regions =
      shared_capture("intel/fdinfo/i915_fdinfo_memory_regions_man_proc_pid_fdinfo5.txt");
  const auto lunar_lake =
      shared_capture("turn3/intel/xe_fdinfo_lunar_lake_engine_cycles.secondary.txt");
  const auto xe_doc = shared_capture("intel/fdinfo/xe_fdinfo_kernel_doc_xe_drm_client_c.txt");
  ASSERT_TRUE(engine_only && regions && lunar_lake && xe_doc);
  {
    t_.i915_integrated();
    t_.client(3300, "a", 5, "renderD128", *engine_only);
    t_.client(3200, "b", 6, "renderD128", *regions);
    const auto snap = two_samples();
    const auto& d = dev(snap, "0000:00:02.0");
    EXPECT_FALSE(process(d, 3300).gpu_memory_bytes);
    EXPECT_EQ(process(d, 3200).gpu_memory_bytes, std::optional<std::uint64_t>(6189056));
  }
  t_.tree().remove("sys");
  t_.tree().remove("proc");
  t_.plain_process(1);
  t_.xe_integrated();
  t_.pci_device("0000:03:00.0", "xe", 1, 129, 0x8086, 0xe20b);
  t_.client(3400, "c", 4, "renderD128", *lunar_lake);
  t_.client(3100, "d", 4, "renderD129", *xe_doc);
  const auto snap = two_samples();
  EXPECT_FALSE(process(dev(snap, "0000:00:02.0"), 3400).gpu_memory_bytes);
  // 0 system + 192 KiB gtt + 23992 KiB vram0 + 0 stolen.
  EXPECT_EQ(process(dev(snap, "0000:03:00.0"), 3100).gpu_memory_bytes,
            std::optional<std::uint64_t>(24764416));
}

}  // namespace
}  // namespace gpustream
