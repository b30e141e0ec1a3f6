// gpustream watch — a live table (or JSON lines) until interrupted or --count snapshots;
// gpustream record FILE — the same JSON lines into a file.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>
#include <unistd.h>

#include "commands.hpp"
#include "format.hpp"
#include "gpustream/json.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/telemetry.hpp"
#include "gpustream/transport/remote_subscriber.hpp"

namespace gpustream::cli {

namespace {

// watch --connect: the same output, fed by a RemoteSubscriber instead of local probes.
int run_connected_watch(const Config& config, const WatchOptions& o) {
  RemoteSubscriberOptions ro;
  ro.url = o.connect;
  ro.probes = config.probes;
  if (!o.token_file.empty()) {
    std::ifstream tf(o.token_file);
    if (!tf || !std::getline(tf, ro.token) || ro.token.empty())
      throw ConfigError("cannot read a token from '" + o.token_file + "'");
  }
  RemoteWatchLimits limits;
  limits.count = o.count > 0 ? static_cast<std::uint64_t>(o.count) : 0;
  limits.duration = std::chrono::milliseconds(static_cast<long>(o.duration_seconds * 1000));
  std::map<std::string, GpuSnapshot> latest;
  const bool tty = !o.json && ::isatty(STDOUT_FILENO) != 0;
  RemoteWatchHandlers h;
  h.on_snapshot = [&](const GpuSnapshot& s) {
    if (o.json) {
      std::cout << to_json_string(s) << "\n" << std::flush;
      return;
    }
    latest[s.probe] = s;
    std::vector<const GpuSnapshot*> ptrs;
    for (const auto& [_, snap] : latest) ptrs.push_back(&snap);
    if (tty) std::cout << "\x1b[H\x1b[2J";
    std::cout << table_header() << "\n" << format_table(ptrs) << (tty ? "" : "\n") << std::flush;
  };
  h.on_gap = [](const Gap& g) {
    std::cerr << "gpustream: missed " << g.missed << " snapshots (" << g.reason << ")\n";
  };
  h.on_status = [](const RemoteStatus& st) {
    if (!st.reason.empty()) std::cerr << "gpustream: " << st.reason << "\n";
  };
  try {
    return run_remote_watch(ro, limits, h, g_interrupted);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
}

}  // namespace

int run_watch(Config config, const WatchOptions& o) {
  if (!o.connect.empty()) return run_connected_watch(config, o);
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
