// gpustream doctor — for each probe: what it looked for, what it found, what blocks it, the fix.
#include <sys/stat.h>

#include <algorithm>
#include <iostream>
#include <variant>

#include "commands.hpp"
#include "gpustream/probes/doctor.hpp"
#include "gpustream/probes/kubelet_client.hpp"
#include "gpustream/terminal_text.hpp"
#include "options.hpp"

namespace gpustream::cli {

namespace {

/// The kubelet's PodResources socket, as serve would use it (serve.kubelet_socket, else the
/// default path): a "kubelet" group with one finding when there is one to speak of — a socket
/// named in the config, or the default one present. Nothing on a machine outside Kubernetes.
void check_kubelet(const Config& config, doctor::Report& report) {
  std::string socket(probes::kDefaultKubeletSocket);
  bool named = false;
  if (const auto* v = config.probe_settings.get(kServeSection, "kubelet_socket"))
    if (const auto* s = std::get_if<std::string>(&v->value()); s && !s->empty()) {
      if (*s == "off") return;
      socket = *s;
      named = true;
    }
  struct stat st {};
  const bool present = ::stat(socket.c_str(), &st) == 0;
  if (!present && !named) return;
  doctor::Finding f{.probe = "kubelet", .check = "kubelet_pod_resources"};
  if (!probes::kubelet_client_built()) {
    f.status = doctor::Status::warn;
    f.detail = socket + (present ? " is there" : " is named") + " but " + probes::kKubeletNotBuilt +
               ": processes and devices carry no pod names";
    f.fix =
        "apt-get install libgrpc++-dev libprotobuf-dev protobuf-compiler "
        "protobuf-compiler-grpc, then rebuild gpustream";
  } else {
    probes::KubeletClientOptions co;
    co.socket = socket;
    auto r = probes::make_kubelet_lister(co)->list();
    if (r.map) {
      f.status = doctor::Status::ok;
      f.detail = "the kubelet at " + socket + " answers: " + std::to_string(r.map->pods()) +
                 " pod(s), " + std::to_string(r.map->devices()) + " GPU(s) held by a container";
    } else {
      f.status = doctor::Status::warn;
      f.detail = "the kubelet at " + socket + " did not answer (" + r.error + ": " + r.message +
                 "): processes in pods will say pod_absent kubelet_unavailable";
      f.fix = r.error == "socket_missing"
                  ? "mount /var/lib/kubelet/pod-resources into gpustream's pod (hostPath), or "
                    "set serve.kubelet_socket"
                  : "check that the kubelet runs and that gpustream may connect to its socket "
                    "(root in the pod)";
    }
  }
  report.probes.push_back("kubelet");
  report.findings.push_back(std::move(f));
}

}  // namespace

int run_doctor(const Config& config, const DoctorOptions& o) {
  auto options = doctor::options_from_config(config);
  options.tool_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(o.tool_timeout_seconds * 1000));
  options.getenv = [env = o.environment](std::string_view name) -> std::optional<std::string> {
    const auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  auto report = doctor::run(options);
  // How many GPUs the probes find (their detection, as `gpustream list`; nothing is sampled):
  // "every GPU can be read" is not said of none, and --expect-gpus N is checked.
  std::size_t gpus = 0;
  const auto timeout = std::max(std::chrono::milliseconds{5000}, 2 * options.tool_timeout);
  for (const auto& r : detect_probes(config, timeout))
    if (r.detection.available && r.name != "host") gpus += r.detection.devices.size();
  report.gpus_readable = gpus;
  check_kubelet(config, report);
  report.gpus_expected = o.expect_gpus;
  // Without --expect-gpus, the service's own expectation (serve.expect_gpus of --config).
  if (!o.expect_gpus_given) {
    if (const auto* v = config.probe_settings.get(kServeSection, "expect_gpus")) {
      const auto* n = std::get_if<std::int64_t>(&v->value());
      if (!n || *n < 0) {
        std::cerr << "gpustream: config key 'serve.expect_gpus': expected a whole number >= 0\n";
        return kExitUsage;
      }
      report.gpus_expected = static_cast<std::size_t>(*n);
    }
  }
  // The text quotes the tools' own messages: terminal_safe_text (its line feeds are kept).
  std::cout << (o.json ? doctor::to_json(report) + "\n"
                       : terminal_safe_text(doctor::to_text(report)));
  std::cout.flush();
  return report.fully_readable() && report.enough_gpus() ? kExitOk : kExitFailure;
}

}  // namespace gpustream::cli

namespace gpustream::cli {

Command doctor_command() {
  return {
      "doctor", "For each probe: what it looked for and found, what blocks it, and the exact fix",
      [](CLI::App& sub, CommandContext& context) -> CommandRun {
        auto o = std::make_shared<DoctorOptions>();
        o->environment = context.environment;
        add_common_options(sub, context.common, false);
        sub.add_flag("--json", o->json,
                     "One JSON document {schema: \"gpustream-doctor/1\", fully_readable, "
                     "blockers, warnings, probes:[{probe,status}], "
                     "findings:[{probe,check,status,detail,fix}]}");
        sub.add_option("--tool-timeout", o->tool_timeout_seconds,
                       "Seconds each vendor tool's version run may take before it is killed, and "
                       "NVML's and the AMD SMI library's calls are waited for (default 3)")
            ->check(CLI::Range(0.05, 60.0));
        auto* expect = sub.add_option(
            "--expect-gpus", o->expect_gpus,
            "GPUs the probes must find: with fewer, exit 1 (default: the config file's "
            "serve.expect_gpus, else 0: not checked)");
        expect->check(CLI::Range(0, 100000));
        sub.footer(
            "Statuses: ok, info, warn (degraded or worth knowing), blocker (a GPU, or part of "
            "what gpustream reads of it, cannot be read until the fix is applied).\n"
            "Exit code: 0 when no finding is a blocker (every GPU found can be read fully; with "
            "no GPU at all the report says \"No GPU found\") and --expect-gpus GPUs are found, 1 "
            "otherwise, 2 for a usage error. Read-only: nothing is changed, nothing is sampled. "
            "See docs/operations.md, \"Diagnosing a machine: gpustream doctor\".");
        return [o, expect, &context] {
          // The doctor's report says everything; the libraries' info lines would only
          // interleave.
          if (context.common.log_level.empty()) context.common.log_level = "warn";
          o->expect_gpus_given = expect->count() > 0;
          return run_doctor(make_config(context.common), *o);
        };
      }};
}

}  // namespace gpustream::cli
