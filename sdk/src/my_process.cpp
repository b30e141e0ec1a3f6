// my_process_usage: this process's RSS and GPU memory on every device, vendor-neutral.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <string>
#include <system_error>

#include "gpustream/planner.hpp"

namespace gpustream {
namespace {

std::optional<std::uint64_t> metric_bytes(const DeviceSample& d, Metric m) {
  const auto& r = d.metrics[m];
  if (!r || r.value() < 0) return std::nullopt;
  return static_cast<std::uint64_t>(r.value());
}

// The pid as the drivers (and the probes' /proc walk) see it: the target of <root>/self.
std::int64_t self_pid(const std::string& procfs_root) {
  char buf[32];
  const std::string self = procfs_root + "/self";
  const auto n = ::readlink(self.c_str(), buf, sizeof(buf) - 1);
  if (n > 0) {
    buf[n] = '\0';
    char* end = nullptr;
    const long long pid = std::strtoll(buf, &end, 10);
    if (end && *end == '\0' && pid > 0) return pid;
  }
  return static_cast<std::int64_t>(::getpid());
}

// Resident pages from statm (second field) in bytes.
std::optional<std::uint64_t> self_rss(const std::string& procfs_root, std::string& error) {
  const std::string path = procfs_root + "/self/statm";
  std::ifstream in(path);
  if (!in) {
    error = "cannot read " + path + ": " + std::generic_category().message(errno);
    return std::nullopt;
  }
  std::uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) {
    error = "cannot parse " + path;
    return std::nullopt;
  }
  const long page = ::sysconf(_SC_PAGESIZE);
  return resident * static_cast<std::uint64_t>(page > 0 ? page : 4096);
}

MyDeviceUsage usage_on(const GpuSnapshot& snap, const DeviceSample& d, std::int64_t pid) {
  MyDeviceUsage u;
  u.probe = snap.probe;
  u.device_id = d.id;
  u.vendor = d.vendor;
  u.index = d.index;
  u.name = d.name;
  u.device_memory_used_bytes = metric_bytes(d, Metric::memory_used_bytes);
  u.device_memory_total_bytes = metric_bytes(d, Metric::memory_total_bytes);
  u.device_memory_free_bytes = metric_bytes(d, Metric::memory_free_bytes);
  u.sampled_monotonic_ns = snap.monotonic_ns;
  if (d.processes_absent) {
    u.absent = *d.processes_absent;
    u.reason = "probe '" + snap.probe + "' lists no processes for this device (" +
               std::string(to_string(*d.processes_absent)) + ")";
    if (const auto it = d.attributes.find("memory");
        it != d.attributes.end() && it->second == "unified")
      u.reason +=
          "; the device shares the host's memory: this process's GPU use is in host_rss_bytes";
    return u;
  }
  const auto it = std::find_if(d.processes.begin(), d.processes.end(),
                               [&](const ProcessSample& p) { return p.pid == pid; });
  if (it == d.processes.end()) {
    // The list is complete for this process when every figure in it is per-process accounting.
    u.gpu_memory_bytes = 0;
    u.exact = std::all_of(d.processes.begin(), d.processes.end(),
                          [](const ProcessSample& p) { return p.per_process_exact; });
    return u;
  }
  u.exact = it->per_process_exact;
  u.gpu_utilization_percent = it->gpu_utilization_percent;
  u.gpu_memory_bytes = it->gpu_memory_bytes;
  if (!u.gpu_memory_bytes) {
    u.absent = Absence::unsupported;
    u.reason = "probe '" + snap.probe + "' lists this process on the device but not its memory";
  }
  return u;
}

}  // namespace

MyProcessUsage my_process_usage(const std::vector<SnapshotPtr>& snapshots,
                                const std::string& procfs_root) {
  MyProcessUsage out;
  out.pid = self_pid(procfs_root);
  std::string error;
  out.host_rss_bytes = self_rss(procfs_root, error);
  if (!error.empty()) out.errors.push_back(std::move(error));
  for (const auto& s : snapshots) {
    if (!s) continue;
    for (const auto& d : s->devices) out.devices.push_back(usage_on(*s, d, out.pid));
  }
  return out;
}

}  // namespace gpustream
