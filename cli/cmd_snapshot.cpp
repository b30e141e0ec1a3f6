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
  apply_simulate_if_no_gpu(config);
  Telemetry t(config, probe_factory());
  t.start();
  const auto timeout = std::chrono::milliseconds(static_cast<long>(o.timeout_seconds * 1000));
  const auto snaps = t.wait_for_first_samples(timeout);
  const auto stats = t.stats();
  t.stop();

  if (o.json) {
    boost::json::array arr;
    for (const auto& s : snaps) arr.push_back(to_json(*s));
    boost::json::array probes;
    for (const auto& st : stats) {
      boost::json::object p{{"probe", st.probe}, {"state", to_string(st.state)}};
      if (!st.reason.empty()) p["reason"] = st.reason;
      probes.push_back(std::move(p));
    }
    boost::json::array setup;
    for (const auto& e : t.setup_errors()) setup.push_back(boost::json::string(e));
    boost::json::object doc{{"schema", kSchema}, {"snapshots", std::move(arr)},
                            {"probes", std::move(probes)}};
    if (!setup.empty()) doc["setup_errors"] = std::move(setup);
    std::cout << boost::json::serialize(doc) << "\n";
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
