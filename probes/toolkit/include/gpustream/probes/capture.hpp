// gpustream/probes/capture.hpp — what the probes read, named by the probes, for `gpustream
// capture`.
//
// A capture copies a machine's raw inputs so that the same probes reproduce the same snapshot
// offline. What it copies has to follow what the probes read, so each probe says it, in its
// registry row's `capture` column (a function filling a Sources), next to the code that reads
// it; probes/capture.cpp gathers the rows' sources:
//   - sysfs_inputs(): the sysfs paths read for each DRM node (card*, renderD*) under
//     <sysfs>/class/drm: the identity and hwmon files every DRM probe reads, then each probe's;
//   - tool_commands(): the exact argument lists the probes run their tools with, plus each
//     tool's version command;
//   - files and recordings: single files a probe reads (a name table) and what a probe records
//     itself through its own library calls (a scenario of a fake library);
//   - replay flags: how `--replay-capture DIR` points each probe at the recording.
//
// Thread safety: pure functions over the filesystem, the configuration and the rows; a recording
// may load a vendor library (see the probe's own notes). Cancellation: none; each is a bounded
// blocking scan or a few dozen library calls.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/json/object.hpp>

#include "gpustream/config.hpp"
#include "gpustream/probes/sysfs.hpp"

namespace gpustream::capture {

/// One path under the sysfs root that a probe reads.
struct SysfsInput {
  std::string rel;     // relative to the sysfs root: "class/drm/card0/device/vendor"
  bool follow = true;  // false: the path is a link the probes read as a link (readlink: driver)
};

/// The most entries of one numbered family examined per folder (hwmonN, tileN, gtN, vramN).
inline constexpr std::size_t kMaxNumberedEntries = 16;

/// Every sysfs path the probes read for each DRM node under <sysfs_root>/class/drm, in a stable
/// order. Whether a path exists is the caller's business (a missing file is part of the
/// machine's view: the probes then report that metric absent). Lists folders of the real tree
/// (hwmonN, tileN, gtN, vramN), so it takes the root.
std::vector<SysfsInput> sysfs_inputs(const std::string& sysfs_root);

/// One command a probe runs.
struct ToolCommand {
  std::string tool;               // "vendor-smi": the file name under DIR/tools
  std::string setting;            // the probe setting that names the binary: "vendor.smi"
  std::vector<std::string> args;  // exactly as the probe passes them, without the program
  /// Streaming commands (`tool -i 1000 pipe`) print until killed: the capture runs
  /// `run_args` instead (the same with a sample count), and the replay prints the recorded
  /// lines, then stays alive like the tool. Empty for one-shot commands.
  std::vector<std::string> run_args;
  bool version = false;  // the tool's version command (recorded for the manifest)
  /// A streaming command's interval: the replay prints one recorded line per interval.
  std::chrono::milliseconds interval{1000};
  /// The pids a run's output names (their /proc files are captured); null: none.
  std::function<std::vector<std::int64_t>(std::string_view output)> pids;
};

/// A probe's sysfs files for one DRM node: adds paths relative to the sysfs root. `node` is
/// "class/drm/card0", `device` is node + "/device".
using NodeInputs = std::function<void(std::vector<SysfsInput>& out, const std::string& sysfs_root,
                                      const std::string& node, const std::string& device)>;

/// One file a probe reads whole, copied into the capture.
struct FileInput {
  std::string key;   // its entry in manifest.json: "device_names"
  std::string path;  // on this machine ("": not configured, nothing is copied)
  std::string rel;   // where in the capture: "share/device-names.ids"
};

/// What a probe's own recording produced (recorded through its library, not from files).
struct Recorded {
  boost::json::object manifest;                            // its entry in manifest.json
  std::vector<std::pair<std::string, std::string>> files;  // {path in the capture, content}
  std::vector<std::int64_t> pids;                          // processes whose /proc is captured
  std::vector<std::string> findings;                       // under the recording's key
};

/// A recording a probe makes itself.
struct Recording {
  std::string key;  // its entry in manifest.json and its findings' kind: the library's name
  std::function<Recorded()> record;
};

/// A path in the capture that a replay gives to one of the probe's flags, unless the user gave
/// that flag: {"--vendor-smi", "tools/vendor-smi"}.
struct ReplayFlag {
  std::string flag;
  std::string rel;
};

/// An environment variable a replay sets to a path in the capture (a fake library's scenario).
struct ReplayEnv {
  std::string name;
  std::string rel;
};

/// Everything the rows say about capturing: each row's `capture` column adds its part.
struct Sources {
  std::vector<NodeInputs> node_inputs;
  std::vector<ToolCommand> tools;
  std::vector<FileInput> files;
  std::vector<Recording> recordings;
  std::vector<ReplayFlag> replay_flags;
  std::vector<ReplayEnv> replay_env;
  /// {PCI vendor id, name} of the devices a probe reads (the manifest's drm_nodes_by_vendor).
  std::vector<std::pair<std::uint32_t, std::string>> pci_vendors;
};

/// The sources of every row of the registry, in row order.
Sources sources(const Config& config);

/// The commands of every tool-based probe, grouped by tool in a stable order, as the probes run
/// them with `config`.
std::vector<ToolCommand> tool_commands(const Config& config);

/// The name of the probe that reads devices of PCI vendor `id` ("other" when none does).
std::string pci_vendor_name(std::uint32_t id);

/// The toolkit's part of sysfs_inputs for one node: identity, power state and hwmon files.
void add_node_identity(std::vector<SysfsInput>& out, const std::string& sysfs_root,
                       const std::string& node, const std::string& device);
/// Numbered entries of `rel` (relative to `root`), at most kMaxNumberedEntries of them.
std::vector<sysfs::Numbered> numbered(const std::string& root, const std::string& rel,
                                      std::string_view prefix);

/// The parts, joined into one string (paths built in loops).
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

}  // namespace gpustream::capture
