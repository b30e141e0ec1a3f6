// gpustream/probes/drm_client_tracker.hpp — the DRM clients of a host, found at a cost that grows
// with the processes that use a GPU rather than with all processes. Shared by the DRM probes
// (one tracker per probe, kept between samples).
//
// Two ways to learn that a process started using a GPU, chosen at construction:
//
// With the open signal (the default when it can be had): an inotify watch (IN_OPEN) on the
// DRM device folder, <devfs_root>/dri (/dev/dri; a generated tree passes its own devfs root,
// as the probes pass SystemPaths::devfs_root), plus one on the device folder of each other mount
// namespace a process is seen in (<procfs_root>/<pid>/root/dev/dri: the container's own /dev,
// whose nodes the host folder's watch never sees opened). A steady sample then costs:
//   1. One read of the watch (nothing pending: no per-process work is due).
//   2. The clients already known: for each process holding DRM fds, only those fds' fdinfo,
//      through a descriptor kept open on /proc/<pid> (up to max_kept_fds). On procfs that
//      descriptor belongs to the process, not to its pid number: once the process is gone
//      every read through it fails, even when the pid has been reused, and the process is
//      scanned afresh (it has exited: gone from this sample; a reused pid never inherits a
//      predecessor's name or counters, see Client::instance). A DRM fd closed or now naming
//      another file triggers a rescan of that process.
//   3. The fd-count pass (with the fd-count signal, Linux >= 6.2): the listing of procfs_root
//      is read a chunk at a time (its own descriptor keeps the position), count_period / sample
//      interval of it per sample; each known pid's fd count (stat of /proc/<pid>/fd) is
//      compared with its last scan (a full fd scan when it changed), each new pid gets a full
//      scan, and pids it did not list in a whole cycle have exited. This finds, within
//      `count_period` (300 s by default), a GPU fd that came without an open of a watched node
//      (inherited across fork/exec, received over a socket: the fd count changed).
//   4. After an open of a watched node (seen at the next sample): the same pass runs at
//      `freshness` speed for one whole cycle from that point (without the fd-count signal, it
//      runs only then, and fully scans every pid). Another open during it extends it by one
//      cycle from that point. So a process that opens a watched node is reported within
//      `freshness` (5 s by default).
//   5. The sweep, the last safety net: the listing read the same way, sweep_period / interval
//      of it per sample, every pid read fully scanned (600 s by default). It finds what nothing
//      else signals: a process that closed an fd and got a GPU fd without an open of a watched
//      node (same fd count), or one whose namespace is past max_namespace_watches on a kernel
//      without the fd-count signal.
//   6. The new end of the listing (one lseek and one getdents64): procfs lists pids in
//      ascending order, so the pids made since the last sample come after the highest seen
//      (a generated tree on tmpfs lists newest first: before the first one seen last time).
//      Each is fully scanned at once: a process that holds a GPU fd when it is first seen
//      (forked from a GPU client, or a container's first process that opened its own node)
//      is reported at the next sample. After the pid counter wraps (and on a tree whose
//      listing order says nothing) new pids are found by the pass.
//   A pid seen for the first time has its mount namespace read (readlink of <pid>/ns/mnt, once
//   per pid); a namespace other than ours (and not sharing our device folder) gets a watch on
//   its device folder while any of its pids is known, at most max_namespace_watches of them
//   (past it: logged once; those pids are left to the fd-count pass and the sweep). So later
//   opens in a container are reported within `freshness`.
// Without it (no inotify, no device folder, or OpenSignal::none), every sample lists
// procfs_root once (getdents64 into a reused 256 KiB buffer), forgets pids no longer listed,
// scans new pids, re-reads the known clients as in 2., and
//   - with the fd-count signal (Linux >= 6.2): compares every process's fd count with its last
//     scan once per `freshness` (round robin, a share per sample), and sweeps every process
//     once per `sweep_period` (60 s by default);
//   - with neither signal: sweeps every process once per `freshness`.
// A full fd scan opens /proc/<pid>/fd (one open), reads the links (readlinkat into a stack
// buffer, no allocation per fd) and opens /proc/<pid> and the fdinfo files only for DRM nodes;
// several fds of one client (same pid, pdev, client id) count once. Processes we may not
// inspect (EACCES) are skipped and counted, processes that exit mid-scan are counted as
// vanished (or, with the open signal, as exited), and truncated or malformed fdinfo never fails
// a sample. The first sample scans every process once (the cost of a one-shot walk, once).
//
// Bounds: every process known costs one 12-byte record (kBytesPerProcess) and nothing else;
// clients (the data reported) are bounded by `max_clients` (each at most kBytesPerClient bytes:
// an fdinfo text is read up to 64 KiB and its keys trimmed to 16 per kind); past it a process's
// clients are not tracked and WalkStats::clients_capped counts them. At most `max_kept_fds`
// descriptors are kept open; past that, a client process is scanned by path every sample and its
// identity checked by its start time.
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

/// Whether the tracker watches the DRM device nodes for opens (see the top of this file).
enum class OpenSignal {
  automatic,  // when inotify and <devfs_root>/dri can be had
  none,       // never: list every pid every sample
};

struct TrackerOptions {
  std::string procfs_root = "/proc";
  /// Where /dev is: the device folder watched is <devfs_root>/dri (SystemPaths::devfs_root).
  std::string devfs_root = "/dev";
  std::vector<std::string> drivers;  // drm-driver values to keep; empty = any
  /// A process that opens a GPU is reported within this time (with the change signal; without
  /// it, every process is swept once per `freshness`).
  std::chrono::milliseconds freshness{5000};
  /// Every process is fully scanned at least once per sweep_period (the safety net). 0: 600 s
  /// with the open signal, 60 s with only the fd-count signal, `freshness` with neither.
  std::chrono::milliseconds sweep_period{0};
  /// With the open signal and the fd-count signal: every process's fd count is compared with
  /// its last scan once per count_period (the fd-count pass; 0: only after an open).
  std::chrono::milliseconds count_period{300000};
  FdCountSignal signal = FdCountSignal::automatic;
  OpenSignal open_signal = OpenSignal::automatic;
  /// Reads the fd count of `rel` (a "<pid>/fd" or "fd" path) relative to `dirfd`; -1 when it
  /// cannot. Default: fstatat's st_size. For tests whose generated fd folders are ordinary
  /// directories; setting it implies FdCountSignal::fd_dir_size unless signal is none.
  long (*fd_count)(int dirfd, const char* rel) = nullptr;
  std::size_t max_clients = 4096;
  std::size_t max_kept_fds = 256;
  /// Watches on the device folders of other mount namespaces (each kBytesPerNamespace bytes
  /// and one inotify watch of the user's max_user_watches).
  std::size_t max_namespace_watches = 128;
};

class ClientTracker {
 public:
  static constexpr std::size_t kBytesPerProcess = 12;
  /// One watched mount namespace: its inode, the watch, the count of its known pids.
  static constexpr std::size_t kBytesPerNamespace = 16;
  /// The most one tracked client holds (Client, its comm and parsed fdinfo: at most 16 keys
  /// of up to 48 bytes per kind, 7 kinds, in std::map nodes), whatever its fdinfo says; a real
  /// DRM driver's client holds 1-2 KB.
  static constexpr std::size_t kBytesPerClient = 16 * 1024;

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
  /// Whether the open signal is in use (decided at construction; off for good if the watch is
  /// lost, e.g. the device folder is removed).
  bool uses_open_signal() const noexcept;
  /// Process records kept (every pid listed by the last sample; with the open signal, every pid
  /// listed during the sweep's last cycle and since).
  std::size_t processes() const noexcept;
  /// Descriptors kept open on client processes.
  std::size_t kept_fds() const noexcept;
  /// Watches on other mount namespaces' device folders (not counting our own folder's).
  std::size_t namespace_watches() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// True when `procfs_root` is a procfs whose <pid>/fd folders report their fd count as st_size
/// (checked on "self": Linux >= 6.2).
bool procfs_reports_fd_count(const std::string& procfs_root);

}  // namespace gpustream::drm
