// drm::ClientTracker with the open signal: generated /proc trees beside a generated dev/dri
// folder whose nodes the tests really open, so the inotify watch is the kernel's, not a mock.
// Time is driven (a sample per second of `now`); nothing sleeps.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "drm_tracker_trees.hpp"
#include "gpustream/probes/drm_client_tracker.hpp"

namespace gpustream::drm {
namespace {

using namespace test_trees;

// `n` processes of one /dev/null fd each, pids from `first`, beside a device folder.
void watch_plain_tree(Proc& p, int first, int n) {
  p.devices();
  for (int pid = first; pid < first + n; ++pid) {
    p.process(pid, "p");
    p.fd(pid, 0, "/dev/null");
  }
}

TEST(DrmClientTrackerWatch, UsesTheDeviceFolderOfTheDevfsRoot) {
  Proc p;
  watch_plain_tree(p, 100, 2);
  ClientTracker tr(with_signal(p));
  EXPECT_TRUE(tr.uses_open_signal());
  Proc bare;
  bare.process(5, "p");
  ClientTracker without(with_signal(bare));  // no dri in its devfs root: lists every sample
  EXPECT_FALSE(without.uses_open_signal());
  auto elsewhere = with_signal(p);  // T/dev/dri exists, but the devfs root given is another
  elsewhere.devfs_root = p.t.dir("other-dev");
  EXPECT_FALSE(ClientTracker(elsewhere).uses_open_signal());
  ClientTracker off(
      {.procfs_root = p.root(), .devfs_root = p.dev(), .open_signal = OpenSignal::none});
  EXPECT_FALSE(off.uses_open_signal());
}

TEST(DrmClientTrackerWatch, SteadyStateChecksEachProcessOncePerCountPeriod) {
  InMemoryTmpdir in_memory;
  Proc p;
  watch_plain_tree(p, 1000, 600);
  p.client(5000, 1);
  auto o = with_signal(p);
  o.count_period = std::chrono::milliseconds(30'000);
  ClientTracker tr(o);  // freshness 5 s, count pass 30 s, sweep 600 s
  std::int64_t now = kSecond;
  WalkStats st;
  ASSERT_EQ(tr.sample(now, &st).size(), 1u);
  std::size_t checks = 0, most_checks = 0, most_scans = 0;
  for (int i = 0; i < 60; ++i) {
    ASSERT_EQ(tr.sample(now += kSecond, &st).size(), 1u);
    checks += st.count_checks;
    most_checks = std::max(most_checks, st.count_checks);
    most_scans = std::max(most_scans, st.scans);
    EXPECT_EQ(st.open_events, 0u);
  }
  // Every process twice in 60 s, a little more: the pass reads ~1/16 over the processes known
  // per period, to list new pids too.
  EXPECT_GE(checks, 2 * 600u);
  EXPECT_LE(checks, 1400u);
  EXPECT_LE(most_checks, 25u);  // spread: (601 + 53) / 30 a sample, no spike
  EXPECT_LE(most_scans, 2u);    // the sweep's share only: no count changed
  EXPECT_EQ(tr.processes(), 601u);
}

TEST(DrmClientTrackerWatch, SteadyStateChecksNoProcessWithoutAnOpen) {
  InMemoryTmpdir in_memory;
  Proc p;
  watch_plain_tree(p, 1000, 600);
  p.client(5000, 1);
  auto o = with_signal(p);
  o.count_period = std::chrono::milliseconds(0);  // no fd-count pass: only after an open
  ClientTracker tr(o);                            // freshness 5 s, sweep 600 s
  std::int64_t now = kSecond;
  WalkStats st;
  ASSERT_EQ(tr.sample(now, &st).size(), 1u);
  EXPECT_EQ(st.scans, 601u);  // the first sample scans everything once
  std::size_t checks = 0, most_scans = 0, listed = 0;
  for (int i = 0; i < 60; ++i) {
    ASSERT_EQ(tr.sample(now += kSecond, &st).size(), 1u);
    checks += st.count_checks;
    listed += st.listed;
    most_scans = std::max(most_scans, st.scans);
    EXPECT_LE(st.fdinfo_reads, 2u);  // the known client's one DRM fd (twice when swept)
    EXPECT_EQ(st.open_events, 0u);
  }
  EXPECT_EQ(checks, 0u);      // no fd-count checks at all
  EXPECT_LE(most_scans, 2u);  // the sweep: 601 processes / 600 s, a sample a second
  EXPECT_GE(listed, 55u);
  EXPECT_LE(listed, 65u);
  EXPECT_EQ(tr.processes(), 601u);
}

TEST(DrmClientTrackerWatch, OpenOfAWatchedNodeIsFoundWithinFreshness) {
  Proc p;
  watch_plain_tree(p, 100, 40);
  ClientTracker tr(with_signal(p));  // freshness 5 s
  std::int64_t now = 0;
  tr.sample(now);
  EXPECT_EQ(samples_until_reported(tr, now, 117, 3), 0);
  p.opens_gpu(117, 4, 9);  // one more fd, and the open the watch sees
  WalkStats st;
  now += kSecond;
  auto cs = tr.sample(now, &st);
  EXPECT_GE(st.open_events, 1u);
  int found_at = has_pid(cs, 117) ? 1 : 0;
  std::size_t changes = st.count_changes;
  for (int i = 2; i <= 8 && !found_at; ++i) {
    if (has_pid(tr.sample(now += kSecond, &st), 117)) found_at = i;
    changes += st.count_changes;
  }
  ASSERT_GT(found_at, 0);
  EXPECT_LE(found_at, 5);
  EXPECT_EQ(changes, 1u);  // found by its changed fd count, no other process scanned
}

TEST(DrmClientTrackerWatch, OpenOfACharacterDeviceNodeIsSeen) {
  // The real /dev/dri holds character devices, not files: the kernel reports their opens too.
  Proc p;
  watch_plain_tree(p, 100, 5);
  const std::string node = p.t.path("dev/dri/renderD128");
  ::unlink(node.c_str());
  if (::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)  // /dev/null's numbers
    GTEST_SKIP() << "mknod needs CAP_MKNOD (runs as root in CI)";
  const int probe_fd = ::open(node.c_str(), O_RDWR | O_CLOEXEC);
  if (probe_fd < 0) GTEST_SKIP() << "the temporary folder is mounted nodev";
  ::close(probe_fd);
  ClientTracker tr(with_signal(p));
  ASSERT_TRUE(tr.uses_open_signal());
  std::int64_t now = 0;
  tr.sample(now);
  WalkStats st;
  tr.sample(now += kSecond, &st);
  EXPECT_EQ(st.open_events, 0u);
  p.opens_gpu(103, 4, 1);
  const auto cs = tr.sample(now += kSecond, &st);
  EXPECT_EQ(st.open_events, 1u);
  EXPECT_EQ(samples_until_reported(tr, now, 103, 5) > 0 || has_pid(cs, 103), true);
}

TEST(DrmClientTrackerWatch, OpenIsFoundWithinFreshnessWithoutTheFdCount) {
  Proc p;
  watch_plain_tree(p, 100, 40);
  ClientTracker tr({.procfs_root = p.root(),
                    .devfs_root = p.dev(),
                    .freshness = std::chrono::milliseconds(4000),
                    .signal = FdCountSignal::none});
  ASSERT_TRUE(tr.uses_open_signal());
  ASSERT_FALSE(tr.uses_fd_count_signal());
  std::int64_t now = 0;
  tr.sample(now);
  tr.sample(now += kSecond);
  p.opens_gpu(139, 4, 3);  // the last in the listing: the pass reaches it last
  WalkStats st;
  std::size_t scans = 0;
  int found_at = 0;
  for (int i = 1; i <= 6 && !found_at; ++i) {
    if (has_pid(tr.sample(now += kSecond, &st), 139)) found_at = i;
    scans += st.scans;
  }
  ASSERT_GT(found_at, 0);
  EXPECT_LE(found_at, 4);
  EXPECT_LE(scans, 45u);  // the pass scans each process once, spread over the samples
}

TEST(DrmClientTrackerWatch, OpenDuringAPassExtendsItOverProcessesAlreadyChecked) {
  Proc p;
  watch_plain_tree(p, 100, 40);
  auto o = with_signal(p);
  o.freshness = std::chrono::milliseconds(4000);
  ClientTracker tr(o);
  std::int64_t now = 0;
  tr.sample(now);
  p.opens_gpu(139, 4, 1);  // starts a pass: ~10 processes a sample
  tr.sample(now += kSecond);
  tr.sample(now += kSecond);
  p.opens_gpu(100, 4, 2);  // the first in the listing: the running pass is past it
  int found_at = samples_until_reported(tr, now, 100, 6);
  ASSERT_GT(found_at, 0);
  EXPECT_LE(found_at, 4);
}

TEST(DrmClientTrackerWatch, NewProcessThatOpensIsFoundWithinFreshness) {
  Proc p;
  watch_plain_tree(p, 100, 20);
  ClientTracker tr(with_signal(p));
  std::int64_t now = 0;
  tr.sample(now);
  tr.sample(now += kSecond);
  p.process(500, "newcomer");
  p.opens_gpu(500, 3, 4);
  WalkStats st;
  const int found_at = samples_until_reported(tr, now, 500, 6, &st);
  ASSERT_GT(found_at, 0);
  EXPECT_LE(found_at, 5);
  EXPECT_EQ(tr.processes(), 21u);
}

TEST(DrmClientTrackerWatch, GpuFdWithoutAWatchedOpenIsFoundByTheSweep) {
  Proc p;
  watch_plain_tree(p, 100, 10);
  auto o = with_signal(p);
  o.sweep_period = std::chrono::milliseconds(10000);
  o.count_period = std::chrono::milliseconds(10000);
  ClientTracker tr(o);
  std::int64_t now = 0;
  tr.sample(now);
  // Swapped in keeping the count, no open of a watched node (received over a socket, or a
  // node outside the folder), and a new pid that inherited one across fork.
  p.fd(104, 0, "/dev/dri/renderD128", amdgpu_fdinfo(4, 1));
  p.client(300, 5);
  WalkStats st;
  std::size_t events = 0, checks = 0;
  int found_104 = 0, found_300 = 0;
  for (int i = 1; i <= 12 && !(found_104 && found_300); ++i) {
    const auto cs = tr.sample(now += kSecond, &st);
    if (!found_104 && has_pid(cs, 104)) found_104 = i;
    if (!found_300 && has_pid(cs, 300)) found_300 = i;
    events += st.open_events;
    checks += st.count_checks;
  }
  EXPECT_GT(found_104, 0);
  EXPECT_LE(found_104, 10);  // within the sweep period
  EXPECT_GT(found_300, 0);
  EXPECT_LE(found_300, 10);
  EXPECT_EQ(events, 0u);
  EXPECT_GT(checks, 0u);  // the fd-count pass (10 s) ran meanwhile, and found nothing for 104
}

TEST(DrmClientTrackerWatch, ExitedClientDisappearsAtTheNextSample) {
  Proc p;
  watch_plain_tree(p, 100, 5);
  p.client(70, 1);
  p.client(71, 2);
  ClientTracker tr(with_signal(p));
  ASSERT_EQ(tr.sample(kSecond).size(), 2u);
  p.t.remove("proc/70");
  WalkStats st;
  const auto cs = tr.sample(2 * kSecond, &st);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].pid, 71);
  EXPECT_EQ(st.exited, 1u);
  EXPECT_EQ(tr.kept_fds(), 1u);
  EXPECT_EQ(tr.processes(), 6u);
}

TEST(DrmClientTrackerWatch, PlainProcessesThatExitAreForgottenByTheSweep) {
  Proc p;
  watch_plain_tree(p, 100, 10);
  auto o = with_signal(p);
  o.sweep_period = std::chrono::milliseconds(5000);
  ClientTracker tr(o);
  std::int64_t now = 0;
  tr.sample(now);
  for (int pid = 100; pid < 105; ++pid) p.t.remove("proc/" + std::to_string(pid));
  std::size_t exited = 0;
  for (int i = 0; i < 7; ++i) {
    WalkStats st;
    tr.sample(now += kSecond, &st);
    exited += st.exited;
  }
  EXPECT_EQ(exited, 5u);
  EXPECT_EQ(tr.processes(), 5u);
}

TEST(DrmClientTrackerWatch, ReusedPidIsANewProcess) {
  Proc p;
  watch_plain_tree(p, 100, 3);
  p.process(50, "old", 1000);
  p.fd(50, 3, "/dev/dri/renderD128", amdgpu_fdinfo(7, 900));
  ClientTracker tr(with_signal(p));
  const auto first = tr.sample(kSecond);
  ASSERT_EQ(first.size(), 1u);
  p.t.remove("proc/50");
  p.process(50, "new", 2000);
  p.fd(50, 3, "/dev/dri/renderD128", amdgpu_fdinfo(7, 1000));
  const auto second = tr.sample(2 * kSecond);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].comm, "new");
  EXPECT_EQ(second[0].start_time, 2000u);
  EXPECT_NE(second[0].instance, first[0].instance);
  EXPECT_EQ(second[0].info.engine_ns.at("gfx"), 1000u);
}

TEST(DrmClientTrackerWatch, PermissionDeniedIsSkippedAndNotRetriedEverySample) {
  Proc p;
  watch_plain_tree(p, 100, 3);
  p.client(15, 1);
  p.client(16, 2);
  if (!p.t.unreadable_file("proc/16/fdinfo/3")) GTEST_SKIP() << gpustream::test::kRunsUnprivileged;
  ClientTracker tr(with_signal(p));
  WalkStats st;
  const auto cs = tr.sample(kSecond, &st);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(st.permission_skipped, 1u);
  tr.sample(2 * kSecond, &st);
  EXPECT_EQ(st.permission_skipped, 1u);
  EXPECT_EQ(st.fdinfo_reads, 1u);  // only pid 15's
}

TEST(DrmClientTrackerWatch, LostWatchFallsBackToListingEverySample) {
  Proc p;
  watch_plain_tree(p, 100, 10);
  ClientTracker tr(with_signal(p));
  std::int64_t now = 0;
  tr.sample(now);
  p.t.remove("dev");  // the device folder goes away: the kernel drops the watch
  tr.sample(now += kSecond);
  EXPECT_FALSE(tr.uses_open_signal());
  p.fd(105, 4, "/dev/dri/renderD128", amdgpu_fdinfo(5, 1));  // found by the fd count now
  const int found_at = samples_until_reported(tr, now, 105, 6);
  ASSERT_GT(found_at, 0);
  EXPECT_LE(found_at, 5);
}

TEST(DrmClientTrackerWatch, ClientsAreBoundedInCountAndBytes) {
  Proc p;
  watch_plain_tree(p, 100, 2);
  // The worst fdinfo: far past the 64 KiB read limit, one engine key after another.
  std::string huge = amdgpu_fdinfo(1, 1);
  for (int i = 0; huge.size() < 1024 * 1024; ++i)
    huge += "drm-engine-e" + std::to_string(i) + ":\t1 ns\n";
  p.process(10, "huge");
  p.fd(10, 3, "/dev/dri/renderD128", huge);
  for (int pid = 11; pid < 15; ++pid) p.client(pid, static_cast<std::uint64_t>(pid));
  ClientTracker tr({.procfs_root = p.root(), .devfs_root = p.dev(), .max_clients = 3});
  WalkStats st;
  const auto cs = tr.sample(kSecond, &st);
  ASSERT_EQ(cs.size(), 3u);
  EXPECT_EQ(st.clients_capped, 2u);
  EXPECT_EQ(st.truncated, 1u);  // read up to 64 KiB, the rest never held
  // Every client within kBytesPerClient: the struct, its strings and a std::map node per key
  // (rb-tree links and colour, a std::string, the value: 80 bytes on 64-bit) plus the key.
  for (const auto& c : cs) {
    std::size_t bytes =
        sizeof(Client) + c.comm.capacity() + c.info.driver.capacity() + c.info.pdev.capacity();
    for (const auto* m :
         {&c.info.engine_ns, &c.info.engine_capacity, &c.info.cycles, &c.info.total_cycles,
          &c.info.resident_bytes, &c.info.total_bytes, &c.info.legacy_memory_bytes})
      for (const auto& [k, v] : *m) bytes += 80 + k.capacity() + 1;
    EXPECT_LE(bytes, ClientTracker::kBytesPerClient) << c.pid;
  }
  EXPECT_EQ(cs[0].info.engine_ns.size(), 16u);
}

}  // namespace
}  // namespace gpustream::drm
