// NvidiaProbe's nvidia-smi fallback, against the fake nvidia-smi: two runs per sample, units and
// placeholders, the minimum interval it reports, timeouts and kills, cancellation, failures,
// field rejection by old drivers, and the fallback from a missing NVML.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "gpustream/errors.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "nvidia_fakes.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using namespace std::chrono_literals;
using test::DrivenClock;
using test::FakeSmi;
using test::find_error;
using test::ProbeHarness;
using test::TempTree;

// What a current driver prints for the probe's query (fields in kSmiGpuFields order).
constexpr const char* kSmiTwoGpus =
    "0, GPU-11111111-2222-3333-4444-555555555555, NVIDIA H100 80GB HBM3, 00000000:18:00.0, "
    "81559, 40960, 87, 33, 64, 312.45, 298.10, 700.00, 1755, 1755, 2619, [N/A], "
    "0x0000000000000001\n"
    "1, GPU-66666666-7777-8888-9999-000000000000, NVIDIA H100 80GB HBM3, 00000000:2A:00.0, "
    "81559, 1, 0, 0, 31, 69.10, 70.05, 700.00, 345, 345, 2619, [N/A], 0x0000000000000000\n";
constexpr const char* kApps =
    "GPU-11111111-2222-3333-4444-555555555555, 4242, 40000, /usr/bin/python3\n"
    "GPU-11111111-2222-3333-4444-555555555555, 4343, [N/A], worker\n";

class SmiProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    smi_.file("query-gpu.csv", kSmiTwoGpus);
    smi_.file("query-compute-apps.csv", kApps);
    test::proc_entry(proc_, 4242, "python3", 2048);
    proc_.file("4242/status", "Name:\tpython3\nVmRSS:\t  2048 kB\n");  // process_usage()
  }
  NvidiaProbeOptions options() {
    NvidiaProbeOptions o;
    o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
    o.nvidia_smi = smi_.tool();
    o.use = NvidiaProbeOptions::Use::nvidia_smi_only;
    o.paths.procfs_root = proc_.path();
    o.clock = clock_.function();
    return o;
  }
  std::shared_ptr<NvidiaProbe> probe() {
    return make_nvidia_probe(harness_.executors(), options());
  }

  FakeSmi smi_;
  TempTree proc_;
  DrivenClock clock_;
  ProbeHarness harness_;
};

TEST_F(SmiProbeTest, DetectsAndSamplesWithTwoRunsPerSample) {
  auto p = probe();
  EXPECT_EQ(p->min_interval(), 1000ms);
  const auto d = harness_.detect(*p);
  ASSERT_TRUE(d.available) << d.reason;
  ASSERT_EQ(d.devices.size(), 2u);
  EXPECT_EQ(d.devices[0], (DeviceInfo{"GPU-11111111-2222-3333-4444-555555555555", Vendor::nvidia, 0,
                                      "NVIDIA H100 80GB HBM3", "0000:18:00.0"}));
  EXPECT_EQ(p->backend(), NvidiaBackend::nvidia_smi);

  const auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec) << r.ec.message();
  EXPECT_TRUE(r.snapshot.errors.empty());
  ASSERT_EQ(r.snapshot.devices.size(), 2u);
  const auto& d0 = r.snapshot.devices[0];
  const auto smi = [](double v) { return Reading::of(v, Source::nvidia_smi); };
  EXPECT_EQ(d0.metrics[Metric::memory_total_bytes], smi(81559.0 * 1024 * 1024));
  EXPECT_EQ(d0.metrics[Metric::memory_used_bytes], smi(40960.0 * 1024 * 1024));
  EXPECT_EQ(d0.metrics[Metric::utilization_percent], smi(87));
  EXPECT_EQ(d0.metrics[Metric::memory_utilization_percent], smi(33));
  EXPECT_EQ(d0.metrics[Metric::temperature_celsius], smi(64));
  EXPECT_EQ(d0.metrics[Metric::power_watts], smi(312.45));  // power.draw.instant
  EXPECT_EQ(d0.power_kind, PowerKind::instant);
  EXPECT_EQ(d0.metrics[Metric::power_average_watts], smi(298.10));
  EXPECT_EQ(d0.metrics[Metric::power_limit_watts], smi(700));
  EXPECT_EQ(d0.metrics[Metric::clock_graphics_mhz], smi(1755));
  EXPECT_EQ(d0.metrics[Metric::clock_memory_mhz], smi(2619));
  EXPECT_EQ(d0.metrics[Metric::fan_percent],
            Reading::missing(Absence::unsupported, Source::nvidia_smi));  // [N/A]
  EXPECT_EQ(d0.metrics[Metric::energy_joules],
            Reading::missing(Absence::unsupported, Source::nvidia_smi));  // not queried
  EXPECT_EQ(d0.throttle_reasons, std::vector<std::string>{"gpu_idle"});
  ASSERT_EQ(d0.processes.size(), 2u);
  EXPECT_EQ(d0.processes[0].pid, 4242);
  EXPECT_EQ(d0.processes[0].name, "python3");  // from /proc
  EXPECT_EQ(d0.processes[0].gpu_memory_bytes, 40000ull << 20);
  EXPECT_EQ(d0.processes[0].host_rss_bytes, 2048u * 1024);
  EXPECT_FALSE(d0.processes[0].per_process_exact);
  EXPECT_EQ(d0.processes[1].name, "worker");  // no /proc entry: nvidia-smi's name
  EXPECT_FALSE(d0.processes[1].gpu_memory_bytes);
  EXPECT_TRUE(r.snapshot.devices[1].processes.empty());

  const auto calls = smi_.calls();
  ASSERT_EQ(calls.size(), 3u);  // detection, then one run for all GPUs and one for processes
  EXPECT_EQ(calls[1],
            "--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,utilization.gpu,"
            "utilization.memory,temperature.gpu,power.draw.instant,power.draw.average,power.limit,"
            "clocks.gr,clocks.sm,clocks.mem,fan.speed,clocks_throttle_reasons.active "
            "--format=csv,noheader,nounits");
  EXPECT_EQ(calls[2],
            "--query-compute-apps=gpu_uuid,pid,used_gpu_memory,process_name "
            "--format=csv,noheader,nounits");
}

TEST_F(SmiProbeTest, EverySampleRunsTheToolAndTheSchedulerKeepsThemApart) {
  // The probe does not hold samples back itself: it reports a 1 s minimum interval, and the
  // Scheduler (which reads min_interval() again after detection) enforces it.
  auto o = options();
  o.nvidia_smi_min_interval = 2500ms;
  auto p = make_nvidia_probe(harness_.executors(), o);
  EXPECT_EQ(p->min_interval(), 2500ms);
  ASSERT_TRUE(harness_.detect(*p).available);
  const auto first = harness_.sample(*p);
  ASSERT_FALSE(first.ec);
  clock_.advance(1ms);                     // the probe's clock (it stamps the snapshots)
  const auto again = harness_.sample(*p);  // well inside the minimum interval
  ASSERT_FALSE(again.ec);
  EXPECT_EQ(smi_.calls().size(), 5u);  // detection, then two runs for each sample
  EXPECT_EQ(again.snapshot.monotonic_ns - first.snapshot.monotonic_ns, 1'000'000);
  ASSERT_EQ(again.snapshot.devices.size(), 2u);
  EXPECT_EQ(again.snapshot.devices[0].processes.at(0).host_rss_bytes, 2048u * 1024);
}

TEST_F(SmiProbeTest, MinimumIntervalIsAtLeastOneSecond) {
  auto o = options();
  o.nvidia_smi_min_interval = 10ms;
  EXPECT_EQ(make_nvidia_probe(harness_.executors(), o)->min_interval(), 1000ms);
}

TEST_F(SmiProbeTest, EmptyProcessListAndRecordedCompute) {
  smi_.file("query-compute-apps.csv", "");
  auto p = probe();
  auto r = harness_.sample(*p);  // detects first
  ASSERT_FALSE(r.ec) << r.ec.message();
  EXPECT_TRUE(r.snapshot.errors.empty());
  for (const auto& d : r.snapshot.devices) EXPECT_TRUE(d.processes.empty());
}

TEST_F(SmiProbeTest, RecordedOutputsOfOtherDriversParse) {
  // Recorded with a header and units (../shared/fixtures/nvidia/smi_csv), single GPU so that
  // the compute apps (without a gpu_uuid column) can be attributed.
  smi_.file("query-gpu.csv",
            "index, name, memory.used [MiB], utilization.gpu [%], power.draw [W]\n"
            "1, NVIDIA RTX A6000, 38742 MiB, 100 %, 297.75 W\n");
  smi_.file("query-compute-apps.csv", "pid, used_gpu_memory [MiB]\n80613, 92908 MiB\n");
  auto p = probe();
  const auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_EQ(r.snapshot.devices.size(), 1u);
  const auto& d = r.snapshot.devices[0];
  EXPECT_EQ(d.name, "NVIDIA RTX A6000");
  EXPECT_EQ(d.metrics[Metric::memory_used_bytes].get(), 38742.0 * 1024 * 1024);
  EXPECT_EQ(d.metrics[Metric::power_watts].get(), 297.75);
  ASSERT_EQ(d.processes.size(), 1u);
  EXPECT_EQ(d.processes[0].gpu_memory_bytes, 92908ull << 20);
}

TEST_F(SmiProbeTest, AppsWithoutGpuColumnOnSeveralGpusAreReported) {
  smi_.file("query-compute-apps.csv", "pid, used_gpu_memory [MiB]\n80613, 92908 MiB\n");
  auto p = probe();
  const auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  EXPECT_TRUE(find_error(r.snapshot, "parse_error"));
}

TEST_F(SmiProbeTest, HangingToolIsKilledAtTheTimeout) {
  smi_.file("mode", "hang\n");
  auto o = options();
  o.nvidia_smi_timeout = 300ms;
  auto p = make_nvidia_probe(harness_.executors(), o);
  const auto d = harness_.detect(*p);
  EXPECT_FALSE(d.available);
  EXPECT_NE(d.reason.find("did not finish within 300 ms and was killed"), std::string::npos)
      << d.reason;
  smi_.remove("mode");
  ASSERT_TRUE(harness_.detect(*p).available);
  smi_.file("mode", "hang-apps\n");
  const auto r = harness_.sample(*p);
  // The GPU query worked; the process query hung and was killed: devices still reported.
  ASSERT_FALSE(r.ec);
  EXPECT_EQ(r.snapshot.devices.size(), 2u);
  const auto* e = find_error(r.snapshot, "tool_failed");
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("timed out"), std::string::npos) << e->message;
  for (const auto& d : r.snapshot.devices) {  // the process list is absent, not empty
    ASSERT_TRUE(d.processes_absent) << d.id;
    EXPECT_EQ(*d.processes_absent, Absence::tool_failed);
  }
  smi_.file("mode", "hang\n");
  const auto hung = harness_.sample(*p);
  EXPECT_EQ(hung.ec, make_error_code(errc::timeout));
  EXPECT_TRUE(find_error(hung.snapshot, "timeout"));
}

TEST_F(SmiProbeTest, CancelKillsTheRunningTool) {
  auto o = options();
  o.nvidia_smi_timeout = 60s;
  boost::asio::io_context io;
  boost::asio::thread_pool pool(1);
  auto p = make_nvidia_probe({io.get_executor(), pool.get_executor()}, o);
  auto guard = boost::asio::make_work_guard(io);
  bool detected = false;
  p->async_detect([&](Detection d) { detected = d.available; });
  while (!detected && io.run_one_for(10s) > 0) {}
  ASSERT_TRUE(detected);
  smi_.file("mode", "hang\n");
  std::optional<boost::system::error_code> result;
  p->async_sample([&](boost::system::error_code ec, GpuSnapshot) { result = ec; });
  // Wait until the child has started (it logs its call), then cancel.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (smi_.calls().size() < 2 && std::chrono::steady_clock::now() < deadline)
    io.run_one_for(10ms);
  ASSERT_EQ(smi_.calls().size(), 2u);
  p->cancel();
  while (!result && io.run_one_for(10s) > 0) {}
  ASSERT_TRUE(result);
  EXPECT_EQ(*result, boost::asio::error::operation_aborted);
  pool.join();
}

TEST_F(SmiProbeTest, FailingCrashingAndGarbageOutputs) {
  auto p = probe();
  ASSERT_TRUE(harness_.detect(*p).available);
  smi_.file("mode", "exit 9\n");
  auto r = harness_.sample(*p);
  EXPECT_EQ(r.ec, make_error_code(errc::tool_failed));
  ASSERT_TRUE(find_error(r.snapshot, "tool_failed"));
  EXPECT_NE(find_error(r.snapshot, "tool_failed")->message.find("exited with code 9"),
            std::string::npos);

  smi_.file("mode", "crash\n");
  r = harness_.sample(*p);
  EXPECT_EQ(r.ec, make_error_code(errc::tool_failed));
  EXPECT_NE(find_error(r.snapshot, "tool_failed")->message.find("SIGSEGV"), std::string::npos);

  smi_.file("mode", "garbage\n");
  r = harness_.sample(*p);
  EXPECT_EQ(r.ec, make_error_code(errc::parse_error));
  EXPECT_TRUE(r.snapshot.devices.empty());

  smi_.file("mode", "partial\n");
  r = harness_.sample(*p);
  EXPECT_EQ(r.ec, make_error_code(errc::parse_error));

  smi_.remove("mode");
  r = harness_.sample(*p);
  EXPECT_FALSE(r.ec);  // and it recovers
}

TEST_F(SmiProbeTest, OldDriverRejectingAFieldIsAskedForTheBasicFields) {
  smi_.file("reject", "clocks_throttle_reasons.active\n");
  smi_.file("query-gpu.csv", "0, GPU-1, Tesla K80, 00000000:04:00.0, 11441, 0, 0, 35, 26.50\n");
  smi_.file("query-compute-apps.csv", "");
  auto p = probe();
  const auto d = harness_.detect(*p);
  ASSERT_TRUE(d.available) << d.reason;
  const auto r = harness_.sample(*p);
  ASSERT_FALSE(r.ec);
  EXPECT_EQ(r.snapshot.devices[0].metrics[Metric::power_watts].get(), 26.5);
  const auto calls = smi_.calls();
  ASSERT_EQ(calls.size(), 4u);  // rejected, basic (detect), basic + apps (sample)
  EXPECT_EQ(calls[1],
            "--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,utilization.gpu,"
            "temperature.gpu,power.draw --format=csv,noheader,nounits");
  EXPECT_EQ(calls[2], calls[1]);
}

TEST_F(SmiProbeTest, NoGpuMeansUnavailable) {
  smi_.remove("query-gpu.csv");
  auto p = probe();
  const auto d = harness_.detect(*p);
  EXPECT_FALSE(d.available);
  EXPECT_NE(d.reason.find("No devices were found"), std::string::npos) << d.reason;
}

TEST_F(SmiProbeTest, FallsBackFromMissingNvml) {
  auto o = options();
  o.use = NvidiaProbeOptions::Use::automatic;
  auto p = make_nvidia_probe(harness_.executors(), o);
  EXPECT_EQ(p->min_interval(), NvidiaProbe::kNvmlMinInterval);
  ASSERT_TRUE(harness_.detect(*p).available);
  EXPECT_EQ(p->backend(), NvidiaBackend::nvidia_smi);
  EXPECT_EQ(p->min_interval(), 1000ms);
  EXPECT_FALSE(harness_.sample(*p).ec);
}

TEST_F(SmiProbeTest, NeitherSourceGivesBothReasons) {
  auto o = options();
  o.use = NvidiaProbeOptions::Use::automatic;
  o.nvidia_smi = "/nonexistent/nvidia-smi";
  auto p = make_nvidia_probe(harness_.executors(), o);
  const auto d = harness_.detect(*p);
  EXPECT_FALSE(d.available);
  EXPECT_EQ(d.reason.rfind("NVML: cannot load /nonexistent/libnvidia-ml.so.1", 0), 0u) << d.reason;
  EXPECT_NE(d.reason.find("; nvidia-smi: cannot run /nonexistent/nvidia-smi"), std::string::npos)
      << d.reason;
}

TEST_F(SmiProbeTest, ProcessUsageThroughTheTool) {
  proc_.symlink("self", "4242");
  auto p = probe();
  const auto u = p->process_usage();
  EXPECT_EQ(u.pid, 4242);
  EXPECT_EQ(u.backend, NvidiaBackend::nvidia_smi);
  EXPECT_EQ(u.host_rss_bytes, 2048u * 1024);
  ASSERT_EQ(u.devices.size(), 2u);
  EXPECT_EQ(u.devices[0].gpu_memory_bytes, 40000ull << 20);
  EXPECT_FALSE(u.devices[0].exact);
  EXPECT_EQ(u.devices[0].source, Source::nvidia_smi);
  EXPECT_EQ(u.devices[0].device_memory_total_bytes, 81559ull << 20);
  EXPECT_FALSE(u.devices[1].gpu_memory_bytes);
  EXPECT_TRUE(u.errors.empty());
}

// No NVML and no nvidia-smi on the machine: the fallback did not run, so no backend answered,
// and the error line says which query failed and why, with a separator.
TEST_F(SmiProbeTest, ProcessUsageWithoutTheToolNamesNoBackend) {
  auto o = options();
  o.use = NvidiaProbeOptions::Use::automatic;
  o.nvidia_smi = "/nonexistent/nvidia-smi";
  const auto u = query_process_gpu_usage(o);
  EXPECT_EQ(u.backend, NvidiaBackend::none);
  EXPECT_TRUE(u.devices.empty());
  ASSERT_FALSE(u.errors.empty());
  EXPECT_EQ(u.errors[0].code, "tool_failed");
  EXPECT_EQ(u.errors[0].message.rfind("/nonexistent/nvidia-smi --query-gpu: ", 0), 0u)
      << u.errors[0].message;
  EXPECT_GT(u.errors[0].message.size(),
            std::string("/nonexistent/nvidia-smi --query-gpu: ").size());
}

// nvidia-smi runs but fails (no GPU): it answered nothing either.
TEST_F(SmiProbeTest, ProcessUsageWhenTheToolFailsNamesNoBackend) {
  smi_.remove("query-gpu.csv");
  const auto u = probe()->process_usage();
  EXPECT_EQ(u.backend, NvidiaBackend::none);
  ASSERT_EQ(u.errors.size(), 1u);
  EXPECT_NE(u.errors[0].message.find(" --query-gpu: exited with code"), std::string::npos)
      << u.errors[0].message;
}

}  // namespace
}  // namespace gpustream
