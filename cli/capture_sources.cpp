// `gpustream capture`: the machine's sources — sysfs, procfs, the vendor tools — copied into a
// bundle (capture.hpp).
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <boost/json.hpp>

#include "capture_bundle.hpp"
#include "capture_internal.hpp"
#include "gpustream/probes/capture.hpp"
#include "gpustream/probes/drm_fdinfo.hpp"
#include "gpustream/probes/readers.hpp"
#include "gpustream/subprocess.hpp"

namespace gpustream::cli::capture_detail {
namespace {

namespace json = boost::json;
using readers::join_path;

/// fdinfo texts are read by the DRM client tracker up to this size (drm_client_tracker_impl.hpp).
constexpr std::uint64_t kMaxFdinfoBytes = 64 * 1024;
/// Most pids examined under the procfs root.
constexpr std::size_t kMaxPidsScanned = 1 << 20;
/// Most fds examined per process.
constexpr std::size_t kMaxFdsPerProcess = 1 << 16;

std::string quote_sh(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string first_line(std::string_view text) {
  text = readers::trim(text);
  auto line = std::string(text.substr(0, text.find('\n')));
  if (line.size() > 200) line.resize(200);
  return line;
}

/// Keeps only the lines of a /proc/<pid>/status the host probe reads (Name, VmRSS).
std::string filtered_status(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.rfind("Name:", 0) == 0 || line.rfind("VmRSS:", 0) == 0) {
      out += line;
      out += '\n';
    }
  }
  return out;
}

}  // namespace

json::object capture_sysfs(CaptureBundle& b, const std::string& sysfs_root) {
  json::object out;
  std::map<std::string, int> vendors;
  json::array nodes;
  std::set<std::string> seen_nodes;
  for (const auto& in : capture::sysfs_inputs(sysfs_root)) {
    b.mirror(sysfs_root, "sys", in.rel, in.follow);
    // One line per node: its name and vendor.
    const auto slash = in.rel.find('/', std::string("class/drm/").size());
    if (slash != std::string::npos || !seen_nodes.insert(in.rel).second) continue;
    const auto node = in.rel.substr(std::string("class/drm/").size());
    auto v = readers::read_uint_file(join_path(sysfs_root, in.rel + "/device/vendor"), 16);
    std::string vendor = v ? capture::pci_vendor_name(static_cast<std::uint32_t>(*v)) : "unknown";
    ++vendors[vendor];
    nodes.push_back(json::object{{"node", node}, {"vendor", vendor}});
  }
  out["drm_nodes"] = std::move(nodes);
  json::object by_vendor;
  for (const auto& [k, n] : vendors) by_vendor[k] = n;
  out["drm_nodes_by_vendor"] = std::move(by_vendor);
  if (seen_nodes.empty())
    b.finding("sysfs", "no DRM node (card*, renderD*) under " + join_path(sysfs_root, "class/drm"));
  return out;
}

void capture_process_files(CaptureBundle& b, const std::string& procfs_root, std::int64_t pid) {
  const auto p = std::to_string(pid);
  for (const char* f : {"comm", "statm", "cgroup"})
    b.copy(join_path(procfs_root, p + "/" + f), "proc/" + p + "/" + f);
}

json::object capture_procfs(CaptureBundle& b, const std::string& procfs_root,
                            const std::vector<std::int64_t>& watch_pids,
                            std::size_t max_processes) {
  json::object out;
  out["meminfo"] = b.copy(join_path(procfs_root, "meminfo"), "proc/meminfo");
  // The host probe's "this process": the self link and the two lines of status it reads.
  std::vector<std::int64_t> status_pids = watch_pids;
  if (auto self = readers::read_link(join_path(procfs_root, "self"))) {
    if (auto pid = readers::parse_int(*self)) {
      b.link("proc/self", std::to_string(*pid));
      status_pids.push_back(*pid);
    }
  }
  for (auto pid : status_pids) {
    if (auto text = readers::read_file(join_path(procfs_root, std::to_string(pid) + "/status")))
      b.write("proc/" + std::to_string(pid) + "/status", filtered_status(*text));
  }

  // DRM clients: the processes holding an fd on a /dev/dri node. Only those fds' links and
  // fdinfo are copied, with comm, statm and cgroup; nothing else of any process.
  std::size_t clients = 0, denied = 0, drm_fds = 0;
  auto pids = readers::list_numeric_dirs(procfs_root);
  if (!pids) {
    b.finding("procfs", "cannot list " + procfs_root + ": " + pids.error().message());
  } else {
    std::size_t scanned = 0;
    for (auto pid : *pids) {
      if (++scanned > kMaxPidsScanned) break;
      const auto p = std::to_string(pid);
      const auto fd_dir = join_path(procfs_root, p + "/fd");
      DIR* d = ::opendir(fd_dir.c_str());
      if (!d) {
        if (errno == EACCES || errno == EPERM) ++denied;
        continue;
      }
      std::vector<std::pair<std::string, std::string>> fds;  // fd, link target
      std::size_t seen = 0;
      while (dirent* e = ::readdir(d)) {
        if (++seen > kMaxFdsPerProcess) break;
        if (!readers::parse_uint(e->d_name)) continue;
        char target[512];
        const ssize_t n = ::readlinkat(::dirfd(d), e->d_name, target, sizeof target - 1);
        if (n <= 0) continue;
        const std::string t(target, static_cast<std::size_t>(n));
        if (drm::is_drm_node(t)) fds.emplace_back(e->d_name, t);
      }
      ::closedir(d);
      if (fds.empty()) continue;
      if (clients >= max_processes) {
        b.finding("limits", "more than " + std::to_string(max_processes) +
                                " DRM client processes: the others are not captured");
        break;
      }
      ++clients;
      for (const auto& [fd, target] : fds) {
        ++drm_fds;
        b.link(concat("proc/", p, "/fd/", fd), target);
        const auto src = join_path(procfs_root, concat(p, "/fdinfo/", fd));
        if (auto text = readers::read_file(src, kMaxFdinfoBytes)) {
          b.write(concat("proc/", p, "/fdinfo/", fd), *text);
        } else if (text.error().code == std::errc::permission_denied) {
          ++denied;
        }
      }
      capture_process_files(b, procfs_root, pid);
    }
  }
  if (denied > 0)
    b.finding("procfs", std::to_string(denied) +
                            " processes could not be inspected (their fds belong to another "
                            "user): run the capture as root or with CAP_SYS_PTRACE to include "
                            "their GPU use");
  out["drm_client_processes"] = clients;
  out["drm_fds"] = drm_fds;
  out["processes_not_inspected"] = denied;
  return out;
}

json::object capture_tools(CaptureBundle& b, const Config& config,
                           std::chrono::milliseconds timeout, std::uint64_t max_output_bytes,
                           std::vector<RecordedRun>& runs) {
  json::object out;
  std::map<std::string, std::vector<capture::ToolCommand>> by_tool;
  std::vector<std::string> order;
  for (auto& c : capture::tool_commands(config)) {
    if (!by_tool.count(c.tool)) order.push_back(c.tool);
    by_tool[c.tool].push_back(std::move(c));
  }
  for (const auto& tool : order) {
    const auto& commands = by_tool[tool];
    const auto& setting = commands.front().setting;
    const auto dot = setting.find('.');
    std::string program = tool;
    bool configured = false;
    if (const auto* v = config.probe_settings.get(setting.substr(0, dot), setting.substr(dot + 1)))
      if (const auto* s = v->if_string(); s && !s->empty()) {
        program = *s;
        configured = true;
      }
    json::object t{{"program", program}, {"from", configured ? setting : std::string("PATH")}};
    json::array cmds;
    std::string script_cases;
    bool found = true;
    int k = 0;
    for (const auto& c : commands) {
      RunOptions ro;
      ro.argv = {program};
      const auto& args = c.run_args.empty() ? c.args : c.run_args;
      ro.argv.insert(ro.argv.end(), args.begin(), args.end());
      ro.timeout = timeout;
      ro.max_output_bytes = static_cast<std::size_t>(max_output_bytes);
      boost::system::error_code ec;
      auto r = gpustream::run(ro, ec);
      std::string joined;
      for (const auto& a : c.args) joined += (joined.empty() ? "" : " ") + a;
      json::object rec{{"args", joined}};
      if (ec == boost::system::errc::no_such_file_or_directory ||
          ec == boost::system::errc::permission_denied) {
        found = false;
        b.finding("tools", concat(tool, ": not found (", program, "): ", ec.message()));
        break;
      }
      const bool stream = !c.run_args.empty();
      if (ec && !r.timed_out) {
        rec["error"] = ec.message();
        b.finding("tools", concat(tool, " ", joined, ": ", ec.message()));
        cmds.push_back(std::move(rec));
        continue;
      }
      std::string output = std::move(r.output);
      if (stream) {  // the complete lines only
        const auto last = output.rfind('\n');
        output.resize(last == std::string::npos ? 0 : last + 1);
      }
      const auto n = std::to_string(k++);
      const auto base = concat("tools/", tool, ".d/", n);
      const bool kept =
          b.write(concat(base, ".out"), output) && b.write(concat(base, ".err"), r.stderr_tail);
      rec["stdout_bytes"] = output.size();
      if (r.exit_code) rec["exit_code"] = *r.exit_code;
      if (r.signal) rec["signal"] = *r.signal;
      if (r.timed_out && !stream) {
        rec["timed_out"] = true;
        b.finding("tools", concat(tool, " ", joined, ": timed out after ",
                                  std::to_string(timeout.count()), " ms and was killed"));
      }
      if (r.truncated) {
        rec["truncated"] = true;
        b.finding("limits", concat(tool, " ", joined, ": output cut at ",
                                   std::to_string(max_output_bytes), " bytes"));
      }
      if (c.version && r.success()) t["version"] = first_line(output);
      if (!kept) {
        cmds.push_back(std::move(rec));
        continue;
      }
      runs.push_back({tool, c.args, output, c.pids ? c.pids(output) : std::vector<std::int64_t>{}});
      // The replay: the recorded output, stderr and ending for exactly these arguments.
      const int code = stream        ? 0
                       : r.timed_out ? 124
                       : r.exit_code ? *r.exit_code
                       : r.signal    ? 128 + *r.signal
                                     : 1;
      script_cases += concat(quote_sh(joined), ")\n  cat \"$d/", n, ".err\" >&2\n");
      if (stream) {
        // Like the tool: one line per interval (the first after one interval too), then alive
        // until killed.
        char pause[32];
        std::snprintf(pause, sizeof pause, "%.3f",
                      static_cast<double>(c.interval.count()) / 1000.0);
        script_cases += concat("  while IFS= read -r line; do sleep ", pause,
                               "; printf '%s\\n' \"$line\"; done < \"$d/", n,
                               ".out\"\n  exec sleep 2147483647\n  ;;\n");
      } else {
        script_cases += concat("  cat \"$d/", n, ".out\"\n");
        if (r.timed_out)
          script_cases += "  echo 'gpustream capture: this run timed out and was killed' >&2\n";
        script_cases += concat("  exit ", std::to_string(code), "\n  ;;\n");
      }
      cmds.push_back(std::move(rec));
    }
    t["found"] = found;
    t["commands"] = std::move(cmds);
    if (found && !script_cases.empty()) {
      const std::string script = concat(
          "#!/bin/sh\n# Generated by `gpustream capture`: prints what `", tool,
          "` printed for each recorded argument list, and refuses any other.\n"
          "d=\"$(dirname \"$0\")/",
          tool, ".d\"\ncase \"$*\" in\n", script_cases, "*)\n  echo \"gpustream capture: ", tool,
          " was not recorded with the arguments: $*\" >&2\n  exit 127\n  ;;\nesac\n");
      b.write(concat("tools/", tool), script, 0755);
      t["replay"] = concat("tools/", tool);
    }
    out[tool] = std::move(t);
  }
  return out;
}

}  // namespace gpustream::cli::capture_detail
