// `gpustream capture DIR`: a support bundle that reproduces this machine's view offline, and
// `--replay-capture DIR`, which points every probe at one. docs/operations.md ("Sending a
// capture") says what is in a bundle and what is not; docs/testing.md how one becomes a test
// fixture.
//
// Layout of DIR:
//   manifest.json        what was captured per source, what failed and why, byte totals
//   sys/...              the sysfs files the GPU probes read, with the links they follow
//   proc/meminfo         host memory;  proc/self -> <pid>, proc/<pid>/status (Name, VmRSS only)
//   proc/<pid>/...       each DRM client: comm, statm, cgroup, the DRM fds (fd/<n> links) and
//                        their fdinfo/<n>; comm, statm, cgroup of the NVML/tool processes
//   tools/<tool>         a replay script per tool found; tools/<tool>.d/<n>.out|.err
//   nvml/scenario.txt    NVML's answers, as a scenario of the fake libnvidia-ml.so.1
//   share/amdgpu.ids     libdrm's AMD names table, when present
//
// Thread safety: one capture at a time per DIR; blocking. Cancellation: every tool run has a
// timeout; the walks are bounded by counts and bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "gpustream/config.hpp"
#include "options.hpp"

namespace gpustream::cli {

struct CaptureOptions {
  std::string dir;
  /// One file (a sysfs attribute, an fdinfo, a tool's output) larger than this is not copied
  /// (a finding says so).
  std::uint64_t max_file_bytes = std::uint64_t{1} << 20;
  /// The whole bundle: past it, nothing more is written (findings say what was left out).
  std::uint64_t max_total_bytes = std::uint64_t{64} << 20;
  /// Each tool run is killed after this long.
  std::chrono::milliseconds tool_timeout{15000};
  /// DRM client processes captured at most.
  std::size_t max_processes = 1024;
};

/// Writes the bundle (DIR is created; it must be empty or absent). Returns the exit code:
/// 0 when the bundle was written (findings do not fail it), 1 when DIR cannot be written.
int run_capture(const Config& config, const CaptureOptions& o);

/// Points `common` at the bundle in `dir` (`snapshot --replay-capture DIR`): the sysfs, procfs
/// and devfs roots inside DIR, each tool to DIR/tools/<tool>, amdgpu.ids to DIR/share, the Level
/// Zero loader to a path that does not exist (Level Zero is not captured), the NVML library to
/// DIR/nvml/libnvidia-ml.so.1 (copy the fake there, or give --nvml-library), and the interval
/// the capture used (macmon's `-i` is part of its recorded command). What the user gave
/// explicitly is kept. Sets GPUSTREAM_FAKE_NVML_SCENARIO to DIR/nvml/scenario.txt: call it
/// before any thread starts. Throws ConfigError when DIR has no manifest.json.
void prepare_replay_capture(CommonOptions& common, const std::string& dir);

}  // namespace gpustream::cli
