// `gpustream capture DIR` and `gpustream snapshot --replay-capture DIR`, end to end with the real
// binary: a generated machine per vendor (sysfs and procfs trees as the probe tests build them,
// the fake amd-smi / rocm-smi / nvidia-smi / macmon executables, the fake libnvidia-ml.so.1 with
// a scenario) is captured, replayed, and the two snapshots are compared field by field except
// their times. Also: a missing tool, a hung tool, the per-file and total byte caps, and that no
// command line or environment is ever captured.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "cli_test_util.hpp"
#include "gpustream_fake_amd_paths.hpp"
#include "gpustream_fake_macmon_paths.hpp"
#include "gpustream_fake_nvidia_smi_paths.hpp"
#include "gpustream_fake_nvml_paths.hpp"

namespace gpustream::cli::test {
namespace {

namespace json = boost::json;

/// Sets an environment variable for the tests' children and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// A generated machine: sysfs, procfs and devfs trees, and the flags that point the CLI at them.
class Machine {
 public:
  Machine() {
    t_.write(
        "proc/meminfo",
        "MemTotal:       65536000 kB\nMemFree:        1000000 kB\n"
        "MemAvailable:   32768000 kB\nSwapTotal:       2097148 kB\nSwapFree:        2097148 kB\n");
    // "This process" of the host probe: the same in the capture and the replay.
    link("proc/self", "4242");
    t_.write("proc/4242/status",
             "Name:\tgpustream\nUmask:\t0022\nVmRSS:\t   10240 kB\n"
             "Uid:\t1000\t1000\t1000\t1000\n");
    fs::create_directories(t_.path() / "dev/dri");
  }

  std::string path(const std::string& rel) const { return t_.file(rel); }
  void write(const std::string& rel, const std::string& content) const { t_.write(rel, content); }
  void link(const std::string& rel, const std::string& target) const {
    fs::create_directories((t_.path() / rel).parent_path());
    fs::create_symlink(target, t_.path() / rel);
  }

  /// A PCI GPU at `bus` with DRM node cardN (and renderD<128+N>), the way sysfs lays it out:
  /// class/drm/cardN -> ../../devices/.../drm/cardN, its device link, the driver link.
  std::string gpu(const std::string& bus, int card, const std::string& vendor,
                  const std::string& device, const std::string& driver) const {
    const std::string dev = "sys/devices/pci0000:00/" + bus;
    write(dev + "/vendor", vendor + "\n");
    write(dev + "/device", device + "\n");
    write(dev + "/revision", "0xc8\n");
    write(dev + "/uevent", "DRIVER=" + driver + "\nPCI_CLASS=30000\nPCI_SLOT_NAME=" + bus + "\n");
    write(dev + "/power/runtime_status", "active\n");
    link(dev + "/driver", "../../../bus/pci/drivers/" + driver);
    for (const std::string& node :
         {"card" + std::to_string(card), "renderD" + std::to_string(128 + card)}) {
      fs::create_directories(t_.path() / (dev + "/drm/" + node));
      link(dev + "/drm/" + node + "/device", "../../../" + bus);
      // Absolute, as some generated trees and bind mounts have: rewritten relative in DIR.
      link("sys/class/drm/" + node, path(dev + "/drm/" + node));
    }
    return dev;
  }

  void amd_card() const {
    const auto dev = gpu("0000:03:00.0", 0, "0x1002", "0x744c", "amdgpu");
    write(dev + "/product_name", "AMD Radeon RX 7900 XTX\n");
    write(dev + "/gpu_busy_percent", "37\n");
    write(dev + "/mem_busy_percent", "12\n");
    write(dev + "/mem_info_vram_total", "25753026560\n");
    write(dev + "/mem_info_vram_used", "1073741824\n");
    write(dev + "/mem_info_gtt_total", "33554432000\n");
    write(dev + "/mem_info_gtt_used", "16777216\n");
    write(dev + "/pp_dpm_mclk", "0: 96Mhz\n1: 456Mhz\n2: 1249Mhz *\n");
    write(dev + "/unique_id", "9246a1c1b2f47d4a\n");
    const auto hw = dev + "/hwmon/hwmon2";
    write(hw + "/name", "amdgpu\n");
    write(hw + "/temp1_input", "45000\n");
    write(hw + "/temp1_label", "edge\n");
    write(hw + "/temp2_input", "58000\n");
    write(hw + "/temp2_label", "junction\n");
    write(hw + "/power1_average", "95000000\n");
    write(hw + "/power1_cap", "327000000\n");
    write(hw + "/fan1_input", "1100\n");
    write(hw + "/freq1_input", "2482000000\n");
    write(hw + "/freq1_label", "sclk\n");
    // A DRM client of it: comm, statm, cgroup, one DRM fd and one ordinary fd.
    client(300, "blender", 7, "renderD128",
           "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-client-id:\t12\n"
           "drm-pdev:\t0000:03:00.0\ndrm-memory-vram:\t524288 KiB\ndrm-memory-gtt:\t2048 KiB\n"
           "drm-engine-gfx:\t1000000 ns\ndrm-engine-compute:\t0 ns\n");
  }

  void intel_cards() const {
    const auto i915 = gpu("0000:00:02.0", 1, "0x8086", "0x56a0", "i915");
    const auto hw = i915 + "/hwmon/hwmon5";
    write(hw + "/name", "i915\n");
    write(hw + "/energy1_input", "123456789\n");
    write(hw + "/power1_max", "0\n");
    write(hw + "/power1_rated_max", "225000000\n");
    write(hw + "/temp1_input", "54000\n");
    write(i915 + "/drm/card1/gt/gt0/rps_act_freq_mhz", "2000\n");
    write(i915 + "/drm/card1/gt/gt0/rps_cur_freq_mhz", "2050\n");
    const auto xe = gpu("0000:04:00.0", 2, "0x8086", "0x0bd5", "xe");
    const auto xhw = xe + "/hwmon/hwmon7";
    write(xhw + "/name", "xe\n");
    write(xhw + "/energy1_input", "0\n");
    write(xhw + "/energy2_input", "5000000\n");
    write(xhw + "/temp2_input", "61000\n");
    write(xhw + "/temp2_label", "pkg\n");
    write(xe + "/tile0/gt0/freq0/act_freq", "1600\n");
    write(xe + "/tile0/vram0/total_bytes", "8589934592\n");
    write(xe + "/tile0/vram0/used_bytes", "1073741824\n");
    client(
        301, "ffmpeg", 4, "renderD129",
        "pos:\t0\nflags:\t02100002\ndrm-driver:\ti915\ndrm-client-id:\t3\n"
        "drm-pdev:\t0000:00:02.0\ndrm-total-system0:\t6044 KiB\ndrm-resident-system0:\t6044 KiB\n"
        "drm-engine-render:\t5000000 ns\ndrm-engine-video:\t0 ns\n");
  }

  /// A process with secrets where a capture must not look.
  void secret_process(std::int64_t pid) const {
    const auto p = "proc/" + std::to_string(pid);
    write(p + "/cmdline", std::string("mysql\0--password=SECRET-CMDLINE", 31));
    write(p + "/environ", std::string("API_TOKEN=SECRET-ENVIRON\0", 25));
    write(p + "/status", "Name:\tmysql\nVmRSS:\t 100 kB\n");
    write(p + "/maps", "7f00-7f01 r-xp 0 0:0 0 /opt/SECRET-MAPS.so\n");
    write(p + "/comm", "mysql\n");
    link(p + "/fd/0", "/dev/null");
    link(p + "/fd/3", "/home/user/SECRET-FILE.txt");
    write(p + "/fdinfo/3", "pos:\t0\nflags:\t02\n");
  }

  void client(std::int64_t pid, const std::string& comm, int fd, const std::string& node,
              const std::string& fdinfo) const {
    const auto p = "proc/" + std::to_string(pid);
    write(p + "/comm", comm + "\n");
    write(p + "/statm", "100000 25600 3000 100 0 20000 0\n");
    write(p + "/cgroup",
          "0::/system.slice/docker-"
          "4f8a1c2b3d4e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeef.scope\n");
    write(p + "/cmdline", std::string("render\0--key=SECRET-CLIENT", 26));
    write(p + "/environ", std::string("HOME=/root\0SECRET-CLIENT-ENV=1", 30));
    link(p + "/fd/" + std::to_string(fd), "/dev/dri/" + node);
    write(p + "/fdinfo/" + std::to_string(fd), fdinfo);
    link(p + "/fd/1", "pipe:[12345]");
    write(p + "/fdinfo/1", "pos:\t0\nflags:\t01\n");
  }

  /// --sysfs-root, --procfs-root, --devfs-root.
  std::string roots() const {
    return "--sysfs-root " + path("sys") + " --procfs-root " + path("proc") + " --devfs-root " +
           path("dev");
  }

 private:
  TempDir t_;
};

/// `snapshot --json` without what differs between two runs by nature: the times, the sequence
/// numbers (one counter for the channel: they follow the order in which the probes answered),
/// and the probes' reasons (they name the paths read). Snapshots keyed by probe.
json::object comparable(const Result& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  json::object out;
  json::value doc;
  try {
    doc = json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON: " << e.what() << "\n" << r.out;
    return out;
  }
  for (auto& s : doc.at("snapshots").as_array()) {
    auto o = s.as_object();
    for (const char* k : {"time_unix_ns", "monotonic_ns", "sample_duration_ns", "sequence"}) {
      EXPECT_TRUE(o.contains(k)) << k;
      o.erase(k);
    }
    out[o.at("probe").as_string()] = o;
  }
  json::object states;
  for (const auto& p : doc.at("probes").as_array())
    states[p.at("probe").as_string()] = p.at("state");
  out["probe_states"] = states;
  return out;
}

/// Every difference between two JSON values, as "path: a != b".
void diff(const json::value& a, const json::value& b, const std::string& path,
          std::vector<std::string>& out) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : a.as_object()) {
      const auto* w = b.as_object().if_contains(k);
      if (!w)
        out.push_back(path + "." + std::string(k) + ": only in the original");
      else
        diff(v, *w, path + "." + std::string(k), out);
    }
    for (const auto& [k, v] : b.as_object())
      if (!a.as_object().contains(k))
        out.push_back(path + "." + std::string(k) + ": only in the replay");
    return;
  }
  if (a.is_array() && b.is_array()) {
    const auto& x = a.as_array();
    const auto& y = b.as_array();
    if (x.size() != y.size())
      out.push_back(path + ": " + std::to_string(x.size()) + " != " + std::to_string(y.size()) +
                    " elements");
    for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i)
      diff(x[i], y[i], path + "[" + std::to_string(i) + "]", out);
    return;
  }
  if (a != b) out.push_back(path + ": " + json::serialize(a) + " != " + json::serialize(b));
}

std::vector<std::string> differences(const json::object& a, const json::object& b) {
  std::vector<std::string> out;
  diff(a, b, "", out);
  return out;
}

/// Runs a shell command line (a replay script, by hand); stdout and stderr kept apart.
Result shell(const std::string& command) {
  TempDir t;
  const int status = std::system((command + " >" + t.file("out") + " 2>" + t.file("err")).c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(t.file("out"));
  r.err = slurp(t.file("err"));
  return r;
}

json::object manifest(const std::string& dir) {
  return json::parse(slurp(fs::path(dir) / "manifest.json")).as_object();
}

bool has_finding(const json::object& m, const std::string& area, const std::string& part) {
  for (const auto& f : m.at("findings").as_array())
    if (f.at("area").as_string() == area &&
        std::string(f.at("what").as_string()).find(part) != std::string::npos)
      return true;
  return false;
}

/// Every file of `dir` (links not followed) whose content or link target contains `needle`.
std::vector<std::string> files_containing(const fs::path& dir, const std::string& needle) {
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it) {
    const auto& p = it->path();
    if (it->is_symlink()) {
      if (fs::read_symlink(p).string().find(needle) != std::string::npos) out.push_back(p.string());
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && slurp(p).find(needle) != std::string::npos)
      out.push_back(p.string());
  }
  return out;
}

constexpr const char* kNvmlScenario =
    "devices=2\n"
    "driver_version=550.54.15\n"
    "device.0.uuid=GPU-aaaaaaaa-1111-2222-3333-444444444444\n"
    "device.0.name=NVIDIA H100 80GB HBM3\n"
    "device.0.compute=500:1073741824,501:na\n"
    "device.0.process_util=500:61:20\n"
    "device.0.clock_reasons=0x4\n"
    "device.1.fail.nvmlDeviceGetFanSpeed=NOT_SUPPORTED\n"
    "device.1.fail.nvmlDeviceGetTotalEnergyConsumption=NO_PERMISSION\n"
    "device.1.graphics=502:2097152\n";

constexpr const char* kMissingTools =
    " --amd-smi /nonexistent/amd-smi --rocm-smi /nonexistent/rocm-smi"
    " --nvidia-smi /nonexistent/nvidia-smi --macmon /nonexistent/macmon"
    " --level-zero-library /nonexistent/libze_loader.so.1 --amdgpu-ids ''";

/// AMD (sysfs + fdinfo), Intel (i915 + xe, fdinfo) and NVIDIA (NVML) GPUs; no vendor tool.
TEST(Capture, SysfsAndNvmlMachineRoundTrips) {
  Machine m;
  m.amd_card();
  m.intel_cards();
  m.secret_process(900);
  for (int pid : {500, 502}) {
    m.write("proc/" + std::to_string(pid) + "/comm", "python3\n");
    m.write("proc/" + std::to_string(pid) + "/statm", "50000 12800 100 10 0 9000 0\n");
  }
  m.write("nvml.txt", kNvmlScenario);
  ScopedEnv scenario(fakes::kFakeNvmlScenarioEnv, m.path("nvml.txt"));
  const std::string machine =
      m.roots() + kMissingTools + " --nvml-library " + fakes::kFakeNvml + " --log-level off";
  const auto original = run("snapshot --json --timeout 20 " + machine);
  TempDir out;
  const auto dir = out.file("bundle");
  const auto cap = run("capture " + dir + " " + machine);
  ASSERT_EQ(cap.exit_code, 0) << cap.err << cap.out;

  // The replay's environment names another scenario: the bundle's must win.
  ScopedEnv other(fakes::kFakeNvmlScenarioEnv, "/nonexistent/scenario.txt");
  const auto replay = run("snapshot --json --timeout 20 --log-level off --replay-capture " + dir +
                          " --nvml-library " + fakes::kFakeNvml);
  const auto a = comparable(original);
  const auto b = comparable(replay);
  EXPECT_EQ(differences(a, b), std::vector<std::string>{}) << original.out << "\n" << replay.out;

  // Not a vacuous comparison: every vendor has its devices and processes.
  ASSERT_TRUE(a.contains("amd") && a.contains("intel") && a.contains("nvidia") &&
              a.contains("host"))
      << original.out;
  const auto& amd = a.at("amd").at("devices").as_array();
  ASSERT_EQ(amd.size(), 1u);
  EXPECT_EQ(amd[0].at("name"), "AMD Radeon RX 7900 XTX");
  ASSERT_EQ(amd[0].at("processes").as_array().size(), 1u);
  EXPECT_EQ(amd[0].at("processes").at(0).at("name"), "blender");
  EXPECT_EQ(a.at("intel").at("devices").as_array().size(), 2u);
  const auto& nv = a.at("nvidia").at("devices").as_array();
  ASSERT_EQ(nv.size(), 2u);
  EXPECT_EQ(nv[0].at("attributes").at("driver_version"), "550.54.15");
  EXPECT_EQ(nv[0].at("processes").as_array().size(), 2u);
  EXPECT_TRUE(nv[1].at("absent").as_object().contains("energy_joules"));

  // The manifest: what was captured, and the missing tools as findings.
  const auto man = manifest(dir);
  EXPECT_EQ(man.at("gpustream"), "0.1.0");
  EXPECT_EQ(man.at("nvml").at("devices"), 2);
  EXPECT_EQ(man.at("nvml").at("driver_version"), "550.54.15");
  EXPECT_EQ(man.at("procfs").at("drm_client_processes"), 2);
  EXPECT_EQ(man.at("sysfs").at("drm_nodes_by_vendor").at("amd"), 2);  // card0, renderD128
  for (const char* tool : {"amd-smi", "rocm-smi", "nvidia-smi", "macmon"}) {
    EXPECT_EQ(man.at("tools").at(tool).at("found"), false) << tool;
    EXPECT_TRUE(has_finding(man, "tools", std::string(tool) + ": not found")) << tool;
    EXPECT_FALSE(fs::exists(fs::path(dir) / "tools" / tool)) << tool;
  }
  EXPECT_GT(man.at("totals").at("bytes").as_int64(), 0);
  // The links are relative and stay inside the bundle.
  const auto card = fs::read_symlink(fs::path(dir) / "sys/class/drm/card0").string();
  EXPECT_EQ(card.rfind("../", 0), 0u) << card;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "sys/class/drm/card0/device/hwmon/hwmon2/temp1_input"));

  // Privacy: no command line, environment, other fd or other process.
  for (const char* secret : {"SECRET", "pipe:[", "/dev/null"})
    EXPECT_EQ(files_containing(dir, secret), std::vector<std::string>{}) << secret;
  for (const char* f : {"proc/300/cmdline", "proc/300/environ", "proc/300/fd/1", "proc/900"})
    EXPECT_FALSE(fs::exists(fs::symlink_status(fs::path(dir) / f))) << f;
  EXPECT_EQ(slurp(fs::path(dir) / "proc/4242/status"), "Name:\tgpustream\nVmRSS:\t   10240 kB\n");
}

/// An old NVML (only the unversioned functions; no energy, power limit, clock reasons, process
/// utilization): the functions it lacks are recorded as not supported, and the replay through
/// the fake of the same generation shows the same snapshot.
TEST(Capture, LegacyNvmlRoundTrips) {
  Machine m;
  m.write("nvml.txt", "devices=1\ndevice.0.compute=500:1048576\n");
  m.write("proc/500/comm", "python3\n");
  ScopedEnv scenario(fakes::kFakeNvmlScenarioEnv, m.path("nvml.txt"));
  const std::string machine = m.roots() + kMissingTools + " --probes nvidia,host --nvml-library " +
                              fakes::kFakeNvmlLegacy + " --log-level off";
  const auto original = run("snapshot --json --timeout 20 " + machine);
  TempDir out;
  const auto dir = out.file("bundle");
  ASSERT_EQ(run("capture " + dir + " " + machine).exit_code, 0);
  const auto replay =
      run("snapshot --json --timeout 20 --log-level off --probes nvidia,host"
          " --replay-capture " +
          dir + " --nvml-library " + fakes::kFakeNvmlLegacy);
  const auto a = comparable(original);
  EXPECT_EQ(differences(a, comparable(replay)), std::vector<std::string>{}) << replay.out;
  ASSERT_TRUE(a.contains("nvidia")) << original.out;
  EXPECT_EQ(a.at("nvidia").at("devices").at(0).at("processes").as_array().size(), 1u);
  const auto scenario_text = slurp(fs::path(dir) / "nvml/scenario.txt");
  EXPECT_NE(scenario_text.find("device.0.fail.nvmlDeviceGetTotalEnergyConsumption=3"),
            std::string::npos)
      << scenario_text;
  const auto notes = json::serialize(manifest(dir).at("nvml").at("notes"));
  EXPECT_NE(notes.find("replay with the nvml-legacy fake"), std::string::npos) << notes;
}

/// No GPU in sysfs: AMD through amd-smi, NVIDIA through nvidia-smi (no NVML), Apple through
/// macmon; every tool replayed by its generated script.
TEST(Capture, ToolMachineRoundTrips) {
  Machine m;
  m.write("smi/query-gpu.csv",
          "0, GPU-11111111-2222-3333-4444-555555555555, NVIDIA H100 80GB HBM3, 00000000:18:00.0, "
          "81559, 40960, 87, 33, 64, 312.45, 298.10, 700.00, 1755, 1755, 2619, [N/A], "
          "0x0000000000000001\n");
  m.write("smi/query-compute-apps.csv",
          "GPU-11111111-2222-3333-4444-555555555555, 4343, 40000, /usr/bin/python3\n");
  m.write("proc/4343/comm", "python3\n");
  m.write("proc/4343/statm", "50000 12800 100 10 0 9000 0\n");
  ScopedEnv smi(fakes::kFakeNvidiaSmiDirEnv, m.path("smi"));
  ScopedEnv amd("GPUSTREAM_FAKE_AMD_DATA", fakes::kFakeAmdData);
  const std::string machine = m.roots() + " --probes amd,nvidia,apple,host --interval 0.2" +
                              " --amd-smi " + fakes::kFakeAmdSmi + " --rocm-smi " +
                              fakes::kFakeRocmSmi + " --nvidia-smi " + fakes::kFakeNvidiaSmi +
                              " --macmon " + fakes::kFakeMacmon +
                              " --nvml-library /nonexistent/libnvidia-ml.so.1 --log-level off";
  const auto original = run("snapshot --json --timeout 20 " + machine);
  TempDir out;
  const auto dir = out.file("bundle");
  const auto cap = run("capture " + dir + " " + machine);
  ASSERT_EQ(cap.exit_code, 0) << cap.err << cap.out;
  const auto replay =
      run("snapshot --json --timeout 20 --log-level off --probes amd,nvidia,apple,host"
          " --replay-capture " +
          dir);
  const auto a = comparable(original);
  const auto b = comparable(replay);
  EXPECT_EQ(differences(a, b), std::vector<std::string>{}) << original.out << "\n" << replay.out;
  for (const char* probe : {"amd", "nvidia", "apple"}) {
    ASSERT_TRUE(a.contains(probe)) << probe << "\n" << original.out;
    EXPECT_FALSE(a.at(probe).at("devices").as_array().empty()) << probe;
  }
  EXPECT_EQ(a.at("nvidia").at("devices").at(0).at("processes").at(0).at("name"), "python3");

  const auto man = manifest(dir);
  for (const char* tool : {"amd-smi", "rocm-smi", "nvidia-smi", "macmon"}) {
    EXPECT_EQ(man.at("tools").at(tool).at("found"), true) << tool;
    EXPECT_TRUE(fs::exists(fs::path(dir) / "tools" / tool)) << tool;
  }
  EXPECT_TRUE(man.at("tools").at("macmon").as_object().contains("version"));
  // The NVML recording says why there is none.
  EXPECT_EQ(man.at("nvml").at("loaded"), false);
  EXPECT_TRUE(has_finding(man, "nvml", "nonexistent"));

  // A replay script refuses arguments it never saw, and says so.
  const auto refused = shell(dir + "/tools/amd-smi list --json");
  EXPECT_EQ(refused.exit_code, 127);
  EXPECT_NE(refused.err.find("amd-smi was not recorded with the arguments: list --json"),
            std::string::npos)
      << refused.err;
}

/// A tool that never answers is killed at --tool-timeout; the capture goes on and says so, and
/// the replay answers like a timed-out tool.
TEST(Capture, HungToolIsBoundedAndRecorded) {
  Machine m;
  ScopedEnv amd("GPUSTREAM_FAKE_AMD_DATA", fakes::kFakeAmdData);
  ScopedEnv hang("GPUSTREAM_FAKE_AMD_MODE", "hang");
  TempDir out;
  const auto dir = out.file("bundle");
  const auto cap = run("capture " + dir + " " + m.roots() + " --amd-smi " + fakes::kFakeAmdSmi +
                       " --rocm-smi /nonexistent/rocm-smi --nvidia-smi /nonexistent/nvidia-smi"
                       " --macmon /nonexistent/macmon --tool-timeout 0.3 --log-level off"
                       " --nvml-library /nonexistent/libnvidia-ml.so.1");
  ASSERT_EQ(cap.exit_code, 0) << cap.err;
  const auto man = manifest(dir);
  EXPECT_TRUE(has_finding(man, "tools", "amd-smi static --json: timed out after 300 ms"));
  const auto& cmds = man.at("tools").at("amd-smi").at("commands").as_array();
  ASSERT_FALSE(cmds.empty());
  EXPECT_EQ(cmds[0].at("timed_out"), true);
  EXPECT_EQ(man.at("limits").at("tool_timeout_ms"), 300);
  const auto replayed = shell(dir + "/tools/amd-smi static --json");
  EXPECT_EQ(replayed.exit_code, 124);
  EXPECT_NE(replayed.err.find("timed out"), std::string::npos) << replayed.err;
}

/// A file over --max-file-bytes is left out with a finding; past --max-bytes nothing more is
/// written, and the bundle stays under it.
TEST(Capture, ByteCapsAreHonoured) {
  Machine m;
  m.amd_card();
  const std::string big(64 * 1024, 'x');
  m.write("sys/devices/pci0000:00/0000:03:00.0/pp_dpm_sclk", big);  // the worst input: huge
  {
    TempDir out;
    const auto dir = out.file("bundle");
    const auto cap = run("capture " + dir + " " + m.roots() + kMissingTools +
                         " --max-file-bytes 4096 --nvml-library /nonexistent/x.so");
    ASSERT_EQ(cap.exit_code, 0) << cap.err;
    EXPECT_FALSE(fs::exists(fs::path(dir) / "sys/devices/pci0000:00/0000:03:00.0/pp_dpm_sclk"));
    EXPECT_TRUE(fs::exists(fs::path(dir) / "sys/devices/pci0000:00/0000:03:00.0/gpu_busy_percent"));
    const auto man = manifest(dir);
    EXPECT_TRUE(has_finding(man, "limits", "pp_dpm_sclk: more than the per-file cap of 4096"));
    EXPECT_EQ(man.at("limits").at("max_file_bytes"), 4096);
  }
  {
    TempDir out;
    const auto dir = out.file("bundle");
    const auto cap = run("capture " + dir + " " + m.roots() + kMissingTools +
                         " --max-bytes 4096 --nvml-library /nonexistent/x.so");
    ASSERT_EQ(cap.exit_code, 0) << cap.err;
    const auto man = manifest(dir);
    EXPECT_TRUE(has_finding(man, "limits", "the bundle reached its cap of 4096 bytes"));
    EXPECT_LE(man.at("totals").at("bytes").as_int64(), 4096);
    EXPECT_GT(man.at("totals").at("refused").as_int64(), 0);
    std::uintmax_t on_disk = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file() && !e.is_symlink() && e.path().filename() != "manifest.json")
        on_disk += e.file_size();
    EXPECT_LE(on_disk, 4096u);
  }
}

TEST(Capture, RefusesANonEmptyFolderAndReplayNeedsAManifest) {
  TempDir out;
  out.write("bundle/something", "x");
  const auto cap = run("capture " + out.file("bundle") + " --nvml-library /nonexistent/x.so");
  EXPECT_EQ(cap.exit_code, 2);
  EXPECT_NE(cap.err.find("not empty"), std::string::npos) << cap.err;
  const auto replay = run("snapshot --json --replay-capture " + out.file("bundle"));
  EXPECT_EQ(replay.exit_code, 2);
  EXPECT_NE(replay.err.find("manifest.json"), std::string::npos) << replay.err;
}

TEST(Capture, HelpSaysWhatIsAndIsNotCaptured) {
  const auto help = run("capture --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* part : {"--replay-capture", "Not captured: command lines, environments",
                           "--max-file-bytes", "--tool-timeout"})
    EXPECT_NE(help.out.find(part), std::string::npos) << part << "\n" << help.out;
}

}  // namespace
}  // namespace gpustream::cli::test
