// gpustream snapshot --json — one document with one snapshot per available probe, then exit.
#include <iostream>
#include <utility>

#include <boost/json.hpp>

#include "capture.hpp"
#include "commands.hpp"
#include "format.hpp"
#include "gpustream/detail/json_text.hpp"
#include "gpustream/json.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/telemetry.hpp"
#include "gpustream/terminal_text.hpp"
#include "kubelet_options.hpp"
#include "options.hpp"

namespace gpustream::cli {

int run_snapshot(Config config, const SnapshotOptions& o) {
  Telemetry t(std::move(config), probe_factory());
  std::unique_ptr<probes::KubeletWatcher> kubelet;  // pod names (--kubelet-socket)
  try {
    kubelet = attach_kubelet(t, o.kubelet_socket, false);
  } catch (const ConfigError& e) {
    std::cerr << "gpustream: " << e.what() << "\n";
    return kExitUsage;
  }
  t.start();
  const auto timeout = std::chrono::milliseconds(static_cast<long>(o.timeout_seconds * 1000));
  const auto snaps = t.wait_for_first_samples(timeout);
  const auto stats = t.stats();
  t.stop();

  if (o.json) {
    boost::json::array probes;
    for (const auto& st : stats) {
      boost::json::object p{{"probe", st.probe}, {"state", to_string(st.state)}};
      if (!st.reason.empty()) p["reason"] = st.reason;
      probes.push_back(std::move(p));
    }
    boost::json::array setup;
    for (const auto& e : t.setup_errors()) setup.push_back(boost::json::string(e));
    // The snapshots are written by the codec (exact, shortest doubles); the rest is small.
    std::string doc = "{\"schema\":\"";
    doc += kSchema;
    doc += "\",\"snapshots\":[";
    for (std::size_t i = 0; i < snaps.size(); ++i) {
      if (i) doc += ',';
      append_json(doc, *snaps[i]);
    }
    doc += "],\"probes\":";
    detail::append_json_value(doc, probes);  // reasons from tools: UTF-8 repaired
    if (!setup.empty()) {
      doc += ",\"setup_errors\":";
      detail::append_json_value(doc, setup);
    }
    doc += '}';
    std::cout << doc << "\n";
  } else {
    std::vector<const GpuSnapshot*> ptrs;
    ptrs.reserve(snaps.size());
    for (const auto& s : snaps) ptrs.push_back(s.get());
    std::cout << table_header() << "\n" << format_table(ptrs);
    for (const auto& st : stats)
      if (st.state == ProbeState::unavailable)
        std::cout << terminal_safe(st.probe) << ": unavailable: " << terminal_safe(st.reason)
                  << "\n";
  }
  return 0;
}

}  // namespace gpustream::cli

namespace gpustream::cli {

Command snapshot_command() {
  return {"snapshot", "One snapshot of every available probe, then exit",
          [](CLI::App& sub, CommandContext& context) -> CommandRun {
            struct State {
              SnapshotOptions o;
              std::string replay_capture;
            };
            auto s = std::make_shared<State>();
            add_common_options(sub, context.common);
            sub.add_flag("--json", s->o.json, "One JSON document {schema, snapshots:[...]}");
            sub.add_option("--timeout", s->o.timeout_seconds,
                           "Seconds to wait for each probe's first sample (default 10)")
                ->check(CLI::Range(0.1, 600.0));
            sub.add_option("--replay-capture", s->replay_capture,
                           "Read a bundle made by `gpustream capture` instead of this machine: "
                           "its sysfs, procfs, tool replays, and its NVML recording through the "
                           "fake libnvidia-ml.so.1 (give --nvml-library PATH, or copy it to "
                           "DIR/nvml/)")
                ->check(CLI::ExistingDirectory);
            add_kubelet_socket_flag(sub, s->o.kubelet_socket);
            return [s, &context] {
              if (!s->replay_capture.empty())
                prepare_replay_capture(context.common, s->replay_capture);
              return run_snapshot(make_config(context.common), s->o);
            };
          }};
}

}  // namespace gpustream::cli
