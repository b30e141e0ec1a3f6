// proc::ProcessTable (probes/common/process_table.cpp) on generated procfs trees: the names and
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
