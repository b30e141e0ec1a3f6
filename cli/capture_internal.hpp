// The parts of `gpustream capture` (capture.hpp), shared by its source files.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "capture_bundle.hpp"
#include "gpustream/config.hpp"

namespace gpustream::cli::capture_detail {

/// One tool run that was recorded.
struct RecordedRun {
  std::string tool;
  std::vector<std::string> args;
  std::string output;
  std::vector<std::int64_t> pids;  // the processes its output names (ToolCommand::pids)
};

/// The sysfs files the GPU probes read, under DIR/sys; a summary for the manifest.
boost::json::object capture_sysfs(CaptureBundle& b, const std::string& sysfs_root);
/// meminfo, this process's status lines, and the DRM clients, under DIR/proc.
boost::json::object capture_procfs(CaptureBundle& b, const std::string& procfs_root,
                                   const std::vector<std::int64_t>& watch_pids,
                                   std::size_t max_processes);
/// comm, statm and cgroup of one process (a GPU process named by NVML or a tool).
void capture_process_files(CaptureBundle& b, const std::string& procfs_root, std::int64_t pid);
/// Every tool command (capture::tool_commands), recorded, and a replay script per tool.
boost::json::object capture_tools(CaptureBundle& b, const Config& config,
                                  std::chrono::milliseconds timeout, std::uint64_t max_output_bytes,
                                  std::vector<RecordedRun>& runs);

}  // namespace gpustream::cli::capture_detail
