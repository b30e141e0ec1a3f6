// gpustream/probes/capture.hpp — what the probes read, named once, for `gpustream capture`.
//
// A capture copies a machine's raw inputs so that the same probes reproduce the same snapshot
// offline. What it copies has to follow what the probes read, so the lists live here, next to
// the probes, and not in the CLI:
//   - sysfs_inputs(): every sysfs path the AMD sysfs probe, the Intel i915/xe probe and the
//     sysfs/PCI helpers read for each DRM node (card*, renderD*) under <sysfs>/class/drm;
//   - tool_commands(): the exact argument lists the AMD, NVIDIA and Apple probes run their tools
//     with (amd-smi, rocm-smi, nvidia-smi, macmon), plus each tool's version command;
//   - record_nvml(): one pass of the NVML calls the NVIDIA probe makes, through the probe's own
//     function table (nvidia/nvml_api.hpp), written as a scenario of the fake libnvidia-ml.so.1
//     (tests/fakes/nvml/fake_nvml_scenario.hpp has the format).
//
// Thread safety: pure functions over the filesystem and the library; record_nvml initializes
// and shuts NVML down itself (call it while no NVML session of this process is open).
// Cancellation: none; each is a bounded blocking scan or a few dozen library calls.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpustream::capture {

/// One path under the sysfs root that a probe reads.
struct SysfsInput {
  std::string rel;     // relative to the sysfs root: "class/drm/card0/device/vendor"
  bool follow = true;  // false: the path is a link the probes read as a link (readlink: driver)
};

/// The most entries of one numbered family examined per folder (hwmonN, tileN, gtN, vramN).
inline constexpr std::size_t kMaxNumberedEntries = 16;

/// Every sysfs path the GPU probes read for each DRM node under <sysfs_root>/class/drm, in a
/// stable order. Whether a path exists is the caller's business (a missing file is part of the
/// machine's view: the probes then report that metric absent). Lists folders of the real tree
/// (hwmonN, tileN, gtN, vramN), so it takes the root.
std::vector<SysfsInput> sysfs_inputs(const std::string& sysfs_root);

/// One command a probe runs.
struct ToolCommand {
  std::string tool;               // "amd-smi": the file name under DIR/tools
  std::string setting;            // the probe setting that names the binary: "amd.amd_smi"
  std::vector<std::string> args;  // exactly as the probe passes them, without the program
  /// Streaming commands (`macmon -i 1000 pipe`) print until killed: the capture runs
  /// `run_args` instead (the same with a sample count), and the replay prints the recorded
  /// lines, then stays alive like the tool. Empty for one-shot commands.
  std::vector<std::string> run_args;
  bool version = false;  // the tool's version command (recorded for the manifest)
};

/// The commands of every tool-based probe, grouped by tool in a stable order. `macmon_interval`
/// is the Apple probe's sampling interval (its `-i` argument; the Config's interval).
std::vector<ToolCommand> tool_commands(std::chrono::milliseconds macmon_interval);

/// What record_nvml saw.
struct NvmlRecording {
  bool loaded = false;         // the library could be loaded and has the required functions
  bool initialized = false;    // nvmlInit succeeded
  std::string scenario;        // the fake libnvidia-ml.so.1 scenario (key=value lines)
  std::string driver_version;  // "" when unknown
  int devices = 0;
  std::vector<std::int64_t> pids;  // every pid of the process lists (their /proc is captured)
  std::vector<std::string> notes;  // what failed and why, one line each
};

/// Loads `library`, calls every NVML function the NVIDIA probe calls once per device (the same
/// versions of them, in the same way), and writes what each returned — values and return codes
/// — as a scenario of the fake NVML. A function the library does not export is recorded as
/// NVML_ERROR_NOT_SUPPORTED (the probe reports both the same way: absent `unsupported`). Never
/// throws for NVML failures: they are in the scenario (init_fail=, fail.<function>=) and notes.
NvmlRecording record_nvml(const std::string& library);

}  // namespace gpustream::capture
