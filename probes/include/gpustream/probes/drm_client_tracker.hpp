// gpustream/probes/drm_client_tracker.hpp — the DRM clients of a host, found at a cost that grows
// with the processes that use a GPU rather than with all processes. Shared by the AMD and Intel
// probes (one tracker per probe, kept between samples).
//
// What one sample() does:
//   1. Lists <procfs_root> once (getdents64 into a reused buffer) and merges the pids with the
//      records of the last sample: a pid no longer listed has exited and its clients disappear
//      now; a pid not seen before gets a full fd scan (the very first sample scans everything).
//   2. Re-reads the clients already known: for each process holding DRM fds, only those fds'
//      fdinfo files, through a descriptor kept open on /proc/<pid> (up to max_kept_fds). On
//      procfs that descriptor belongs to the process, not to its pid number, so once the
//      process is gone every read through it fails, even when the pid has been reused: the
//      entry is dropped and the pid scanned afresh (a reused pid never inherits a predecessor's
//      name or counters; see Client::instance). A DRM fd that was closed or now names another
//      file triggers a rescan of that process.
//   3. Change signal (Linux >= 6.2): stat(/proc/<pid>/fd).st_size is the number of open fds.
//      Every process's count is compared with the last one at least once per `freshness`
//      (round robin, a share of the processes per sample); a changed count triggers a full fd
//      scan. A process that opens a GPU therefore shows within `freshness` (5 s by default).
//   4. Sweep, the safety net: every process gets a full fd scan at least once per
//      `sweep_period` (round robin, spread over the samples: no sample does the whole sweep).
//      It finds a process whose fds changed while the count did not (one fd closed and a GPU
//      opened between two checks). Without the change signal (older kernels, or a procfs_root
//      that is not procfs) the sweep is the only mechanism and runs once per `freshness`.
// A full fd scan reads the fd links (readlinkat into a stack buffer, no allocation per fd) and
// opens fdinfo only for DRM nodes; several fds of one client (same pid, pdev, client id) count
// once. Processes we may not inspect (EACCES) are skipped and counted, processes that exit
// mid-scan are counted as vanished, and truncated or malformed fdinfo never fails a sample.
//
// Bounds: every process listed costs one 12-byte record (kBytesPerProcess) and nothing else;
// clients (the data reported) are bounded by `max_clients` (each ≈ kBytesPerClient bytes); past
// it a process's clients are not tracked and WalkStats::clients_capped counts them. At most
// `max_kept_fds` descriptors are kept open; past that, a client process is scanned by path
// every sample and its identity checked by its start time.
//
// Thread safety: none; the owning probe serialises sample() (it holds its mutex).
// Cancellation: none; one sample is a bounded blocking scan and belongs on the work pool.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpustream/probes/drm_fdinfo.hpp"

namespace gpustream::drm {

/// How the tracker learns that a process's set of fds changed, besides the sweep.
enum class FdCountSignal {
  automatic,    // the fd-dir size when procfs_root is a procfs that reports it (Linux >= 6.2)
  fd_dir_size,  // always trust stat(<pid>/fd).st_size (or TrackerOptions::fd_count)
  none,         // sweep only
};

struct TrackerOptions {
  std::string procfs_root = "/proc";
  std::vector<std::string> drivers;  // drm-driver values to keep; empty = any
  /// A process that opens a GPU is reported within this time (with the change signal; without
  /// it, every process is swept once per `freshness`).
  std::chrono::milliseconds freshness{5000};
  /// With the change signal: every process is fully scanned at least once per sweep_period.
  std::chrono::milliseconds sweep_period{60000};
  FdCountSignal signal = FdCountSignal::automatic;
  /// Reads the fd count of `rel` (a "<pid>/fd" or "fd" path) relative to `dirfd`; -1 when it
  /// cannot. Default: fstatat's st_size. For tests whose generated fd folders are ordinary
  /// directories; setting it implies FdCountSignal::fd_dir_size unless signal is none.
  long (*fd_count)(int dirfd, const char* rel) = nullptr;
  std::size_t max_clients = 4096;
  std::size_t max_kept_fds = 256;
};

class ClientTracker {
 public:
  static constexpr std::size_t kBytesPerProcess = 12;
  static constexpr std::size_t kBytesPerClient = 2048;  // Client + its parsed fdinfo, generous

  explicit ClientTracker(TrackerOptions options);
  ~ClientTracker();
  ClientTracker(const ClientTracker&) = delete;
  ClientTracker& operator=(const ClientTracker&) = delete;

  /// One sample at `now_ns` (monotonic, ns; drives the round robins). The DRM clients, sorted
  /// by pid (then pdev, client id). Never throws for filesystem conditions; an unreadable
  /// procfs root yields no clients.
  std::vector<Client> sample(std::int64_t now_ns, WalkStats* stats = nullptr);

  /// Whether the fd-count change signal is in use (decided at construction).
  bool uses_fd_count_signal() const noexcept;
  /// Process records kept (every pid listed by the last sample).
  std::size_t processes() const noexcept;
  /// Descriptors kept open on client processes.
  std::size_t kept_fds() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// True when `procfs_root` is a procfs whose <pid>/fd folders report their fd count as st_size
/// (checked on "self": Linux >= 6.2).
bool procfs_reports_fd_count(const std::string& procfs_root);

}  // namespace gpustream::drm
