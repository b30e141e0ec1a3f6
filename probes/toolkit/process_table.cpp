#include "gpustream/probes/process_table.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include "gpustream/log.hpp"
#include "gpustream/model.hpp"
#include "gpustream/probes/container.hpp"
#include "gpustream/probes/slurm.hpp"

namespace gpustream::proc {
namespace {

/// "<pid>/<file>" into `out` (at least 48 bytes); false for a pid that cannot be one.
bool pid_path(char* out, std::int64_t pid, const char* file) {
  if (pid <= 0) return false;
  auto [end, ec] = std::to_chars(out, out + 24, pid);
  if (ec != std::errc{}) return false;
  *end++ = '/';
  std::memcpy(end, file, std::strlen(file) + 1);
  return true;
}

int open_at(int dir, const char* path) {
  int fd = -1;
  do {
    fd = ::openat(dir, path, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

/// Reads from offset 0; -1 on failure (ESRCH once the process is gone).
ssize_t read_at_start(int fd, char* buf, std::size_t size) {
  ssize_t n = -1;
  do {
    n = ::pread(fd, buf, size, 0);
  } while (n < 0 && errno == EINTR);
  return n;
}

/// Up to `size` bytes of "<pid>/<file>" from offset 0; empty when it cannot be read.
std::string_view read_small(int dir, std::int64_t pid, const char* file, char* buf,
                            std::size_t size) {
  char path[48];
  if (dir < 0 || !pid_path(path, pid, file)) return {};
  const int fd = open_at(dir, path);
  if (fd < 0) return {};
  const auto n = read_at_start(fd, buf, size);
  ::close(fd);
  return n > 0 ? std::string_view(buf, static_cast<std::size_t>(n)) : std::string_view{};
}

const char* skip_spaces(const char* p, const char* end) {
  while (p < end && (*p == ' ' || *p == '\t')) ++p;
  return p;
}

}  // namespace

std::optional<std::uint64_t> parse_statm_rss(std::string_view text, std::uint64_t page_size) {
  const char* p = text.data();
  const char* const end = p + text.size();
  std::uint64_t size = 0, resident = 0;
  p = skip_spaces(p, end);
  auto r = std::from_chars(p, end, size);
  if (r.ec != std::errc{}) return std::nullopt;
  p = skip_spaces(r.ptr, end);
  r = std::from_chars(p, end, resident);
  if (r.ec != std::errc{} || r.ptr == p) return std::nullopt;
  if (size == 0) return std::nullopt;  // no address space: nothing resident to speak of
  return resident * page_size;
}

ProcessTable::ProcessTable(std::string procfs_root, Clock clock, std::size_t max_open,
                           std::chrono::milliseconds name_refresh)
    : root_(std::move(procfs_root)),
      clock_(std::move(clock)),
      max_open_(max_open),
      name_refresh_(name_refresh),
      page_size_(static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE))) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
}

ProcessTable::~ProcessTable() {
  for (auto& [pid, e] : entries_) close_entry(e);
  if (dir_ >= 0) ::close(dir_);
}

int ProcessTable::dir() {
  if (dir_ < 0) dir_ = ::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  return dir_;
}

int ProcessTable::open_statm(std::int64_t pid) {
  char path[48];
  if (dir() < 0 || !pid_path(path, pid, "statm")) return -1;
  return open_at(dir_, path);
}

void ProcessTable::close_entry(Entry& e) {
  if (e.fd < 0) return;
  ::close(e.fd);
  e.fd = -1;
  --open_;
}

ProcessTable::Found ProcessTable::read_rss(std::int64_t pid, Entry& e) {
  char buf[256];
  if (e.fd >= 0) {
    const auto n = read_at_start(e.fd, buf, sizeof buf);
    if (n >= 0) {
      e.info.rss_bytes = parse_statm_rss({buf, static_cast<std::size_t>(n)}, page_size_);
      return Found::same_process;
    }
    close_entry(e);  // the process is gone; its pid may already belong to another one
  }
  const int fd = open_statm(pid);
  if (fd < 0) return Found::gone;
  const auto n = read_at_start(fd, buf, sizeof buf);
  if (n < 0) {
    ::close(fd);
    return Found::gone;
  }
  e.info.rss_bytes = parse_statm_rss({buf, static_cast<std::size_t>(n)}, page_size_);
  if (open_ < max_open_) {
    e.fd = fd;
    ++open_;
  } else {
    ::close(fd);
  }
  return Found::opened;
}

void ProcessTable::read_name(std::int64_t pid, Entry& e,
                             std::chrono::steady_clock::time_point now) {
  char path[48];
  e.info.name.clear();
  e.name_known = true;
  e.name_read_at = now;
  if (!pid_path(path, pid, "comm")) return;
  const int fd = open_at(dir_, path);
  if (fd < 0) return;
  char buf[128];
  const auto n = read_at_start(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return;
  std::string_view name(buf, static_cast<std::size_t>(n));
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.remove_suffix(1);
  e.info.name = std::string(name);
  read_container(pid, e);
}

void ProcessTable::read_container(std::int64_t pid, Entry& e) {
  e.info.container.reset();
  e.info.container_absent = ContainerAbsent::not_collected;
  e.info.slurm.reset();
  const SlurmAbsent slurm_before = e.info.slurm_absent;
  e.info.slurm_absent = SlurmAbsent::none;
  char path[48];
  if (!pid_path(path, pid, "cgroup")) return;
  const int fd = open_at(dir_, path);
  if (fd < 0) {
    if (errno == EACCES || errno == EPERM) e.info.container_absent = ContainerAbsent::no_permission;
    return;  // gone: the process's other reads say so
  }
  // A real file is a few hundred bytes (v2) to ~2 KiB (v1 with long Kubernetes paths); longer
  // text is cut at its last full line.
  cgroup_buf_.resize(kCgroupReadMax);
  const auto n = read_at_start(fd, cgroup_buf_.data(), cgroup_buf_.size());
  ::close(fd);
  if (n <= 0) return;
  std::string_view text(cgroup_buf_.data(), static_cast<std::size_t>(n));
  if (static_cast<std::size_t>(n) == cgroup_buf_.size()) {
    const auto last = text.rfind('\n');
    text = last == std::string_view::npos ? std::string_view{} : text.substr(0, last + 1);
  }
  auto result = probes::parse_cgroup(text);
  e.info.container = std::move(result.container);
  e.info.container_absent = e.info.container ? ContainerAbsent::not_collected : result.absent;
  e.info.slurm_absent = slurm_before;  // read_slurm counts a process newly unrecognized once
  read_slurm(pid, e, text);
}

void ProcessTable::read_slurm(std::int64_t pid, Entry& e, std::string_view cgroup_text) {
  auto r = probes::parse_slurm_cgroup(cgroup_text);
  if (!r.job) {
    if (r.absent == SlurmAbsent::unrecognized && e.info.slurm_absent != r.absent) {
      ++slurm_counters_.unrecognized;
      if (log_once_.first("slurm-unrecognized"))
        logger()->warn(
            "process table: the cgroup of pid {} has Slurm's mark in a shape gpustream does not "
            "know, its job is left out (slurm_absent: unrecognized): {}",
            pid, cgroup_text.substr(0, 512));
    }
    e.info.slurm_absent = r.absent;
    e.slurm.reset();
    return;
  }
  e.info.slurm_absent = SlurmAbsent::none;
  SlurmJob job = std::move(*r.job);
  char stat[1024];
  const auto start =
      probes::parse_stat_start_time(read_small(dir_, pid, "stat", stat, sizeof stat));
  if (!e.slurm || e.slurm->start_time != start || e.slurm->job_id != job.job_id) {
    e.slurm = SlurmCache{.start_time = start, .job_id = job.job_id};
    fill_slurm_cache(pid, *e.slurm);
  }
  const SlurmCache& c = *e.slurm;
  if (!c.env_job_id.empty()) {
    job.array_job_id = c.array_job_id;
    job.array_task_id = c.array_task_id;
    job.user = c.user;
  }
  if (!job.uid) job.uid = c.status_uid;
  if (job.user.empty() && job.uid) job.user = user_name(*job.uid);
  e.info.slurm = std::move(job);
}

void ProcessTable::fill_slurm_cache(std::int64_t pid, SlurmCache& c) {
  char status[kStatusReadMax];
  c.status_uid = probes::parse_status_uid(read_small(dir_, pid, "status", status, sizeof status));
  ++slurm_counters_.environ_reads;
  char path[48];
  int fd = -1;
  if (pid_path(path, pid, "environ")) fd = open_at(dir_, path);
  if (fd < 0) {
    ++slurm_counters_.environ_unreadable;
    return;
  }
  environ_buf_.resize(kEnvironChunk);
  probes::SlurmEnvironScanner scanner;
  std::size_t total = 0;
  bool eof = false;
  bool failed = false;
  while (total < kEnvironReadMax && !scanner.complete()) {
    ssize_t n = -1;
    do {
      n = ::pread(fd, environ_buf_.data(), std::min(kEnvironChunk, kEnvironReadMax - total),
                  static_cast<off_t>(total));
    } while (n < 0 && errno == EINTR);
    if (n < 0) failed = true;
    if (n <= 0) {
      eof = true;
      break;
    }
    scanner.feed({environ_buf_.data(), static_cast<std::size_t>(n)});
    total += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (failed && total == 0) {
    ++slurm_counters_.environ_unreadable;
    return;
  }
  if (!eof && !scanner.complete()) ++slurm_counters_.environ_bounded;
  auto env = scanner.finish();
  if (env.job_id.empty()) return;  // not in the environment: the cgroup's job alone
  if (env.job_id != c.job_id) {
    ++slurm_counters_.environ_other_job;
    if (log_once_.first("slurm-other-job"))
      logger()->info(
          "process table: pid {} runs in Slurm job {} (its cgroup) but its SLURM_JOB_ID says {}: "
          "the environment is ignored",
          pid, c.job_id, env.job_id);
    return;
  }
  c.env_job_id = std::move(env.job_id);
  c.array_job_id = std::move(env.array_job_id);
  c.array_task_id = std::move(env.array_task_id);
  c.user = std::move(env.user);
}

std::string ProcessTable::user_name(std::uint32_t uid) {
  if (auto it = user_names_.find(uid); it != user_names_.end()) return it->second;
  if (user_names_.size() >= kMaxUserNames) user_names_.clear();
  std::string name;
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16 * 1024);  // getpwuid_r's strings; a larger entry stays unnamed
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found) == 0 && found &&
      found->pw_name)
    name = found->pw_name;
  user_names_.emplace(uid, name);  // an unknown uid is remembered too: NSS is asked once
  return name;
}

SlurmCounters ProcessTable::slurm_counters() {
  std::lock_guard lock(mu_);
  return slurm_counters_;
}

void ProcessTable::refresh(std::int64_t pid, Entry& e, std::chrono::steady_clock::time_point now) {
  switch (read_rss(pid, e)) {
    case Found::gone:
      e.info = {};
      e.name_known = false;
      return;
    case Found::same_process:  // the descriptor vouches for the process: the name is its own
      if (e.name_known && now - e.name_read_at < name_refresh_) return;
      break;
    case Found::opened:  // a new or replaced process, or one past max_open (no descriptor kept)
      break;
  }
  read_name(pid, e, now);
}

std::vector<ProcInfo> ProcessTable::read(std::span<const std::int64_t> pids) {
  std::lock_guard lock(mu_);
  ++batch_;
  const auto now = clock_();
  std::vector<ProcInfo> out;
  out.reserve(pids.size());
  for (const auto pid : pids) {
    if (pid <= 0) {
      out.emplace_back();
      continue;
    }
    auto& e = entries_[pid];
    if (e.batch != batch_) {
      e.batch = batch_;
      refresh(pid, e, now);
    }
    out.push_back(e.info);
  }
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.batch == batch_) {
      ++it;
      continue;
    }
    close_entry(it->second);
    it = entries_.erase(it);
  }
  return out;
}

void ProcessTable::fill(std::span<DeviceSample> devices) {
  std::vector<std::int64_t> pids;  // a pid on several devices is listed again, and read once
  for (const auto& d : devices)
    for (const auto& p : d.processes) pids.push_back(p.pid);
  if (pids.empty()) {
    read(pids);  // forget everyone: no process uses a device now
    return;
  }
  const auto infos = read(pids);
  std::size_t i = 0;
  for (auto& d : devices) {
    for (auto& p : d.processes) {
      const auto& info = infos[i++];
      if (p.name.empty()) p.name = info.name;
      p.host_rss_bytes = info.rss_bytes;
      p.container = info.container;
      p.container_absent = info.container_absent;
      p.slurm = info.slurm;
      p.slurm_absent = info.slurm_absent;
    }
  }
}

ProcInfo ProcessTable::read_one(std::int64_t pid) {
  std::lock_guard lock(mu_);
  if (pid <= 0) return {};
  const auto now = clock_();
  if (auto it = entries_.find(pid); it != entries_.end()) {
    refresh(pid, it->second, now);
    return it->second.info;
  }
  Entry e;  // not kept: its descriptor, if one was opened, is closed again
  refresh(pid, e, now);
  close_entry(e);
  return e.info;
}

}  // namespace gpustream::proc
