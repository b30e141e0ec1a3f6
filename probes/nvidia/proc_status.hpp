// proc_status.hpp — the name and resident memory of many processes, read from
// <procfs_root>/<pid>/status, cheaply: the procfs root is opened once per batch and each file is
// opened relative to it (openat: a two-component path walk), read once, and scanned only until
// "Name:" and "VmRSS:" have both been seen.
//
// Thread safety: one reader per thread (it owns a directory descriptor). Nothing to cancel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpustream::nvidia_detail {

struct ProcInfo {
  std::string name;                      // empty when unknown
  std::optional<std::uint64_t> rss_bytes;  // absent when unknown (kernel threads have none)
};

/// Name and VmRSS from the text of a status file (the lines may come in any order). With
/// `whole` false, a last line without its newline is ignored (the read stopped inside it).
ProcInfo parse_proc_status(std::string_view text, bool whole = true);

class ProcStatusReader {
 public:
  explicit ProcStatusReader(const std::string& procfs_root);
  ~ProcStatusReader();
  ProcStatusReader(const ProcStatusReader&) = delete;
  ProcStatusReader& operator=(const ProcStatusReader&) = delete;

  /// What <procfs_root>/<pid>/status says; empty when it cannot be read (the process is gone).
  ProcInfo read(std::int64_t pid) const;

 private:
  int dir_ = -1;
};

}  // namespace gpustream::nvidia_detail
