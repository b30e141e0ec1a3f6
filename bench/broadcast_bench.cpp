// Broadcast over WebSocket: one 8-GPU snapshot published to 10 / 100 / 500 clients on loopback,
// gpustream's Server against a websocketpp broadcast server (bench/websocketpp/) that sends the
// same bytes, in the same run.
//
// Setup per case: the server under test, and the clients in a child process (this program
// re-executed with --client-fleet), so that the clients' CPU is never counted. Closed loop: each
// iteration publishes one snapshot and waits until every client received it (the fleet says
// "got SEQ"). Counters:
//   server_cpu_ns_per_delivery  CPU time of the server / (publishes × clients). gpustream: the
//                               CPU clock of its io thread, which runs the channel, the
//                               serialization and every socket write. websocketpp: the CPU clock
//                               of its whole process (one thread), which reads each message from
//                               a pipe and writes it to every client.
//   p50_us, p99_us             publish → receive latency over every (publish, client) pair,
//                               measured by the fleet with CLOCK_MONOTONIC against the
//                               `monotonic_ns` stamped in the snapshot at publish time.
//   serializations_per_publish gpustream only: ServerCounters::serializations / publishes.
//   message_bytes              size of one snapshot message (the WebSocket payload).
//
// The snapshot: the simulated probe's 8 GPUs (with their processes), serialized by gpustream's
// codec; websocketpp is given exactly the bytes gpustream sends (a fresh stamp per publish).
// websocketpp_binary sends them as binary frames: websocketpp checks the UTF-8 of each outgoing
// text frame once per connection, and this case shows its send path without that check (not
// the protocol: the wire protocol uses text frames).
//
// Run: build-*/bench/broadcast_bench            (about a minute)
//      build-*/bench/broadcast_bench --benchmark_filter=gpustream
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <benchmark/benchmark.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "broadcast_fleet.hpp"
#include "gpustream/channel.hpp"
#include "gpustream/json.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/telemetry.hpp"
#include "gpustream/transport/protocol.hpp"
#include "gpustream/transport/server.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;

constexpr int kWarmup = 20;
const char* g_self = nullptr;  // this program, for the fleet child
std::string g_wspp_server =
#ifdef GPUSTREAM_WSPP_SERVER
    GPUSTREAM_WSPP_SERVER;
#else
    "";
#endif

// ----- child processes ------------------------------------------------------------------------

/// A child with its stdout (and optionally stdin) on pipes; killed and reaped on destruction.
class Child {
 public:
  Child(const std::vector<std::string>& argv, bool pipe_stdin) {
    int out[2], in[2] = {-1, -1};
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    if (pipe_stdin && ::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    if (pipe_stdin) posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    out_ = out[0];
    if (pipe_stdin) {
      ::close(in[0]);
      in_ = in[1];
    }
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  ~Child() {
    close_stdin();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(out_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }

  /// The next line of the child's stdout; nothing on EOF or after `timeout`.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (const auto nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      const auto n = ::read(out_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  /// A length-prefixed message on the child's stdin.
  void send_message(std::string_view bytes) {
    const auto n = static_cast<std::uint32_t>(bytes.size());
    const unsigned char h[4] = {static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
                                static_cast<unsigned char>(n >> 16),
                                static_cast<unsigned char>(n >> 24)};
    write_all(h, 4);
    write_all(bytes.data(), bytes.size());
  }

  void close_stdin() {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
  }

  /// Waits for the exit (after the child printed its results).
  void wait() {
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  void write_all(const void* p, std::size_t n) {
    const auto* c = static_cast<const char*>(p);
    while (n > 0) {
      const auto w = ::write(in_, c, n);
      if (w <= 0) throw std::runtime_error("write to child failed");
      c += w;
      n -= static_cast<std::size_t>(w);
    }
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int in_ = -1;
  std::string buf_;
};

std::int64_t cpu_ns(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// ----- the snapshot ---------------------------------------------------------------------------

/// One sample of 8 simulated GPUs (with their processes), taken once.
const gpustream::GpuSnapshot& template_snapshot() {
  static const gpustream::GpuSnapshot snapshot = [] {
    gpustream::Config c;
    c.probes = {"simulated"};
    c.simulate = 8;
    gpustream::Telemetry t(c, gpustream::probe_factory());
    t.start();
    auto first = t.wait_for_first_samples(10s);
    t.stop();
    if (first.empty()) throw std::runtime_error("the simulated probe produced no snapshot");
    return *first.front();
  }();
  return snapshot;
}

gpustream::GpuSnapshot stamped(std::uint64_t sequence) {
  gpustream::GpuSnapshot s = template_snapshot();
  s.sequence = sequence;
  s.time_unix_ns = gpustream::wall_now_ns();
  s.monotonic_ns = gpustream::steady_now_ns();  // CLOCK_MONOTONIC: comparable across processes
  return s;
}

// ----- one case -------------------------------------------------------------------------------

struct FleetResult {
  double p50_us = 0, p99_us = 0, max_us = 0;
};

/// Starts the fleet against `url` and waits until every client is connected.
std::unique_ptr<Child> start_fleet(const std::string& url, int clients, int messages) {
  auto fleet = std::make_unique<Child>(
      std::vector<std::string>{g_self, "--client-fleet", url, std::to_string(clients),
                               std::to_string(messages), std::to_string(kWarmup)},
      false);
  const auto line = fleet->read_line(60s);
  if (!line || *line != "ready") throw std::runtime_error("the client fleet did not connect");
  return fleet;
}

void wait_got(Child& fleet, std::uint64_t seq) {
  const auto want = "got " + std::to_string(seq);
  for (;;) {
    const auto line = fleet.read_line(30s);
    if (!line) throw std::runtime_error("no delivery of " + std::to_string(seq));
    if (*line == want) return;
  }
}

FleetResult finish_fleet(Child& fleet) {
  FleetResult r;
  const auto line = fleet.read_line(30s);
  if (!line ||
      std::sscanf(line->c_str(), "latency_us %lf %lf %lf", &r.p50_us, &r.p99_us, &r.max_us) != 3)
    throw std::runtime_error("the fleet did not report its latencies");
  fleet.wait();
  return r;
}

void report(benchmark::State& state, std::int64_t cpu, int publishes, int clients,
            const FleetResult& f) {
  state.counters["server_cpu_ns_per_delivery"] =
      static_cast<double>(cpu) / (static_cast<double>(publishes) * clients);
  state.counters["p50_us"] = f.p50_us;
  state.counters["p99_us"] = f.p99_us;
  state.counters["max_us"] = f.max_us;
  state.counters["message_bytes"] = static_cast<double>(
      gpustream::transport::snapshot_message(gpustream::to_json_string(stamped(1))).size() - 1);
}

void BM_gpustream(benchmark::State& state) {
  const int clients = static_cast<int>(state.range(0));
  const int publishes = static_cast<int>(state.max_iterations);
  try {
    (void)template_snapshot();
    asio::io_context io(1);
    auto guard = asio::make_work_guard(io);
    gpustream::SnapshotChannel channel(io.get_executor(), 64);
    gpustream::transport::ServerOptions o;
    o.http = asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0);
    o.limits.max_connections = static_cast<std::size_t>(clients) + 16;
    gpustream::transport::Server server(io.get_executor(), channel, o);
    server.start();
    std::thread io_thread([&] { io.run(); });
    clockid_t io_clock{};
    pthread_getcpuclockid(io_thread.native_handle(), &io_clock);
    struct Join {
      std::thread& t;
      asio::io_context& io;
      ~Join() {
        io.stop();
        t.join();
      }
    } join{io_thread, io};

    const auto url = "ws://127.0.0.1:" + std::to_string(server.http_endpoint()->port()) + "/ws";
    auto fleet = start_fleet(url, clients, kWarmup + publishes);
    std::uint64_t seq = 0;
    auto publish = [&] {
      ++seq;
      asio::post(io, [&channel, s = stamped(0)]() mutable { channel.publish(std::move(s)); });
      wait_got(*fleet, seq);
    };
    for (int i = 0; i < kWarmup; ++i) publish();
    const auto serial0 = server.counters().serializations;
    const auto cpu0 = cpu_ns(io_clock);
    for (auto _ : state) publish();
    const auto cpu = cpu_ns(io_clock) - cpu0;
    const auto serializations = server.counters().serializations - serial0;
    const auto f = finish_fleet(*fleet);
    report(state, cpu, publishes, clients, f);
    state.counters["serializations_per_publish"] = static_cast<double>(serializations) / publishes;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void run_websocketpp(benchmark::State& state, bool binary) {
  const int clients = static_cast<int>(state.range(0));
  const int publishes = static_cast<int>(state.max_iterations);
  if (g_wspp_server.empty() || ::access(g_wspp_server.c_str(), X_OK) != 0) {
    state.SkipWithError("wspp_broadcast_server not built (libwebsocketpp-dev missing?)");
    for (auto _ : state) {}
    return;
  }
  try {
    std::vector<std::string> argv{g_wspp_server};
    if (binary) argv.emplace_back("--binary");
    Child server(argv, true);
    const auto line = server.read_line(10s);
    unsigned port = 0;
    if (!line || std::sscanf(line->c_str(), "listening %u", &port) != 1)
      throw std::runtime_error("the websocketpp server did not start");
    clockid_t server_clock{};
    if (clock_getcpuclockid(server.pid(), &server_clock) != 0)
      throw std::runtime_error("no CPU clock for the websocketpp server");

    auto fleet =
        start_fleet("ws://127.0.0.1:" + std::to_string(port) + "/ws", clients, kWarmup + publishes);
    std::uint64_t seq = 0;
    auto publish = [&] {
      ++seq;
      // The exact frame payload gpustream's server sends for this snapshot.
      auto msg = gpustream::transport::snapshot_message(gpustream::to_json_string(stamped(seq)));
      msg.pop_back();  // the '\n' of the TCP framing
      server.send_message(msg);
      wait_got(*fleet, seq);
    };
    for (int i = 0; i < kWarmup; ++i) publish();
    const auto cpu0 = cpu_ns(server_clock);
    for (auto _ : state) publish();
    const auto cpu = cpu_ns(server_clock) - cpu0;
    const auto f = finish_fleet(*fleet);
    report(state, cpu, publishes, clients, f);
    server.close_stdin();
    server.wait();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void BM_websocketpp(benchmark::State& state) { run_websocketpp(state, false); }
void BM_websocketpp_binary(benchmark::State& state) { run_websocketpp(state, true); }

void register_all() {
  // Publishes per case: enough samples for a p99, few enough to stay near a minute in all.
  const std::pair<int, int> cases[] = {{10, 1000}, {100, 300}, {500, 100}};
  for (const auto& [clients, publishes] : cases) {
    benchmark::RegisterBenchmark("broadcast/gpustream", BM_gpustream)
        ->Arg(clients)
        ->ArgName("clients")
        ->Iterations(publishes)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("broadcast/websocketpp", BM_websocketpp)
        ->Arg(clients)
        ->ArgName("clients")
        ->Iterations(publishes)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("broadcast/websocketpp_binary", BM_websocketpp_binary)
        ->Arg(clients)
        ->ArgName("clients")
        ->Iterations(publishes)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--client-fleet") == 0)
    return gpustream::bench::run_client_fleet(argc - 2, argv + 2);
  ::signal(SIGPIPE, SIG_IGN);
  g_self = "/proc/self/exe";
  static std::string self_path;
  {
    char buf[4096];
    const auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) self_path.assign(buf, static_cast<std::size_t>(n));
    g_self = self_path.c_str();
  }
  benchmark::Initialize(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--wspp_server=", 14) == 0) g_wspp_server = argv[i] + 14;
  }
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
