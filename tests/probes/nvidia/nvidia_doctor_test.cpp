// `gpustream doctor` for the nvidia probe (probes/nvidia/nvidia_doctor.cpp) on generated trees
// and the NVIDIA fakes.
#include <gtest/gtest.h>

#include "doctor_machine.hpp"
#include "gpustream_fake_paths.hpp"
#include "nvidia/nvidia_fakes.hpp"

namespace gpustream {
namespace {

using namespace doctor_test;  // NOLINT(google-build-using-namespace)

TEST(Doctor, NvmlVersionsAreReadAfterInitFromTheFakeLibrary) {
  test::FakeNvml nvml;
  nvml.scenario("devices=2\n");
  Machine m;
  m.options.probes = {"nvidia"};
  m.options.probe_settings.set("nvidia", "library", fakes::kFakeNvml);
  const auto r = m.run();
  const auto* f = find(r, "nvidia", "nvml", Status::ok);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("NVML 12.535.183.01-fake"), std::string::npos) << f->detail;
  EXPECT_NE(f->detail.find("driver 535.183.01-fake"), std::string::npos) << f->detail;
  EXPECT_NE(f->detail.find("2 GPU(s)"), std::string::npos) << f->detail;
  EXPECT_EQ(nvml.count("init"), nvml.count("shutdown"));  // released again
  EXPECT_EQ(find(r, "nvidia", "fallback"), nullptr);      // NVML answers: no fallback
  EXPECT_TRUE(r.fully_readable()) << dump(r);
}

TEST(Doctor, ActivityMetricsSayWhichGpusHaveGpm) {
  test::FakeNvml nvml;
  nvml.scenario(
      "devices=3\ndevice.0.architecture=9\ndevice.1.architecture=8\n"
      "device.2.architecture=10\ndevice.2.gpm=0\n");
  Machine m;
  m.options.probes = {"nvidia"};
  m.options.probe_settings.set("nvidia", "library", fakes::kFakeNvml);
  const auto r = m.run();
  const auto* f = find(r, "nvidia", "activity", Status::ok);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_EQ(f->detail,
            "activity metrics (NVML GPM) on 1 of 3 GPU(s): GPU 0: supported; GPU 1: unsupported "
            "(before Hopper); GPU 2: unsupported (the device has no GPM)");
  EXPECT_EQ(nvml.count("init"), nvml.count("shutdown"));

  test::FakeNvml legacy(fakes::kFakeNvmlLegacy);
  legacy.scenario("devices=1\n");
  m.options.probe_settings.set("nvidia", "library", fakes::kFakeNvmlLegacy);
  const auto old = m.run();
  const auto* g = find(old, "nvidia", "activity", Status::info);
  ASSERT_NE(g, nullptr) << dump(old);
  EXPECT_NE(g->detail.find("nvmlGpmQueryDeviceSupport missing"), std::string::npos) << g->detail;
  EXPECT_TRUE(old.fully_readable()) << dump(old);
}

TEST(Doctor, NvmlInitFailureWithTheDriverPresentIsABlockerWithItsFix) {
  test::FakeNvml nvml;
  nvml.scenario("devices=1\ninit_fail=DRIVER_NOT_LOADED\n");
  Machine m;
  m.options.probes = {"nvidia"};
  m.options.probe_settings.set("nvidia", "library", fakes::kFakeNvml);
  m.tree().dir("sys/module/nvidia");
  m.tree().file("dev/nvidiactl", "");
  ::chmod(m.tree().path("dev/nvidiactl").c_str(), 0666);
  auto r = m.run();
  const auto* f = find(r, "nvidia", "nvml", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("NVML_ERROR_DRIVER_NOT_LOADED"), std::string::npos);
  EXPECT_NE(f->fix.find("modprobe nvidia"), std::string::npos);
  // And nvidia-smi is missing too: the fallback cannot help.
  EXPECT_NE(find(r, "nvidia", "nvidia_smi", Status::blocker), nullptr) << dump(r);

  nvml.scenario("devices=1\n");
  r = m.run();
  EXPECT_EQ(find(r, "nvidia", "nvml", Status::blocker), nullptr) << dump(r);
  EXPECT_NE(find(r, "nvidia", "nvidia_smi", Status::info), nullptr) << dump(r);
  EXPECT_TRUE(r.fully_readable()) << dump(r);
}

TEST(Doctor, HungNvmlIsReportedWithinTheTimeoutAndLeftToFinish) {
  test::FakeNvml nvml;
  nvml.scenario("devices=1\n");
  Machine m;
  m.options.probes = {"nvidia"};
  m.options.probe_settings.set("nvidia", "library", fakes::kFakeNvml);
  m.options.tool_timeout = std::chrono::milliseconds{200};
  m.tree().dir("sys/module/nvidia");
  nvml.block(true);  // every NVML call now waits until released: nvmlInit hangs
  const auto r = m.run();
  const auto* f = find(r, "nvidia", "nvml", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("did not answer within 200 ms"), std::string::npos) << f->detail;
  ASSERT_EQ(r.pending.size(), 1U);
  nvml.block(false);
  r.pending[0].wait();  // the abandoned check finishes and releases NVML
  EXPECT_EQ(nvml.count("init"), 1);
  EXPECT_EQ(nvml.count("shutdown"), 1);
}

TEST(Doctor, MissingNvmlWithoutNvidiaHardwareIsOnlyInformation) {
  Machine m;
  m.options.probes = {"nvidia"};
  const auto r = m.run();
  const auto* f = find(r, "nvidia", "nvml", Status::info);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("cannot load"), std::string::npos);
  EXPECT_TRUE(r.fully_readable());
}

TEST(Doctor, NvidiaModuleWithoutDeviceNodesIsABlocker) {
  Machine m;
  m.options.probes = {"nvidia"};
  m.tree().dir("sys/module/nvidia");
  auto r = m.run();
  EXPECT_NE(find(r, "nvidia", "device_nodes", Status::blocker), nullptr) << dump(r);
  m.tree().file("dev/nvidia0", "");
  m.tree().file("dev/nvidiactl", "");
  r = m.run();
  EXPECT_EQ(find(r, "nvidia", "device_nodes", Status::blocker), nullptr) << dump(r);
  EXPECT_NE(find(r, "nvidia", "device_nodes", Status::ok), nullptr);
}

TEST(Doctor, NvidiaNodeTheReaderCannotOpenIsABlocker) {
  Machine m;
  m.options.probes = {"nvidia"};
  m.tree().dir("sys/module/nvidia");
  const auto node = m.tree().file("dev/nvidia0", "");
  ::chmod(node.c_str(), 0660);
  m.identity(1000, {}, 0);
  auto r = m.run();
  const auto* f = find(r, "nvidia", "device_nodes", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->fix.find("NVreg_DeviceFileMode=0666"), std::string::npos);
  m.identity(1000, {my_gid()}, 0);
  r = m.run();
  EXPECT_EQ(find(r, "nvidia", "device_nodes", Status::blocker), nullptr) << dump(r);
}

TEST(Doctor, NvidiaSmiFallbackReportsItsVersionAndTheFallback) {
  test::FakeSmi smi;
  Machine m;
  m.options.probes = {"nvidia"};
  m.options.probe_settings.set("nvidia", "nvidia_smi", smi.tool());
  m.tree().dir("sys/module/nvidia");
  m.tree().file("dev/nvidia0", "");
  auto r = m.run();
  const auto* f = find(r, "nvidia", "nvidia_smi", Status::ok);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("NVIDIA-SMI version  : 535.183.01"), std::string::npos) << f->detail;
  EXPECT_NE(find(r, "nvidia", "fallback", Status::warn), nullptr) << dump(r);
  EXPECT_TRUE(r.fully_readable()) << dump(r);
}

TEST(Doctor, HungNvidiaSmiIsKilledWithinTheTimeout) {
  test::FakeSmi smi;
  smi.file("mode", "hang\n");
  Machine m;
  m.options.probes = {"nvidia"};
  m.options.probe_settings.set("nvidia", "nvidia_smi", smi.tool());
  m.options.tool_timeout = std::chrono::milliseconds{200};
  m.tree().dir("sys/module/nvidia");
  const auto r = m.run();  // returns: the hung child was killed
  const auto* f = find(r, "nvidia", "nvidia_smi", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("did not finish within 200 ms"), std::string::npos) << f->detail;
}

TEST(Doctor, GarbageVersionOutputIsReportedNotCrashed) {
  test::FakeSmi smi;
  smi.file("mode", "garbage\n");
  Machine m;
  m.options.probes = {"nvidia"};
  m.options.probe_settings.set("nvidia", "nvidia_smi", smi.tool());
  auto r = m.run();
  const auto* f = find(r, "nvidia", "nvidia_smi", Status::warn);  // not needed: no hardware
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("printed no version"), std::string::npos) << f->detail;
  smi.remove("mode");
  r = m.run();
  EXPECT_NE(find(r, "nvidia", "nvidia_smi", Status::ok), nullptr) << dump(r);
}

}  // namespace
}  // namespace gpustream
