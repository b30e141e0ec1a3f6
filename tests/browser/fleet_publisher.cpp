// gpustream_fleet_publisher: many simulated nodes on the fleet bus from one process, for the
// /fleet page test (fleet.test.mjs). Each node's snapshot (8 GPUs, a few processes, values that
// move every tick) is encoded by the real bus encoder (BusEncoder, one per node, as an agent
// has) and published to <prefix>.<node>.simulated on a real NATS server.
//
//   gpustream_fleet_publisher --nats nats://127.0.0.1:4222 --nodes 1000 [--interval 1]
//                             [--gpus 8] [--prefix gpustream]
//
// Nodes are named node-0001 … node-NNNN. A line "stop NAME" on stdin stops publishing NAME (it
// goes stale on the fleet's side); "quit" (or the end of stdin) ends the program. Prints
// "published N" on stdout after each round.
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nats/nats.h>

#include "gpustream/model.hpp"
#include "gpustream/transport/fleet_codec.hpp"

namespace {

using gpustream::DeviceSample;
using gpustream::GpuSnapshot;
using gpustream::Metric;
using gpustream::Source;

GpuSnapshot node_snapshot(int node, int tick, int gpus) {
  GpuSnapshot s;
  s.probe = "simulated";
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  s.time_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now).count();
  s.monotonic_ns = s.time_unix_ns;
  s.sample_duration_ns = 20'000;
  for (int i = 0; i < gpus; ++i) {
    DeviceSample d;
    d.id = "sim-" + std::to_string(node) + "-" + std::to_string(i);
    d.vendor = gpustream::Vendor::simulated;
    d.index = i;
    d.name = "Simulated GPU";
    const double util = (node * 37 + i * 11 + tick * 3) % 101;
    d.metrics.set(Metric::utilization_percent, util, Source::simulated);
    d.metrics.set(Metric::memory_total_bytes, 80.0 * (1ULL << 30), Source::simulated);
    d.metrics.set(Metric::memory_used_bytes, (util / 100.0) * 80.0 * (1ULL << 30),
                  Source::simulated);
    d.metrics.set(Metric::temperature_celsius, 40 + util / 3, Source::simulated);
    d.metrics.set(Metric::power_watts, 90 + util * 3, Source::simulated);
    gpustream::derive_metrics(d);
    if ((node + i) % 3 == 0) {
      gpustream::ProcessSample p;
      p.pid = 1000 + i;
      p.name = "train.py";
      p.gpu_memory_bytes = 4ULL << 30;
      d.processes.push_back(p);
    }
    d.metrics.fill_absent(gpustream::Absence::unsupported, Source::simulated);
    s.devices.push_back(std::move(d));
  }
  return s;
}

std::string node_name(int i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "node-%04d", i);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string url = "nats://127.0.0.1:4222";
  std::string prefix = "gpustream";
  int nodes = 1000;
  int gpus = 8;
  double interval = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--nats")
      url = argv[i + 1];
    else if (a == "--prefix")
      prefix = argv[i + 1];
    else if (a == "--nodes")
      nodes = std::atoi(argv[i + 1]);
    else if (a == "--gpus")
      gpus = std::atoi(argv[i + 1]);
    else if (a == "--interval")
      interval = std::atof(argv[i + 1]);
    else {
      std::cerr << "fleet_publisher: unknown option " << a << "\n";
      return 2;
    }
  }
  natsConnection* nc = nullptr;
  if (natsConnection_ConnectTo(&nc, url.c_str()) != NATS_OK) {
    std::cerr << "fleet_publisher: cannot connect to " << url << "\n";
    return 1;
  }
  std::vector<gpustream::transport::BusEncoder> encoders;
  for (int i = 1; i <= nodes; ++i) encoders.emplace_back(node_name(i), "gpustream/0.1.0");

  std::mutex mu;
  std::set<std::string> stopped;
  std::atomic<bool> quit{false};
  std::thread input([&] {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line == "quit") break;
      if (line.rfind("stop ", 0) == 0) {
        std::lock_guard lock(mu);
        stopped.insert(line.substr(5));
      }
    }
    quit = true;
  });
  const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(interval));
  auto next = std::chrono::steady_clock::now();
  for (int tick = 0; !quit; ++tick) {
    int published = 0;
    for (int i = 1; i <= nodes && !quit; ++i) {
      auto& enc = encoders[static_cast<std::size_t>(i - 1)];
      {
        std::lock_guard lock(mu);
        if (stopped.count(enc.node())) continue;
      }
      const std::string& msg = enc.encode(node_snapshot(i, tick, gpus));
      const std::string subject = prefix + "." + enc.node() + ".simulated";
      if (natsConnection_Publish(nc, subject.c_str(), msg.data(), static_cast<int>(msg.size())) ==
          NATS_OK)
        ++published;
    }
    natsConnection_FlushTimeout(nc, 5000);
    std::cout << "published " << published << std::endl;
    next += period;
    while (!quit && std::chrono::steady_clock::now() < next)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  input.join();  // quit is only set by it, once stdin ended or said "quit"
  natsConnection_Destroy(nc);
  nats_Close();
  return 0;
}
