// gpustream_fleet_load_generator: the load of many nodes on the fleet bus from one process, for
// the fleet view's load test (bench/fleet_load.py, docs/benchmarks.md "Fleet over NATS").
//
// Each node's snapshot (the real simulated probe's, 8 GPUs, 100 consecutive samples taken at
// start, each node at its own phase, dated when sent: what `serve --simulate 8` agents send) is
// encoded by the real bus encoder (BusEncoder, one per node as an agent has: a full every 10
// messages, deltas between, deflated) and published to <prefix>.<node>.simulated. Threads split
// the nodes; each thread has its own NATS connection and spreads its nodes' messages evenly over
// the interval (agents are not synchronised), so the bus sees a steady rate, not a burst a
// second. Several processes split a bigger fleet with --first.
//
//   gpustream_fleet_load_generator --nats nats://127.0.0.1:4222 --nodes 2500 [--first 1]
//       [--threads 2] [--interval 1] [--gpus 8] [--prefix gpustream] [--seconds 0]
//       [--mode templated|exact] [--level 6]
//
// --mode exact encodes every message with its node's BusEncoder (≈ 0.5 ms of CPU each on a
// loaded 2-core machine: 10,000 nodes would need 5 cores). --mode templated (the default) has
// the real encoders make each distinct body once at start and then only writes the node's name
// and the current time into it and deflates it (see make_bodies): the same bytes an agent
// sends, at a fraction of the cost.
//
// Nodes are named load-NNNNN from --first on. --seconds 0 runs until stdin ends. Every second
// it prints "rate <messages published in the last second> behind_ms <how late the slowest
// thread's round is> cpu_s <the process's CPU time so far>" (stdout, flushed), and at the end
// "total <messages> failed <publishes refused by the client>".
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nats/nats.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "fleet/bus_deflate.hpp"
#include "gpustream/model.hpp"
#include "gpustream/probes/simulated_probe.hpp"
#include "gpustream/transport/fleet_codec.hpp"

namespace {

using gpustream::GpuSnapshot;
using Clock = std::chrono::steady_clock;

struct GenOptions {
  std::string url = "nats://127.0.0.1:4222";
  std::string prefix = "gpustream";
  int nodes = 1000;
  int first = 1;
  int threads = 2;
  int gpus = 8;
  double interval = 1.0;
  double seconds = 0;
  bool exact = false;  // --mode exact: BusEncoder per message (costly: ~0.5 ms of CPU each)
  int level = 6;       // the agents' deflate level
};

constexpr int kTicks = 100;

/// kTicks consecutive 1-second samples of the real simulated probe with `gpus` GPUs (driven
/// clocks, derived metrics as Telemetry publishes them): what `serve --simulate` agents send.
std::vector<GpuSnapshot> probe_ticks(int gpus) {
  boost::asio::io_context io;
  boost::asio::thread_pool pool(1);
  std::int64_t t = 1'000'000'000;
  gpustream::SimulatedProbeOptions o;
  o.devices = gpus;
  o.monotonic_clock = [&t] { return t; };
  o.wall_clock = [&t] { return 1'764'000'000'000'000'000 + t; };
  auto probe = gpustream::make_simulated_probe({io.get_executor(), pool.get_executor()}, o);
  auto guard = boost::asio::make_work_guard(io);  // the sample completes through the pool
  std::vector<GpuSnapshot> out;
  for (int i = 0; i < kTicks; ++i) {
    probe->async_sample([&](boost::system::error_code, GpuSnapshot s) {
      for (auto& d : s.devices) gpustream::derive_metrics(d);
      out.push_back(std::move(s));
    });
    while (out.size() <= static_cast<std::size_t>(i)) io.run_one();
    t += 1'000'000'000;
  }
  pool.join();
  return out;
}

/// Node `node`'s snapshot at `tick`: the probe's samples, each node at its own phase, dated now.
GpuSnapshot load_snapshot(const std::vector<GpuSnapshot>& ticks, int node, int tick) {
  GpuSnapshot s = ticks[static_cast<std::size_t>(node + tick) % ticks.size()];
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  s.time_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now).count();
  s.monotonic_ns = s.time_unix_ns;
  return s;
}

/// The templated mode: every message the real encoder would send, made once. A node's stream
/// at tick t is the probe's sample (node + t) % kTicks, a full every kFullEvery: its body
/// depends only on that phase and on t % kFullEvery (the full it is a delta of). Those
/// kTicks x kFullEvery bodies are made by BusEncoders (plain, then taken apart) with a marker
/// for the node's name and for the time; a message is then its body with the node and the
/// current time written over the markers, deflated at the agents' level, behind its header.
constexpr int kFullEvery = 10;
constexpr std::string_view kNodeMarker = "load-XXXXX";           // as long as load_node_name's
constexpr std::int64_t kTimeMarker = 1'111'111'111'000'000'000;  // 19 digits, as now's

struct Body {
  std::string text;
  std::vector<std::size_t> node_at;  // where kNodeMarker is
  std::vector<std::size_t> time_at;  // where the time's 19 digits are
};

std::vector<std::size_t> find_all(const std::string& text, std::string_view what) {
  std::vector<std::size_t> out;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    out.push_back(at);
  return out;
}

/// bodies[phase * kFullEvery + k]: the body of the k-th message after a full (0: the full).
std::vector<Body> make_bodies(const std::vector<GpuSnapshot>& ticks) {
  std::vector<Body> bodies(ticks.size() * kFullEvery);
  const auto n = static_cast<int>(ticks.size());
  for (int start = 0; start < n; ++start) {
    gpustream::transport::BusEncoderOptions eo;
    eo.full_every = kFullEvery;
    eo.compress = false;
    gpustream::transport::BusEncoder enc(std::string(kNodeMarker), "gpustream/0.1.0", eo);
    for (int k = 0; k < kFullEvery; ++k) {
      const int phase = (start + k) % n;
      GpuSnapshot s = ticks[static_cast<std::size_t>(phase)];
      s.time_unix_ns = kTimeMarker + phase;  // unique per phase: a delta carries it
      const std::string& msg = enc.encode(s);
      Body& b = bodies[static_cast<std::size_t>(phase * kFullEvery + k)];
      b.text = msg.substr(msg.find('\n') + 1);
      b.node_at = find_all(b.text, kNodeMarker);
      b.time_at = find_all(b.text, std::to_string(kTimeMarker + phase));
    }
  }
  return bodies;
}

/// One node's stream in the templated mode.
struct TemplatedNode {
  std::string name;
  std::string epoch_hex;
};

/// The message of node `node` (index `n`) at its tick `tick` (seq tick + 1).
void templated_message(std::string& out, std::string& scratch, const std::vector<Body>& bodies,
                       const TemplatedNode& node, int n, int tick, int level) {
  const int k = tick % kFullEvery;
  const int phase = (n + tick) % kTicks;
  const Body& b = bodies[static_cast<std::size_t>(phase * kFullEvery + k)];
  scratch = b.text;
  for (const auto at : b.node_at) scratch.replace(at, kNodeMarker.size(), node.name);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto digits =
      std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
  for (const auto at : b.time_at) scratch.replace(at, digits.size(), digits);
  out.clear();
  out += gpustream::transport::kBusMagic;
  out += k == 0 ? " f z " : " d z ";
  out += node.name;
  out += " simulated ";
  out += node.epoch_hex;
  const auto seq = static_cast<std::uint64_t>(tick) + 1;
  for (const std::uint64_t v :
       {seq, seq - static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(scratch.size())}) {
    out += ' ';
    out += std::to_string(v);
  }
  out += " gpustream/0.1.0\n";
  gpustream::transport::bus_deflate_into(out, scratch, level);  // as BusEncoder does
}

std::string load_node_name(int i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "load-%05d", i);
  return buf;
}

double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Shared {
  std::atomic<bool> quit{false};
  std::atomic<std::uint64_t> published{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::int64_t> behind_ns{0};  // the latest lateness of any thread's schedule
};

/// Publishes nodes [lo, hi) once per interval, each at its own offset in the interval.
void run_thread(const GenOptions& o, const std::vector<GpuSnapshot>& ticks,
                const std::vector<Body>& bodies, int lo, int hi, Shared& shared) {
  natsConnection* nc = nullptr;
  if (natsConnection_ConnectTo(&nc, o.url.c_str()) != NATS_OK) {
    std::cerr << "fleet_load_generator: cannot connect to " << o.url << "\n";
    shared.quit = true;
    return;
  }
  std::vector<gpustream::transport::BusEncoder> encoders;
  std::vector<TemplatedNode> nodes;
  std::vector<std::string> subjects;
  std::mt19937_64 rng(std::random_device{}());
  for (int i = lo; i < hi; ++i) {
    if (o.exact) encoders.emplace_back(load_node_name(i), "gpustream/0.1.0");
    char hex[17];
    std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(rng() | 1));
    nodes.push_back({load_node_name(i), hex});
    subjects.push_back(o.prefix + "." + load_node_name(i) + ".simulated");
  }
  std::string templated, scratch;
  const auto period =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.interval));
  const auto count = static_cast<std::int64_t>(nodes.size());
  const auto start = Clock::now();
  for (int tick = 0; !shared.quit && count > 0; ++tick) {
    const auto round = start + tick * period;
    for (std::int64_t k = 0; k < count && !shared.quit; ++k) {
      const auto due = round + period * k / count;
      const auto now = Clock::now();
      if (now < due)
        std::this_thread::sleep_until(due);
      else
        shared.behind_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - due).count();
      const int n = lo + static_cast<int>(k);
      if (!o.exact)
        templated_message(templated, scratch, bodies, nodes[static_cast<std::size_t>(k)], n, tick,
                          o.level);
      const std::string& msg =
          o.exact ? encoders[static_cast<std::size_t>(k)].encode(load_snapshot(ticks, n, tick))
                  : templated;
      const auto& subject = subjects[static_cast<std::size_t>(k)];
      if (natsConnection_Publish(nc, subject.c_str(), msg.data(), static_cast<int>(msg.size())) ==
          NATS_OK)
        ++shared.published;
      else
        ++shared.failed;
    }
  }
  natsConnection_FlushTimeout(nc, 5000);
  natsConnection_Destroy(nc);
}

bool parse_args(int argc, char** argv, GenOptions& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--nats")
      o.url = v;
    else if (a == "--prefix")
      o.prefix = v;
    else if (a == "--nodes")
      o.nodes = std::atoi(v);
    else if (a == "--first")
      o.first = std::atoi(v);
    else if (a == "--threads")
      o.threads = std::max(1, std::atoi(v));
    else if (a == "--gpus")
      o.gpus = std::atoi(v);
    else if (a == "--interval")
      o.interval = std::atof(v);
    else if (a == "--seconds")
      o.seconds = std::atof(v);
    else if (a == "--mode" && (std::string(v) == "exact" || std::string(v) == "templated"))
      o.exact = std::string(v) == "exact";
    else if (a == "--level")
      o.level = std::clamp(std::atoi(v), 1, 9);
    else {
      std::cerr << "fleet_load_generator: unknown option " << a << "\n";
      return false;
    }
  }
  if (argc % 2 == 0) {
    std::cerr << "fleet_load_generator: option " << argv[argc - 1] << " without a value\n";
    return false;
  }
  if (o.nodes < 0 || o.gpus < 1 || o.interval <= 0) {
    std::cerr << "fleet_load_generator: --nodes >= 0, --gpus >= 1, --interval > 0\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  GenOptions o;
  if (!parse_args(argc, argv, o)) return 2;
  Shared shared;
  const auto ticks = probe_ticks(o.gpus);
  const auto bodies = o.exact ? std::vector<Body>() : make_bodies(ticks);
  std::vector<std::thread> threads;
  const int n = o.threads;
  for (int t = 0; t < n; ++t) {
    const int lo = o.first + o.nodes * t / n;
    const int hi = o.first + o.nodes * (t + 1) / n;
    threads.emplace_back(
        [&o, &ticks, &bodies, lo, hi, &shared] { run_thread(o, ticks, bodies, lo, hi, shared); });
  }
  std::thread input;
  if (o.seconds <= 0)
    input = std::thread([&shared] {
      std::string line;
      while (std::getline(std::cin, line) && line != "quit") {}
      shared.quit = true;
    });
  const auto start = Clock::now();
  std::uint64_t last = 0;
  while (!shared.quit) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const auto now_published = shared.published.load();
    std::cout << "rate " << now_published - last << " behind_ms "
              << shared.behind_ns.exchange(0) / 1'000'000 << " cpu_s " << process_cpu_seconds()
              << std::endl;
    last = now_published;
    if (o.seconds > 0 && Clock::now() - start >= std::chrono::duration<double>(o.seconds))
      shared.quit = true;
  }
  for (auto& t : threads) t.join();
  if (input.joinable()) input.detach();  // blocked on stdin; the process ends
  std::cout << "total " << shared.published.load() << " failed " << shared.failed.load()
            << std::endl;
  nats_Close();
  return 0;
}
