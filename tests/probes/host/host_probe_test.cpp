#include "gpustream/probes/host_probe.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "gpustream/errors.hpp"
#include "probe_harness.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

using test::ProbeHarness;
using test::TempTree;

constexpr std::uint64_t kKiB = 1024;

const char* const kMeminfo =
    "MemTotal:       16000000 kB\n"
    "MemFree:         2000000 kB\n"
    "MemAvailable:   12000000 kB\n"
    "Buffers:          100000 kB\n"
    "SwapCached:            0 kB\n"
    "SwapTotal:       4000000 kB\n"
    "SwapFree:        3000000 kB\n"
    "HugePages_Total:       0\n";

std::string status(const std::string& name, const std::string& rss_line) {
  return "Name:\t" + name + "\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t  9000 kB\n" +
         rss_line + "RssAnon:\t  100 kB\nThreads:\t1\n";
}

class HostProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_.file("proc/meminfo", kMeminfo);
    tree_.file("proc/4242/status", status("gpustream_test", "VmRSS:\t    5120 kB\n"));
    tree_.symlink("proc/self", "4242");
    tree_.file("proc/777/status", status("worker", "VmRSS:\t    2048 kB\n"));
    paths_.procfs_root = tree_.path("proc");
  }

  std::shared_ptr<HostProbe> probe(std::vector<std::int64_t> watch = {}) {
    return make_host_probe(harness_.executors(), {paths_, std::move(watch)});
  }

  static bool has_error(const GpuSnapshot& s, const std::string& code, const std::string& msg) {
    return std::any_of(s.errors.begin(), s.errors.end(),
                       [&](const SampleError& e) { return e.code == code && e.message == msg; });
  }

  TempTree tree_;
  SystemPaths paths_;
  ProbeHarness harness_;
};

TEST(ParseMeminfo, ConvertsKilobytesToBytes) {
  const auto m = parse_meminfo(kMeminfo);
  EXPECT_EQ(m.total_bytes, 16000000 * kKiB);
  EXPECT_EQ(m.available_bytes, 12000000 * kKiB);
  EXPECT_EQ(m.swap_total_bytes, 4000000 * kKiB);
  EXPECT_EQ(m.swap_free_bytes, 3000000 * kKiB);
  EXPECT_TRUE(m.garbled.empty());
}

TEST(ParseProcessStatus, NameAndRss) {
  const auto s = parse_process_status(status("python3", "VmRSS:\t  3 kB\n"));
  EXPECT_EQ(s.name, "python3");
  EXPECT_EQ(s.rss_bytes, 3 * kKiB);
  EXPECT_FALSE(s.rss_garbled);
  const auto kthread = parse_process_status("Name:\tkworker/0:1\nState:\tI (idle)\n");
  EXPECT_EQ(kthread.name, "kworker/0:1");
  EXPECT_FALSE(kthread.rss_bytes);
  EXPECT_FALSE(kthread.rss_garbled);
}

TEST_F(HostProbeTest, ReportsRamSwapAndSelf) {
  auto p = probe();
  EXPECT_EQ(p->name(), "host");
  EXPECT_GE(p->min_interval(), std::chrono::milliseconds(50));
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec) << r.ec.message();
  const auto& s = r.snapshot;
  EXPECT_EQ(s.probe, "host");
  EXPECT_TRUE(s.devices.empty());
  EXPECT_TRUE(s.errors.empty());
  EXPECT_GT(s.monotonic_ns, 0);
  ASSERT_TRUE(s.host);
  EXPECT_EQ(s.host->memory_total_bytes, 16000000 * kKiB);
  EXPECT_EQ(s.host->memory_available_bytes, 12000000 * kKiB);
  EXPECT_EQ(s.host->memory_used_bytes, 4000000 * kKiB);
  EXPECT_EQ(s.host->swap_total_bytes, 4000000 * kKiB);
  EXPECT_EQ(s.host->swap_used_bytes, 1000000 * kKiB);
  ASSERT_EQ(s.host->processes.size(), 1u);
  EXPECT_EQ(s.host->processes[0].pid, 4242);
  EXPECT_EQ(s.host->processes[0].name, "gpustream_test");
  EXPECT_EQ(s.host->processes[0].rss_bytes, 5120 * kKiB);
}

TEST_F(HostProbeTest, MissingLinesLeaveFiguresAbsentNotZero) {
  tree_.file("proc/meminfo", "MemTotal:  1000 kB\nMemFree:  10 kB\nSwapTotal:  0 kB\n");
  auto p = probe();
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  const auto& h = *r.snapshot.host;
  EXPECT_EQ(h.memory_total_bytes, 1000 * kKiB);
  EXPECT_FALSE(h.memory_available_bytes);
  EXPECT_FALSE(h.memory_used_bytes);
  EXPECT_EQ(h.swap_total_bytes, 0u);  // a real zero: no swap configured
  EXPECT_FALSE(h.swap_used_bytes);
  EXPECT_TRUE(r.snapshot.errors.empty());
}

TEST_F(HostProbeTest, GarbageNumbersAreAbsentAndReported) {
  tree_.file("proc/meminfo",
             "MemTotal:  lots kB\nMemAvailable:  500 kB\nSwapTotal: 12 furlongs\nSwapFree: 1 kB\n");
  auto p = probe();
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  const auto& h = *r.snapshot.host;
  EXPECT_FALSE(h.memory_total_bytes);
  EXPECT_EQ(h.memory_available_bytes, 500 * kKiB);
  EXPECT_FALSE(h.memory_used_bytes);
  EXPECT_FALSE(h.swap_total_bytes);
  EXPECT_FALSE(h.swap_used_bytes);
  const auto path = tree_.path("proc/meminfo");
  EXPECT_TRUE(has_error(r.snapshot, "parse_error", "cannot parse MemTotal in " + path));
  EXPECT_TRUE(has_error(r.snapshot, "parse_error", "cannot parse SwapTotal in " + path));
  EXPECT_EQ(r.snapshot.errors.size(), 2u);
}

TEST_F(HostProbeTest, DetectIsAvailableWhenMeminfoIsReadable) {
  auto p = probe();
  auto d = harness_.detect(*p);
  EXPECT_TRUE(d.available);
  EXPECT_TRUE(d.reason.empty());
  EXPECT_TRUE(d.devices.empty());
}

TEST_F(HostProbeTest, DetectSaysWhyWhenMeminfoIsMissing) {
  tree_.remove("proc/meminfo");
  auto p = probe();
  auto d = harness_.detect(*p);
  EXPECT_FALSE(d.available);
  EXPECT_EQ(d.reason, "cannot read " + tree_.path("proc/meminfo") + ": No such file or directory");

  // Sampling fails too, with the same words.
  auto r = harness_.sample(*p);
  EXPECT_EQ(r.ec, errc::sample_failed);
  ASSERT_EQ(r.snapshot.errors.size(), 1u);
  EXPECT_EQ(r.snapshot.errors[0].message, d.reason);
  EXPECT_EQ(r.snapshot.probe, "host");
}

TEST_F(HostProbeTest, DetectSaysWhyWhenMeminfoCannotBeRead) {
  tree_.remove("proc/meminfo");
  tree_.dir("proc/meminfo");  // unreadable for everyone, root included
  auto p = probe();
  auto d = harness_.detect(*p);
  EXPECT_FALSE(d.available);
  EXPECT_EQ(d.reason, "cannot read " + tree_.path("proc/meminfo") + ": Is a directory");
}

TEST_F(HostProbeTest, DetectSaysPermissionDenied) {
  if (!tree_.unreadable_file("proc/meminfo", kMeminfo))
    GTEST_SKIP() << gpustream::test::kRunsUnprivileged;
  auto p = probe();
  auto d = harness_.detect(*p);
  EXPECT_FALSE(d.available);
  EXPECT_EQ(d.reason, "cannot read " + tree_.path("proc/meminfo") + ": Permission denied");
}

TEST_F(HostProbeTest, ReportsWatchedPidsOnceEach) {
  auto p = probe({777, 4242, 777});
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  const auto& procs = r.snapshot.host->processes;
  ASSERT_EQ(procs.size(), 2u);  // self, then 777; duplicates and self dropped
  EXPECT_EQ(procs[0].pid, 4242);
  EXPECT_EQ(procs[1].pid, 777);
  EXPECT_EQ(procs[1].name, "worker");
  EXPECT_EQ(procs[1].rss_bytes, 2048 * kKiB);
}

TEST_F(HostProbeTest, VanishedPidIsReportedOnceThenDropped) {
  auto p = probe({777});
  ASSERT_EQ(harness_.sample(*p).snapshot.host->processes.size(), 2u);

  tree_.remove("proc/777");
  auto second = harness_.sample(*p);
  EXPECT_FALSE(second.ec) << "an exited watched pid must not fail the sample";
  EXPECT_TRUE(has_error(second.snapshot, "process_exited", "pid 777 exited"));
  ASSERT_EQ(second.snapshot.host->processes.size(), 1u);
  EXPECT_EQ(second.snapshot.host->processes[0].pid, 4242);

  // The pid number comes back (reused): it is not the process that was asked for.
  tree_.file("proc/777/status", status("someone_else", "VmRSS:\t 1 kB\n"));
  auto third = harness_.sample(*p);
  EXPECT_FALSE(third.ec);
  EXPECT_TRUE(third.snapshot.errors.empty());
  EXPECT_EQ(third.snapshot.host->processes.size(), 1u);

  // Asking again starts afresh.
  p->set_watch_pids({777});
  auto fourth = harness_.sample(*p);
  ASSERT_EQ(fourth.snapshot.host->processes.size(), 2u);
  EXPECT_EQ(fourth.snapshot.host->processes[1].name, "someone_else");
}

TEST_F(HostProbeTest, UnreadableStatusKeepsThePidWithRssAbsent) {
  tree_.remove("proc/777/status");
  tree_.dir("proc/777/status");
  auto p = probe({777});
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  ASSERT_EQ(r.snapshot.host->processes.size(), 2u);
  EXPECT_EQ(r.snapshot.host->processes[1].pid, 777);
  EXPECT_FALSE(r.snapshot.host->processes[1].rss_bytes);
  EXPECT_TRUE(has_error(r.snapshot, "read_failed",
                        "cannot read " + tree_.path("proc/777/status") + ": Is a directory"));
}

TEST_F(HostProbeTest, ProcessWithoutOrWithGarbledRss) {
  tree_.file("proc/777/status", "Name:\tzombie\nState:\tZ (zombie)\n");
  tree_.file("proc/778/status", status("odd", "VmRSS:\t many kB\n"));
  auto p = probe({777, 778});
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  ASSERT_EQ(r.snapshot.host->processes.size(), 3u);
  EXPECT_EQ(r.snapshot.host->processes[1].name, "zombie");
  EXPECT_FALSE(r.snapshot.host->processes[1].rss_bytes);
  EXPECT_FALSE(r.snapshot.host->processes[2].rss_bytes);
  ASSERT_EQ(r.snapshot.errors.size(), 1u);
  EXPECT_EQ(r.snapshot.errors[0].message, "cannot parse VmRSS in " + tree_.path("proc/778/status"));
}

TEST_F(HostProbeTest, SelfWithoutLinkFallsBackToGetpid) {
  tree_.remove("proc/self");
  const auto me = static_cast<std::int64_t>(::getpid());
  tree_.file("proc/" + std::to_string(me) + "/status", status("me", "VmRSS:\t 64 kB\n"));
  auto p = probe();
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  ASSERT_EQ(r.snapshot.host->processes.size(), 1u);
  EXPECT_EQ(r.snapshot.host->processes[0].pid, me);
  EXPECT_EQ(r.snapshot.host->processes[0].rss_bytes, 64 * kKiB);
  EXPECT_EQ(current_process_rss_bytes(paths_), 64 * kKiB);
}

TEST_F(HostProbeTest, CurrentProcessRssFromTree) {
  EXPECT_EQ(current_process_rss_bytes(paths_), 5120 * kKiB);
  tree_.file("proc/4242/status", status("gpustream_test", ""));
  EXPECT_FALSE(current_process_rss_bytes(paths_));
  SystemPaths nowhere;
  nowhere.procfs_root = tree_.path("missing");
  EXPECT_FALSE(current_process_rss_bytes(nowhere));
}

TEST(HostProbeReal, ReadsThisMachine) {
  const auto rss = current_process_rss_bytes();
  ASSERT_TRUE(rss);
  EXPECT_GT(*rss, 1024u * 1024u);  // a running gtest binary holds more than 1 MiB

  ProbeHarness harness;
  auto p = make_host_probe(harness.executors(), {});
  EXPECT_TRUE(harness.detect(*p).available);
  auto r = harness.sample(*p);
  ASSERT_FALSE(r.ec);
  ASSERT_TRUE(r.snapshot.host);
  ASSERT_TRUE(r.snapshot.host->memory_total_bytes);
  EXPECT_GT(*r.snapshot.host->memory_total_bytes, 0u);
  ASSERT_FALSE(r.snapshot.host->processes.empty());
  EXPECT_EQ(r.snapshot.host->processes[0].pid, static_cast<std::int64_t>(::getpid()));
  EXPECT_FALSE(r.snapshot.host->processes[0].name.empty());
  EXPECT_TRUE(r.snapshot.host->processes[0].rss_bytes);
}

}  // namespace
}  // namespace gpustream
