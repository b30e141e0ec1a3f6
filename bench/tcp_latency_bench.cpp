// Sample → client over TCP (issue #32): an 8-GPU snapshot published at 100 Hz to N clients of
// the TCP listener (JSON lines, docs/protocol.md), open loop, measured by a native client.
//
// The server: gpustream's transport::Server in this process, its io_context run by its own
// thread(s). A publisher thread stamps a copy of one simulated 8-GPU sample (the simulated
// probe's, taken once) with CLOCK_MONOTONIC and publishes it into the SnapshotChannel every
// 10 ms (absolute deadlines: a late tick does not shift the next).
//
// The clients: one thread, plain non-blocking sockets on one epoll set. Each client waits for
// the hello (from then on the server fans snapshots out to it), then reads lines. For each
// snapshot line: latency = CLOCK_MONOTONIC read right after the recv() that returned the line's
// last byte − the snapshot's `monotonic_ns` (the publish instant). Every line of client 0 is
// decoded with parse_server_message after the run (a snapshot of 8 devices, the sequences in
// order); every client must receive every snapshot, in order, with nothing else between.
//
// Counters (per case):
//   p50_us, p99_us, max_us      publish → last byte read, over every (snapshot, client) pair
//                               after the warm-up.
//   server_cpu_ns_per_delivery  gpustream: the CPU clocks of the server's io thread(s) over the
//                               measured publishes / (publishes × clients). The publisher's and
//                               the clients' threads are not counted (the channel's publish runs
//                               on the publisher; its fan-out to the server runs on the io thread).
//                               raw_write: the writer thread's CPU in its write loops only.
//   message_bytes               one snapshot line as sent.
//   serializations_per_publish  gpustream: ServerCounters::serializations / publishes.
//
// The baseline in the same run (raw_write): one thread that writes the same line (a fresh stamp
// each tick) with one write(2) per client to N accepted sockets, one after another — the floor of
// "one write per client" on one thread, read by the same client.
//
// Run: build-*/bench/tcp_latency_bench                 (about 25 s)
//      build-*/bench/tcp_latency_bench --benchmark_filter=gpustream/clients:100
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/json.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/telemetry.hpp"
#include "gpustream/transport/protocol.hpp"
#include "gpustream/transport/server.hpp"

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;

constexpr int kHz = 100;
constexpr int kWarmupPublishes = 50;
constexpr std::int64_t kPeriodNs = 1'000'000'000 / kHz;

std::int64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::int64_t clock_ns(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

clockid_t clock_of(std::thread& t) {
  clockid_t c{};
  if (pthread_getcpuclockid(t.native_handle(), &c) != 0)
    throw std::runtime_error("no CPU clock for a thread");
  return c;
}

// ----- the snapshot ---------------------------------------------------------------------------

/// One sample of `gpus` simulated GPUs (with their processes), taken once per count.
const gpustream::GpuSnapshot& sample_of(int gpus) {
  static std::map<int, gpustream::GpuSnapshot> samples;
  if (const auto it = samples.find(gpus); it != samples.end()) return it->second;
  gpustream::Config c;
  c.probes = {"simulated"};
  c.simulate = gpus;
  gpustream::Telemetry t(c, gpustream::probe_factory());
  t.start();
  auto first = t.wait_for_first_samples(10s);
  t.stop();
  if (first.empty()) throw std::runtime_error("the simulated probe produced no snapshot");
  return samples.emplace(gpus, *first.front()).first->second;
}

// ----- the clients: one thread, one epoll set --------------------------------------------------

struct ClientState {
  int fd = -1;
  std::string buf;
  std::size_t scanned = 0;
  bool hello = false;
  std::uint64_t next_seq = 0;  // 0: the first snapshot sets it
  std::uint64_t snapshots = 0;
};

std::uint64_t number_after(std::string_view text, std::string_view key) {
  const auto at = text.find(key);
  if (at == std::string_view::npos) return 0;
  return std::strtoull(text.data() + at + key.size(), nullptr, 10);
}

/// N TCP clients of 127.0.0.1:port on one epoll set, read by the calling thread.
class EpollFleet {
 public:
  EpollFleet(unsigned short port, int clients) : ep_(::epoll_create1(EPOLL_CLOEXEC)) {
    if (ep_ < 0) throw std::runtime_error("epoll_create1");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    clients_.resize(static_cast<std::size_t>(clients));
    for (std::size_t i = 0; i < clients_.size(); ++i) {
      auto& c = clients_[i];
      c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (c.fd < 0 || ::connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
        throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
      ::fcntl(c.fd, F_SETFL, ::fcntl(c.fd, F_GETFL) | O_NONBLOCK);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = i;
      if (::epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev) != 0) throw std::runtime_error("epoll_ctl");
    }
  }
  ~EpollFleet() {
    for (auto& c : clients_)
      if (c.fd >= 0) ::close(c.fd);
    ::close(ep_);
  }
  EpollFleet(const EpollFleet&) = delete;
  EpollFleet& operator=(const EpollFleet&) = delete;

  /// Reads until every client has its hello.
  void wait_hellos(std::chrono::milliseconds timeout) {
    run_until([this] { return hellos_ == clients_.size(); }, timeout);
    if (hellos_ != clients_.size()) throw std::runtime_error("not every client got its hello");
  }
  /// Reads until every client has `n` snapshots.
  void wait_snapshots(std::uint64_t n, std::chrono::milliseconds timeout) {
    run_until([&] { return complete_ == clients_.size(); }, timeout, n);
    if (complete_ != clients_.size())
      throw std::runtime_error("not every client got every snapshot (" + std::to_string(complete_) +
                               " of " + std::to_string(clients_.size()) + " did)");
  }

  /// Latencies (ns) of the snapshots after the first `warmup` sequences, every client.
  std::vector<std::int64_t>& latencies() { return latencies_; }
  void set_warmup_sequences(std::uint64_t first_measured) { first_measured_ = first_measured; }
  /// Every line client 0 read, for the decode check after the run.
  const std::vector<std::string>& client0_lines() const { return client0_lines_; }

 private:
  void run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                 std::uint64_t want = 0) {
    want_ = want;
    const auto deadline = mono_ns() + std::chrono::nanoseconds(timeout).count();
    epoll_event evs[256];
    char chunk[64 * 1024];
    while (!done()) {
      const auto left_ms = (deadline - mono_ns()) / 1'000'000;
      if (left_ms <= 0) return;
      const int n =
          ::epoll_wait(ep_, evs, 256, static_cast<int>(std::min<std::int64_t>(left_ms, 100)));
      for (int k = 0; k < n; ++k) {
        auto& c = clients_[evs[k].data.u64];
        for (;;) {
          const auto r = ::recv(c.fd, chunk, sizeof chunk, 0);
          if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
          if (r <= 0) throw std::runtime_error("a client's connection closed");
          const auto now = mono_ns();
          c.buf.append(chunk, static_cast<std::size_t>(r));
          take_lines(c, evs[k].data.u64 == 0, now);
        }
      }
    }
  }

  void take_lines(ClientState& c, bool keep, std::int64_t now) {
    std::size_t start = 0;
    for (;;) {
      const auto nl = c.buf.find('\n', std::max(start, c.scanned));
      if (nl == std::string::npos) break;
      const std::string_view line(c.buf.data() + start, nl - start);
      start = nl + 1;
      on_line(c, line, now);
      if (keep) client0_lines_.emplace_back(line);
    }
    c.buf.erase(0, start);
    c.scanned = c.buf.size();
  }

  void on_line(ClientState& c, std::string_view line, std::int64_t now) {
    if (!c.hello) {
      if (line.rfind("{\"type\":\"hello\"", 0) != 0)
        throw std::runtime_error("the first line is not a hello: " +
                                 std::string(line.substr(0, 80)));
      c.hello = true;
      ++hellos_;
      return;
    }
    if (line.rfind("{\"type\":\"snapshot\"", 0) != 0)
      throw std::runtime_error("not a snapshot line: " + std::string(line.substr(0, 120)));
    const auto seq = number_after(line, "\"sequence\":");
    if (c.next_seq != 0 && seq != c.next_seq)
      throw std::runtime_error("sequence " + std::to_string(seq) + " where " +
                               std::to_string(c.next_seq) + " was due");
    c.next_seq = seq + 1;
    if (seq >= first_measured_)
      latencies_.push_back(now -
                           static_cast<std::int64_t>(number_after(line, "\"monotonic_ns\":")));
    if (++c.snapshots == want_) ++complete_;
  }

  int ep_;
  std::vector<ClientState> clients_;
  std::size_t hellos_ = 0;
  std::size_t complete_ = 0;
  std::uint64_t want_ = 0;
  std::uint64_t first_measured_ = ~std::uint64_t{0};
  std::vector<std::int64_t> latencies_;
  std::vector<std::string> client0_lines_;
};

/// Client 0's lines decode as the protocol says: a hello, then `gpus`-device snapshots in order.
void check_decoded(const std::vector<std::string>& lines, std::uint64_t snapshots,
                   std::size_t gpus) {
  namespace t = gpustream::transport;
  if (lines.size() != snapshots + 1)
    throw std::runtime_error("client 0 read " + std::to_string(lines.size()) + " lines");
  if (t::parse_server_message(lines.front()).kind != t::ServerMessage::Kind::hello)
    throw std::runtime_error("client 0's first line does not decode as a hello");
  std::uint64_t prev = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto m = t::parse_server_message(lines[i]);
    if (m.kind != t::ServerMessage::Kind::snapshot || m.snapshot.devices.size() != gpus ||
        (prev != 0 && m.snapshot.sequence != prev + 1))
      throw std::runtime_error("client 0's line " + std::to_string(i) +
                               " does not decode as the next snapshot of " + std::to_string(gpus) +
                               " GPUs");
    prev = m.snapshot.sequence;
  }
}

void report_latencies(benchmark::State& state, std::vector<std::int64_t>& l) {
  if (l.empty()) throw std::runtime_error("no latency measured");
  std::sort(l.begin(), l.end());
  const auto at = [&](double q) {
    return static_cast<double>(l[std::min(l.size() - 1, static_cast<std::size_t>(q * l.size()))]) /
           1000.0;
  };
  state.counters["p50_us"] = at(0.50);
  state.counters["p99_us"] = at(0.99);
  state.counters["max_us"] = static_cast<double>(l.back()) / 1000.0;
  state.counters["deliveries"] = static_cast<double>(l.size());
}

/// Calls `tick(i)` at 100 Hz, i = 0 .. count-1, on absolute deadlines.
void at_100hz(int count, const std::function<void(int)>& tick) {
  timespec next{};
  ::clock_gettime(CLOCK_MONOTONIC, &next);
  for (int i = 0; i < count; ++i) {
    next.tv_nsec += kPeriodNs;
    if (next.tv_nsec >= 1'000'000'000) {
      next.tv_nsec -= 1'000'000'000;
      ++next.tv_sec;
    }
    ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr);
    tick(i);
  }
}

// ----- gpustream's server ---------------------------------------------------------------------

void BM_gpustream(benchmark::State& state) {
  const int clients = static_cast<int>(state.range(0));
  const int publishes = static_cast<int>(state.range(1));
  const int gpus = static_cast<int>(state.range(2));
  const int io_threads = static_cast<int>(state.range(3));
  for (auto _ : state) {
    try {
      const auto& sample = sample_of(gpus);
      asio::io_context io(io_threads);
      auto guard = asio::make_work_guard(io);
      gpustream::SnapshotChannel channel(io.get_executor(), 64);
      gpustream::transport::ServerOptions o;
      o.http.reset();
      o.tcp = asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0);
      o.limits.max_connections = static_cast<std::size_t>(clients) + 16;
      o.limits.max_connections_per_address = static_cast<std::size_t>(clients) + 16;
      gpustream::transport::Server server(io.get_executor(), channel, o);
      server.start();
      std::vector<std::thread> threads;
      std::vector<clockid_t> clocks;
      for (int i = 0; i < io_threads; ++i) {
        threads.emplace_back([&] {
          pthread_setname_np(pthread_self(), "server-io");  // for perf report --comms
          io.run();
        });
        clocks.push_back(clock_of(threads.back()));
      }
      struct Join {
        std::vector<std::thread>& t;
        asio::io_context& io;
        ~Join() {
          io.stop();
          for (auto& x : t) x.join();
        }
      } join{threads, io};
      const auto server_cpu = [&] {
        std::int64_t sum = 0;
        for (const auto c : clocks) sum += clock_ns(c);
        return sum;
      };

      EpollFleet fleet(server.tcp_endpoint()->port(), clients);
      fleet.wait_hellos(30s);
      const auto first_seq = channel.last_sequence() + 1;
      fleet.set_warmup_sequences(first_seq + kWarmupPublishes);
      std::atomic<std::int64_t> cpu0{0};
      std::uint64_t serial0 = 0;
      std::jthread publisher([&] {  // joined on every way out
        pthread_setname_np(pthread_self(), "publisher");
        at_100hz(kWarmupPublishes + publishes, [&](int i) {
          if (i == kWarmupPublishes) {
            cpu0 = server_cpu();
            serial0 = server.counters().serializations;
          }
          gpustream::GpuSnapshot s = sample;
          s.time_unix_ns = gpustream::wall_now_ns();
          s.monotonic_ns = mono_ns();
          channel.publish(std::move(s));
        });
      });
      fleet.wait_snapshots(static_cast<std::uint64_t>(kWarmupPublishes + publishes),
                           std::chrono::milliseconds(60'000 + 20 * publishes));
      const auto cpu = server_cpu() - cpu0.load();
      const auto serializations = server.counters().serializations - serial0;
      state.counters["server_cpu_ns_per_delivery"] =
          static_cast<double>(cpu) / (static_cast<double>(publishes) * clients);
      state.counters["serializations_per_publish"] =
          static_cast<double>(serializations) / publishes;
      report_latencies(state, fleet.latencies());
      check_decoded(fleet.client0_lines(), static_cast<std::uint64_t>(kWarmupPublishes + publishes),
                    static_cast<std::size_t>(gpus));
      state.counters["message_bytes"] =
          static_cast<double>(fleet.client0_lines().back().size() + 1);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
    }
  }
}

// ----- the floor: one write(2) per client, one thread ------------------------------------------

void BM_raw_write(benchmark::State& state) {
  const int clients = static_cast<int>(state.range(0));
  const int publishes = static_cast<int>(state.range(1));
  const int gpus = static_cast<int>(state.range(2));
  for (auto _ : state) {
    try {
      const auto& sample = sample_of(gpus);
      const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      struct CloseFd {
        int fd;
        ~CloseFd() { ::close(fd); }
      } close_l{lfd};
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof a;
      if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd, 1024) != 0 ||
          ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::runtime_error("listen");
      std::vector<int> conns;
      struct CloseAll {
        std::vector<int>& fds;
        ~CloseAll() {
          for (const int fd : fds) ::close(fd);
        }
      } close_conns{conns};
      std::thread acceptor([&] {
        for (int i = 0; i < clients; ++i) {
          const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
          if (fd < 0) return;
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // as Asio's server does
          conns.push_back(fd);
        }
      });
      EpollFleet fleet(ntohs(a.sin_port), clients);
      acceptor.join();
      if (conns.size() != static_cast<std::size_t>(clients)) throw std::runtime_error("accept");
      const auto write_all = [](int fd, const std::string& bytes) {
        std::size_t off = 0;
        while (off < bytes.size()) {
          const auto w = ::write(fd, bytes.data() + off, bytes.size() - off);
          if (w <= 0) throw std::runtime_error("write failed");
          off += static_cast<std::size_t>(w);
        }
      };
      gpustream::transport::Hello h;
      const auto hello = gpustream::transport::hello_message(h);
      for (const int fd : conns) write_all(fd, hello);
      fleet.wait_hellos(30s);
      fleet.set_warmup_sequences(1 + kWarmupPublishes);
      std::int64_t cpu = 0;
      std::jthread writer([&] {  // joined on every way out
        clockid_t self{};
        pthread_getcpuclockid(pthread_self(), &self);
        pthread_setname_np(pthread_self(), "raw-writer");
        at_100hz(kWarmupPublishes + publishes, [&](int i) {
          gpustream::GpuSnapshot s = sample;
          s.sequence = static_cast<std::uint64_t>(i) + 1;
          s.time_unix_ns = gpustream::wall_now_ns();
          s.monotonic_ns = mono_ns();
          const auto line = gpustream::transport::snapshot_message(gpustream::to_json_string(s));
          const auto c0 = clock_ns(self);
          for (const int fd : conns) write_all(fd, line);
          if (i >= kWarmupPublishes) cpu += clock_ns(self) - c0;
        });
      });
      fleet.wait_snapshots(static_cast<std::uint64_t>(kWarmupPublishes + publishes),
                           std::chrono::milliseconds(60'000 + 20 * publishes));
      writer.join();
      state.counters["server_cpu_ns_per_delivery"] =
          static_cast<double>(cpu) / (static_cast<double>(publishes) * clients);
      report_latencies(state, fleet.latencies());
      check_decoded(fleet.client0_lines(), static_cast<std::uint64_t>(kWarmupPublishes + publishes),
                    static_cast<std::size_t>(gpus));
      state.counters["message_bytes"] =
          static_cast<double>(fleet.client0_lines().back().size() + 1);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
    }
  }
}

void register_all() {
  // 5 s a case at 100 Hz, 500 deliveries per client. 2 GPUs: what `serve` simulates on a
  // machine without GPUs; 8: the WebSocket broadcast benchmark's snapshot.
  for (const int gpus : {2, 8})
    for (const int clients : {1, 100}) {
      benchmark::RegisterBenchmark("tcp_latency/raw_write", BM_raw_write)
          ->Args({clients, 500, gpus})
          ->ArgNames({"clients", "publishes", "gpus"})
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      benchmark::RegisterBenchmark("tcp_latency/gpustream", BM_gpustream)
          ->Args({clients, 500, gpus, 1})
          ->ArgNames({"clients", "publishes", "gpus", "io_threads"})
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  benchmark::Initialize(&argc, argv);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
