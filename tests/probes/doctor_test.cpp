// `gpustream doctor` (gpustream::doctor::run) on generated sysfs/procfs/devfs trees and the
// vendor fakes: each finding appears in the bad case and not in the good one.
#include "gpustream/probes/doctor.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "amd/amd_fake_cli.hpp"
#include "gpustream/dynamic_library.hpp"
#include "gpustream/probes/apple_probe.hpp"
#include "gpustream/probes/machine_view.hpp"
#include "gpustream_fake_amd_smi_lib_paths.hpp"
#include "gpustream_fake_level_zero_paths.hpp"
#include "gpustream_fake_macmon_paths.hpp"
#include "gpustream_fake_paths.hpp"
#include "nvidia/nvidia_fakes.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

using doctor::Finding;
using doctor::Status;
using test::TempTree;

constexpr std::uint64_t kPtraceBit = std::uint64_t{1} << 19;

/// A generated machine: sys/, proc/, dev/ and a root folder, and the doctor's options on it.
class Machine {
 public:
  Machine() {
    tree_.file("proc/meminfo", "MemTotal:       16318784 kB\nMemAvailable:    8000000 kB\n");
    host_proc();
    identity(0, {}, 0);
    tree_.dir("root");
    tree_.dir("dev");
    tree_.dir("sys/class/drm");
    options.paths = {.sysfs_root = tree_.path("sys"),
                     .procfs_root = tree_.path("proc"),
                     .devfs_root = tree_.path("dev")};
    options.root_dir = tree_.path("root");
    options.probe_settings.set("nvidia", "library", tree_.path("no/libnvidia-ml.so.1"));
    options.probe_settings.set("nvidia", "nvidia_smi", tree_.path("no/nvidia-smi"));
    options.probe_settings.set("amd", "amd_smi", tree_.path("no/amd-smi"));
    options.probe_settings.set("amd", "rocm_smi", tree_.path("no/rocm-smi"));
    options.probe_settings.set("amd", "library", tree_.path("no/libamd_smi.so"));
    options.probe_settings.set("intel", "level_zero_library", "");
    options.tool_timeout = std::chrono::milliseconds{2000};
    options.getenv = [this](std::string_view n) -> std::optional<std::string> {
      const auto it = env.find(std::string(n));
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
  }

  TempTree& tree() { return tree_; }

  /// <proc>/self/status of a process with this uid (gid = uid), groups and CapEff.
  void identity(std::uint32_t uid, const std::vector<std::uint32_t>& groups, std::uint64_t caps) {
    std::string g;
    for (auto x : groups) g += std::to_string(x) + " ";
    char cap[32];
    std::snprintf(cap, sizeof cap, "%016llx", static_cast<unsigned long long>(caps));
    const auto u = std::to_string(uid);
    tree_.file("proc/self/status", "Name:\tgpustream\nPid:\t4242\nUid:\t" + u + "\t" + u + "\t" +
                                       u + "\t" + u + "\nGid:\t" + u + "\t" + u + "\t" + u + "\t" +
                                       u + "\nGroups:\t" + g + "\nCapEff:\t" + cap + "\n");
  }
  void host_proc() { tree_.symlink("proc/1/ns/pid", "pid:[4026531836]"); }
  void container_proc() {
    tree_.remove("proc/1/ns/pid");
    tree_.symlink("proc/1/ns/pid", "pid:[4026532513]");
  }

  /// A PCI GPU bound to `driver` with card<N> and renderD<128+N> (a file with mode 0660 and this
  /// process's group).
  void gpu(const std::string& bus, const std::string& driver, int n,
           const std::string& runtime = "active") {
    const std::string dev = "sys/devices/pci0000:00/" + bus;
    tree_.file(dev + "/uevent", "DRIVER=" + driver + "\nPCI_SLOT_NAME=" + bus + "\n");
    tree_.file(dev + "/power/runtime_status", runtime + "\n");
    tree_.dir("sys/module/" + driver);
    for (const auto& node : {"card" + std::to_string(n), "renderD" + std::to_string(128 + n)}) {
      tree_.dir("sys/class/drm/" + node);
      tree_.symlink("sys/class/drm/" + node + "/device", tree_.path(dev));
    }
    const auto render = tree_.file("dev/dri/renderD" + std::to_string(128 + n), "");
    ::chmod(render.c_str(), 0660);
  }

  doctor::Report run() const { return doctor::run(options); }

  doctor::Options options;
  std::map<std::string, std::string> env;

 private:
  TempTree tree_;
};

std::uint32_t my_gid() { return static_cast<std::uint32_t>(::getegid()); }

const Finding* find(const doctor::Report& r, std::string_view probe, std::string_view check) {
  for (const auto& f : r.findings)
    if (f.probe == probe && f.check == check) return &f;
  return nullptr;
}

const Finding* find(const doctor::Report& r, std::string_view probe, std::string_view check,
                    Status status) {
  for (const auto& f : r.findings)
    if (f.probe == probe && f.check == check && f.status == status) return &f;
  return nullptr;
}

std::string dump(const doctor::Report& r) { return doctor::to_text(r); }

/// A fake Level Zero loader opened by the test to set its scenario; the doctor's dlopen of the
/// same path shares this instance.
class FakeZe {
 public:
  FakeZe(const char* path, const std::string& scenario) : lib_(DynamicLibrary::load(path)) {
    lib_.required<void(const char*)>("fake_ze_configure")(scenario.c_str());
  }

 private:
  DynamicLibrary lib_;
};

constexpr const char* kZeScenario = "devices=1\nd0.bus=0000:03:00.0\nd0.engines=compute\n";

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

TEST(Doctor, NoGpuMeansNoDrmChecksAndExitZero) {
  Machine m;
  m.options.probes = {"amd", "intel"};
  m.identity(1000, {}, 0);  // would be blocked, but there is nothing to read
  const auto r = m.run();
  EXPECT_EQ(find(r, "amd", "fdinfo_access"), nullptr) << dump(r);
  EXPECT_EQ(find(r, "intel", "render_node_access"), nullptr);
  EXPECT_NE(find(r, "amd", "drm_devices", Status::info), nullptr);
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

TEST(Doctor, ContainerProcThatIsNotTheHostsIsABlocker) {
  Machine m;
  m.options.probes = {"host"};
  m.tree().file("root/.dockerenv", "");
  m.container_proc();
  auto r = m.run();
  const auto* f = find(r, "host", "host_proc", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("pid:[4026532513]"), std::string::npos);
  EXPECT_NE(f->fix.find("--pid=host"), std::string::npos);
  EXPECT_NE(find(r, "host", "container", Status::info), nullptr);
  EXPECT_FALSE(r.fully_readable());

  m.host_proc();  // --pid=host: pid 1 is the host's init
  r = m.run();
  EXPECT_EQ(find(r, "host", "host_proc", Status::blocker), nullptr) << dump(r);
  EXPECT_NE(find(r, "host", "host_proc", Status::ok), nullptr);
  EXPECT_TRUE(r.fully_readable()) << dump(r);
}

TEST(Doctor, ContainerWhosePidNamespaceCannotBeReadIsAWarning) {
  Machine m;
  m.options.probes = {"host"};
  m.tree().remove("proc/1");
  m.env["container"] = "podman";
  auto r = m.run();
  EXPECT_NE(find(r, "host", "host_proc", Status::warn), nullptr) << dump(r);
  EXPECT_NE(find(r, "host", "container_devices", Status::warn), nullptr) << dump(r);
  m.env.clear();  // not a container: nothing to warn about
  r = m.run();
  EXPECT_EQ(find(r, "host", "host_proc", Status::warn), nullptr) << dump(r);
  EXPECT_EQ(find(r, "host", "container"), nullptr);
}

TEST(Doctor, UnreadableMeminfoIsABlocker) {
  Machine m;
  m.options.probes = {"host"};
  auto r = m.run();
  EXPECT_NE(find(r, "host", "meminfo", Status::ok), nullptr) << dump(r);
  m.tree().remove("proc/meminfo");
  r = m.run();
  EXPECT_NE(find(r, "host", "meminfo", Status::blocker), nullptr) << dump(r);
  EXPECT_FALSE(r.fully_readable());
}

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

TEST(Doctor, MacmonVersionAndNotMacos) {
  Machine m;
  m.options.probes = {"apple"};
  auto r = m.run();
  if (!kIsMacOS) {
    const auto* f = find(r, "apple", "macmon", Status::info);
    ASSERT_NE(f, nullptr) << dump(r);
    EXPECT_NE(f->detail.find("not macOS"), std::string::npos);
  }
  m.options.probe_settings.set("apple", "macmon", fakes::kFakeMacmon);
  r = m.run();
  const auto* f = find(r, "apple", "macmon", Status::ok);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("macmon 0.8.1"), std::string::npos);
  m.options.probe_settings.set("apple", "macmon", m.tree().path("no/macmon"));
  r = m.run();
  const auto* missing = find(r, "apple", "macmon", Status::blocker);
  ASSERT_NE(missing, nullptr) << dump(r);
  EXPECT_NE(missing->fix.find("brew install macmon"), std::string::npos);
}

TEST(Doctor, LevelZeroLoaderVersionAndDevices) {
  FakeZe ze(fakes::kFakeLevelZero, kZeScenario);
  Machine m;
  m.options.probes = {"intel"};
  m.gpu("0000:03:00.0", "i915", 0);
  m.options.probe_settings.set("intel", "level_zero_library", fakes::kFakeLevelZero);
  auto r = m.run();
  const auto* f = find(r, "intel", "level_zero", Status::ok);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("zesInit"), std::string::npos) << f->detail;
  EXPECT_NE(f->detail.find("API 1.17"), std::string::npos) << f->detail;
  EXPECT_NE(f->detail.find("1 Level Zero device(s)"), std::string::npos) << f->detail;

  m.options.probe_settings.set("intel", "level_zero_library",
                               m.tree().path("no/libze_loader.so.1"));
  r = m.run();
  const auto* missing = find(r, "intel", "level_zero", Status::info);
  ASSERT_NE(missing, nullptr) << dump(r);
  EXPECT_NE(missing->detail.find("cannot load"), std::string::npos);
  EXPECT_NE(missing->fix.find("libze1"), std::string::npos);
  EXPECT_TRUE(r.fully_readable()) << dump(r);
}

TEST(Doctor, LegacyLevelZeroLoaderNeedsZesEnableSysman) {
  ::unsetenv("ZES_ENABLE_SYSMAN");
  FakeZe legacy(fakes::kFakeLevelZeroLegacy, kZeScenario);
  FakeZe current(fakes::kFakeLevelZero, kZeScenario);
  Machine m;
  m.options.probes = {"intel"};
  m.gpu("0000:03:00.0", "i915", 0);
  m.options.probe_settings.set("intel", "level_zero_library", fakes::kFakeLevelZeroLegacy);
  auto r = m.run();
  const auto* f = find(r, "intel", "zes_enable_sysman", Status::warn);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_EQ(f->fix, "export ZES_ENABLE_SYSMAN=1");

  m.env["ZES_ENABLE_SYSMAN"] = "1";
  r = m.run();
  EXPECT_EQ(find(r, "intel", "zes_enable_sysman", Status::warn), nullptr) << dump(r);
  EXPECT_NE(find(r, "intel", "zes_enable_sysman", Status::ok), nullptr);

  Machine no_gpu;  // without an Intel GPU it is only information
  no_gpu.options.probes = {"intel"};
  no_gpu.options.probe_settings.set("intel", "level_zero_library", fakes::kFakeLevelZeroLegacy);
  r = no_gpu.run();
  EXPECT_NE(find(r, "intel", "zes_enable_sysman", Status::info), nullptr) << dump(r);

  m.env.clear();
  m.options.probe_settings.set("intel", "level_zero_library",
                               fakes::kFakeLevelZero);  // has zesInit: no such need
  r = m.run();
  EXPECT_EQ(find(r, "intel", "zes_enable_sysman"), nullptr) << dump(r);
}

TEST(Doctor, JsonDocumentShape) {
  Machine m;
  m.options.probes = {"amd", "host", "simulated"};
  m.gpu("0000:03:00.0", "amdgpu", 0);
  m.identity(1000, {}, 0);  // two blockers: render node and fdinfo
  const auto r = m.run();
  const auto doc = boost::json::parse(doctor::to_json(r)).as_object();
  EXPECT_EQ(doc.at("schema").as_string(), "gpustream-doctor/1");
  EXPECT_EQ(doc.at("fully_readable").as_bool(), false);
  EXPECT_EQ(doc.at("blockers").to_number<int>(), 2);
  EXPECT_EQ(doc.at("warnings").to_number<std::size_t>(), r.count(Status::warn));
  const auto& probes = doc.at("probes").as_array();
  ASSERT_EQ(probes.size(), 3U);
  EXPECT_EQ(probes[0].at("probe").as_string(), "amd");
  EXPECT_EQ(probes[0].at("status").as_string(), "blocker");
  EXPECT_EQ(probes[2].at("probe").as_string(), "simulated");
  const auto& findings = doc.at("findings").as_array();
  ASSERT_EQ(findings.size(), r.findings.size());
  for (const auto& v : findings) {
    const auto& f = v.as_object();
    EXPECT_EQ(f.size(), 5U);
    for (const auto* key : {"probe", "check", "status", "detail", "fix"})
      EXPECT_TRUE(f.at(key).is_string()) << key;
    const auto status = f.at("status").as_string();
    EXPECT_TRUE(status == "ok" || status == "info" || status == "warn" || status == "blocker");
  }
  // The text form groups per probe and ends with the verdict.
  const auto text = doctor::to_text(r);
  EXPECT_LT(text.find("amd: blocker"), text.find("host: "));
  EXPECT_NE(text.find("2 blocker(s)"), std::string::npos);
}

TEST(Doctor, OversizedStatusFileIsNotReadWhole) {
  Machine m;
  m.options.probes = {"host"};
  // Worst input: a status file larger than the bound.
  m.tree().file("proc/self/status", "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n" +
                                        std::string(machine::kMaxViewFileBytes + 1, 'x'));
  const auto r = m.run();
  EXPECT_NE(find(r, "host", "identity", Status::warn), nullptr) << dump(r);
}

TEST(Doctor, ToolOutputIsCappedInBytes) {
  // Worst input: 8 MiB of output without a version; at most 16 KiB is kept, and the detail
  // shows a short printable head.
  const auto v = machine::tool_version({fakes::kFakeTool, "bytes", "8388608"},
                                       std::chrono::milliseconds{10000}, {}, 16 * 1024);
  EXPECT_EQ(v.state, machine::ToolVersion::State::garbage);
  EXPECT_LT(v.detail.size(), v.command.size() + 120) << v.detail;
  // A pid is not a version: "(pid 1234)" has no "<digits>.<digits>".
  EXPECT_EQ(machine::tool_version({fakes::kFakeTool, "print", "Traceback (pid 1234)"},
                                  std::chrono::milliseconds{10000})
                .state,
            machine::ToolVersion::State::garbage);
  const auto ok = machine::tool_version({fakes::kFakeTool, "print", "tool 1.2.3"},
                                        std::chrono::milliseconds{10000});
  EXPECT_EQ(ok.state, machine::ToolVersion::State::ok);
  EXPECT_EQ(ok.version, "tool 1.2.3");
}

}  // namespace
}  // namespace gpustream
