// gpustream snapshot --json — one document with one snapshot per available probe, then exit.
#include <iostream>

#include <boost/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "gpustream/json.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/telemetry.hpp"

namespace gpustream::cli {

int run_snapshot(Config config, const SnapshotOptions& o) {
  Telemetry t(config, probe_factory());
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
    doc += boost::json::serialize(probes);
    if (!setup.empty()) {
      doc += ",\"setup_errors\":";
      doc += boost::json::serialize(setup);
    }
    doc += '}';
    std::cout << doc << "\n";
  } else {
    std::vector<const GpuSnapshot*> ptrs;
    for (const auto& s : snaps) ptrs.push_back(s.get());
    std::cout << table_header() << "\n" << format_table(ptrs);
    for (const auto& st : stats)
      if (st.state == ProbeState::unavailable)
        std::cout << st.probe << ": unavailable: " << st.reason << "\n";
  }
  return 0;
}

}  // namespace gpustream::cli
