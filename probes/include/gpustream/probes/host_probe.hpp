// gpustream/probes/host_probe.hpp — host RAM, swap, and the RSS of this and watched processes.
//
// Reads <procfs_root>/meminfo (MemTotal, MemAvailable, SwapTotal, SwapFree) and
// <procfs_root>/<pid>/status (Name, VmRSS). This process comes first in HostSample::processes;
// its pid is the target of the <procfs_root>/self link (so a host /proc mounted in a container
// works), else getpid(). A line that is missing leaves its figure absent (never 0); a line that
// is present but garbled also leaves it absent and adds a "parse_error" to the snapshot's errors.
//
// Watched pids that exit: the first snapshot in which <pid>/status is gone carries one error
// {code "process_exited", message "pid 123 exited"}; from then on the pid is dropped silently
// (a later process that reuses the number is not the one that was asked for). Calling
// set_watch_pids() starts afresh. A pid whose status cannot be read for another reason (EACCES)
// stays in the list with its RSS absent and a "read_failed" error in that snapshot.
//
// Thread safety: detect()/sample() run on the work pool (one sample at a time, as the Scheduler
// guarantees); set_watch_pids()/watch_pids() may be called from any thread.
// Cancellation: a sample is a handful of small file reads; there is nothing to cancel.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/config.hpp"
#include "gpustream/log_once.hpp"

namespace gpustream {

/// The figures of /proc/meminfo the host probe uses, in bytes; absent when the line is missing
/// or its number is garbled (those are listed in `garbled`, by key).
struct MemInfo {
  std::optional<std::uint64_t> total_bytes;
  std::optional<std::uint64_t> available_bytes;
  std::optional<std::uint64_t> swap_total_bytes;
  std::optional<std::uint64_t> swap_free_bytes;
  std::vector<std::string> garbled;
};
MemInfo parse_meminfo(std::string_view text);

/// The parts of /proc/<pid>/status the host probe uses. `rss_garbled` is set when a VmRSS line
/// is there but its value cannot be parsed (kernel threads and zombies have no VmRSS at all).
struct ProcessStatus {
  std::string name;
  std::optional<std::uint64_t> rss_bytes;
  bool rss_garbled = false;
};
ProcessStatus parse_process_status(std::string_view text);

/// How much RAM this process holds right now: VmRSS of <procfs_root>/self/status (or of
/// <procfs_root>/<getpid()>/status when there is no "self"), in bytes; nullopt when it cannot be
/// read. Blocking (one small file read); callable from any thread.
std::optional<std::uint64_t> current_process_rss_bytes(const SystemPaths& paths = {});

struct HostProbeOptions {
  SystemPaths paths;
  /// Processes to report besides this one.
  std::vector<std::int64_t> watch_pids;
};

class HostProbe final : public BlockingProbe {
 public:
  static constexpr std::string_view kName = "host";

  HostProbe(ProbeExecutors executors, HostProbeOptions options);

  std::string_view name() const noexcept override { return kName; }
  ProbeKind kind() const noexcept override { return ProbeKind::host; }
  std::chrono::milliseconds min_interval() const noexcept override {
    return std::chrono::milliseconds{100};
  }

  /// Replaces the watched pids (and forgets which ones exited). Thread-safe.
  void set_watch_pids(std::vector<std::int64_t> pids);
  std::vector<std::int64_t> watch_pids() const;

 protected:
  /// Available when <procfs_root>/meminfo is readable; else "cannot read <path>: <why>".
  Detection detect() override;
  /// Throws (the sample fails) only when meminfo cannot be read; everything else is reported
  /// in the snapshot's errors.
  GpuSnapshot sample() override;

 private:
  std::int64_t self_pid() const;
  void add_process(GpuSnapshot& snap, std::int64_t pid, bool is_self);

  const SystemPaths paths_;
  mutable std::mutex mu_;
  std::vector<std::int64_t> watch_pids_;  // guarded by mu_
  std::set<std::int64_t> exited_;         // guarded by mu_
  LogOnce log_once_;
};

std::shared_ptr<HostProbe> make_host_probe(ProbeExecutors executors, HostProbeOptions options = {});

/// The "host" registry row: config.paths and config.watch_pids; its section takes no settings
/// (any key is a mistake: std::invalid_argument).
ProbePtr make_host_probe_from_config(const Config& config, ProbeExecutors executors);

}  // namespace gpustream
