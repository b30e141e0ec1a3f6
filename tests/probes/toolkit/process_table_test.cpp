// proc::ProcessTable (probes/toolkit/process_table.cpp) on generated procfs trees: the names and
// host RSS every vendor's processes carry. The NVIDIA probe's tests cover it through NVML too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "gpustream/model.hpp"
#include "gpustream/probes/process_table.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

using proc::parse_statm_rss;
using proc::ProcessTable;

std::size_t open_fds() {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

class ProcessTableTest : public ::testing::Test {
 protected:
  void process(int pid, const std::string& comm, const std::string& statm) {
    tree_.file("proc/" + std::to_string(pid) + "/comm", comm + "\n");
    tree_.file("proc/" + std::to_string(pid) + "/statm", statm);
  }
  const std::uint64_t page_ = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  test::TempTree tree_;
};

TEST(ParseStatm, ResidentPagesTimesPageSizeAndNoAddressSpaceIsUnknown) {
  EXPECT_EQ(parse_statm_rss("5000 1234 300 10 0 900 0\n", 4096), 1234u * 4096);
  EXPECT_EQ(parse_statm_rss("  7 3", 100), 300u);
  EXPECT_FALSE(parse_statm_rss("0 0 0 0 0 0 0\n", 4096));  // kernel thread, zombie
  EXPECT_FALSE(parse_statm_rss("", 4096));
  EXPECT_FALSE(parse_statm_rss("12", 4096));
  EXPECT_FALSE(parse_statm_rss("x 1", 4096));
}

TEST_F(ProcessTableTest, FillSetsRssAndMissingNamesKeepsTheSourcesName) {
  process(100, "trainer", "900 250 1 1 0 1 0\n");
  process(200, "python3", "900 10 1 1 0 1 0\n");
  std::vector<DeviceSample> devices(2);
  devices[0].processes.push_back({.pid = 100});
  devices[0].processes.push_back({.pid = 300});  // no such process
  devices[1].processes.push_back({.pid = 200, .name = "python3 train.py"});
  devices[1].processes.push_back({.pid = 100});  // the same process on a second device
  ProcessTable table(tree_.path("proc"));
  table.fill(devices);
  EXPECT_EQ(devices[0].processes[0].name, "trainer");
  EXPECT_EQ(devices[0].processes[0].host_rss_bytes, 250 * page_);
  EXPECT_EQ(devices[0].processes[1].name, "");
  EXPECT_FALSE(devices[0].processes[1].host_rss_bytes);
  EXPECT_EQ(devices[1].processes[0].name, "python3 train.py");  // the source's own name
  EXPECT_EQ(devices[1].processes[0].host_rss_bytes, 10 * page_);
  EXPECT_EQ(devices[1].processes[1].host_rss_bytes, 250 * page_);
}

TEST_F(ProcessTableTest, ReadOneAnswersWithoutForgettingTheBatch) {
  process(100, "trainer", "900 250 1 1 0 1 0\n");
  process(200, "worker", "900 20 1 1 0 1 0\n");
  process(300, "me", "900 30 1 1 0 1 0\n");
  ProcessTable table(tree_.path("proc"));
  const std::vector<std::int64_t> batch{100, 200};
  table.read(batch);
  const auto kept = open_fds();  // the table holds the batch's statm descriptors (and its dir)
  const auto me = table.read_one(300);
  EXPECT_EQ(me.name, "me");
  EXPECT_EQ(me.rss_bytes, 30 * page_);
  EXPECT_EQ(open_fds(), kept);  // 300 was not kept, 100 and 200 were not dropped
  tree_.file("proc/100/statm", "900 260 1 1 0 1 0\n");
  EXPECT_EQ(table.read_one(100).rss_bytes, 260 * page_);  // a batch member, refreshed
  EXPECT_EQ(open_fds(), kept);
  EXPECT_FALSE(table.read_one(999).rss_bytes);
  EXPECT_FALSE(table.read_one(-1).rss_bytes);
}

TEST_F(ProcessTableTest, AnEmptyBatchClosesEveryDescriptor) {
  process(100, "trainer", "900 250 1 1 0 1 0\n");
  ProcessTable table(tree_.path("proc"));
  const auto before = open_fds();
  std::vector<DeviceSample> devices(1);
  devices[0].processes.push_back({.pid = 100});
  table.fill(devices);
  EXPECT_GT(open_fds(), before);
  devices[0].processes.clear();  // the process stopped using the GPU
  table.fill(devices);
  EXPECT_LE(open_fds(), before + 1);  // at most the procfs directory stays open
}

}  // namespace
}  // namespace gpustream

namespace gpustream {
namespace {

class ProcessTableContainerTest : public ::testing::Test {
 protected:
  void process(int pid, const std::string& cgroup) {
    const std::string dir = "proc/" + std::to_string(pid) + "/";
    tree_.file(dir + "comm", "worker\n");
    tree_.file(dir + "statm", "900 25 1 1 0 1 0\n");
    if (!cgroup.empty()) tree_.file(dir + "cgroup", cgroup);
  }
  test::TempTree tree_;
};

const std::string kContainerId = "4f1c2b9d8e7a6f5c4b3a29180716253443526170819a0b1c2d3e4f5a6b7c8d9e";

TEST_F(ProcessTableContainerTest, EachProcessCarriesItsContainerOrWhyItHasNone) {
  process(10,
          "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
          "5b1c2d3e_4f50_6172_8394_a5b6c7d8e9f0.slice/cri-containerd-" +
              kContainerId + ".scope\n");
  process(11, "0::/system.slice/ssh.service\n");
  process(12, "garbage without colons\n");
  process(13, "");  // no cgroup file (the process went away between reads)
  std::vector<DeviceSample> devices(1);
  for (int pid : {10, 11, 12, 13}) devices[0].processes.push_back({.pid = pid});
  proc::ProcessTable table(tree_.path("proc"));
  table.fill(devices);
  const auto& p = devices[0].processes;
  ASSERT_TRUE(p[0].container.has_value());
  EXPECT_EQ(*p[0].container,
            (ProcessContainer{"containerd", kContainerId, "5b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
                              "burstable"}));
  EXPECT_FALSE(p[1].container.has_value());
  EXPECT_EQ(p[1].container_absent, ContainerAbsent::host);
  EXPECT_EQ(p[2].container_absent, ContainerAbsent::malformed);
  EXPECT_FALSE(p[3].container.has_value());
  EXPECT_EQ(p[3].container_absent, ContainerAbsent::not_collected);
}

TEST_F(ProcessTableContainerTest, AReplacedProcessGetsItsOwnContainerNotItsPredecessors) {
  // The same pid, first in a docker container, then (a new process) on the host: its cgroup is
  // read again with its name, so the new process never shows the old container.
  process(20, "0::/system.slice/docker-" + kContainerId + ".scope\n");
  auto now = std::chrono::steady_clock::time_point{};
  proc::ProcessTable table(tree_.path("proc"), [&] { return now; });
  std::vector<DeviceSample> devices(1);
  devices[0].processes.push_back({.pid = 20});
  table.fill(devices);
  ASSERT_TRUE(devices[0].processes[0].container.has_value());
  EXPECT_EQ(devices[0].processes[0].container->runtime, "docker");

  std::filesystem::remove_all(tree_.path("proc/20"));
  process(20, "0::/user.slice/user-1000.slice/session-2.scope\n");
  now += proc::ProcessTable::kDefaultNameRefresh;  // a generated tree has no ESRCH: the refresh
  devices[0].processes[0] = {.pid = 20};
  table.fill(devices);
  EXPECT_FALSE(devices[0].processes[0].container.has_value());
  EXPECT_EQ(devices[0].processes[0].container_absent, ContainerAbsent::host);
}

TEST_F(ProcessTableContainerTest, ConsecutiveSamplesOfAProcessShareItsContainer) {
  // The container is read with the name and kept in the table's entry: each sample's process
  // shares that block (gpustream/shared_optional.hpp) instead of copying its strings, until the
  // cgroup is read again.
  process(30, "0::/system.slice/docker-" + kContainerId + ".scope\n");
  auto now = std::chrono::steady_clock::time_point{};
  proc::ProcessTable table(tree_.path("proc"), [&] { return now; });
  auto sample = [&] {
    std::vector<DeviceSample> devices(1);
    devices[0].processes.push_back({.pid = 30});
    table.fill(devices);
    return devices[0].processes[0];
  };
  const ProcessSample a = sample();
  const ProcessSample b = sample();
  ASSERT_TRUE(a.container.has_value());
  EXPECT_TRUE(b.container.shares_with(a.container));

  now += proc::ProcessTable::kDefaultNameRefresh;  // read again: a block of its own
  const ProcessSample c = sample();
  EXPECT_FALSE(c.container.shares_with(a.container));
  EXPECT_EQ(c.container, a.container) << "equal by value";
}

TEST_F(ProcessTableContainerTest, AHugeCgroupFileIsReadUpToTheBound) {
  // Thousands of v1 hierarchies: only the first 8 KiB are read; a container named there is
  // found, and the memory used does not grow with the file.
  std::string text = "12:memory:/docker/" + kContainerId + "\n";
  while (text.size() < (1u << 20)) text += "99:name=x:/" + std::string(200, 'a') + "\n";
  process(30, text);
  std::vector<DeviceSample> devices(1);
  devices[0].processes.push_back({.pid = 30});
  proc::ProcessTable table(tree_.path("proc"));
  table.fill(devices);
  ASSERT_TRUE(devices[0].processes[0].container.has_value());
  EXPECT_EQ(devices[0].processes[0].container->id, kContainerId);
}

}  // namespace
}  // namespace gpustream

namespace gpustream {
namespace {

// Slurm jobs on generated procfs trees: the cgroup layouts of Slurm's cgroup/v1 and cgroup/v2
// plugins (gpustream/probes/slurm.hpp), environ read once per process lifetime and bounded.
class ProcessTableSlurmTest : public ::testing::Test {
 protected:
  void process(int pid, const std::string& cgroup, std::uint32_t uid = 4000000000u,
               std::uint64_t start_time = 1000) {
    const std::string dir = "proc/" + std::to_string(pid) + "/";
    tree_.file(dir + "comm", "trainer\n");
    tree_.file(dir + "statm", "900 25 1 1 0 1 0\n");
    tree_.file(dir + "cgroup", cgroup);
    tree_.file(dir + "status", "Name:\ttrainer\nUmask:\t0022\nState:\tR (running)\nUid:\t" +
                                   std::to_string(uid) + "\t" + std::to_string(uid) + "\t" +
                                   std::to_string(uid) + "\t" + std::to_string(uid) + "\n");
    stat(pid, start_time);
  }
  void stat(int pid, std::uint64_t start_time) {
    tree_.file("proc/" + std::to_string(pid) + "/stat",
               std::to_string(pid) + " (trainer) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 " +
                   std::to_string(start_time) + " 1000 25 0\n");
  }
  void environ(int pid, const std::string& text) {
    tree_.file("proc/" + std::to_string(pid) + "/environ", text);
  }
  std::vector<ProcessSample> fill(std::initializer_list<int> pids) {
    std::vector<DeviceSample> devices(1);
    for (int pid : pids) devices[0].processes.push_back({.pid = pid});
    table_.fill(devices);
    return devices[0].processes;
  }
  test::TempTree tree_;
  std::chrono::steady_clock::time_point now_{};
  proc::ProcessTable table_{tree_.path("proc"), [this] { return now_; }};
};

using namespace std::string_literals;

TEST_F(ProcessTableSlurmTest, BothLayoutsGiveTheJobAndTheEnvironExtendsIt) {
  process(10,
          "11:memory:/slurm/uid_0/job_4242/step_0/task_0\n9:freezer:/slurm/uid_0/job_4242/"
          "step_0\n");  // v1; no environ: the user is uid 0's name
  process(11, "0::/system.slice/slurmstepd.scope/job_1235/step_batch/user/task_0\n", 1000);
  environ(11,
          "HOME=/home/alice\0SLURM_JOB_ID=1235\0SLURM_ARRAY_JOB_ID=1230\0"
          "SLURM_ARRAY_TASK_ID=5\0SLURM_JOB_USER=alice\0"s);
  process(12, "0::/system.slice/node3_slurmstepd.scope/job_77/step_extern/user/task_special\n");
  process(13, "0::/user.slice/user-1000.slice/session-4.scope\n");
  const auto p = fill({10, 11, 12, 13});
  ASSERT_TRUE(p[0].slurm.has_value());
  EXPECT_EQ(*p[0].slurm, (SlurmJob{.job_id = "4242", .step = "0", .uid = 0u, .user = "root"}));
  ASSERT_TRUE(p[1].slurm.has_value());
  EXPECT_EQ(*p[1].slurm, (SlurmJob{.job_id = "1235",
                                   .step = "batch",
                                   .uid = 1000u,  // v2: the process's own, from status
                                   .user = "alice",
                                   .array_job_id = "1230",
                                   .array_task_id = "5"}));
  ASSERT_TRUE(p[2].slurm.has_value());  // a uid without a name: no user, no guess
  EXPECT_EQ(*p[2].slurm, (SlurmJob{.job_id = "77", .step = "extern", .uid = 4000000000u}));
  EXPECT_FALSE(p[3].slurm.has_value());  // not Slurm: unset, no error
  EXPECT_EQ(p[3].slurm_absent, SlurmAbsent::none);
  const auto c = table_.slurm_counters();
  EXPECT_EQ(c.environ_reads, 3u);
  EXPECT_EQ(c.environ_unreadable, 2u);  // 10 and 12 have no environ file
  EXPECT_EQ(c.unrecognized, 0u);
}

TEST_F(ProcessTableSlurmTest, ConsecutiveSamplesOfAProcessShareItsJob) {
  process(70, "0::/system.slice/slurmstepd.scope/job_1235/step_batch/user/task_0\n", 1000);
  const auto a = fill({70});
  const auto b = fill({70});
  ASSERT_TRUE(a[0].slurm.has_value());
  EXPECT_EQ(a[0].slurm->job_id, "1235");
  EXPECT_TRUE(b[0].slurm.shares_with(a[0].slurm)) << "the table's entry holds the one block";
}

TEST_F(ProcessTableSlurmTest, AnUnknownShapeIsUnrecognizedAndCountedOncePerProcess) {
  process(20, "0::/system.slice/slurmstepd.scope/job_12/step_0+1/user/task_0\n");
  auto p = fill({20});
  EXPECT_FALSE(p[0].slurm.has_value());
  EXPECT_EQ(p[0].slurm_absent, SlurmAbsent::unrecognized);
  now_ += proc::ProcessTable::kDefaultNameRefresh;  // the cgroup is read again: not a new one
  p = fill({20});
  EXPECT_EQ(p[0].slurm_absent, SlurmAbsent::unrecognized);
  EXPECT_EQ(table_.slurm_counters().unrecognized, 1u);
  EXPECT_EQ(table_.slurm_counters().environ_reads, 0u);  // no job: the environ is not read
}

TEST_F(ProcessTableSlurmTest, EnvironIsReadOncePerProcessLifetime) {
  process(30, "0::/system.slice/slurmstepd.scope/job_50/step_0/user/task_0\n", 0, 1000);
  environ(30, "SLURM_JOB_ID=50\0SLURM_ARRAY_JOB_ID=49\0SLURM_ARRAY_TASK_ID=1\0"s);
  EXPECT_EQ(fill({30})[0].slurm->array_task_id, "1");
  // Later ticks, and a name refresh that reads the cgroup again: environ is not read again.
  environ(30, "SLURM_JOB_ID=50\0SLURM_ARRAY_JOB_ID=49\0SLURM_ARRAY_TASK_ID=2\0"s);
  EXPECT_EQ(fill({30})[0].slurm->array_task_id, "1");
  now_ += proc::ProcessTable::kDefaultNameRefresh;
  EXPECT_EQ(fill({30})[0].slurm->array_task_id, "1");
  EXPECT_EQ(table_.slurm_counters().environ_reads, 1u);
  // Another process under the same pid (another start time): its own environ.
  stat(30, 2000);
  now_ += proc::ProcessTable::kDefaultNameRefresh;
  EXPECT_EQ(fill({30})[0].slurm->array_task_id, "2");
  EXPECT_EQ(table_.slurm_counters().environ_reads, 2u);
}

TEST_F(ProcessTableSlurmTest, AnEnvironOfAnotherJobIsIgnored) {
  process(40, "4:memory:/slurm/uid_0/job_60/step_0/task_0\n");
  environ(40, "SLURM_JOB_ID=61\0SLURM_JOB_USER=mallory\0SLURM_ARRAY_JOB_ID=1\0"s);
  const auto p = fill({40});
  ASSERT_TRUE(p[0].slurm.has_value());
  EXPECT_EQ(*p[0].slurm, (SlurmJob{.job_id = "60", .step = "0", .uid = 0u, .user = "root"}));
  EXPECT_EQ(table_.slurm_counters().environ_other_job, 1u);
}

TEST_F(ProcessTableSlurmTest, AHugeEnvironIsReadUpToTheBound) {
  // The worst case: 16 MiB of environment. Keys within the first 1 MiB are found; keys past it
  // are never read, and the read stops at the bound.
  const std::string filler = "FILLER=" + std::string(16u << 20, 'x') + '\0';
  process(50, "0::/system.slice/slurmstepd.scope/job_70/step_0/user/task_0\n");
  environ(50, "SLURM_JOB_ID=70\0SLURM_JOB_USER=carol\0"s + filler);
  process(51, "0::/system.slice/slurmstepd.scope/job_71/step_0/user/task_0\n");
  environ(51, filler + "SLURM_JOB_ID=71\0SLURM_JOB_USER=dave\0"s);
  process(52, "0::/system.slice/slurmstepd.scope/job_72/step_0/user/task_0\n");
  environ(52, std::string(16u << 20, 'y'));  // one entry, no NUL at all
  const auto p = fill({50, 51, 52});
  EXPECT_EQ(p[0].slurm->user, "carol");
  EXPECT_EQ(p[1].slurm->user, "");  // past the bound: the cgroup's job alone
  EXPECT_EQ(p[1].slurm->job_id, "71");
  EXPECT_EQ(p[2].slurm->user, "");
  EXPECT_EQ(table_.slurm_counters().environ_bounded, 3u);
}

TEST_F(ProcessTableSlurmTest, AnUnreadableEnvironLeavesTheCgroupsJob) {
  process(60, "0::/system.slice/slurmstepd.scope/job_80/step_1/user/task_0\n", 0);
  if (!tree_.unreadable_file("proc/60/environ", "SLURM_JOB_ID=80\0SLURM_JOB_USER=eve\0"s))
    GTEST_SKIP() << test::kRunsUnprivileged;
  const auto p = fill({60});
  ASSERT_TRUE(p[0].slurm.has_value());
  EXPECT_EQ(p[0].slurm->job_id, "80");
  EXPECT_EQ(p[0].slurm->step, "1");
  EXPECT_EQ(p[0].slurm->user, "root");  // uid 0 from status, its name from the password database
  EXPECT_EQ(table_.slurm_counters().environ_unreadable, 1u);
}

}  // namespace
}  // namespace gpustream
