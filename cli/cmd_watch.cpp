// gpustream watch — a live table (or JSON lines) until interrupted or --count snapshots;
// gpustream record FILE — the same JSON lines into a file.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <unistd.h>

#include "commands.hpp"
#include "format.hpp"
#include "gpustream/json.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/telemetry.hpp"

namespace gpustream::cli {

int run_watch(Config config, const WatchOptions& o) {
  apply_simulate_if_no_gpu(config);
  std::ofstream file;
  if (!o.output_file.empty()) {
    file.open(o.output_file, std::ios::out | std::ios::trunc);
    if (!file) {
      std::cerr << "gpustream: cannot open '" << o.output_file << "' for writing\n";
      return 1;
    }
  }
  const bool json = o.json || file.is_open();
  std::ostream& out = file.is_open() ? static_cast<std::ostream&>(file) : std::cout;
  const bool tty = !json && ::isatty(STDOUT_FILENO) != 0;

  Telemetry t(config, probe_factory());
  SubscribeOptions so;
  so.policy = Backpressure::lossless;
  so.capacity = 4096;
  auto queue = t.channel().subscribe_queue(so);
  t.start();
  for (const auto& e : t.setup_errors()) std::cerr << "gpustream: " << e << "\n";

  const auto started = std::chrono::steady_clock::now();
  std::map<std::string, SnapshotPtr> latest;  // for the table: newest per probe
  long seen = 0;
  while (!g_interrupted.load()) {
    if (o.duration_seconds > 0 &&
        std::chrono::steady_clock::now() - started >
            std::chrono::duration<double>(o.duration_seconds))
      break;
    auto item = queue->pop_for(std::chrono::milliseconds{200});
    if (!item) continue;
    if (const auto* gap = std::get_if<Gap>(&*item)) {
      std::cerr << "gpustream: missed " << gap->missed << " snapshots (" << gap->reason << ")\n";
      continue;
    }
    const auto& snap = std::get<SnapshotPtr>(*item);
    ++seen;
    if (json) {
      out << to_json_string(*snap) << "\n";
      out.flush();
    } else {
      latest[snap->probe] = snap;
      std::vector<const GpuSnapshot*> ptrs;
      for (const auto& [_, s] : latest) ptrs.push_back(s.get());
      if (tty) out << "\x1b[H\x1b[2J";
      out << table_header() << "\n" << format_table(ptrs);
      if (!tty) out << "\n";
      out.flush();
    }
    if (o.count > 0 && seen >= o.count) break;
  }
  t.stop();
  if (file.is_open())
    std::cerr << "gpustream: recorded " << seen << " snapshots to " << o.output_file << "\n";
  return 0;
}

}  // namespace gpustream::cli
