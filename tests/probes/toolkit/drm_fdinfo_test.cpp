#include "gpustream/probes/drm_fdinfo.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "support/temp_tree.hpp"

namespace gpustream::drm {
namespace {

using test::TempTree;

// The amdgpu example of the kernel patch converting to drm_print_memory_stats (shared fixture),
// inlined so the suite also runs without ../shared/fixtures.
constexpr const char* kAmdgpu =
    "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1204\n"
    "drm-driver:\tamdgpu\ndrm-client-id:\t30\ndrm-pdev:\t0000:04:00.0\npasid:\t32785\n"
    "drm-total-cpu:\t0\ndrm-shared-cpu:\t0\ndrm-active-cpu:\t0\ndrm-resident-cpu:\t0\n"
    "drm-total-gtt:\t22 MiB\ndrm-shared-gtt:\t0\ndrm-active-gtt:\t10 MiB\n"
    "drm-resident-gtt:\t22 MiB\ndrm-total-vram:\t544428 KiB\ndrm-shared-vram:\t13584 KiB\n"
    "drm-active-vram:\t260356 KiB\ndrm-resident-vram:\t544428 KiB\n"
    "drm-memory-vram:\t544428 KiB\ndrm-memory-gtt: \t22528 KiB\ndrm-memory-cpu: \t0 KiB\n"
    "amd-memory-visible-vram:\t544428 KiB\namd-evicted-vram:\t0 KiB\n"
    "drm-engine-gfx:\t39456116802 ns\n";

constexpr const char* kXe =
    "pos:    0\ndrm-driver:     xe\ndrm-client-id:  3\ndrm-pdev:       0000:03:00.0\n"
    "drm-total-gtt:  192 KiB\ndrm-resident-vram0:     23992 KiB\n"
    "drm-cycles-rcs: 28257900\ndrm-total-cycles-rcs:   7655183225\n"
    "drm-engine-capacity-vcs:        2\n";

std::string amdgpu_fdinfo(std::uint64_t client, std::string_view pdev, std::uint64_t gfx_ns) {
  return "pos:\t0\ndrm-driver:\tamdgpu\ndrm-client-id:\t" + std::to_string(client) +
         "\ndrm-pdev:\t" + std::string(pdev) + "\ndrm-resident-vram:\t1024 KiB\ndrm-engine-gfx:\t" +
         std::to_string(gfx_ns) + " ns\n";
}

// Adds /proc/<pid> with `comm` and one fd per (fd number, link target, fdinfo text).
void add_process(TempTree& t, int pid, std::string_view comm,
                 std::vector<std::tuple<int, std::string, std::string>> fds) {
  const std::string base = "proc/" + std::to_string(pid);
  t.file(base + "/comm", std::string(comm) + "\n");
  t.dir(base + "/fd");
  t.dir(base + "/fdinfo");
  for (auto& [n, target, info] : fds) {
    t.symlink(base + "/fd/" + std::to_string(n), target);
    t.file(base + "/fdinfo/" + std::to_string(n), info);
  }
}

TEST(DrmFdinfo, ParsesAmdgpuNewAndLegacyKeys) {
  auto info = parse_fdinfo(kAmdgpu);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->driver, "amdgpu");
  EXPECT_EQ(info->pdev, "0000:04:00.0");
  EXPECT_EQ(info->client_id, 30u);
  EXPECT_EQ(info->engine_ns.at("gfx"), 39456116802u);
  EXPECT_EQ(info->resident_bytes.at("vram"), 544428u * 1024);
  EXPECT_EQ(info->resident_bytes.at("gtt"), 22u << 20);
  EXPECT_EQ(info->total_bytes.at("vram"), 544428u * 1024);
  EXPECT_EQ(info->legacy_memory_bytes.at("gtt"), 22528u * 1024);
  EXPECT_EQ(info->legacy_memory_bytes.at("cpu"), 0u);
  EXPECT_FALSE(info->truncated);
  EXPECT_EQ(info->engine_ns.count("capacity-gfx"), 0u);
}

TEST(DrmFdinfo, ParsesCyclesAndCapacity) {
  auto info = parse_fdinfo(kXe);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->driver, "xe");
  EXPECT_EQ(info->cycles.at("rcs"), 28257900u);
  EXPECT_EQ(info->total_cycles.at("rcs"), 7655183225u);
  EXPECT_EQ(info->engine_capacity.at("vcs"), 2u);
  EXPECT_EQ(info->total_bytes.at("gtt"), 192u * 1024);
  EXPECT_EQ(info->total_bytes.count("cycles-rcs"), 0u);
  EXPECT_TRUE(info->engine_ns.empty());
}

TEST(DrmFdinfo, SharedFixtureParses) {
  std::ifstream in(std::string(GPUSTREAM_SHARED_FIXTURES) +
                   "/amd_fdinfo/amdgpu_fdinfo_drm_print_memory_stats_patch.txt");
  if (!in) GTEST_SKIP() << "shared fixtures not present";
  std::stringstream ss;
  ss << in.rdbuf();
  auto info = parse_fdinfo(ss.str());
  ASSERT_TRUE(info);
  EXPECT_EQ(info->client_id, 30u);
  EXPECT_EQ(info->engine_ns.at("gfx"), 39456116802u);
}

TEST(DrmFdinfo, NonDrmAndTruncatedText) {
  EXPECT_FALSE(parse_fdinfo("pos:\t0\nflags:\t02\nmnt_id:\t24\n"));
  EXPECT_FALSE(parse_fdinfo(""));
  const std::string full = kAmdgpu;
  // Cut in the middle of the last value: the parsed part survives, marked truncated.
  auto cut = parse_fdinfo(std::string_view(full).substr(0, full.size() - 8));
  ASSERT_TRUE(cut);
  EXPECT_TRUE(cut->truncated);
  EXPECT_EQ(cut->resident_bytes.at("vram"), 544428u * 1024);
  auto garbage = parse_fdinfo("drm-driver: amdgpu\ndrm-engine-gfx: lots ns\ndrm-client-id: x\n");
  ASSERT_TRUE(garbage);
  EXPECT_TRUE(garbage->truncated);
  EXPECT_TRUE(garbage->engine_ns.empty());
  EXPECT_FALSE(garbage->client_id);
}

TEST(DrmFdinfo, RecognisesDrmNodes) {
  EXPECT_TRUE(is_drm_node("/dev/dri/card0"));
  EXPECT_TRUE(is_drm_node("/dev/dri/renderD128"));
  EXPECT_FALSE(is_drm_node("/dev/dri/by-path/pci-0000:03:00.0-card"));
  EXPECT_FALSE(is_drm_node("/dev/dri/card"));
  EXPECT_FALSE(is_drm_node("/dev/null"));
  EXPECT_FALSE(is_drm_node("socket:[1234]"));
  EXPECT_FALSE(is_drm_node("/dev/dri/renderD128 (deleted)"));
}

TEST(DrmFdinfo, WalkDedupsClientsAndFiltersDrivers) {
  TempTree t;
  // pid 10: two fds of client 5 plus a card fd of client 6 on the same GPU, one unrelated file.
  add_process(t, 10, "game",
              {{3, "/dev/dri/renderD128", amdgpu_fdinfo(5, "0000:03:00.0", 100)},
               {4, "/dev/dri/renderD128", amdgpu_fdinfo(5, "0000:03:00.0", 100)},
               {5, "/dev/dri/card0", amdgpu_fdinfo(6, "0000:03:00.0", 50)},
               {6, "/home/u/file.txt", amdgpu_fdinfo(7, "0000:03:00.0", 50)}});
  // pid 20: an i915 client; pid 30: no GPU at all; pid 40: a socket.
  add_process(t, 20, "browser",
              {{7, "/dev/dri/renderD129",
                "drm-driver: i915\ndrm-client-id: 1\n"
                "drm-pdev: 0000:00:02.0\n"}});
  add_process(t, 30, "shell", {{0, "/dev/pts/0", "pos: 0\n"}});
  add_process(t, 40, "net", {{9, "socket:[77]", "pos: 0\n"}});
  t.file("proc/meminfo", "MemTotal: 1 kB\n");
  t.dir("proc/self");

  WalkStats st;
  auto all = walk_clients({.procfs_root = t.path("proc")}, &st);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].pid, 10);
  EXPECT_EQ(all[0].comm, "game");
  EXPECT_EQ(all[0].info.client_id, 5u);
  EXPECT_EQ(all[1].info.client_id, 6u);
  EXPECT_EQ(all[2].pid, 20);
  EXPECT_EQ(all[2].info.driver, "i915");
  EXPECT_EQ(st.processes, 4u);
  EXPECT_EQ(st.fds, 7u);
  EXPECT_EQ(st.drm_fds, 4u);
  EXPECT_EQ(st.fdinfo_reads, 4u);  // fdinfo is opened only for DRM nodes

  auto amd = walk_clients({.procfs_root = t.path("proc"), .drivers = {"amdgpu"}});
  ASSERT_EQ(amd.size(), 2u);
  EXPECT_EQ(amd[0].info.engine_ns.at("gfx"), 100u);
}

TEST(DrmFdinfo, SamePidClientIdOnTwoDevicesCountsTwice) {
  TempTree t;
  add_process(t, 11, "multi",
              {{3, "/dev/dri/renderD128", amdgpu_fdinfo(1, "0000:03:00.0", 10)},
               {4, "/dev/dri/renderD129", amdgpu_fdinfo(1, "0000:04:00.0", 20)}});
  auto c = walk_clients({.procfs_root = t.path("proc")});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].info.pdev, "0000:03:00.0");
  EXPECT_EQ(c[1].info.pdev, "0000:04:00.0");
}

TEST(DrmFdinfo, VanishedTruncatedAndMissingFdinfoNeverFail) {
  TempTree t;
  add_process(t, 12, "exiting",
              {{3, "/dev/dri/renderD128", "drm-driver:\tamdgpu\ndrm-client-id:\t4\ndrm-pd"}});
  // fd link present but its fdinfo gone (closed between readlink and open).
  t.dir("proc/13/fd");
  t.symlink("proc/13/fd/3", "/dev/dri/renderD128");
  // pid directory without an fd folder: the process is gone.
  t.file("proc/14/comm", "zombie\n");
  WalkStats st;
  auto c = walk_clients({.procfs_root = t.path("proc")}, &st);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].info.truncated);
  EXPECT_EQ(st.truncated, 1u);
  EXPECT_EQ(st.vanished, 1u);
  EXPECT_EQ(st.processes, 3u);
}

TEST(DrmFdinfo, CapsProcesses) {
  TempTree t;
  for (int pid = 100; pid < 110; ++pid)
    add_process(t, pid, "p", {{3, "/dev/dri/renderD128", amdgpu_fdinfo(1, "0000:03:00.0", 1)}});
  WalkStats st;
  auto c = walk_clients({.procfs_root = t.path("proc"), .max_processes = 4}, &st);
  EXPECT_EQ(c.size(), 4u);
  EXPECT_EQ(st.processes, 4u);
  EXPECT_EQ(st.capped, 6u);
}

TEST(DrmFdinfo, PermissionDeniedSkipsProcess) {
  TempTree t;
  add_process(t, 15, "mine", {{3, "/dev/dri/renderD128", amdgpu_fdinfo(1, "0000:03:00.0", 1)}});
  add_process(t, 16, "theirs", {{3, "/dev/dri/renderD128", amdgpu_fdinfo(2, "0000:03:00.0", 1)}});
  if (!t.unreadable_file("proc/16/fdinfo/3")) GTEST_SKIP() << gpustream::test::kRunsUnprivileged;
  WalkStats st;
  auto c = walk_clients({.procfs_root = t.path("proc")}, &st);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].pid, 15);
  EXPECT_EQ(st.permission_skipped, 1u);
}

TEST(DrmFdinfo, MissingProcRootYieldsNothing) {
  WalkStats st;
  EXPECT_TRUE(walk_clients({.procfs_root = "/nonexistent/proc"}, &st).empty());
  EXPECT_EQ(st.processes, 0u);
}

TEST(DrmFdinfo, RealProcWalkDoesNotFail) {
  WalkStats st;
  (void)walk_clients({}, &st);
  EXPECT_GE(st.processes, 1u);  // at least this test process
}

}  // namespace
}  // namespace gpustream::drm
