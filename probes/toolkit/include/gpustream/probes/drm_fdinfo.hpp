// gpustream/probes/drm_fdinfo.hpp — DRM client usage stats from /proc/<pid>/fdinfo, shared by
// the DRM probes.
//
// parse_fdinfo() reads one fdinfo file in the kernel's "drm-*" key format
// (Documentation/gpu/drm-usage-stats.rst): engine busy time in ns, engine capacity, cycles,
// per-region memory with KiB/MiB units, and the legacy "drm-memory-<region>" keys one DRM
// driver still writes.
//
// walk_clients() lists /proc, reads each process's fd links first and opens fdinfo only for fds
// that point at a DRM node (/dev/dri/card* or /dev/dri/renderD*). Several fds of one client (the
// same pid, pdev and drm-client-id) count once. Processes we may not inspect (other users) are
// skipped and counted; processes that exit mid-walk are counted as vanished; truncated or
// malformed fdinfo never fails the walk. The number of processes examined is capped. It costs
// one full scan of every process per call: the probes use drm::ClientTracker
// (drm_client_tracker.hpp) instead; walk_clients stays as the one-shot walker and the baseline
// of the fdinfo benchmarks (bench/).
//
// Thread safety: every function is reentrant and keeps no state.
// Cancellation: none; one walk is a bounded blocking scan and belongs on the work pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpustream::drm {

/// The DRM keys of one fdinfo file. Memory values are in bytes (units converted).
struct Fdinfo {
  std::string driver;                                        // drm-driver
  std::string pdev;                                          // drm-pdev (e.g. "0000:03:00.0")
  std::optional<std::uint64_t> client_id;                    // drm-client-id
  std::map<std::string, std::uint64_t> engine_ns;            // drm-engine-<class>: N ns
  std::map<std::string, std::uint64_t> engine_capacity;      // drm-engine-capacity-<class>
  std::map<std::string, std::uint64_t> cycles;               // drm-cycles-<class>
  std::map<std::string, std::uint64_t> total_cycles;         // drm-total-cycles-<class>
  std::map<std::string, std::uint64_t> resident_bytes;       // drm-resident-<region>
  std::map<std::string, std::uint64_t> total_bytes;          // drm-total-<region>
  std::map<std::string, std::uint64_t> legacy_memory_bytes;  // legacy drm-memory-<region>
  /// A line could not be parsed or the text ended mid-line (the process was exiting).
  bool truncated = false;
};

/// Parses one fdinfo text; nullopt when it has no "drm-driver" key (not a DRM fd).
std::optional<Fdinfo> parse_fdinfo(std::string_view text);

/// True for a link target naming a DRM device node: "/dev/dri/card<N>" or "/dev/dri/renderD<N>".
bool is_drm_node(std::string_view link_target) noexcept;

/// One DRM client: one per distinct (pid, pdev, client_id).
struct Client {
  std::int64_t pid;
  std::string comm;  // /proc/<pid>/comm, trimmed; empty if it could not be read
  Fdinfo info;
  /// The process's start time: field 22 of /proc/<pid>/stat (clock ticks after boot), 0 when
  /// unknown. (pid, start_time) names one process for good: a reused pid has another.
  std::uint64_t start_time = 0;
  /// ClientTracker only: a number unique to one process as tracked (never 0): a reused pid, or
  /// a process that stopped and started again using a GPU, gets a new one. Keys of counters
  /// kept between samples include it. 0 from walk_clients().
  std::uint64_t instance = 0;
};

/// What a walk (or one ClientTracker sample) saw, for the probe's diagnostics and the benchmark.
struct WalkStats {
  std::size_t processes = 0, permission_skipped = 0, vanished = 0, fds = 0, drm_fds = 0,
              fdinfo_reads = 0, truncated = 0, capped = 0;
  /// Syscall-ish operations issued (directory opens, readlinks, file opens), for the benchmark.
  std::size_t readlinks = 0, opens = 0;
  /// ClientTracker only: pids seen for the first time, full fd scans (new, changed count,
  /// sweep, client rescans), fd-count checks, counts found changed, pids that exited since
  /// the last sample, clients not tracked because max_clients was reached, stat and getdents64
  /// calls issued.
  std::size_t new_processes = 0, scans = 0, count_checks = 0, count_changes = 0, exited = 0,
              clients_capped = 0, stats = 0, getdents = 0;
  /// ClientTracker with the open signal only: opens of watched DRM nodes seen (an overflowed
  /// event queue counts as one), reads of the watch, pids listed by the sweep and the passes,
  /// watches tried on other mount namespaces' device folders (inotify_add_watch calls), new
  /// pids of a namespace left unwatched because max_namespace_watches was reached.
  std::size_t open_events = 0, watch_reads = 0, listed = 0, watch_adds = 0,
              namespaces_unwatched = 0;
};

struct WalkOptions {
  std::string procfs_root = "/proc";
  std::vector<std::string> drivers;  // drm-driver values to keep; empty = any
  std::size_t max_processes = 4096;  // processes examined beyond this are counted in `capped`
};

/// Walks procfs and returns the DRM clients, sorted by pid (then pdev, client id).
/// Never throws for filesystem conditions; an unreadable procfs root yields no clients.
std::vector<Client> walk_clients(const WalkOptions& options, WalkStats* stats = nullptr);

}  // namespace gpustream::drm
