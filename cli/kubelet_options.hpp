// The kubelet flags of `gpustream serve` (docs/cli.md, "Kubernetes"): --kubelet-socket,
// --kubelet-refresh and their config keys; made into a running probes::KubeletWatcher by
// make_kubelet_watcher.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpustream/probes/pod_resources.hpp"
#include "gpustream/telemetry.hpp"
#include "server_options.hpp"

namespace gpustream::cli {

struct KubeletFlags {
  /// --kubelet-socket: "" (default: the kubelet's own socket when it exists at start), a
  /// path, or "off".
  std::string socket;
  double refresh_seconds = 10;  // --kubelet-refresh
};

const std::vector<FlagRow<KubeletFlags>>& kubelet_flag_table();

/// The watcher the flags ask for, not started; null when there is none to run (off, or the
/// default socket is not there). Throws ConfigError when a socket is asked for by name and this
/// build has no kubelet client. `note`: one line saying what was chosen, for the log.
std::unique_ptr<probes::KubeletWatcher> make_kubelet_watcher(const KubeletFlags& flags,
                                                             std::string& note);

/// --kubelet-socket of the commands that run the local probes once or for a while (snapshot,
/// watch, record): registered on `sub`, bound to `socket`.
void add_kubelet_socket_flag(CLI::App& sub, std::string& socket);
/// For those commands: the watcher the flag asks for (null when none), its first answer asked
/// for now (at most the List deadline) and joined into every snapshot `telemetry` publishes;
/// `keep_asking` starts its refresh thread. Throws ConfigError like make_kubelet_watcher.
std::unique_ptr<probes::KubeletWatcher> attach_kubelet(Telemetry& telemetry,
                                                       const std::string& socket, bool keep_asking);

/// The kubelet's counters in the Prometheus text format (gpustream_kubelet_*), and as the
/// members of /api/v1/stats' "kubelet" object.
std::string kubelet_metrics(const probes::KubeletStats& stats);
std::string kubelet_stats_json(const probes::KubeletStats& stats);

}  // namespace gpustream::cli
