#include "gpustream/probes/drm_fdinfo.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

#include "gpustream/probes/readers.hpp"

namespace gpustream::drm {
namespace {

using readers::parse_byte_size;
using readers::parse_uint;
using readers::trim;

bool starts_with(std::string_view s, std::string_view p) noexcept {
  return s.size() >= p.size() && s.substr(0, p.size()) == p;
}

// "39456116802 ns" -> 39456116802; a bare number is accepted too.
std::optional<std::uint64_t> parse_ns(std::string_view v) noexcept {
  v = trim(v);
  if (v.size() > 2 && v.substr(v.size() - 2) == "ns") v = trim(v.substr(0, v.size() - 2));
  return parse_uint(v);
}

// Stores `value` under `name` in `map`, or marks the record truncated when it did not parse.
void put(std::map<std::string, std::uint64_t>& map, std::string_view name,
         std::optional<std::uint64_t> value, Fdinfo& out) {
  if (name.empty() || !value) {
    out.truncated = true;
    return;
  }
  map[std::string(name)] = *value;
}

// Closes a file descriptor / DIR* on scope exit.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};
struct DirGuard {
  DIR* dir;
  ~DirGuard() {
    if (dir) ::closedir(dir);
  }
};

bool all_digits(const char* s) noexcept {
  if (!*s) return false;
  for (; *s; ++s)
    if (*s < '0' || *s > '9') return false;
  return true;
}

// Reads a small file relative to `dirfd`; false with errno set on failure.
bool read_at(int dirfd, const char* rel, std::string& out, WalkStats& st) {
  ++st.opens;
  int fd = -1;
  do {
    fd = ::openat(dirfd, rel, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return false;
  FdGuard guard{fd};
  out.clear();
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) return true;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > readers::kMaxSmallFileBytes) return true;  // keep what we have
  }
}

bool driver_wanted(const WalkOptions& o, const std::string& driver) {
  return o.drivers.empty() ||
         std::find(o.drivers.begin(), o.drivers.end(), driver) != o.drivers.end();
}

using ClientKey = std::tuple<std::string, bool, std::uint64_t>;  // pdev, has id, id

// Scans one process and appends its clients; a process we may not inspect adds none.
void scan_process(int proc_fd, const char* pid_name, std::int64_t pid, const WalkOptions& o,
                  WalkStats& st, std::vector<Client>& out) {
  char rel[320];
  std::snprintf(rel, sizeof rel, "%s/fd", pid_name);
  ++st.opens;
  const int fd_dir = ::openat(proc_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_dir < 0) {
    if (errno == EACCES || errno == EPERM) {
      ++st.permission_skipped;
    } else {
      ++st.vanished;
    }
    return;
  }
  DIR* dir = ::fdopendir(fd_dir);
  if (!dir) {
    ::close(fd_dir);
    ++st.vanished;
    return;
  }
  DirGuard dir_guard{dir};

  const std::size_t first = out.size();
  std::map<ClientKey, std::size_t> seen;  // key -> index in out
  std::string comm;
  bool comm_read = false;
  std::string text;
  char target[256];
  while (dirent* e = ::readdir(dir)) {
    if (!all_digits(e->d_name)) continue;
    ++st.fds;
    ++st.readlinks;
    const ssize_t n = ::readlinkat(fd_dir, e->d_name, target, sizeof target - 1);
    if (n <= 0) continue;  // closed meanwhile, or not permitted
    if (!is_drm_node(std::string_view(target, static_cast<std::size_t>(n)))) continue;
    ++st.drm_fds;
    std::snprintf(rel, sizeof rel, "%s/fdinfo/%s", pid_name, e->d_name);
    ++st.fdinfo_reads;
    if (!read_at(proc_fd, rel, text, st)) {
      if (errno == EACCES || errno == EPERM) {
        ++st.permission_skipped;
        out.resize(first);
        return;  // drop the whole process: its other fds are just as private
      }
      continue;  // the fd was closed: nothing to count
    }
    auto info = parse_fdinfo(text);
    if (!info) continue;
    if (info->truncated) ++st.truncated;
    if (!driver_wanted(o, info->driver)) continue;
    ClientKey key{info->pdev, info->client_id.has_value(), info->client_id.value_or(0)};
    if (seen.count(key)) continue;  // another fd of the same client
    if (!comm_read) {
      comm_read = true;
      std::snprintf(rel, sizeof rel, "%s/comm", pid_name);
      std::string c;
      if (read_at(proc_fd, rel, c, st)) comm = std::string(trim(c));
    }
    seen.emplace(std::move(key), out.size());
    out.push_back(Client{pid, comm, std::move(*info)});
  }
}

}  // namespace

bool is_drm_node(std::string_view t) noexcept {
  constexpr std::string_view kPrefix = "/dev/dri/";
  if (!starts_with(t, kPrefix)) return false;
  t.remove_prefix(kPrefix.size());
  std::string_view digits;
  if (starts_with(t, "card")) {
    digits = t.substr(4);
  } else if (starts_with(t, "renderD")) {
    digits = t.substr(7);
  } else {
    return false;
  }
  if (digits.empty()) return false;
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<Fdinfo> parse_fdinfo(std::string_view text) {
  Fdinfo out;
  bool has_driver = false;
  if (!text.empty() && text.back() != '\n') out.truncated = true;
  readers::for_each_key_value(text, [&](const readers::KeyValue& kv) {
    const auto key = kv.key;
    const auto value = kv.value;
    if (!starts_with(key, "drm-")) return;
    if (key == "drm-driver") {
      has_driver = !value.empty();
      out.driver = std::string(value);
    } else if (key == "drm-pdev") {
      out.pdev = std::string(value);
    } else if (key == "drm-client-id") {
      out.client_id = parse_uint(value);
      if (!out.client_id) out.truncated = true;
    } else if (starts_with(key, "drm-engine-capacity-")) {
      put(out.engine_capacity, key.substr(20), parse_uint(value), out);
    } else if (starts_with(key, "drm-engine-")) {
      put(out.engine_ns, key.substr(11), parse_ns(value), out);
    } else if (starts_with(key, "drm-total-cycles-")) {
      put(out.total_cycles, key.substr(17), parse_uint(value), out);
    } else if (starts_with(key, "drm-cycles-")) {
      put(out.cycles, key.substr(11), parse_uint(value), out);
    } else if (starts_with(key, "drm-total-")) {
      put(out.total_bytes, key.substr(10), parse_byte_size(value), out);
    } else if (starts_with(key, "drm-resident-")) {
      put(out.resident_bytes, key.substr(13), parse_byte_size(value), out);
    } else if (starts_with(key, "drm-memory-")) {
      put(out.legacy_memory_bytes, key.substr(11), parse_byte_size(value), out);
    }
  });
  if (!has_driver) return std::nullopt;
  return out;
}

std::vector<Client> walk_clients(const WalkOptions& options, WalkStats* stats) {
  WalkStats local;
  WalkStats& st = stats ? *stats : local;
  st = WalkStats{};
  std::vector<Client> out;

  ++st.opens;
  const int proc_fd = ::open(options.procfs_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc_fd < 0) return out;
  FdGuard proc_guard{proc_fd};
  const int list_fd = ::dup(proc_fd);
  if (list_fd < 0) return out;
  DIR* dir = ::fdopendir(list_fd);
  if (!dir) {
    ::close(list_fd);
    return out;
  }
  DirGuard dir_guard{dir};

  while (dirent* e = ::readdir(dir)) {
    if (!all_digits(e->d_name)) continue;
    const auto pid = readers::parse_int(e->d_name);
    if (!pid) continue;
    if (st.processes >= options.max_processes) {
      ++st.capped;
      continue;
    }
    ++st.processes;
    scan_process(proc_fd, e->d_name, *pid, options, st, out);
  }

  std::sort(out.begin(), out.end(), [](const Client& a, const Client& b) {
    return std::tie(a.pid, a.info.pdev, a.info.client_id) <
           std::tie(b.pid, b.info.pdev, b.info.client_id);
  });
  return out;
}

}  // namespace gpustream::drm
