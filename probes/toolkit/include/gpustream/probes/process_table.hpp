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

#include "gpustream/model.hpp"

namespace gpustream::proc {

struct ProcInfo {
  std::string name;                        // empty when unknown
  std::optional<std::uint64_t> rss_bytes;  // absent when unknown
  /// From <pid>/cgroup (gpustream/probes/container.hpp), read with the name; unset with the
  /// reason in container_absent.
  std::optional<ProcessContainer> container;
  ContainerAbsent container_absent = ContainerAbsent::not_collected;
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

 private:
  struct Entry {
    int fd = -1;  // statm, kept open (or -1 past max_open)
    ProcInfo info;
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
