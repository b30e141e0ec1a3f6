// gpustream/probes/process_table.hpp — the name and host resident memory of the processes using
// the GPUs, for every vendor's probe (a vendor library's or tool's process list, DRM fdinfo), kept
// between samples so that a sample costs one system call per process.
//
// RSS: for each pid the table keeps a descriptor open on <procfs_root>/<pid>/statm and re-reads
// it with pread(fd, ..., 0) at every sample. procfs builds the text again on every read at
// offset 0, so the value is current; it is one system call instead of open + read + close, and
// statm (seven numbers) is far cheaper for the kernel to produce than status. RSS is statm's
// second field (resident pages) times the page size: the same figure as status's VmRSS. A size
// of 0 (no address space: a kernel thread, a zombie) is reported absent, not 0.
//
// Identity: the descriptor belongs to the process, not to its pid number. Once the process is
// gone the read fails (ESRCH), even when the pid has been reused, and the entry is dropped and
// opened afresh, so a reused pid never shows its predecessor's name.
//
// Containers come from <procfs_root>/<pid>/cgroup (gpustream/probes/container.hpp), read with
// the name (first sight, a replaced process, every name_refresh): at most 8 KiB of it.
//
// Slurm jobs come from the same cgroup text (gpustream/probes/slurm.hpp). For a process in a job,
// <procfs_root>/<pid>/environ is read once per process lifetime (the cache is keyed by pid, the
// start time in <pid>/stat and the job id, one entry per tracked pid): at most 1 MiB of it, in
// 16 KiB pieces through one reused buffer, stopping early once every SLURM_* key is seen; only
// SLURM_JOB_ID, SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID and SLURM_JOB_USER are kept (each at
// most 256 bytes), nothing else of the environment. A v2 path has no uid: the process's real uid
// comes from <pid>/status (at most 4 KiB read). User names not in the environ come from
// getpwuid_r, cached per uid (at most 1024 names; the cache is emptied when full).
//
// Names come from <procfs_root>/<pid>/comm (the kernel's command name, up to 15 characters, as
// status's "Name:"). They are read when a pid is first seen or its process was replaced, and
// again once `name_refresh` has passed: exec and prctl(PR_SET_NAME) rename a process without
// any cheap signal, so a new name shows within name_refresh (10 s by default).
//
// Entries of pids not asked for in a batch are dropped and their descriptors closed. At most
// `max_open` descriptors are kept (256 by default: an embedding program's own descriptors should
// not be pushed up); past that, a pid's statm is opened, read and closed each time.
//
// Thread safety: every member locks one mutex. Nothing to cancel (procfs reads do not block).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpustream/log_once.hpp"
#include "gpustream/model.hpp"

namespace gpustream::proc {

struct ProcInfo {
  std::string name;                        // empty when unknown
  std::optional<std::uint64_t> rss_bytes;  // absent when unknown
  /// From <pid>/cgroup (gpustream/probes/container.hpp), read with the name; unset with the
  /// reason in container_absent. Shared (gpustream/shared_optional.hpp) with every sample of the
  /// process made from this entry until the cgroup is read again.
  SharedOptional<ProcessContainer> container;
  ContainerAbsent container_absent = ContainerAbsent::not_collected;
  /// The Slurm job, from <pid>/cgroup and <pid>/environ (gpustream/probes/slurm.hpp).
  SharedOptional<SlurmJob> slurm;
  SlurmAbsent slurm_absent = SlurmAbsent::none;
};

/// What the table met of Slurm, since it was made.
struct SlurmCounters {
  std::uint64_t unrecognized = 0;        // processes whose cgroup has Slurm's mark, shape unknown
  std::uint64_t environ_reads = 0;       // environ files read (once per process lifetime)
  std::uint64_t environ_unreadable = 0;  // environ files that could not be opened or read
  std::uint64_t environ_bounded = 0;     // environ files cut at the 1 MiB bound
  std::uint64_t environ_other_job = 0;   // SLURM_JOB_ID naming another job than the cgroup
};

/// RSS in bytes from the text of a statm file; absent when unparsable or when the process has
/// no address space (size 0).
std::optional<std::uint64_t> parse_statm_rss(std::string_view text, std::uint64_t page_size);

class ProcessTable {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  static constexpr std::size_t kDefaultMaxOpen = 256;
  static constexpr std::chrono::milliseconds kDefaultNameRefresh{10000};

  /// `clock` (default steady_clock) decides when names are re-read.
  explicit ProcessTable(std::string procfs_root, Clock clock = {},
                        std::size_t max_open = kDefaultMaxOpen,
                        std::chrono::milliseconds name_refresh = kDefaultNameRefresh);
  ~ProcessTable();
  ProcessTable(const ProcessTable&) = delete;
  ProcessTable& operator=(const ProcessTable&) = delete;

  /// Name and RSS of each of `pids`, now, in the same order (a pid may repeat: it is read once).
  /// Pids absent from `pids` are forgotten.
  std::vector<ProcInfo> read(std::span<const std::int64_t> pids);

  /// Reads the processes of every device in one batch (read()) and fills each ProcessSample's
  /// host_rss_bytes, and its name where the source gave none (a name from the source, such as
  /// a vendor tool's, is kept). A process whose statm cannot be read keeps host_rss_bytes absent.
  void fill(std::span<DeviceSample> devices);

  /// Name and RSS of one pid now, without forgetting the others (for a "my process" query next
  /// to a probe's batches): a pid in the table is refreshed through its descriptor; another one
  /// is read and not kept.
  ProcInfo read_one(std::int64_t pid);

  /// The Slurm counters (one lock).
  SlurmCounters slurm_counters();

  static constexpr std::size_t kEnvironReadMax = 1 << 20;  // bytes of one environ read, at most
  static constexpr std::size_t kEnvironChunk = 16 * 1024;  // bytes of one pread of environ
  static constexpr std::size_t kStatusReadMax = 4096;      // bytes of <pid>/status read
  static constexpr std::size_t kMaxUserNames = 1024;       // uids whose names are cached

 private:
  /// What a process's environ and status said, for its lifetime (pid, start time, job id).
  struct SlurmCache {
    std::optional<std::uint64_t> start_time;
    std::string job_id;
    std::string env_job_id;  // SLURM_JOB_ID when it names `job_id`'s job, else empty
    std::string array_job_id, array_task_id, user;
    std::optional<std::uint32_t> status_uid;
  };
  struct Entry {
    int fd = -1;  // statm, kept open (or -1 past max_open)
    ProcInfo info;
    std::optional<SlurmCache> slurm;
    bool name_known = false;
    std::chrono::steady_clock::time_point name_read_at{};
    std::uint64_t batch = 0;  // the last batch that asked for this pid
  };

  int dir();
  int open_statm(std::int64_t pid);
  void close_entry(Entry& e);
  enum class Found : std::uint8_t { gone, same_process, opened };
  /// Reads statm through e.fd, else through a new descriptor (kept while under max_open).
  Found read_rss(std::int64_t pid, Entry& e);
  void read_name(std::int64_t pid, Entry& e, std::chrono::steady_clock::time_point now);
  void read_container(std::int64_t pid, Entry& e);
  void read_slurm(std::int64_t pid, Entry& e, std::string_view cgroup_text);
  void fill_slurm_cache(std::int64_t pid, SlurmCache& c);
  std::string user_name(std::uint32_t uid);
  std::string environ_buf_;  // reused by fill_slurm_cache
  std::unordered_map<std::uint32_t, std::string> user_names_;
  SlurmCounters slurm_counters_;
  LogOnce log_once_;
  static constexpr std::size_t kCgroupReadMax = 8192;
  std::string cgroup_buf_;  // reused by read_container
  void refresh(std::int64_t pid, Entry& e, std::chrono::steady_clock::time_point now);

  const std::string root_;
  Clock clock_;
  const std::size_t max_open_;
  const std::chrono::milliseconds name_refresh_;
  const std::uint64_t page_size_;
  std::mutex mu_;  // guards everything below
  int dir_ = -1;
  std::unordered_map<std::int64_t, Entry> entries_;
  std::size_t open_ = 0;
  std::uint64_t batch_ = 0;
};

}  // namespace gpustream::proc
