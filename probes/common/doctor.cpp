// `gpustream doctor`: runs each probe's checks in registry order, plus the host's (who reads the
// machine, whether /proc is the host's) and the DRM checks the amd and intel probes share.
#include "gpustream/probes/doctor.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>

#include <boost/json.hpp>

#include "common/doctor_checks.hpp"
#include "gpustream/probes/host_probe.hpp"
#include "gpustream/probes/readers.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/probes/settings.hpp"

namespace gpustream::doctor {
namespace {

using readers::join_path;

constexpr std::string_view kSchema = "gpustream-doctor/1";

/// The variables the doctor reads from the environment.
constexpr std::string_view kEnvNames[] = {"ZES_ENABLE_SYSMAN", "container",
                                          "KUBERNETES_SERVICE_HOST"};

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

void check_host(const detail::Context& c) {
  constexpr std::string_view p = "host";
  const auto& paths = c.options.paths;
  const auto meminfo = join_path(paths.procfs_root, "meminfo");
  if (auto text = readers::read_file(meminfo, machine::kMaxViewFileBytes)) {
    const auto mem = parse_meminfo(*text);
    if (mem.total_bytes)
      c.add(p, "meminfo", Status::ok,
            meminfo + " is readable (MemTotal " + std::to_string(*mem.total_bytes >> 20) + " MiB)");
    else
      c.add(p, "meminfo", Status::blocker, meminfo + " has no MemTotal line: not a Linux /proc?",
            "point --procfs-root at the host's /proc");
  } else {
    c.add(p, "meminfo", Status::blocker, text.error().message(),
          "point --procfs-root at a readable /proc (default /proc)");
  }

  const auto& id = c.identity;
  if (id.known) {
    std::string caps = id.cap_eff ? (id.has_cap(machine::kCapSysPtrace) ? "CAP_SYS_PTRACE: yes"
                                                                        : "CAP_SYS_PTRACE: no")
                                  : "CapEff unknown";
    std::string groups;
    for (auto g : id.groups) groups += (groups.empty() ? "" : ",") + std::to_string(g);
    c.add(p, "identity", Status::info,
          "uid " + std::to_string(id.uid) + ", gid " + std::to_string(id.gid) + ", groups [" +
              groups + "], " + caps + " (from " + join_path(paths.procfs_root, "self/status") +
              ")");
  } else {
    c.add(p, "identity", Status::warn,
          "cannot read uid, groups and capabilities from " +
              join_path(paths.procfs_root, "self/status") +
              ": device-node and fdinfo access cannot be judged",
          "point --procfs-root at a /proc where self/status is readable");
  }

  const auto view = machine::proc_view(c.options.root_dir, paths.procfs_root,
                                       [&c](std::string_view n) { return c.env(n); });
  const std::string evidence = join(view.container_evidence, ", ");
  if (view.in_container())
    c.add(p, "container", Status::info, "running in a container: " + evidence);
  constexpr std::string_view kProcFix =
      "docker run --pid=host -v /sys:/host/sys:ro --device /dev/dri ... serve --sysfs-root "
      "/host/sys (Kubernetes: hostPID: true); see docs/operations.md, \"Docker\"";
  if (view.host_pid_namespace == false) {
    c.add(p, "host_proc", Status::blocker,
          "pid 1 of " + paths.procfs_root + " is in " + view.pid1_namespace +
              ", not the host's PID namespace " + std::string(machine::kInitialPidNamespace) +
              ": GPU processes of the host and of other containers are invisible",
          std::string(kProcFix));
  } else if (view.host_pid_namespace == true) {
    c.add(p, "host_proc", Status::ok,
          paths.procfs_root + " is the host's (pid 1 in " + view.pid1_namespace + ")");
  } else if (view.in_container()) {
    c.add(p, "host_proc", Status::warn,
          "cannot read " + join_path(paths.procfs_root, "1/ns/pid") +
              " in this container: whether it shows the host's processes is unknown",
          std::string(kProcFix));
  } else {
    c.add(p, "host_proc", Status::info,
          "cannot read " + join_path(paths.procfs_root, "1/ns/pid") +
              " (no container detected: assuming the host's /proc)");
  }
  if (view.in_container() && c.drm.empty() &&
      !std::filesystem::exists(join_path(paths.devfs_root, "nvidiactl"))) {
    c.add(p, "container_devices", Status::warn,
          "no DRM node under " + join_path(paths.sysfs_root, "class/drm") + " and no " +
              join_path(paths.devfs_root, "nvidiactl") + " in this container: no GPU was passed in",
          "docker run --device /dev/dri -v /sys:/host/sys:ro ... (NVIDIA: --gpus all with the "
          "NVIDIA container runtime); see docs/operations.md, \"Docker\"");
  }
}

void check_simulated(const detail::Context& c) {
  c.add("simulated", "simulated", Status::info,
        c.options.simulate > 0
            ? std::to_string(c.options.simulate) + " simulated GPU(s): formulas, nothing is read"
            : "not asked for: --simulate N adds N simulated GPUs (nothing is read from the "
              "machine)");
}

Status worst(const Report& r, const std::string& probe) {
  Status w = Status::ok;
  for (const auto& f : r.findings)
    if (f.probe == probe && static_cast<int>(f.status) > static_cast<int>(w)) w = f.status;
  return w;
}

}  // namespace

std::string_view to_string(Status s) noexcept {
  switch (s) {
    case Status::ok:
      return "ok";
    case Status::info:
      return "info";
    case Status::warn:
      return "warn";
    case Status::blocker:
      return "blocker";
  }
  return "info";
}

bool Report::fully_readable() const noexcept { return count(Status::blocker) == 0; }

std::size_t Report::count(Status s) const noexcept {
  return static_cast<std::size_t>(std::count_if(findings.begin(), findings.end(),
                                                [s](const Finding& f) { return f.status == s; }));
}

namespace detail {

std::optional<std::string> Context::env(std::string_view name) const {
  if (options.getenv) return options.getenv(name);
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only, nothing here sets the environment.
  const char* v = std::getenv(std::string(name).c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

void Context::add(std::string_view probe, std::string_view check, Status status, std::string detail,
                  std::string fix) const {
  out.push_back(
      {std::string(probe), std::string(check), status, std::move(detail), std::move(fix)});
}

bool run_bounded(const Context& c, std::string_view probe, std::string_view check_name,
                 std::function<void(const Context&)> check) {
  struct Work {
    Options options;
    machine::Identity identity;
    std::vector<Finding> findings;
    std::function<void(const Context&)> check;
  };
  auto work = std::make_shared<Work>(Work{c.options, c.identity, {}, std::move(check)});
  std::promise<void> finished;
  std::shared_future<void> done = finished.get_future().share();
  std::thread([work, probe = std::string(probe), name = std::string(check_name),
               finished = std::move(finished)]() mutable {
    std::vector<std::shared_future<void>> unused;
    const Context local{work->options, work->identity, {}, work->findings, unused};
    try {
      work->check(local);
    } catch (const std::exception& e) {
      local.add(probe, name, Status::warn, std::string("this check failed: ") + e.what());
    }
    finished.set_value();
  }).detach();
  if (done.wait_for(c.options.tool_timeout) != std::future_status::ready) {
    c.pending.push_back(std::move(done));
    return false;
  }
  for (auto& f : work->findings) c.out.push_back(std::move(f));
  return true;
}

}  // namespace detail

Options options_from_config(const Config& config) {
  Options o;
  o.paths = config.paths;
  o.probes = config.probes;
  o.simulate = config.simulate;
  // Only the keys the doctor uses; the probe factories check the rest (check_probe_settings).
  if (const auto* nv = config.probe_settings.section("nvidia")) {
    if (auto v = settings::string_at(nv, "nvidia", "library")) o.nvml_library = *v;
    if (auto v = settings::string_at(nv, "nvidia", "nvidia_smi")) o.nvidia_smi = *v;
  }
  if (const auto* amd = config.probe_settings.section("amd")) {
    if (auto v = settings::string_at(amd, "amd", "amd_smi")) o.amd_smi = *v;
    if (auto v = settings::string_at(amd, "amd", "rocm_smi")) o.rocm_smi = *v;
    if (auto v = settings::string_at(amd, "amd", "source")) {
      if (*v != "auto" && *v != "library" && *v != "sysfs" && *v != "cli" && *v != "amd-smi" &&
          *v != "rocm-smi")
        throw std::invalid_argument("unknown amd source '" + *v +
                                    "' (use auto, library, sysfs, cli, amd-smi or rocm-smi)");
      o.amd_source = *v;
    }
    if (auto v = settings::string_at(amd, "amd", "library")) o.amd_library = *v;
  }
  if (const auto* intel = config.probe_settings.section("intel")) {
    if (auto v =
            settings::string_at(intel, "intel", "level_zero_library", settings::Empty::allowed))
      o.level_zero_library = *v;
  }
  if (const auto* apple = config.probe_settings.section("apple")) {
    if (auto v = settings::string_at(apple, "apple", "macmon")) o.macmon = *v;
  }
  return o;
}

std::map<std::string, std::string> environment_snapshot() {
  std::map<std::string, std::string> out;
  for (auto name : kEnvNames) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): called first thing in main, one thread.
    if (const char* v = std::getenv(std::string(name).c_str())) out[std::string(name)] = v;
  }
  return out;
}

Report run(const Options& options) {
  Report report;
  std::vector<std::string> wanted = options.probes;
  if (wanted.empty()) {
    for (auto n : known_probe_names()) wanted.emplace_back(n);
  } else if (options.simulate > 0 &&
             std::find(wanted.begin(), wanted.end(), kSimulatedProbe) == wanted.end()) {
    wanted.emplace_back(kSimulatedProbe);
  }
  detail::Context c{options, machine::read_identity(options.paths.procfs_root),
                    machine::drm_nodes(options.paths.sysfs_root), report.findings, report.pending};
  for (auto name : known_probe_names()) {  // registry order
    if (std::find(wanted.begin(), wanted.end(), name) == wanted.end()) continue;
    report.probes.emplace_back(name);
    const auto before = report.findings.size();
    try {
      if (name == "nvidia")
        detail::check_nvidia(c);
      else if (name == "amd")
        detail::check_amd(c);
      else if (name == "intel")
        detail::check_intel(c);
      else if (name == "apple")
        detail::check_apple(c);
      else if (name == "host")
        check_host(c);
      else if (name == kSimulatedProbe)
        check_simulated(c);
    } catch (const std::exception& e) {  // a check never takes the others down
      c.add(name, "doctor", Status::warn, std::string("this check failed: ") + e.what());
    }
    if (report.findings.size() == before)
      c.add(name, "doctor", Status::info, "no check for this probe");
  }
  return report;
}

std::string to_json(const Report& report) {
  boost::json::array probes;
  for (const auto& p : report.probes)
    probes.push_back({{"probe", p}, {"status", to_string(worst(report, p))}});
  boost::json::array findings;
  for (const auto& f : report.findings)
    findings.push_back({{"probe", f.probe},
                        {"check", f.check},
                        {"status", to_string(f.status)},
                        {"detail", f.detail},
                        {"fix", f.fix}});
  boost::json::object doc{{"schema", kSchema},
                          {"fully_readable", report.fully_readable()},
                          {"blockers", report.count(Status::blocker)},
                          {"warnings", report.count(Status::warn)},
                          {"probes", std::move(probes)},
                          {"findings", std::move(findings)}};
  return boost::json::serialize(doc);
}

std::string to_text(const Report& report) {
  std::string out;
  for (const auto& p : report.probes) {
    out += p + ": " + std::string(to_string(worst(report, p))) + "\n";
    for (const auto& f : report.findings) {
      if (f.probe != p) continue;
      std::string tag = "[" + std::string(to_string(f.status)) + "]";
      tag.resize(std::max<std::size_t>(tag.size(), 10), ' ');
      out += "  " + tag + f.check + ": " + f.detail + "\n";
      if (!f.fix.empty()) out += "            fix: " + f.fix + "\n";
    }
  }
  out += "\n";
  out += report.fully_readable()
             ? "Every GPU found can be read fully"
             : std::to_string(report.count(Status::blocker)) +
                   " blocker(s): some GPU, or part of what gpustream reads of it, cannot be read";
  out += " (" + std::to_string(report.count(Status::warn)) + " warning(s)).\n";
  return out;
}

}  // namespace gpustream::doctor
