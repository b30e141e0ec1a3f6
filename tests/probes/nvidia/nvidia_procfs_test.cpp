// NvidiaProbe's per-process names and RSS from procfs, kept between samples: statm re-read
// through one kept descriptor per process (fresh values at every sample, on the real /proc too),
// descriptors dropped when the process is gone or no longer listed, at most 256 of them, and
// names cached and refreshed.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <boost/asio/post.hpp>

#include "gpustream/probes/nvidia_probe.hpp"
#include "nvidia_fakes.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using namespace std::chrono_literals;
using test::DrivenClock;
using test::FakeNvml;
using test::ProbeHarness;
using test::TempTree;

/// This process's descriptors on a statm file under `path` (or on `path` itself, a statm file):
/// fd number -> target.
std::vector<std::pair<int, std::string>> open_descriptors(const std::string& path) {
  const auto prefix = std::filesystem::weakly_canonical(path).string();
  std::vector<std::pair<int, std::string>> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind(prefix, 0) == 0 && target.ends_with("/statm"))
      out.emplace_back(std::stoi(e.path().filename().string()), target);
  }
  return out;
}

/// A child that waits for a signal; killed and reaped when the test ends, whatever happens.
struct PausedChild {
  PausedChild() : pid(::fork()) {
    if (pid == 0) {
      for (;;) ::pause();
    }
  }
  ~PausedChild() {
    if (pid > 0 && !reaped) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  pid_t pid;
  bool reaped = false;
};

std::string own_comm() {
  std::ifstream in("/proc/self/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

class NvidiaProcfsTest : public ::testing::Test {
 protected:
  std::shared_ptr<NvidiaProbe> probe(const std::string& procfs_root) {
    NvidiaProbeOptions o;
    o.nvml_library = nvml_.path();
    o.use = NvidiaProbeOptions::Use::nvml_only;
    o.library_session = LibrarySessionMode::persistent;
    o.paths.procfs_root = procfs_root;
    o.clock = clock_.function();
    return make_nvidia_probe(harness_.executors(), o);
  }
  /// The processes of the first device of a successful sample.
  std::vector<ProcessSample> processes(NvidiaProbe& p) {
    auto r = harness_.sample(p);
    EXPECT_FALSE(r.ec) << r.ec.message();
    if (r.snapshot.devices.empty()) return {};
    return r.snapshot.devices[0].processes;
  }

  /// Returns once every task posted to the (one-thread) work pool so far has finished and been
  /// destroyed, with whatever it held.
  void pool_barrier() {
    std::promise<void> done;
    boost::asio::post(harness_.executors().work, [&done] { done.set_value(); });
    ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  }

  FakeNvml nvml_;
  TempTree proc_;
  DrivenClock clock_;
  ProbeHarness harness_;
};

TEST_F(NvidiaProcfsTest, OwnStatmIsReadAgainThroughTheSameDescriptorWithFreshValues) {
  const auto pid = static_cast<long>(::getpid());
  nvml_.scenario("devices=1\ndevice.0.compute=" + std::to_string(pid) + ":1048576\n");
  auto p = probe("/proc");
  const std::string statm = "/proc/" + std::to_string(pid) + "/statm";

  auto before = processes(*p);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].name, own_comm());
  ASSERT_TRUE(before[0].host_rss_bytes);
  const auto fds = open_descriptors(statm);
  ASSERT_EQ(fds.size(), 1u);  // one descriptor, kept

  constexpr std::size_t kBig = 64u << 20;
  void* block = ::mmap(nullptr, kBig, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(block, MAP_FAILED);
  std::memset(block, 0x5a, kBig);  // every page resident
  const auto grown = processes(*p);
  ::munmap(block, kBig);
  const auto shrunk = processes(*p);

  EXPECT_EQ(open_descriptors(statm), fds);  // the same descriptor, not reopened
  ASSERT_EQ(grown.size(), 1u);
  ASSERT_TRUE(grown[0].host_rss_bytes);
  EXPECT_GE(*grown[0].host_rss_bytes, *before[0].host_rss_bytes + (48u << 20));
  ASSERT_EQ(shrunk.size(), 1u);
  ASSERT_TRUE(shrunk[0].host_rss_bytes);
  EXPECT_LE(*shrunk[0].host_rss_bytes + (48u << 20), *grown[0].host_rss_bytes);
}

TEST_F(NvidiaProcfsTest, AProcessThatIsGoneLosesItsDescriptorNameAndRss) {
  PausedChild paused;
  const pid_t child = paused.pid;
  ASSERT_GT(child, 0);
  nvml_.scenario("devices=1\ndevice.0.compute=" + std::to_string(child) + ":4096\n");
  auto p = probe("/proc");
  const std::string statm = "/proc/" + std::to_string(child) + "/statm";

  auto alive = processes(*p);
  ASSERT_EQ(alive.size(), 1u);
  EXPECT_EQ(alive[0].name, own_comm());  // a forked child keeps the name
  EXPECT_TRUE(alive[0].host_rss_bytes);
  EXPECT_EQ(open_descriptors(statm).size(), 1u);

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  const auto zombie = processes(*p);  // exited, not reaped: no address space any more
  ASSERT_EQ(zombie.size(), 1u);
  EXPECT_FALSE(zombie[0].host_rss_bytes);

  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  paused.reaped = true;
  const auto gone = processes(*p);  // the kept descriptor now fails (ESRCH)
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].gpu_memory_bytes, 4096u);  // NVML still lists it
  EXPECT_EQ(gone[0].name, "");
  EXPECT_FALSE(gone[0].host_rss_bytes);
  EXPECT_TRUE(open_descriptors(statm).empty());
}

TEST_F(NvidiaProcfsTest, ProcessesNoLongerListedAreForgotten) {
  test::proc_entry(proc_, 11, "eleven", 100);
  test::proc_entry(proc_, 12, "twelve", 200);
  nvml_.scenario("devices=1\ndevice.0.compute=11:1,12:2\n");
  auto p = probe(proc_.path());
  const auto both = processes(*p);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(open_descriptors(proc_.path()).size(), 2u);

  nvml_.reload("devices=1\ndevice.0.compute=11:1\n");
  const auto one = processes(*p);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].name, "eleven");
  EXPECT_EQ(one[0].host_rss_bytes, 100u * 1024);
  const auto left = open_descriptors(proc_.path());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].second, std::filesystem::weakly_canonical(proc_.path("11/statm")).string());

  p.reset();       // the probe's descriptors close with it, once its last work item has let go:
  pool_barrier();  // the pool's task for the last sample may still be finishing
  EXPECT_TRUE(open_descriptors(proc_.path()).empty());
}

TEST_F(NvidiaProcfsTest, AtMost256DescriptorsAndEveryProcessStillRead) {
  constexpr int kCount = 260;  // processes_per_device: pids 100000 + k
  for (int k = 0; k < kCount; ++k)
    test::proc_entry(proc_, 100000 + k, "p" + std::to_string(k), 8 * (k + 1));
  nvml_.scenario("devices=1\nprocesses_per_device=" + std::to_string(kCount) + "\n");
  auto p = probe(proc_.path());
  for (int round = 0; round < 2; ++round) {
    const auto ps = processes(*p);
    ASSERT_EQ(ps.size(), static_cast<std::size_t>(kCount));
    for (const auto& q : ps) {
      const auto k = q.pid - 100000;
      EXPECT_EQ(q.name, "p" + std::to_string(k));
      EXPECT_EQ(q.host_rss_bytes, 8u * 1024 * static_cast<std::uint64_t>(k + 1));
    }
    EXPECT_EQ(open_descriptors(proc_.path()).size(), 256u);
  }
}

TEST_F(NvidiaProcfsTest, RssIsCurrentAtEverySampleAndNamesAreRefreshedAfterTenSeconds) {
  test::proc_entry(proc_, 4242, "before", 1000);
  nvml_.scenario("devices=1\ndevice.0.compute=4242:1\n");
  auto p = probe(proc_.path());
  auto ps = processes(*p);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].name, "before");

  test::proc_entry(proc_, 4242, "after", 3000);  // rewritten in place
  clock_.advance(1s);
  ps = processes(*p);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].host_rss_bytes, 3000u * 1024);  // RSS: read at every sample
  EXPECT_EQ(ps[0].name, "before");                // the name: cached

  clock_.advance(9s);
  ps = processes(*p);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].name, "after");  // 10 s after it was read
}

}  // namespace
}  // namespace gpustream
