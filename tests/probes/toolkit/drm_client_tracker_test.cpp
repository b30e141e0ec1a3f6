#include "gpustream/probes/drm_client_tracker.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "drm_tracker_trees.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::drm {
namespace {

using namespace test_trees;

TEST(DrmClientTracker, FindsEveryClientAmongTenThousandProcesses) {
  InMemoryTmpdir in_memory;
  Proc p;
  p.t.dir("proc");
  for (int pid = 1; pid <= 10000; ++pid) {
    if (pid % 196 == 0) {  // 51 clients, spread over the whole pid range
      p.client(pid, static_cast<std::uint64_t>(pid));
    } else {
      p.plain(pid);
    }
  }
  ClientTracker tr({.procfs_root = p.root(), .devfs_root = p.dev(), .drivers = {"amdgpu"}});
  WalkStats st;
  EXPECT_EQ(tr.sample(kSecond, &st).size(), 51u);
  EXPECT_EQ(st.processes, 10000u);
  EXPECT_EQ(st.scans, 10000u);  // the first sample scans everything once
  const auto second = tr.sample(2 * kSecond, &st);
  ASSERT_EQ(second.size(), 51u);
  EXPECT_EQ(second.back().pid, 9996);
  EXPECT_LT(st.scans, 10000u / 5 + 2);  // afterwards a share per sample, never everything
  EXPECT_EQ(tr.processes(), 10000u);
}

TEST(DrmClientTracker, ProcessOpeningAGpuAfterBeingSeenIsFoundWithinFreshness) {
  Proc p;
  for (int pid = 100; pid < 120; ++pid) {
    p.process(pid, "p");
    p.fd(pid, 0, "/dev/null");
  }
  ClientTracker tr(with_signal(p));  // freshness 5 s
  ASSERT_TRUE(tr.uses_fd_count_signal());
  std::int64_t now = 0;
  EXPECT_TRUE(tr.sample(now).empty());
  EXPECT_EQ(samples_until_reported(tr, now, 107, 3), 0);     // nothing changed yet
  p.fd(107, 4, "/dev/dri/renderD128", amdgpu_fdinfo(9, 5));  // one more fd: the count changes
  WalkStats st;
  const int found_at = samples_until_reported(tr, now, 107, 10, &st);
  ASSERT_GT(found_at, 0);
  EXPECT_LE(found_at, 5);
  EXPECT_EQ(st.count_changes, 1u);  // found by the change signal
}

TEST(DrmClientTracker, FreshnessIsConfigurableAndHoldsWithoutTheSignal) {
  Proc p;
  for (int pid = 100; pid < 130; ++pid) {
    p.process(pid, "p");
    p.fd(pid, 0, "/dev/null");
  }
  ClientTracker tr({.procfs_root = p.root(),
                    .devfs_root = p.dev(),
                    .freshness = std::chrono::milliseconds(3000),
                    .signal = FdCountSignal::none});
  ASSERT_FALSE(tr.uses_fd_count_signal());
  std::int64_t now = 0;
  tr.sample(now);
  tr.sample(now += kSecond);  // the sweep's cursor is somewhere in the middle now
  for (int pid : {100, 115, 129}) p.fd(pid, 5, "/dev/dri/card0", amdgpu_fdinfo(pid, 1));
  int reported = 0;
  for (int i = 1; i <= 3 && reported < 3; ++i) {
    const auto cs = tr.sample(now += kSecond);
    reported = static_cast<int>(cs.size());
  }
  EXPECT_EQ(reported, 3);  // all three within 3 samples of 1 s
}

TEST(DrmClientTracker, FdSwappedKeepingTheCountIsFoundByTheSweep) {
  Proc p;
  for (int pid = 100; pid < 110; ++pid) {
    p.process(pid, "p");
    p.fd(pid, 3, "/var/log/x.log");
  }
  auto o = with_signal(p);
  o.freshness = std::chrono::milliseconds(2000);
  o.sweep_period = std::chrono::milliseconds(10000);
  ClientTracker tr(o);
  std::int64_t now = 0;
  tr.sample(now);
  p.fd(104, 3, "/dev/dri/renderD128", amdgpu_fdinfo(4, 1));  // same fd number, same count
  WalkStats st;
  std::size_t changes = 0;
  int found_at = 0;
  for (int i = 1; i <= 12 && !found_at; ++i) {
    if (has_pid(tr.sample(now += kSecond, &st), 104)) found_at = i;
    changes += st.count_changes;
  }
  ASSERT_GT(found_at, 0);
  EXPECT_LE(found_at, 10);  // within the sweep period
  EXPECT_EQ(changes, 0u);   // the count never told
}

TEST(DrmClientTracker, ReusedPidIsANewProcess) {
  Proc p;
  p.process(50, "old", 1000);
  p.fd(50, 3, "/dev/dri/renderD128", amdgpu_fdinfo(7, 900));
  ClientTracker tr({.procfs_root = p.root(), .devfs_root = p.dev()});
  auto first = tr.sample(kSecond);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].comm, "old");
  EXPECT_EQ(first[0].start_time, 1000u);
  EXPECT_NE(first[0].instance, 0u);
  // Pid 50 exits and a new process gets the same pid, fd number and (in this fake) client id.
  p.t.remove("proc/50");
  p.process(50, "new", 2000);
  p.fd(50, 3, "/dev/dri/renderD128", amdgpu_fdinfo(7, 1000));
  auto second = tr.sample(2 * kSecond);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].comm, "new");
  EXPECT_EQ(second[0].start_time, 2000u);
  EXPECT_NE(second[0].instance, first[0].instance);  // counters keyed by it start afresh
  EXPECT_EQ(second[0].info.engine_ns.at("gfx"), 1000u);
}

TEST(DrmClientTracker, ReusedPidBeyondTheKeptDescriptorsIsToldByItsStartTime) {
  Proc p;
  for (int pid : {60, 61}) {
    p.process(pid, "old", 1000);
    p.fd(pid, 3, "/dev/dri/renderD128", amdgpu_fdinfo(static_cast<std::uint64_t>(pid), 1));
  }
  ClientTracker tr({.procfs_root = p.root(), .devfs_root = p.dev(), .max_kept_fds = 1});
  const auto first = tr.sample(kSecond);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(tr.kept_fds(), 1u);
  // Rewrite pid 61 in place (its folder stays): only the start time tells it is another process.
  p.t.file("proc/61/comm", "new\n");
  p.t.file("proc/61/stat", stat_text(61, 3000));
  const auto second = tr.sample(2 * kSecond);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[1].comm, "new");
  EXPECT_NE(second[1].instance, first[1].instance);
  EXPECT_EQ(second[0].instance, first[0].instance);  // pid 60 is the same process
}

TEST(DrmClientTracker, ExitedProcessDisappearsAtTheNextSample) {
  Proc p;
  p.client(70, 1);
  p.client(71, 2);
  ClientTracker tr({.procfs_root = p.root(), .devfs_root = p.dev()});
  ASSERT_EQ(tr.sample(kSecond).size(), 2u);
  EXPECT_EQ(tr.kept_fds(), 2u);
  p.t.remove("proc/70");
  WalkStats st;
  const auto cs = tr.sample(2 * kSecond, &st);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].pid, 71);
  EXPECT_EQ(st.exited, 1u);
  EXPECT_EQ(tr.kept_fds(), 1u);
  EXPECT_EQ(tr.processes(), 1u);
}

TEST(DrmClientTracker, ClosedGpuFdDisappearsAtTheNextSample) {
  Proc p;
  p.client(72, 1);
  p.fd(72, 0, "/dev/null");
  ClientTracker tr({.procfs_root = p.root(), .devfs_root = p.dev()});
  ASSERT_EQ(tr.sample(kSecond).size(), 1u);
  p.close(72, 3);
  EXPECT_TRUE(tr.sample(2 * kSecond).empty());
  EXPECT_EQ(tr.kept_fds(), 0u);
}

TEST(DrmClientTracker, ExitsMidWalkAndMissingFdinfoNeverFail) {
  Proc p;
  p.client(80, 1);
  p.t.dir("proc/81/fd");  // fd link present but its fdinfo gone (closed between the two reads)
  p.t.symlink("proc/81/fd/3", "/dev/dri/renderD128");
  p.t.file("proc/82/comm", "zombie\n");  // listed, but no fd folder: exited while we looked
  ClientTracker tr({.procfs_root = p.root(), .devfs_root = p.dev()});
  WalkStats st;
  const auto cs = tr.sample(kSecond, &st);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].pid, 80);
  EXPECT_EQ(st.vanished, 1u);
  EXPECT_EQ(st.processes, 3u);
}

TEST(DrmClientTracker, PermissionDeniedSkipsProcess) {
  Proc p;
  p.client(15, 1);
  p.client(16, 2);
  if (!p.t.unreadable_file("proc/16/fdinfo/3")) GTEST_SKIP() << gpustream::test::kRunsUnprivileged;
  ClientTracker tr({.procfs_root = p.root(), .devfs_root = p.dev()});
  WalkStats st;
  const auto cs = tr.sample(kSecond, &st);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].pid, 15);
  EXPECT_EQ(st.permission_skipped, 1u);
  tr.sample(2 * kSecond, &st);
  EXPECT_EQ(st.permission_skipped, 1u);  // still counted, not scanned again
  EXPECT_EQ(st.scans, 0u);
}

TEST(DrmClientTracker, ProcessWithThousandsOfFdsCostsItsGpuFdsOnlyOnceKnown) {
  InMemoryTmpdir in_memory;
  Proc p;
  p.process(90, "many");
  for (int n = 0; n < 3000; ++n) p.t.symlink("proc/90/fd/" + std::to_string(n), "/dev/null");
  p.fd(90, 3000, "/dev/dri/renderD128", amdgpu_fdinfo(1, 5));
  p.fd(90, 3001, "/dev/dri/renderD128", amdgpu_fdinfo(1, 5));  // the same client twice
  ClientTracker tr(with_signal(p));
  WalkStats st;
  auto cs = tr.sample(kSecond, &st);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(st.fds, 3002u);
  EXPECT_EQ(st.drm_fds, 2u);
  std::size_t checks = 0;
  for (int i = 2; i <= 6; ++i) {  // steady state: its two DRM fds, a count check per 5 s
    cs = tr.sample(i * kSecond, &st);
    ASSERT_EQ(cs.size(), 1u);
    EXPECT_EQ(st.fds, 0u);
    EXPECT_EQ(st.fdinfo_reads, 2u);
    checks += st.count_checks;
  }
  EXPECT_EQ(checks, 1u);
  EXPECT_EQ(cs[0].info.engine_ns.at("gfx"), 5u);
}

TEST(DrmClientTracker, SweepIsSpreadOverTheSamples) {
  InMemoryTmpdir in_memory;
  Proc p;
  p.t.dir("proc");
  for (int pid = 1000; pid < 1600; ++pid) p.plain(pid);
  auto o = with_signal(p);  // freshness 5 s, sweep 60 s
  ClientTracker tr(o);
  std::int64_t now = 0;
  tr.sample(now);
  std::size_t scans = 0, checks = 0, most = 0;
  for (int i = 0; i < 60; ++i) {
    WalkStats st;
    tr.sample(now += kSecond, &st);
    scans += st.scans;
    checks += st.count_checks;
    most = std::max(most, st.scans);
  }
  EXPECT_GE(scans, 600u);        // every process swept once in 60 s
  EXPECT_LE(most, 11u);          // 600 / 60, rounded up
  EXPECT_GE(checks, 600u * 12);  // every count checked once per 5 s
}

TEST(DrmClientTracker, MaxClientsBoundsTheTrackedClients) {
  Proc p;
  for (int pid = 10; pid < 15; ++pid) p.client(pid, static_cast<std::uint64_t>(pid));
  ClientTracker tr({.procfs_root = p.root(), .devfs_root = p.dev(), .max_clients = 3});
  WalkStats st;
  EXPECT_EQ(tr.sample(kSecond, &st).size(), 3u);
  EXPECT_EQ(st.clients_capped, 2u);
}

TEST(DrmClientTracker, MissingProcRootYieldsNothing) {
  ClientTracker tr({.procfs_root = "/nonexistent/proc"});
  WalkStats st;
  EXPECT_TRUE(tr.sample(kSecond, &st).empty());
  EXPECT_EQ(st.processes, 0u);
}

TEST(DrmClientTracker, RealProc) {
  ClientTracker tr({});
  EXPECT_EQ(tr.uses_fd_count_signal(), procfs_reports_fd_count("/proc"));
  WalkStats st;
  (void)tr.sample(kSecond, &st);
  EXPECT_GE(st.processes, 1u);
  (void)tr.sample(2 * kSecond, &st);
  EXPECT_GE(st.processes, 1u);
  EXPECT_LT(st.scans, st.processes);
}

}  // namespace
}  // namespace gpustream::drm
