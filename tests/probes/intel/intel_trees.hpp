// intel_trees.hpp — generated sysfs/procfs trees for the Intel probe tests: i915 integrated,
// i915 discrete, xe discrete with two tiles, xe integrated, and DRM clients in /proc.
//
// Layout follows ../shared/fixtures/intel/SYSFS_LAYOUT_NOTES.md: the PCI function is a real
// folder under sys/devices/, and class/drm/cardN/device and renderD<M>/device link to it, as in
// a real /sys.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "gpustream/probes/intel_probe.hpp"
#include "probe_harness.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::test {

class IntelTree {
 public:
  TempTree& tree() { return tree_; }
  std::string sys() const { return tree_.path("sys"); }
  std::string proc() const { return tree_.path("proc"); }
  std::string dev() const { return tree_.path("dev"); }

  /// A PCI function with DRM nodes. `card` < 0: no card node; `render` < 0: no render node.
  /// Returns the device folder (relative to the tree root).
  std::string pci_device(const std::string& bus, const std::string& driver, int card, int render,
                         std::uint32_t vendor = 0x8086, std::uint32_t device = 0x56a0) {
    const std::string dev = "sys/devices/pci0000:00/" + bus;
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%04x\n", vendor);
    tree_.file(dev + "/vendor", buf);
    std::snprintf(buf, sizeof buf, "0x%04x\n", device);
    tree_.file(dev + "/device", buf);
    tree_.file(dev + "/uevent",
               "DRIVER=" + driver + "\nPCI_CLASS=30000\nPCI_SLOT_NAME=" + bus + "\n");
    tree_.file(dev + "/power/runtime_status", "active\n");
    if (card >= 0) {
      const auto node = "sys/class/drm/card" + std::to_string(card);
      tree_.dir(node);
      tree_.symlink(node + "/device", tree_.path(dev));
      // A connector folder beside the card, as real sysfs has: not a device.
      tree_.dir("sys/class/drm/card" + std::to_string(card) + "-DP-1");
    }
    if (render >= 0) {
      const auto node = "sys/class/drm/renderD" + std::to_string(render);
      tree_.dir(node);
      tree_.symlink(node + "/device", tree_.path(dev));
    }
    return dev;
  }

  std::string hwmon(const std::string& dev, int index, const std::string& name) {
    const auto dir = dev + "/hwmon/hwmon" + std::to_string(index);
    tree_.file(dir + "/name", name + "\n");
    return dir;
  }

  /// i915 integrated (Tiger Lake-like): 0000:00:02.0, card0 + renderD128, no hwmon.
  void i915_integrated() {
    pci_device("0000:00:02.0", "i915", 0, 128, 0x8086, 0x9a49);
    tree_.file("sys/class/drm/card0/gt_act_freq_mhz", "1300\n");
    tree_.file("sys/class/drm/card0/gt_cur_freq_mhz", "1350\n");
  }

  /// i915 discrete (DG2-like): 0000:03:00.0, card1 + renderD129, hwmon "i915" plus a per-GT
  /// hwmon "i915_gt0" listed first, two GTs.
  std::string i915_discrete(std::uint64_t energy_uj = 1000000) {
    const auto dev = pci_device("0000:03:00.0", "i915", 1, 129, 0x8086, 0x56a0);
    const auto gt_hw = hwmon(dev, 2, "i915_gt0");
    tree_.file(gt_hw + "/energy1_input", "999999999\n");
    const auto hw = hwmon(dev, 5, "i915");
    tree_.file(hw + "/energy1_input", std::to_string(energy_uj) + "\n");
    tree_.file(hw + "/power1_max", "0\n");  // disabled: fall back to the rated TDP
    tree_.file(hw + "/power1_rated_max", "225000000\n");
    tree_.file(hw + "/temp1_input", "54000\n");
    tree_.file(hw + "/fan1_input", "1200\n");
    tree_.file("sys/class/drm/card1/gt/gt0/rps_act_freq_mhz", "2000\n");
    tree_.file("sys/class/drm/card1/gt/gt0/rps_cur_freq_mhz", "2050\n");
    tree_.file("sys/class/drm/card1/gt/gt1/rps_act_freq_mhz", "1000\n");
    return hw;
  }

  /// xe discrete with two tiles (PVC-like): 0000:04:00.0, card2 + renderD130; the card energy
  /// counter reads 0 so the package counter is used; VRAM on both tiles.
  std::string xe_discrete_two_tiles(std::uint64_t package_uj = 5000000) {
    const auto dev = pci_device("0000:04:00.0", "xe", 2, 130, 0x8086, 0x0bd5);
    const auto hw = hwmon(dev, 7, "xe");
    tree_.file(hw + "/energy1_input", "0\n");
    tree_.file(hw + "/energy2_input", std::to_string(package_uj) + "\n");
    tree_.file(hw + "/power1_max", "300000000\n");
    tree_.file(hw + "/temp2_input", "61000\n");
    tree_.file(hw + "/temp2_label", "pkg\n");
    tree_.file(hw + "/temp3_input", "70000\n");
    tree_.file(hw + "/temp3_label", "vram\n");
    tree_.file(dev + "/tile0/gt0/freq0/act_freq", "1600\n");
    tree_.file(dev + "/tile0/gt0/freq0/cur_freq", "1650\n");
    tree_.file(dev + "/tile1/gt1/freq0/act_freq", "1500\n");
    tree_.file(dev + "/tile0/vram0/total_bytes", "8589934592\n");
    tree_.file(dev + "/tile0/vram0/used_bytes", "1073741824\n");
    tree_.file(dev + "/tile1/vram0/total_bytes", "8589934592\n");
    tree_.file(dev + "/tile1/vram0/used_bytes", "2147483648\n");
    return hw;
  }

  /// xe integrated (Lunar Lake-like): 0000:00:02.0, card0 + renderD128, a media GT, no hwmon.
  void xe_integrated() {
    const auto dev = pci_device("0000:00:02.0", "xe", 0, 128, 0x8086, 0x64a0);
    tree_.file(dev + "/tile0/gt0/freq0/act_freq", "1950\n");
    tree_.file(dev + "/tile0/gt1/freq0/act_freq", "800\n");
  }

  /// A process holding `fd` on /dev/dri/<node> with the given fdinfo text.
  void client(std::int64_t pid, const std::string& comm, int fd, const std::string& node,
              const std::string& fdinfo) {
    const auto p = "proc/" + std::to_string(pid);
    tree_.file(p + "/comm", comm + "\n");
    tree_.symlink(p + "/fd/" + std::to_string(fd), "/dev/dri/" + node);
    tree_.file(p + "/fdinfo/" + std::to_string(fd), fdinfo);
  }
  /// Removes a process (it exited).
  void remove_process(std::int64_t pid) { tree_.remove("proc/" + std::to_string(pid)); }
  /// A process with only ordinary fds.
  void plain_process(std::int64_t pid) {
    const auto p = "proc/" + std::to_string(pid);
    tree_.file(p + "/comm", "bash\n");
    tree_.symlink(p + "/fd/0", "/dev/pts/0");
    tree_.file(p + "/fdinfo/0", "pos:\t0\nflags:\t02\n");
  }

 private:
  TempTree tree_;
};

/// i915 fdinfo in the shape of the shared sample.
inline std::string i915_fdinfo(const std::string& pdev, std::uint64_t client,
                               std::uint64_t render_ns, std::uint64_t video_ns = 0,
                               const std::string& system0 = "6044 KiB") {
  return "pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t284\ndrm-driver:\ti915\n"
         "drm-client-id:\t" +
         std::to_string(client) + "\ndrm-pdev:\t" + pdev + "\ndrm-total-system0:\t" + system0 +
         "\ndrm-resident-system0:\t" + system0 +
         "\ndrm-total-stolen-system0:\t0\ndrm-resident-stolen-system0:\t1 MiB\n"
         "drm-engine-render:\t" +
         std::to_string(render_ns) +
         " ns\ndrm-engine-copy:\t0 ns\n"
         "drm-engine-video:\t" +
         std::to_string(video_ns) + " ns\ndrm-engine-capacity-video:\t2\n";
}

/// xe fdinfo in the shape of the shared sample (kernel doc of xe_drm_client.c).
inline std::string xe_fdinfo(const std::string& pdev, std::uint64_t client, std::uint64_t rcs,
                             std::uint64_t ccs, std::uint64_t total) {
  const auto t = std::to_string(total);
  return "pos:\t0\nflags:\t0100002\ndrm-driver:\txe\ndrm-client-id:\t" + std::to_string(client) +
         "\ndrm-pdev:\t" + pdev +
         "\ndrm-total-gtt:\t192 KiB\ndrm-resident-gtt:\t192 KiB\ndrm-total-vram0:\t23992 KiB\n"
         "drm-shared-vram0:\t16 MiB\ndrm-resident-vram0:\t23992 KiB\ndrm-resident-vram1:\t2 MiB\n"
         "drm-cycles-rcs:\t" +
         std::to_string(rcs) + "\ndrm-total-cycles-rcs:\t" + t +
         "\ndrm-cycles-bcs:\t0\ndrm-total-cycles-bcs:\t" + t + "\ndrm-cycles-ccs:\t" +
         std::to_string(ccs) + "\ndrm-total-cycles-ccs:\t" + t + "\ndrm-engine-capacity-ccs:\t4\n";
}

/// The fixture of the Intel probe suites: a tree, a driven monotonic clock (now_ns_, advanced by
/// clock_step_ns_ at each reading), and the probe over both.
class IntelProbeTest : public ::testing::Test {
 protected:
  /// Level Zero off ("") unless a loader is named.
  std::shared_ptr<IntelGpuProbe> make_probe(const std::string& level_zero_library = "") {
    IntelProbeOptions o;
    o.paths.sysfs_root = t_.sys();
    o.paths.procfs_root = t_.proc();
    o.paths.devfs_root = t_.dev();
    o.level_zero_library = level_zero_library;
    o.monotonic_clock = [this] { return now_ns_ += clock_step_ns_; };
    return make_intel_probe(harness_.executors(), o);
  }
  GpuSnapshot sample(IntelGpuProbe& p) {
    auto r = harness_.sample(p);
    EXPECT_FALSE(r.ec) << r.ec.message();
    return r.snapshot;
  }
  static const DeviceSample& dev(const GpuSnapshot& s, const std::string& bus) {
    const auto* d = s.find_device(bus);
    if (!d) throw std::runtime_error("no device " + bus);
    return *d;
  }

  IntelTree t_;
  std::int64_t now_ns_ = 1'000'000'000;
  std::int64_t clock_step_ns_ = 0;
  ProbeHarness harness_;
};

}  // namespace gpustream::test
