// remote_subscriber — prints what a running `gpustream serve` streams, one line per GPU.
//
//   gpustream serve --simulate 2 --tcp 127.0.0.1:9401 &
//   remote_subscriber tcp://127.0.0.1:9401
//   remote_subscriber ws://127.0.0.1:9400/ws --probe simulated --field power_watts --count 10
//
// Stop the server and start it again: the subscriber reconnects (with backoff) and resumes
// after the last sequence it printed, so nothing still in the server's history is lost.
// Ctrl-C ends it.
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "gpustream/transport/remote_subscriber.hpp"

namespace {

void usage() {
  std::cerr << "usage: remote_subscriber URL [--token-file FILE] [--probe NAME]... "
               "[--device ID]... [--field METRIC]... [--max-rate HZ] [--since SEQ] [--count N]\n"
               "  URL: tcp://HOST:PORT or ws://HOST:PORT/ws\n";
}

std::string value(const gpustream::Reading& r, double scale, const char* unit, int digits) {
  if (!r) return "—";  // absent: never printed as 0
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f %s", digits, r.value() / scale, unit);
  return buf;
}

void print(const gpustream::GpuSnapshot& s) {
  using gpustream::Metric;
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  if (s.devices.empty())
    std::printf("#%llu %s (no devices)\n", static_cast<unsigned long long>(s.sequence),
                s.probe.c_str());
  for (const auto& d : s.devices) {
    std::printf("#%llu %-10s %-20s util %-7s mem %-10s power %-9s temp %s\n",
                static_cast<unsigned long long>(s.sequence), s.probe.c_str(), d.name.c_str(),
                value(d.metrics[Metric::utilization_percent], 1, "%", 0).c_str(),
                value(d.metrics[Metric::memory_used_bytes], kGiB, "GiB", 1).c_str(),
                value(d.metrics[Metric::power_watts], 1, "W", 1).c_str(),
                value(d.metrics[Metric::temperature_celsius], 1, "°C", 0).c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  gpustream::RemoteSubscriberOptions o;
  std::uint64_t count = 0;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--token-file") {
        std::ifstream f(next());
        if (!(f >> o.token)) throw std::invalid_argument("cannot read the token file");
      } else if (a == "--probe") {
        o.probes.push_back(next());
      } else if (a == "--device") {
        o.devices.push_back(next());
      } else if (a == "--field") {
        const auto name = next();
        const auto m = gpustream::metric_from_string(name);
        if (!m) throw std::invalid_argument("unknown metric '" + name + "'");
        o.fields.push_back(*m);
      } else if (a == "--max-rate") {
        o.max_rate_hz = std::stod(next());
      } else if (a == "--since") {
        o.since = std::stoull(next());
      } else if (a == "--count") {
        count = std::stoull(next());
      } else if (a == "-h" || a == "--help") {
        usage();
        return 0;
      } else if (o.url.empty() && !a.starts_with("-")) {
        o.url = a;
      } else {
        throw std::invalid_argument("unexpected argument '" + a + "'");
      }
    }
    if (o.url.empty()) throw std::invalid_argument("no URL");
    gpustream::validate_remote_url(o.url);
  } catch (const std::exception& e) {
    std::cerr << "remote_subscriber: " << e.what() << "\n";
    usage();
    return 2;
  }

  boost::asio::io_context io;
  gpustream::RemoteSubscriber sub(io.get_executor(), o);
  std::uint64_t printed = 0;
  sub.on_snapshot([&](const gpustream::SnapshotPtr& s) {
    print(*s);
    if (count > 0 && ++printed >= count) sub.stop();
  });
  sub.on_gap([](const gpustream::Gap& g) {
    std::printf("-- missed %llu snapshot(s) after #%llu: %s\n",
                static_cast<unsigned long long>(g.missed),
                static_cast<unsigned long long>(g.after_sequence), g.reason.c_str());
  });
  sub.on_status([](const gpustream::RemoteStatus& s) {
    std::cerr << "remote_subscriber: " << gpustream::to_string(s.state);
    if (!s.reason.empty()) std::cerr << " (" << s.reason << ")";
    if (s.state == gpustream::RemoteStatus::State::disconnected)
      std::cerr << ", retrying in " << s.retry_in.count() << " ms";
    std::cerr << "\n";
  });

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) sub.stop();
  });
  sub.start();
  // Runs until stopped: the subscriber's last operations end, then the signal wait is cancelled.
  while (sub.status().state != gpustream::RemoteStatus::State::stopped) io.run_one();
  signals.cancel();
  io.run();
  return 0;
}
