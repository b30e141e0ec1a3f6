#include "gpustream/probes/host_probe.hpp"

#include <unistd.h>

#include <stdexcept>
#include <utility>

#include "gpustream/log.hpp"
#include "gpustream/probes/readers.hpp"
#include "gpustream/probes/settings.hpp"

namespace gpustream {
namespace {

using readers::join_path;

std::string status_path(const SystemPaths& paths, std::string_view pid_dir) {
  return join_path(paths.procfs_root, std::string(pid_dir) + "/status");
}

}  // namespace

MemInfo parse_meminfo(std::string_view text) {
  MemInfo out;
  const std::pair<std::string_view, std::optional<std::uint64_t>*> wanted[] = {
      {"MemTotal", &out.total_bytes},
      {"MemAvailable", &out.available_bytes},
      {"SwapTotal", &out.swap_total_bytes},
      {"SwapFree", &out.swap_free_bytes},
  };
  for (const auto& [key, field] : wanted) {
    const auto value = readers::find_value(text, key);
    if (!value) continue;  // missing line: the figure stays absent
    if (auto bytes = readers::parse_byte_size(*value)) {
      *field = *bytes;
    } else {
      out.garbled.emplace_back(key);
    }
  }
  return out;
}

ProcessStatus parse_process_status(std::string_view text) {
  ProcessStatus out;
  if (auto name = readers::find_value(text, "Name")) out.name = std::string(*name);
  if (auto rss = readers::find_value(text, "VmRSS")) {
    out.rss_bytes = readers::parse_byte_size(*rss);
    out.rss_garbled = !out.rss_bytes;
  }
  return out;
}

std::optional<std::uint64_t> current_process_rss_bytes(const SystemPaths& paths) {
  auto text = readers::read_file(status_path(paths, "self"));
  if (!text) text = readers::read_file(status_path(paths, std::to_string(::getpid())));
  if (!text) return std::nullopt;
  return parse_process_status(*text).rss_bytes;
}

HostProbe::HostProbe(ProbeExecutors executors, HostProbeOptions options)
    : BlockingProbe(std::move(executors)),
      paths_(std::move(options.paths)),
      watch_pids_(std::move(options.watch_pids)) {}

void HostProbe::set_watch_pids(std::vector<std::int64_t> pids) {
  std::lock_guard lock(mu_);
  watch_pids_ = std::move(pids);
  exited_.clear();
}

std::vector<std::int64_t> HostProbe::watch_pids() const {
  std::lock_guard lock(mu_);
  return watch_pids_;
}

Detection HostProbe::detect() {
  Detection d;
  auto text = readers::read_file(join_path(paths_.procfs_root, "meminfo"));
  if (!text) {
    d.reason = text.error().message();
    return d;
  }
  d.available = true;
  return d;
}

GpuSnapshot HostProbe::sample() {
  const auto meminfo_path = join_path(paths_.procfs_root, "meminfo");
  auto text = readers::read_file(meminfo_path);
  if (!text) {
    const auto message = text.error().message();
    if (log_once_.first("meminfo")) logger()->warn("host probe: {}", message);
    throw std::runtime_error(message);
  }
  log_once_.clear("meminfo");

  GpuSnapshot snap;
  snap.probe = std::string(kName);
  const MemInfo mem = parse_meminfo(*text);
  HostSample host;
  host.memory_total_bytes = mem.total_bytes;
  host.memory_available_bytes = mem.available_bytes;
  if (mem.total_bytes && mem.available_bytes && *mem.available_bytes <= *mem.total_bytes)
    host.memory_used_bytes = *mem.total_bytes - *mem.available_bytes;
  host.swap_total_bytes = mem.swap_total_bytes;
  if (mem.swap_total_bytes && mem.swap_free_bytes && *mem.swap_free_bytes <= *mem.swap_total_bytes)
    host.swap_used_bytes = *mem.swap_total_bytes - *mem.swap_free_bytes;
  for (const auto& key : mem.garbled) {
    std::string message = "cannot parse " + key;
    message += " in ";
    message += meminfo_path;
    snap.errors.push_back({"parse_error", std::move(message), {}});
  }
  snap.host = std::move(host);

  const auto self = self_pid();
  add_process(snap, self, /*is_self=*/true);
  std::set<std::int64_t> seen{self};
  for (const auto pid : watch_pids()) {
    if (!seen.insert(pid).second) continue;
    {
      std::lock_guard lock(mu_);
      if (exited_.count(pid)) continue;
    }
    add_process(snap, pid, /*is_self=*/false);
  }
  return snap;
}

std::int64_t HostProbe::self_pid() const {
  if (auto target = readers::read_link(join_path(paths_.procfs_root, "self")))
    if (auto pid = readers::parse_int(*target)) return *pid;
  return static_cast<std::int64_t>(::getpid());
}

void HostProbe::add_process(GpuSnapshot& snap, std::int64_t pid, bool is_self) {
  const auto path = status_path(paths_, std::to_string(pid));
  auto text = readers::read_file(path);
  const auto key = "status:" + std::to_string(pid);
  if (!text && !is_self && text.error().not_found()) {
    {
      std::lock_guard lock(mu_);
      exited_.insert(pid);
    }
    const auto message = "pid " + std::to_string(pid) + " exited";
    logger()->info("host probe: watched {}", message);
    snap.errors.push_back({"process_exited", message, {}});
    return;
  }

  HostProcess proc;
  proc.pid = pid;
  if (!text) {
    const auto message = text.error().message();
    if (log_once_.first(key)) logger()->warn("host probe: {}", message);
    snap.errors.push_back({"read_failed", message, {}});
    snap.host->processes.push_back(std::move(proc));
    return;
  }
  log_once_.clear(key);
  auto status = parse_process_status(*text);
  proc.name = std::move(status.name);
  proc.rss_bytes = status.rss_bytes;
  if (status.rss_garbled)
    snap.errors.push_back({"parse_error", "cannot parse VmRSS in " + path, {}});
  snap.host->processes.push_back(std::move(proc));
}

std::shared_ptr<HostProbe> make_host_probe(ProbeExecutors executors, HostProbeOptions options) {
  return std::make_shared<HostProbe>(std::move(executors), std::move(options));
}

ProbePtr make_host_probe_from_config(const Config& config, ProbeExecutors executors) {
  settings::section(config, HostProbe::kName, {});  // no settings: any key is a mistake
  HostProbeOptions options;
  options.paths = config.paths;
  options.watch_pids = config.watch_pids;
  return make_host_probe(std::move(executors), std::move(options));
}

}  // namespace gpustream
