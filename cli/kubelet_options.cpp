// The kubelet flag table and the watcher it makes.
#include "kubelet_options.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <stdexcept>

#include "gpustream/probes/kubelet_client.hpp"

namespace gpustream::cli {

const std::vector<FlagRow<KubeletFlags>>& kubelet_flag_table() {
  static const std::vector<FlagRow<KubeletFlags>> rows = {
      {"--kubelet-socket", "kubelet_socket",
       "The kubelet's PodResources socket: pod, namespace and container of each GPU and of the "
       "processes in pods (default: /var/lib/kubelet/pod-resources/kubelet.sock when it exists "
       "at start; 'off': never; docs/operations.md, \"Kubernetes\")",
       &KubeletFlags::socket, std::nullopt},
      {"--kubelet-refresh", "kubelet_refresh_seconds",
       "Seconds between two questions to the kubelet (default 10; after a failure 1 s, doubling "
       "up to 60 s)",
       &KubeletFlags::refresh_seconds, CLI::Range(0.1, 3600.0)},
  };
  return rows;
}

std::unique_ptr<probes::KubeletWatcher> make_kubelet_watcher(const KubeletFlags& f,
                                                             std::string& note) {
  note.clear();
  if (f.socket == "off") return nullptr;
  std::string socket = f.socket;
  if (socket.empty()) {
    struct stat st {};
    socket = std::string(probes::kDefaultKubeletSocket);
    if (::stat(socket.c_str(), &st) != 0) return nullptr;  // not a Kubernetes node
    if (!probes::kubelet_client_built()) {
      note = std::string("the kubelet's socket is there but ") + probes::kKubeletNotBuilt +
             ": no pod names";
      return nullptr;
    }
  }
  if (!probes::kubelet_client_built())
    throw ConfigError(std::string("--kubelet-socket: ") + probes::kKubeletNotBuilt);
  probes::KubeletClientOptions co;
  co.socket = socket;
  probes::KubeletWatcherOptions wo;
  wo.refresh = millis_of_seconds(f.refresh_seconds);
  wo.backoff_max = std::max(wo.backoff_max, wo.refresh);
  note = "reading pod names from the kubelet at " + socket;
  return std::make_unique<probes::KubeletWatcher>(probes::make_kubelet_lister(std::move(co)), wo);
}

void add_kubelet_socket_flag(CLI::App& sub, std::string& socket) {
  sub.add_option("--kubelet-socket", socket,
                 "The kubelet's PodResources socket: pod, namespace and container of each GPU "
                 "and of the processes in pods (default: the kubelet's own socket when it "
                 "exists; 'off': never; docs/operations.md, \"Kubernetes\")");
}

std::unique_ptr<probes::KubeletWatcher> attach_kubelet(Telemetry& telemetry,
                                                       const std::string& socket,
                                                       bool keep_asking) {
  std::string note;
  auto w = make_kubelet_watcher(KubeletFlags{.socket = socket}, note);
  if (!w) {
    if (!note.empty()) std::cerr << "gpustream: " << note << "\n";
    return nullptr;
  }
  telemetry.set_annotator([p = w.get()](GpuSnapshot& s) { p->annotate(s); });
  if (keep_asking)
    w->start();  // asks at once, on its own thread
  else
    w->refresh_once();  // the one answer, before the first sample
  return w;
}

std::string kubelet_metrics(const probes::KubeletStats& s) {
  std::string out =
      "# HELP gpustream_kubelet_up 1 when the kubelet's last PodResources answer was read.\n"
      "# TYPE gpustream_kubelet_up gauge\n"
      "gpustream_kubelet_up " +
      std::string(s.available ? "1" : "0") +
      "\n"
      "# HELP gpustream_kubelet_refreshes_total PodResources answers read.\n"
      "# TYPE gpustream_kubelet_refreshes_total counter\n"
      "gpustream_kubelet_refreshes_total " +
      std::to_string(s.refreshes) +
      "\n"
      "# HELP gpustream_kubelet_errors_total PodResources questions that failed, by reason.\n"
      "# TYPE gpustream_kubelet_errors_total counter\n";
  // Every reason, 0 until it happens: a rate() over it needs the series before the first.
  std::map<std::string, std::uint64_t> by_reason{{"socket_missing", 0}, {"unavailable", 0},
                                                 {"deadline", 0},       {"too_large", 0},
                                                 {"malformed", 0},      {"failed", 0}};
  for (const auto& [reason, n] : s.errors_by_reason) by_reason[reason] = n;
  for (const auto& [reason, n] : by_reason)
    out += "gpustream_kubelet_errors_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  out +=
      "# HELP gpustream_kubelet_holds_refused_total GPU device holds refused (a bad name or id).\n"
      "# TYPE gpustream_kubelet_holds_refused_total counter\n"
      "gpustream_kubelet_holds_refused_total " +
      std::to_string(s.refused) +
      "\n"
      "# HELP gpustream_kubelet_holds_bounded_total GPU device holds left out by the bound.\n"
      "# TYPE gpustream_kubelet_holds_bounded_total counter\n"
      "gpustream_kubelet_holds_bounded_total " +
      std::to_string(s.bounded) + "\n";
  if (s.available)
    out +=
        "# HELP gpustream_kubelet_pods Pods in the kubelet's last answer.\n"
        "# TYPE gpustream_kubelet_pods gauge\n"
        "gpustream_kubelet_pods " +
        std::to_string(s.pods) +
        "\n"
        "# HELP gpustream_kubelet_gpus_held GPU devices some container holds, last answer.\n"
        "# TYPE gpustream_kubelet_gpus_held gauge\n"
        "gpustream_kubelet_gpus_held " +
        std::to_string(s.devices) + "\n";
  return out;
}

std::string kubelet_stats_json(const probes::KubeletStats& s) {
  std::string out = "\"up\":" + std::string(s.available ? "true" : "false") +
                    ",\"refreshes\":" + std::to_string(s.refreshes) +
                    ",\"errors\":" + std::to_string(s.errors);
  if (!s.last_error.empty()) out += ",\"last_error\":\"" + s.last_error + "\"";
  if (s.available)
    out += ",\"pods\":" + std::to_string(s.pods) + ",\"gpus_held\":" + std::to_string(s.devices);
  return out;
}

}  // namespace gpustream::cli
