// drm::ClientTracker and GPU fds that come without an open of the host's device folder: a
// process in another mount namespace opening its own node (a container's mknod'ed /dev/dri), an
// fd inherited across fork or received over a socket. Generated /proc trees with emulated mount
// namespaces (see Proc::in_namespace in drm_tracker_trees.hpp: the ns link's text and a root
// folder per namespace; the inotify watches and the opens are the kernel's). Time is driven (a
// sample per second of `now`); nothing sleeps.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "drm_tracker_trees.hpp"
#include "gpustream/probes/drm_client_tracker.hpp"

namespace gpustream::drm {
namespace {

using namespace test_trees;
using std::chrono::milliseconds;

constexpr std::uint64_t kNsA = 4026532001, kNsB = 4026532002, kNsC = 4026532003;

// `n` processes of one /dev/null fd each, pids from `first`, in our namespace.
void plain_tree(Proc& p, int first, int n) {
  p.devices();
  for (int pid = first; pid < first + n; ++pid) {
    p.process(pid, "p");
    p.fd(pid, 0, "/dev/null");
  }
}

// A process of namespace `ns` with one /dev/null fd.
void contained(Proc& p, int pid, std::uint64_t ns) {
  p.process(pid, "c" + std::to_string(pid));
  p.fd(pid, 0, "/dev/null");
  p.in_namespace(pid, ns);
}

// Samples until `pid` is reported (at most `max` samples); the sample number or 0, and the sum
// of the open events and fd-count changes seen meanwhile.
struct Found {
  int at = 0;
  std::size_t events = 0, changes = 0;
};
Found sample_until(ClientTracker& tr, std::int64_t& now, int pid, int max) {
  Found f;
  for (int i = 1; i <= max && !f.at; ++i) {
    WalkStats st;
    if (has_pid(tr.sample(now += kSecond, &st), pid)) f.at = i;
    f.events += st.open_events;
    f.changes += st.count_changes;
  }
  return f;
}

TEST(DrmClientTrackerNamespaces, OpenOfANodeInAnotherNamespaceIsFoundWithinFreshness) {
  Proc p;
  plain_tree(p, 100, 40);
  p.mount_namespace(kNsA);
  contained(p, 200, kNsA);
  contained(p, 201, kNsA);
  auto o = with_signal(p);
  o.count_period = milliseconds(120'000);  // so that only the open can find it in time
  ClientTracker tr(o);
  std::int64_t now = 0;
  WalkStats st;
  tr.sample(now, &st);
  EXPECT_EQ(tr.namespace_watches(), 1u);  // two pids, one namespace, one watch
  EXPECT_EQ(st.watch_adds, 1u);
  tr.sample(now += kSecond);
  p.opens_gpu_in(kNsA, 201, 4, 9);  // the host's T/dev/dri sees nothing of this
  const Found f = sample_until(tr, now, 201, 8);
  ASSERT_GT(f.at, 0);
  EXPECT_LE(f.at, 5);  // freshness 5 s
  EXPECT_GE(f.events, 1u);
}

TEST(DrmClientTrackerNamespaces, WithoutItsWatchTheSameOpenWaitsForThePass) {
  // The control of the test above: past the bound on watches (0 here), the namespace's open is
  // not seen, and the process is found by the fd-count pass, within its period.
  Proc p;
  plain_tree(p, 100, 40);
  p.mount_namespace(kNsA);
  contained(p, 200, kNsA);
  auto o = with_signal(p);
  o.count_period = milliseconds(20'000);
  o.max_namespace_watches = 0;
  ClientTracker tr(o);
  std::int64_t now = 0;
  WalkStats st;
  tr.sample(now, &st);
  EXPECT_EQ(tr.namespace_watches(), 0u);
  EXPECT_EQ(st.namespaces_unwatched, 1u);  // and a warning, logged once
  p.opens_gpu_in(kNsA, 200, 4, 9);
  const Found f = sample_until(tr, now, 200, 25);
  ASSERT_GT(f.at, 5);  // not within freshness: nothing signalled the open
  EXPECT_LE(f.at, 20);
  EXPECT_EQ(f.events, 0u);
  EXPECT_EQ(f.changes, 1u);
}

TEST(DrmClientTrackerNamespaces, OneWatchPerNamespaceWithADeviceFolderAndNoneForOurs) {
  Proc p;
  plain_tree(p, 100, 5);
  p.mount_namespace(kNsA);
  p.mount_namespace(kNsB);
  p.mount_namespace(kNsC, /*with_devices=*/false);  // a container given no GPU
  contained(p, 200, kNsA);
  contained(p, 201, kNsA);
  contained(p, 300, kNsB);
  contained(p, 400, kNsC);
  p.in_namespace(101, Proc::kOwnNs);  // our own namespace, named: nothing to add
  ClientTracker tr(with_signal(p));
  WalkStats st;
  tr.sample(kSecond, &st);
  EXPECT_EQ(tr.namespace_watches(), 2u);
  EXPECT_EQ(st.watch_adds, 3u);  // A, B, and C's missing folder
  EXPECT_EQ(st.namespaces_unwatched, 0u);
}

TEST(DrmClientTrackerNamespaces, FirstProcessOfANewNamespaceIsFoundAtTheNextSampleThenWatched) {
  InMemoryTmpdir in_memory;  // a tmpfs lists newest first, as procfs lists new pids last
  Proc p;
  if (!lists_in_creation_order(p)) GTEST_SKIP() << "no tmpfs for the tree (/dev/shm)";
  plain_tree(p, 100, 30);
  auto o = with_signal(p);
  o.count_period = milliseconds(120'000);
  ClientTracker tr(o);
  std::int64_t now = 0;
  tr.sample(now);
  EXPECT_EQ(tr.namespace_watches(), 0u);
  // A container starts: its first process opens its own node straight away. Its pid is above
  // every pid seen: the tail of the listing has it at the next sample, scanned at first sight.
  p.mount_namespace(kNsB);
  contained(p, 500, kNsB);
  p.opens_gpu_in(kNsB, 500, 4, 3);
  const Found f = sample_until(tr, now, 500, 12);
  EXPECT_EQ(f.at, 1);
  EXPECT_EQ(f.events, 0u);  // nothing watched B yet
  EXPECT_EQ(tr.namespace_watches(), 1u);
  // Its next process is found within freshness: the namespace is watched now, and the open
  // starts a pass at freshness speed that lists the new pid.
  contained(p, 501, kNsB);
  p.opens_gpu_in(kNsB, 501, 4, 4);
  const Found g = sample_until(tr, now, 501, 8);
  ASSERT_GT(g.at, 0);
  EXPECT_LE(g.at, 5);
  EXPECT_GE(g.events, 1u);
}

TEST(DrmClientTrackerNamespaces, NewProcessThatInheritedAGpuFdIsFoundAtTheNextSample) {
  InMemoryTmpdir in_memory;  // a tmpfs lists newest first, as procfs lists new pids last
  Proc p;
  if (!lists_in_creation_order(p)) GTEST_SKIP() << "no tmpfs for the tree (/dev/shm)";
  plain_tree(p, 100, 30);
  auto o = with_signal(p);
  o.count_period = milliseconds(120'000);
  ClientTracker tr(o);
  std::int64_t now = 0;
  tr.sample(now);
  tr.sample(now += kSecond);
  p.client(700, 8);  // a child of a GPU client, its fds inherited across fork: no open anywhere
  const Found f = sample_until(tr, now, 700, 5);
  EXPECT_EQ(f.at, 1);
  EXPECT_EQ(f.events, 0u);
}

TEST(DrmClientTrackerNamespaces, NewPidsOutsideTheNewEndOfTheListingAreFoundByThePass) {
  // On procfs after the pid counter wrapped (a new pid lower than the highest seen), or on a
  // tree whose listing order says nothing (ext4: hash order), a new pid is not where the tracker
  // looks for new pids each sample; the fd-count pass lists it (a new pid: fully scanned) within
  // its period. (On a tmpfs tree it is found at once: a tmpfs lists newest first.)
  Proc p;
  plain_tree(p, 100, 30);
  p.process(900, "high");
  auto o = with_signal(p);
  o.count_period = milliseconds(10'000);
  ClientTracker tr(o);
  std::int64_t now = 0;
  tr.sample(now);
  p.client(50, 8);
  const Found f = sample_until(tr, now, 50, 12);
  EXPECT_GT(f.at, 0);
  EXPECT_LE(f.at, 10);
}

TEST(DrmClientTrackerNamespaces, InheritedFdIsFoundWithinTheCountPassPeriod) {
  Proc p;
  plain_tree(p, 100, 50);
  auto o = with_signal(p);
  o.count_period = milliseconds(10'000);  // sweep: 600 s
  ClientTracker tr(o);
  std::int64_t now = 0;
  tr.sample(now);
  tr.sample(now += kSecond);
  // A GPU fd inherited across fork/exec (or received over a socket): one more fd, no open.
  p.fd(149, 7, "/dev/dri/renderD128", amdgpu_fdinfo(11, 1));
  const Found f = sample_until(tr, now, 149, 12);
  ASSERT_GT(f.at, 0);
  EXPECT_LE(f.at, 10);
  EXPECT_EQ(f.events, 0u);
  EXPECT_EQ(f.changes, 1u);
}

TEST(DrmClientTrackerNamespaces, WithoutTheCountPassAnInheritedFdWaitsForTheSweep) {
  Proc p;
  plain_tree(p, 100, 50);
  auto o = with_signal(p);
  o.count_period = milliseconds(0);  // only after an open
  ClientTracker tr(o);
  std::int64_t now = 0;
  tr.sample(now);
  p.fd(149, 7, "/dev/dri/renderD128", amdgpu_fdinfo(11, 1));
  WalkStats st;
  std::size_t checks = 0;
  for (int i = 0; i < 30; ++i) {
    EXPECT_FALSE(has_pid(tr.sample(now += kSecond, &st), 149));
    checks += st.count_checks;
  }
  EXPECT_EQ(checks, 0u);
}

TEST(DrmClientTrackerNamespaces, PassedFdKeepingTheCountIsFoundByTheSweep) {
  Proc p;
  plain_tree(p, 100, 20);
  auto o = with_signal(p);
  o.count_period = milliseconds(2'000);
  o.sweep_period = milliseconds(20'000);
  ClientTracker tr(o);
  std::int64_t now = 0;
  tr.sample(now);
  // Closed /dev/null, received a GPU fd in the same slot: same count, no open.
  p.fd(110, 0, "/dev/dri/renderD128", amdgpu_fdinfo(6, 1));
  const Found f = sample_until(tr, now, 110, 25);
  ASSERT_GT(f.at, 0);
  EXPECT_LE(f.at, 20);
  EXPECT_EQ(f.changes, 0u);  // ten passes over it saw nothing: the sweep found it
}

TEST(DrmClientTrackerNamespaces, WatchIsDroppedWhenItsNamespacesPidsHaveExited) {
  Proc p;
  plain_tree(p, 100, 10);
  p.mount_namespace(kNsA);
  p.mount_namespace(kNsB);
  contained(p, 200, kNsA);
  contained(p, 201, kNsA);
  contained(p, 300, kNsB);
  auto o = with_signal(p);
  o.count_period = milliseconds(5'000);
  ClientTracker tr(o);
  std::int64_t now = 0;
  tr.sample(now);
  ASSERT_EQ(tr.namespace_watches(), 2u);
  p.exits(200);
  for (int i = 0; i < 7; ++i) tr.sample(now += kSecond);
  EXPECT_EQ(tr.namespace_watches(), 2u);  // 201 is still there
  p.exits(201);
  std::size_t exited = 0;
  for (int i = 0; i < 7; ++i) {
    WalkStats st;
    tr.sample(now += kSecond, &st);
    exited += st.exited;
  }
  EXPECT_EQ(exited, 1u);
  EXPECT_EQ(tr.namespace_watches(), 1u);  // A's watch is gone, B's stays
  EXPECT_EQ(tr.processes(), 11u);
  // The watch really is removed: an open in A's folder is no event any more.
  p.open_node_in(kNsA);
  WalkStats st;
  tr.sample(now += kSecond, &st);
  EXPECT_EQ(st.open_events, 0u);
}

TEST(DrmClientTrackerNamespaces, WatchesAreBoundedAndTheRestLeftToTheCountPass) {
  Proc p;
  plain_tree(p, 100, 10);
  for (std::uint64_t ns : {kNsA, kNsB, kNsC}) p.mount_namespace(ns);
  contained(p, 200, kNsA);
  contained(p, 300, kNsB);
  contained(p, 400, kNsC);
  contained(p, 401, kNsC);
  auto o = with_signal(p);
  o.max_namespace_watches = 2;
  o.count_period = milliseconds(10'000);
  ClientTracker tr(o);
  std::int64_t now = 0;
  WalkStats st;
  tr.sample(now, &st);
  EXPECT_EQ(tr.namespace_watches(), 2u);
  EXPECT_EQ(st.namespaces_unwatched, 2u);  // C's two pids (one warning, logged once)
  EXPECT_EQ(st.watch_adds, 2u);
  p.opens_gpu_in(kNsC, 401, 4, 2);
  const Found f = sample_until(tr, now, 401, 12);
  ASSERT_GT(f.at, 0);
  EXPECT_LE(f.at, 10);
  EXPECT_EQ(f.events, 0u);
  // Once A's only pid exits, its slot frees up for a namespace seen later.
  p.exits(200);
  for (int i = 0; i < 11; ++i) tr.sample(now += kSecond);
  EXPECT_EQ(tr.namespace_watches(), 1u);
  contained(p, 402, kNsC);
  for (int i = 0; i < 11; ++i) tr.sample(now += kSecond);
  EXPECT_EQ(tr.namespace_watches(), 2u);
}

// The real thing, where it may be done (root: CAP_SYS_ADMIN): a child process in its own mount
// namespace, with its own /dev (a tmpfs) holding dri/renderD128, on the real /proc. The watch
// on /proc/<child>/root/dev/dri and the open seen through it are the kernel's, nothing emulated.
// The child is driven through pipes (blocking reads, no sleeps). Assumes no other process opens
// a GPU node in a watched namespace meanwhile (CI machines have no GPU).
TEST(DrmClientTrackerNamespaces, RealMountNamespaceOpenIsSeenThroughItsOwnWatch) {
  Proc p;
  p.devices();  // our device folder: T/dev/dri (the real /dev/dri may not exist)
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe2(to_child, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(from_child, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c = 'n';
    if (::unshare(CLONE_NEWNS) == 0 &&
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
        ::mount("gs-test-dev", "/dev", "tmpfs", 0, "size=64k") == 0 &&
        ::mkdir("/dev/dri", 0755) == 0) {
      const int f = ::open("/dev/dri/renderD128", O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
      if (f >= 0) {
        ::close(f);
        c = 'y';
      }
    }
    (void)!::write(from_child[1], &c, 1);
    if (c != 'y') ::_exit(1);
    (void)!::read(to_child[0], &c, 1);  // go
    const int f = ::open("/dev/dri/renderD128", O_RDONLY | O_CLOEXEC);
    (void)!::write(from_child[1], &c, 1);
    (void)!::read(to_child[0], &c, 1);  // exit
    ::_exit(f >= 0 ? 0 : 1);
  }
  char c = 0;
  ASSERT_EQ(::read(from_child[0], &c, 1), 1);
  if (c != 'y') {
    ::waitpid(child, nullptr, 0);
    GTEST_SKIP() << "no mount namespace of our own here (needs CAP_SYS_ADMIN)";
  }
  ClientTracker tr({.procfs_root = "/proc", .devfs_root = p.dev()});
  ASSERT_TRUE(tr.uses_open_signal());
  std::int64_t now = kSecond;
  WalkStats st;
  tr.sample(now, &st);
  EXPECT_GE(tr.namespace_watches(), 1u);  // the child's (and any container's with a /dev/dri)
  tr.sample(now += kSecond, &st);
  EXPECT_EQ(st.open_events, 0u);
  (void)!::write(to_child[1], "g", 1);
  ASSERT_EQ(::read(from_child[0], &c, 1), 1);  // it has opened its node
  tr.sample(now += kSecond, &st);
  EXPECT_EQ(st.open_events, 1u);
  (void)!::write(to_child[1], "x", 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
}

}  // namespace
}  // namespace gpustream::drm
