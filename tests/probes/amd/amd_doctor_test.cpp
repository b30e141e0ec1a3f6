// `gpustream doctor` for the amd probe (probes/amd/amd_doctor.cpp and the DRM checks it shares,
// probes/toolkit/doctor_drm.cpp) on generated trees and the AMD fakes.
#include <cstdlib>

#include <gtest/gtest.h>

#include "amd/amd_fake_cli.hpp"
#include "doctor_machine.hpp"
#include "gpustream/dynamic_library.hpp"
#include "gpustream_fake_amd_smi_lib_paths.hpp"
#include "gpustream_fake_paths.hpp"

namespace gpustream {
namespace {

using namespace doctor_test;  // NOLINT(google-build-using-namespace)

/// The fake libamd_smi.so's scenario and event log (tests/fakes/amd_smi_lib), set for the
/// doctor's dlopen of it, and unset again.
class FakeAmdSmiLib {
 public:
  explicit FakeAmdSmiLib(TempTree& tree) : tree_(tree), log_(tree.file("amdsmi.log", "")) {
    ::setenv(fakes::kFakeAmdSmiLogEnv, log_.c_str(), 1);
  }
  ~FakeAmdSmiLib() {
    ::unsetenv(fakes::kFakeAmdSmiLogEnv);
    ::unsetenv(fakes::kFakeAmdSmiScenarioEnv);
  }
  FakeAmdSmiLib(const FakeAmdSmiLib&) = delete;
  FakeAmdSmiLib& operator=(const FakeAmdSmiLib&) = delete;

  void scenario(const std::string& text) {
    ::setenv(fakes::kFakeAmdSmiScenarioEnv, tree_.file("amdsmi.txt", text).c_str(), 1);
  }
  /// Lines of the fake's event log equal to `what` ("init", "shutdown", ...).
  int count(const std::string& what) const {
    std::ifstream in(log_);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line == what ? 1 : 0;
    return n;
  }

 private:
  TempTree& tree_;
  std::string log_;
};

constexpr const char* kTwoGpus =
    "version=26.1.0\ndevices=2\ndevice.0.bdf=0000:03:00.0\ndevice.1.bdf=0000:04:00.0\n";

TEST(Doctor, RenderNodeOutsideTheGroupIsABlockerWithTheUsermodFix) {
  Machine m;
  m.options.probes = {"amd"};
  m.gpu("0000:03:00.0", "amdgpu", 0);
  m.identity(1000, {}, kPtraceBit);  // not in the node's group
  auto r = m.run();
  const auto* f = find(r, "amd", "render_node_access", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("renderD128"), std::string::npos);
  EXPECT_NE(f->fix.find("sudo usermod -aG render,video $USER"), std::string::npos);
  EXPECT_FALSE(r.fully_readable());

  m.identity(1000, {my_gid()}, kPtraceBit);  // in it
  r = m.run();
  EXPECT_EQ(find(r, "amd", "render_node_access", Status::blocker), nullptr) << dump(r);
  EXPECT_NE(find(r, "amd", "render_node_access", Status::ok), nullptr) << dump(r);
  EXPECT_TRUE(r.fully_readable()) << dump(r);
}

TEST(Doctor, RenderNodeMissingFromDevIsAWarning) {
  Machine m;
  m.options.probes = {"amd"};
  m.gpu("0000:03:00.0", "amdgpu", 0);
  m.tree().remove("dev/dri");  // sysfs has the GPU, /dev/dri was not passed in
  auto r = m.run();
  const auto* f = find(r, "amd", "render_node_access", Status::warn);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->fix.find("--device /dev/dri"), std::string::npos);
  m.gpu("0000:03:00.0", "amdgpu", 0);
  r = m.run();
  EXPECT_EQ(find(r, "amd", "render_node_access", Status::warn), nullptr) << dump(r);
}

TEST(Doctor, AmdgpuLoadedWithoutSysfsDevicesOrAmdSmiHasNoSource) {
  Machine m;
  m.options.probes = {"amd"};
  m.tree().dir("sys/module/amdgpu");  // e.g. a container without the host's /sys/class/drm
  auto r = m.run();
  const auto* f = find(r, "amd", "source", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->fix.find("--sysfs-root"), std::string::npos);
  m.gpu("0000:03:00.0", "amdgpu", 0);  // sysfs shows it: the fast path works
  r = m.run();
  EXPECT_EQ(find(r, "amd", "source", Status::blocker), nullptr) << dump(r);
  const auto* source = find(r, "amd", "source", Status::info);
  ASSERT_NE(source, nullptr) << dump(r);
  EXPECT_NE(source->detail.find("auto takes sysfs (passed over library: "), std::string::npos)
      << dump(r);
  EXPECT_TRUE(r.fully_readable()) << dump(r);
}

TEST(Doctor, OtherUsersFdinfoNeedsRootOrCapSysPtrace) {
  Machine m;
  m.options.probes = {"intel"};
  m.gpu("0000:00:02.0", "i915", 1);
  m.identity(1000, {my_gid()}, 0);  // no CAP_SYS_PTRACE
  auto r = m.run();
  const auto* f = find(r, "intel", "fdinfo_access", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->fix.find("setcap cap_sys_ptrace+ep"), std::string::npos);
  EXPECT_NE(f->fix.find("AmbientCapabilities=CAP_SYS_PTRACE"), std::string::npos);
  EXPECT_FALSE(r.fully_readable());

  m.identity(1000, {my_gid()}, kPtraceBit);
  r = m.run();
  EXPECT_EQ(find(r, "intel", "fdinfo_access", Status::blocker), nullptr) << dump(r);
  EXPECT_NE(find(r, "intel", "fdinfo_access", Status::ok), nullptr);
  m.identity(0, {}, 0);  // root
  r = m.run();
  EXPECT_NE(find(r, "intel", "fdinfo_access", Status::ok), nullptr) << dump(r);
  EXPECT_TRUE(r.fully_readable()) << dump(r);
}

TEST(Doctor, SuspendedDeviceIsSaidWithoutBlocking) {
  Machine m;
  m.options.probes = {"amd"};
  m.gpu("0000:03:00.0", "amdgpu", 0, "suspended");
  auto r = m.run();
  const auto* f = find(r, "amd", "runtime_suspended", Status::warn);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("absent"), std::string::npos);
  EXPECT_NE(f->fix.find("/sys/bus/pci/devices/0000:03:00.0/power/control"), std::string::npos);
  EXPECT_TRUE(r.fully_readable());

  m.tree().file("sys/devices/pci0000:00/0000:03:00.0/power/runtime_status", "active\n");
  r = m.run();
  EXPECT_EQ(find(r, "amd", "runtime_suspended"), nullptr) << dump(r);
}

TEST(Doctor, AmdToolsVersionsMissingHungAndNeeded) {
  Machine m;
  m.options.probes = {"amd"};
  test::FakeAmdCli amd(m.tree(), fakes::kFakeAmdSmi, "amd-smi");
  test::FakeAmdCli rocm(m.tree(), fakes::kFakeRocmSmi, "rocm-smi");
  amd.set_output("version.json",
                 "AMDSMI Tool: 24.6.2+2b02a07 | AMDSMI Library version: 24.6.2.0 | ROCm version: "
                 "6.2.0\n");
  rocm.set_output("rocm-smi.json", "ROCM-SMI version: 2.3.1\nROCM-SMI-LIB version: 7.3.0\n");
  m.options.probe_settings.set("amd", "amd_smi", amd.path());
  m.options.probe_settings.set("amd", "rocm_smi", rocm.path());
  m.options.tool_timeout = std::chrono::milliseconds{300};
  auto r = m.run();
  const auto* a = find(r, "amd", "amd_smi", Status::ok);
  ASSERT_NE(a, nullptr) << dump(r);
  EXPECT_NE(a->detail.find("AMDSMI Tool: 24.6.2"), std::string::npos);
  const auto* b = find(r, "amd", "rocm_smi", Status::ok);
  ASSERT_NE(b, nullptr) << dump(r);
  EXPECT_NE(b->detail.find("ROCM-SMI version: 2.3.1"), std::string::npos);

  amd.set_mode("hang");
  rocm.set_mode("garbage");
  r = m.run();
  const auto* hung = find(r, "amd", "amd_smi", Status::warn);
  ASSERT_NE(hung, nullptr) << dump(r);
  EXPECT_NE(hung->detail.find("did not finish within 300 ms"), std::string::npos);
  EXPECT_NE(find(r, "amd", "rocm_smi", Status::warn), nullptr) << dump(r);
  EXPECT_TRUE(r.fully_readable());  // sysfs is the source: the tools are optional

  m.options.probe_settings.set("amd", "source", "amd-smi");  // now it is the only source
  r = m.run();
  EXPECT_NE(find(r, "amd", "amd_smi", Status::blocker), nullptr) << dump(r);
  EXPECT_FALSE(r.fully_readable());

  m.options.probe_settings.set("amd", "amd_smi", m.tree().path("no/amd-smi"));
  m.options.probe_settings.set("amd", "source", "auto");
  r = m.run();
  EXPECT_NE(find(r, "amd", "amd_smi", Status::info), nullptr) << dump(r);
}

TEST(Doctor, AmdSmiLibraryVersionAndGpusThroughTheBackendThenShutDown) {
  Machine m;
  m.options.probes = {"amd"};
  FakeAmdSmiLib lib(m.tree());
  lib.scenario(kTwoGpus);
  m.options.probe_settings.set("amd", "library", fakes::kFakeAmdSmiLib);
  auto r = m.run();
  const auto* f = find(r, "amd", "amd_smi_library", Status::ok);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("AMD SMI library 26.1.0 (struct layout v26, known)"), std::string::npos)
      << f->detail;
  EXPECT_NE(f->detail.find("2 GPU(s): 0000:03:00.0, 0000:04:00.0"), std::string::npos) << f->detail;
  EXPECT_EQ(lib.count("init"), 1);
  EXPECT_EQ(lib.count("shutdown"), 1);  // what the doctor initialized, it ended
  const auto* source = find(r, "amd", "source", Status::info);
  ASSERT_NE(source, nullptr) << dump(r);
  EXPECT_NE(source->detail.find("auto takes the library"), std::string::npos) << dump(r);
  EXPECT_TRUE(r.fully_readable()) << dump(r);

  // A ROCm 6.x library (23.x/24.x) is known too.
  lib.scenario("version=24.6.0\ndevices=1\n");
  r = m.run();
  f = find(r, "amd", "amd_smi_library", Status::ok);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("24.6.0 (struct layout v6, known)"), std::string::npos) << f->detail;
}

TEST(Doctor, AmdSmiLibraryUsedByTheHostProgramIsNotShutDown) {
  Machine m;
  m.options.probes = {"amd"};
  FakeAmdSmiLib lib(m.tree());
  lib.scenario(kTwoGpus);
  m.options.probe_settings.set("amd", "library", fakes::kFakeAmdSmiLib);
  {
    auto host = DynamicLibrary::load(fakes::kFakeAmdSmiLib);  // loaded before gpustream
    const auto r = m.run();
    const auto* f = find(r, "amd", "amd_smi_library", Status::ok);
    ASSERT_NE(f, nullptr) << dump(r);
    EXPECT_NE(f->detail.find("not shut down"), std::string::npos) << f->detail;
    EXPECT_EQ(lib.count("shutdown"), 0);  // the host guard: the program keeps it initialized
    EXPECT_EQ(host.required<std::uint32_t()>("amdsmi_shut_down")(), 0u);  // still up to end
  }
  // Without the host, the doctor's own init is ended again.
  const auto r = m.run();
  const auto* f = find(r, "amd", "amd_smi_library", Status::ok);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_EQ(f->detail.find("not shut down"), std::string::npos) << f->detail;
  EXPECT_EQ(lib.count("init"), lib.count("shutdown"));
}

TEST(Doctor, UnknownAmdSmiLibraryVersionSaysWhyAndTheSupportedReleases) {
  Machine m;
  m.options.probes = {"amd"};
  m.gpu("0000:03:00.0", "amdgpu", 0);
  FakeAmdSmiLib lib(m.tree());
  lib.scenario("version=25.3.0\ndevices=1\n");
  m.options.probe_settings.set("amd", "library", fakes::kFakeAmdSmiLib);
  m.options.probe_settings.set("amd", "source", "library");  // the only source: a blocker
  auto r = m.run();
  const auto* f = find(r, "amd", "amd_smi_library", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("version 25.3 is not one gpustream knows"), std::string::npos)
      << f->detail;
  EXPECT_NE(f->fix.find("ROCm 6.0-6.3"), std::string::npos) << f->fix;
  EXPECT_NE(f->fix.find("ROCm 7.x"), std::string::npos) << f->fix;
  EXPECT_EQ(lib.count("init"), lib.count("shutdown"));

  m.options.probe_settings.set("amd", "source", "auto");  // auto passes it over to sysfs: a warning
  r = m.run();
  ASSERT_NE(find(r, "amd", "amd_smi_library", Status::warn), nullptr) << dump(r);
  EXPECT_NE(find(r, "amd", "source", Status::info)->detail.find("auto takes sysfs"),
            std::string::npos)
      << dump(r);
  EXPECT_TRUE(r.fully_readable()) << dump(r);

  lib.scenario("version=26.1.0\ndevices=1\n");  // a supported release
  m.options.probe_settings.set("amd", "source", "library");
  r = m.run();
  EXPECT_EQ(find(r, "amd", "amd_smi_library", Status::blocker), nullptr) << dump(r);
  EXPECT_NE(find(r, "amd", "amd_smi_library", Status::ok), nullptr) << dump(r);
  EXPECT_TRUE(r.fully_readable()) << dump(r);
}

TEST(Doctor, AmdSmiInitFailureIsABlockerWithItsFix) {
  Machine m;
  m.options.probes = {"amd"};
  m.gpu("0000:03:00.0", "amdgpu", 0);
  FakeAmdSmiLib lib(m.tree());
  lib.scenario("init_fail=DRIVER_NOT_LOADED\n");
  m.options.probe_settings.set("amd", "library", fakes::kFakeAmdSmiLib);
  m.options.probe_settings.set("amd", "source", "library");
  auto r = m.run();
  const auto* f = find(r, "amd", "amd_smi_library", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("amdsmi_init(AMDSMI_INIT_AMD_GPUS)"), std::string::npos) << f->detail;
  EXPECT_NE(f->detail.find("AMDSMI_STATUS_DRIVER_NOT_LOADED"), std::string::npos) << f->detail;
  EXPECT_NE(f->fix.find("modprobe amdgpu"), std::string::npos) << f->fix;

  lib.scenario("init_fail=NO_PERM\n");
  r = m.run();
  f = find(r, "amd", "amd_smi_library", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->fix.find("usermod -aG render,video"), std::string::npos) << f->fix;

  lib.scenario("devices=1\n");
  r = m.run();
  EXPECT_EQ(find(r, "amd", "amd_smi_library", Status::blocker), nullptr) << dump(r);
  EXPECT_NE(find(r, "amd", "amd_smi_library", Status::ok), nullptr) << dump(r);
}

TEST(Doctor, MissingAmdSmiLibraryBlocksOnlyWhenTheSourceIsLibrary) {
  Machine m;
  m.options.probes = {"amd"};
  m.gpu("0000:03:00.0", "amdgpu", 0);
  m.options.probe_settings.set("amd", "source", "library");
  auto r = m.run();
  const auto* f = find(r, "amd", "amd_smi_library", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("no/libamd_smi.so"), std::string::npos) << f->detail;
  EXPECT_NE(f->fix.find("--amd-smi-library"), std::string::npos) << f->fix;
  EXPECT_FALSE(r.fully_readable());

  m.options.probe_settings.set("amd", "source",
                               "auto");  // the library is optional: sysfs is the source
  r = m.run();
  EXPECT_EQ(find(r, "amd", "amd_smi_library", Status::blocker), nullptr) << dump(r);
  EXPECT_NE(find(r, "amd", "amd_smi_library", Status::info), nullptr) << dump(r);
  EXPECT_TRUE(r.fully_readable()) << dump(r);

  m.options.probe_settings.set("amd", "source", "cli");  // not looked at; amd-smi is what is needed
  r = m.run();
  EXPECT_EQ(find(r, "amd", "amd_smi_library", Status::blocker), nullptr) << dump(r);
  EXPECT_NE(find(r, "amd", "amd_smi", Status::blocker), nullptr) << dump(r);
}

}  // namespace
}  // namespace gpustream
