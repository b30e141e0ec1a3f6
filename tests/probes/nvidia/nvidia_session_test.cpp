// NvidiaProbe over the fake NVML: library sessions (lazy releases NVML between samples and
// re-resolves by UUID), lost GPUs, the io thread never blocked, the one-call process usage, and
// the registry row.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/value.hpp>

#include "gpustream/errors.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/probes/registry.hpp"
#include "nvidia_fakes.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using namespace std::chrono_literals;
using test::DrivenClock;
using test::FakeNvml;
using test::find_error;
using test::ProbeHarness;
using test::TempTree;

std::string three_rotating_gpus() {
  std::string s = "devices=3\nrotate_on_init=1\n";
  for (int i = 0; i < 3; ++i) {
    const auto dev = "device." + std::to_string(i) + ".";
    s += dev + "uuid=GPU-lazy-" + std::to_string(i) + "\n" + dev +
         "temperature=" + std::to_string(50 + i) + "\n";
  }
  return s;
}

/// Waits (with a deadline that only matters on failure) until `pred` holds.
template <class Pred>
bool eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

class NvmlSessionTest : public ::testing::Test {
 protected:
  std::shared_ptr<NvidiaProbe> probe(std::optional<LibrarySessionMode> mode) {
    NvidiaProbeOptions o;
    o.nvml_library = nvml_.path();
    o.use = NvidiaProbeOptions::Use::nvml_only;
    o.library_session = mode;
    o.paths.procfs_root = proc_.path();
    o.clock = clock_.function();
    return make_nvidia_probe(harness_.executors(), o);
  }

  FakeNvml nvml_;
  TempTree proc_;
  DrivenClock clock_;
  ProbeHarness harness_;
};

TEST_F(NvmlSessionTest, FakeCatchesHandlesFromAnEarlierSession) {
  // The lazy-mode tests rely on the fake rejecting stale handles; make sure it does.
  auto lib = DynamicLibrary::load(nvml_.path());
  auto* init = lib.required<int()>("nvmlInit_v2");
  auto* shutdown = lib.required<int()>("nvmlShutdown");
  auto* by_index = lib.required<int(unsigned, void**)>("nvmlDeviceGetHandleByIndex_v2");
  auto* fan = lib.required<int(void*, unsigned*)>("nvmlDeviceGetFanSpeed");
  ASSERT_EQ(init(), 0);
  void* handle = nullptr;
  ASSERT_EQ(by_index(0, &handle), 0);
  unsigned speed = 0;
  EXPECT_EQ(fan(handle, &speed), 0);
  ASSERT_EQ(shutdown(), 0);
  EXPECT_EQ(fan(handle, &speed), 1);  // NVML_ERROR_UNINITIALIZED
  ASSERT_EQ(init(), 0);
  EXPECT_EQ(fan(handle, &speed), 2);  // NVML_ERROR_INVALID_ARGUMENT: a handle of the old session
  EXPECT_EQ(nvml_.count("stale_handle"), 1);
  ASSERT_EQ(shutdown(), 0);
}

TEST_F(NvmlSessionTest, LazyModeReleasesNvmlBetweenSamplesAndReresolvesByUuid) {
  nvml_.scenario(three_rotating_gpus());
  auto p = probe(LibrarySessionMode::lazy);
  const auto d = harness_.detect(*p);
  ASSERT_TRUE(d.available) << d.reason;
  EXPECT_EQ(nvml_.count("initialized"), 0);  // released right after the detection
  for (int i = 0; i < 3; ++i) {
    const auto r = harness_.sample(*p);
    ASSERT_FALSE(r.ec) << r.ec.message();
    EXPECT_EQ(nvml_.count("initialized"), 0) << "NVML still initialized after sample " << i;
    ASSERT_EQ(r.snapshot.devices.size(), 3u);
    // The index order rotates at every init; values follow the UUID, not the index.
    for (int k = 0; k < 3; ++k) {
      const auto id = "GPU-lazy-" + std::to_string(k);
      const auto* dev = r.snapshot.find_device(id);
      ASSERT_TRUE(dev) << id;
      EXPECT_EQ(dev->metrics[Metric::temperature_celsius].get(), 50.0 + k) << id;
    }
  }
  EXPECT_EQ(nvml_.count("init"), 4);
  EXPECT_EQ(nvml_.count("shutdown"), 4);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetHandleByUUID"), 9);  // every device, every session
  EXPECT_EQ(nvml_.count("stale_handle"), 0);
  EXPECT_EQ(nvml_.count("uninitialized_call"), 0);
  EXPECT_EQ(nvml_.count("violations"), 0);
  // Names, PCI ids and totals were read once, at enumeration.
  EXPECT_EQ(nvml_.count("nvmlDeviceGetName"), 3);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetPciInfo_v3"), 3);
  const auto stats = p->library_session_stats();
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->inits, 4u);
  EXPECT_EQ(stats->shutdowns, 4u);
}

TEST_F(NvmlSessionTest, PersistentModeInitializesOnceAndShutsDownWithTheProbe) {
  nvml_.scenario(three_rotating_gpus());
  auto p = probe(LibrarySessionMode::persistent);
  ASSERT_TRUE(harness_.detect(*p).available);
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(harness_.sample(*p).ec);
  EXPECT_EQ(nvml_.count("init"), 1);
  EXPECT_EQ(nvml_.count("initialized"), 1);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetHandleByUUID"), 0);  // handles of the one session
  EXPECT_EQ(nvml_.count("nvmlDeviceGetName"), 3);
  p.reset();
  EXPECT_TRUE(eventually([&] { return nvml_.count("shutdown") == 1; }));
  EXPECT_EQ(nvml_.count("initialized"), 0);
}

TEST_F(NvmlSessionTest, LazyModeFromTheEnvironment) {
  ::setenv(kLibrarySessionEnv, "lazy", 1);
  auto p = probe(std::nullopt);
  ::unsetenv(kLibrarySessionEnv);
  ASSERT_TRUE(harness_.detect(*p).available);
  ASSERT_FALSE(harness_.sample(*p).ec);
  EXPECT_EQ(nvml_.count("initialized"), 0);
  EXPECT_EQ(nvml_.count("init"), 2);
}

TEST_F(NvmlSessionTest, LostGpuIsReportedOthersContinueAndItIsFoundAgainAfterBackoff) {
  const std::string healthy = "devices=2\n";
  const std::string lost = healthy + "device.1.lost_after=0\n";
  nvml_.scenario(healthy);
  auto p = probe(LibrarySessionMode::persistent);
  const auto d = harness_.detect(*p);
  ASSERT_TRUE(d.available);
  const auto gpu0 = d.devices[0].id;
  const auto gpu1 = d.devices[1].id;

  nvml_.reload(lost);  // from now on every call on GPU 1 answers NVML_ERROR_GPU_IS_LOST
  auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec) << "one lost GPU does not fail the sample";
  EXPECT_TRUE(r.snapshot.find_device(gpu0)->metrics[Metric::power_watts].has_value());
  const auto* dev1 = r.snapshot.find_device(gpu1);
  ASSERT_TRUE(dev1);
  EXPECT_EQ(dev1->metrics[Metric::power_watts], Reading::missing(Absence::lost, Source::nvml));
  EXPECT_EQ(dev1->attributes.at("state"), "lost");
  auto* e = find_error(r.snapshot, "gpu_lost");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->device, gpu1);
  EXPECT_NE(e->message.find("NVML_ERROR_GPU_IS_LOST"), std::string::npos) << e->message;
  EXPECT_NE(e->message.find("again in 1000 ms"), std::string::npos) << e->message;

  // Before the backoff expires the lost GPU is not touched again.
  r = harness_.sample(*p);
  ASSERT_TRUE(find_error(r.snapshot, "gpu_lost"));
  EXPECT_EQ(nvml_.count("init"), 1);
  EXPECT_EQ(nvml_.count("nvmlDeviceGetHandleByUUID"), 0);

  // Backoff over, still lost: a fresh session, looked up by UUID, lost again, delay doubled.
  clock_.advance(1000ms);
  r = harness_.sample(*p);
  EXPECT_EQ(nvml_.count("init"), 2);
  EXPECT_EQ(nvml_.count("shutdown"), 1);
  e = find_error(r.snapshot, "gpu_lost");
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("again in 2000 ms"), std::string::npos) << e->message;
  EXPECT_TRUE(r.snapshot.find_device(gpu0)->metrics[Metric::power_watts].has_value());

  // The GPU comes back; it is picked up once the doubled delay has passed.
  nvml_.scenario(healthy);
  clock_.advance(1000ms);
  r = harness_.sample(*p);
  EXPECT_TRUE(find_error(r.snapshot, "gpu_lost"));
  clock_.advance(1000ms);
  r = harness_.sample(*p);
  EXPECT_FALSE(r.ec);
  EXPECT_TRUE(r.snapshot.errors.empty());
  EXPECT_TRUE(r.snapshot.find_device(gpu1)->metrics[Metric::power_watts].has_value());
  EXPECT_EQ(nvml_.count("init"), 3);
  EXPECT_EQ(nvml_.count("stale_handle"), 0);
}

TEST_F(NvmlSessionTest, EveryGpuLostFailsTheSampleAndDetectionStartsAfresh) {
  nvml_.scenario("devices=1\n");
  auto p = probe(LibrarySessionMode::persistent);
  ASSERT_TRUE(harness_.detect(*p).available);
  nvml_.reload("devices=1\ndevice.0.lost_after=0\n");
  const auto r = harness_.sample(*p);
  EXPECT_EQ(r.ec, make_error_code(errc::sample_failed));
  ASSERT_TRUE(find_error(r.snapshot, "gpu_lost"));
  // The scheduler re-detects after failures: a new session sees the GPU again.
  nvml_.scenario("devices=1\n");
  const auto d = harness_.detect(*p);
  EXPECT_TRUE(d.available) << d.reason;
  EXPECT_EQ(nvml_.count("init"), 2);
  EXPECT_FALSE(harness_.sample(*p).ec);
}

TEST_F(NvmlSessionTest, VendorCallsNeverBlockTheIoThread) {
  boost::asio::io_context io;
  boost::asio::thread_pool pool(1);
  NvidiaProbeOptions o;
  o.nvml_library = nvml_.path();
  o.use = NvidiaProbeOptions::Use::nvml_only;
  auto p = make_nvidia_probe({io.get_executor(), pool.get_executor()}, o);
  auto guard = boost::asio::make_work_guard(io);  // keep run_one_for waiting for the pool
  bool detected = false;
  p->async_detect([&](Detection d) { detected = d.available; });
  while (!detected && io.run_one_for(10s) > 0) {}
  ASSERT_TRUE(detected);

  nvml_.block(true);  // every NVML call now waits until released
  bool sampled = false;
  p->async_sample([&](boost::system::error_code, GpuSnapshot) { sampled = true; });
  bool other_work = false;
  boost::asio::post(io, [&] { other_work = true; });
  io.restart();
  while (!other_work && io.run_one_for(10s) > 0) {}
  EXPECT_TRUE(other_work);  // the io thread ran while NVML was stuck
  EXPECT_FALSE(sampled);
  nvml_.block(false);
  io.restart();
  while (!sampled && io.run_one_for(10s) > 0) {}
  EXPECT_TRUE(sampled);
  pool.join();
}

class ProcessUsageTest : public NvmlSessionTest {
 protected:
  void SetUp() override {
    proc_.symlink("self", "4242");
    proc_.file("4242/status", "Name:\tplanner\nVmRSS:\t  5120 kB\n");
    nvml_.scenario(
        "devices=3\n"
        "device.0.compute=4242:3221225472,17:1024\n"
        "device.0.memory_used=4294967296\n"
        "device.1.compute=17:2048\n"
        "device.2.fail.nvmlDeviceGetComputeRunningProcesses_v3=NOT_SUPPORTED\n"
        "device.2.fail.nvmlDeviceGetGraphicsRunningProcesses_v3=NOT_SUPPORTED\n");
  }
  void check(const ProcessGpuUsage& u) {
    EXPECT_EQ(u.pid, 4242);
    EXPECT_EQ(u.host_rss_bytes, 5120u * 1024);
    EXPECT_EQ(u.backend, NvidiaBackend::nvml);
    ASSERT_EQ(u.devices.size(), 3u);
    EXPECT_EQ(u.devices[0].gpu_memory_bytes, 3221225472u);
    EXPECT_TRUE(u.devices[0].exact);
    EXPECT_EQ(u.devices[0].device_memory_used_bytes, 4294967296u);
    EXPECT_EQ(u.devices[0].device_memory_total_bytes, 80ull << 30);
    EXPECT_EQ(u.devices[0].source, Source::nvml);
    EXPECT_EQ(u.devices[1].gpu_memory_bytes, 0u);  // listed processes, not this one: really 0
    EXPECT_TRUE(u.devices[1].exact);
    EXPECT_FALSE(u.devices[2].gpu_memory_bytes);  // cannot tell
    EXPECT_FALSE(u.devices[2].exact);
    ASSERT_EQ(u.errors.size(), 1u);
    EXPECT_EQ(u.errors[0].code, "processes_unsupported");
    EXPECT_EQ(u.errors[0].device, u.devices[2].device_id);
  }
};

TEST_F(ProcessUsageTest, OneCallAnswersForThisProcess) {
  auto p = probe(LibrarySessionMode::persistent);
  check(p->process_usage());  // works before any detection
}

TEST_F(ProcessUsageTest, FreeFunctionLoadsAndReleasesNvml) {
  NvidiaProbeOptions o;
  o.nvml_library = nvml_.path();
  o.paths.procfs_root = proc_.path();
  check(query_process_gpu_usage(o));
  EXPECT_EQ(nvml_.count("initialized"), 0);
  EXPECT_EQ(nvml_.count("init"), 1);
}

TEST_F(ProcessUsageTest, UnavailableValueIsAbsentNotExact) {
  nvml_.scenario("devices=1\ndevice.0.compute=4242:na\n");
  auto u = probe(LibrarySessionMode::lazy)->process_usage();
  ASSERT_EQ(u.devices.size(), 1u);
  EXPECT_FALSE(u.devices[0].gpu_memory_bytes);
  EXPECT_FALSE(u.devices[0].exact);
}

TEST_F(NvmlSessionTest, RegistryBuildsTheNvidiaProbeFromConfig) {
  ASSERT_TRUE(is_known_probe("nvidia"));
  Config config;
  config.probes = {"nvidia"};
  config.probe_settings["nvidia"] =
      ProbeSettings::Section{{"library", nvml_.path()}, {"use", "nvml"}};
  auto set = make_probes(config, harness_.executors());
  ASSERT_TRUE(set.errors.empty());
  ASSERT_EQ(set.probes.size(), 1u);
  EXPECT_EQ(set.probes[0]->name(), "nvidia");
  EXPECT_TRUE(harness_.detect(*set.probes[0]).available);

  config.probe_settings["nvidia"] = ProbeSettings::Section{{"bogus", 1}};
  set = make_probes(config, harness_.executors());
  ASSERT_EQ(set.errors.size(), 1u);
  EXPECT_NE(set.errors[0].find("nvidia.bogus"), std::string::npos) << set.errors[0];
}

}  // namespace
}  // namespace gpustream
