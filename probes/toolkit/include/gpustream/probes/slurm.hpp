// slurm.hpp — which Slurm job a process runs in, from its /proc/<pid>/cgroup and its environ.
//
// The cgroup paths Slurm's plugins create (cgroup.conf CgroupPlugin), under every v1 controller
// (memory, cpuset, devices, freezer, ...) or in v2's single hierarchy:
//
//   cgroup/v1  /slurm/uid_<uid>/job_<job>/step_<step>[/task_<n>]
//              /slurm_<nodename>/uid_...  (several slurmd on one host: --enable-multiple-slurmd)
//              /slurm/system              (slurmd itself with MemSpecLimit/CoreSpec: no job)
//   cgroup/v2  [<prefix>]/system.slice/slurmstepd.scope/job_<job>/step_<step>/user/task_<n>
//              .../step_<step>/user/task_special (a pid added to a step from outside: PAM, sattach)
//              .../step_<step>/slurm       (the step's slurmstepd)
//              .../<nodename>_slurmstepd.scope/job_...  (several slurmd on one host)
//              .../slurmstepd.scope/system (slurmstepds waiting for a job: no job)
//
// <step> is a step number or batch, extern, interactive. The scope may sit under another slice or
// a container's own cgroup (the prefix). Array and heterogeneous jobs are not in the path: a
// task's cgroup carries its own job id; SLURM_ARRAY_JOB_ID / SLURM_ARRAY_TASK_ID in its environ
// say which array it belongs to.
//
// "Slurm's mark" is a path element `slurm`, `slurm_<nodename>`, `slurmstepd.scope` or
// `<nodename>_slurmstepd.scope`. Below a mark, a path of none of the shapes above is
// `unrecognized`, never guessed at.
//
// Thread safety: pure functions; a SlurmEnvironScanner is one caller's.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "gpustream/model.hpp"

namespace gpustream::probes {

/// A job, or why there is none (SlurmAbsent: `none` outside Slurm's cgroups or in its daemons'
/// own, `unrecognized` below Slurm's mark in an unknown shape).
struct SlurmResult {
  std::optional<SlurmJob> job;
  SlurmAbsent absent = SlurmAbsent::none;  // meaningful only without `job`
};

/// One cgroup path ("/slurm/uid_1000/job_42/step_0/task_0"). `job` carries job_id, step and,
/// from a v1 path, uid; the rest is the environ's.
SlurmResult slurm_from_cgroup_path(std::string_view path);

/// The text of /proc/<pid>/cgroup (v2's "0::/path" or v1's "N:controllers:/path" lines): the
/// first line naming a job wins; `unrecognized` when no line does and one has Slurm's mark in an
/// unknown shape. Lines not in the cgroup format are skipped (container.hpp says `malformed`).
SlurmResult parse_slurm_cgroup(std::string_view text);

/// What a process's environment says of its job (empty: not there, or not valid: ids must be
/// decimal, a user name printable ASCII without spaces; each value at most 256 bytes).
struct SlurmEnviron {
  std::string job_id;         // SLURM_JOB_ID (SLURM_JOBID in old releases)
  std::string array_job_id;   // SLURM_ARRAY_JOB_ID
  std::string array_task_id;  // SLURM_ARRAY_TASK_ID
  std::string user;           // SLURM_JOB_USER
  friend bool operator==(const SlurmEnviron&, const SlurmEnviron&) = default;
};

/// Scans /proc/<pid>/environ ("KEY=VALUE\0" entries) fed in pieces of any size, keeping only the
/// SLURM_* keys above. Memory: an entry split across pieces is carried up to kMaxEntry bytes;
/// a longer entry is skipped whole, so the scanner never holds more than kMaxEntry bytes
/// whatever the environment's size.
class SlurmEnvironScanner {
 public:
  static constexpr std::size_t kMaxEntry = 512;  // bytes of one carried "KEY=VALUE" entry
  void feed(std::string_view piece);
  /// True once every key has been seen: the rest of the environment need not be read.
  bool complete() const noexcept;
  /// The values; an unterminated last entry is taken as it stands.
  SlurmEnviron finish();

 private:
  void entry(std::string_view e);
  SlurmEnviron env_;
  std::string carry_;  // the start of an entry cut by the end of a piece
  bool skipping_ = false;
  bool old_job_id_ = false;  // job_id came from SLURM_JOBID (SLURM_JOB_ID replaces it)
};

/// Parses a whole environ text (SlurmEnvironScanner in one piece).
SlurmEnviron parse_slurm_environ(std::string_view text);

/// The real uid from the text of /proc/<pid>/status ("Uid:\t<real>\t<effective>...").
std::optional<std::uint32_t> parse_status_uid(std::string_view text);

/// The start time (clock ticks since boot, field 22) from the text of /proc/<pid>/stat: with the
/// pid, it names one process for its lifetime.
std::optional<std::uint64_t> parse_stat_start_time(std::string_view text);

}  // namespace gpustream::probes
