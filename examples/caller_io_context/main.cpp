// Runs gpustream on the program's own io_context (docs/embedding.md, "Running on your own
// io_context"): the program owns the event loop and its thread; gpustream's timers, completions
// and subscriber callbacks run there, its blocking probe work on its own work pool.
//
//   ./caller_io_context             # the machine's GPUs (and the host)
//   ./caller_io_context --simulate  # two simulated GPUs
//
// The rules it follows: the io_context outlives the Telemetry (declared first, destroyed last);
// the blocking calls (wait_for_first_samples, sample_now, windows) are made on a thread that
// does not run the io_context; stop() is called on a thread that runs it (posted there), or
// while nothing runs it.
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <iostream>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <gpustream/probes/registry.hpp>
#include <gpustream/telemetry.hpp>

int main(int argc, char** argv) {
  gpustream::Config config;
  config.interval = std::chrono::milliseconds{100};
  if (argc > 1 && std::strcmp(argv[1], "--simulate") == 0) {
    config.probes = {"simulated"};
    config.simulate = 2;
  }

  // 1. The program's event loop and its thread. The work guard keeps run() from returning while
  //    gpustream has nothing queued.
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::thread loop([&io] { io.run(); });

  int status = 0;
  {
    gpustream::Telemetry telemetry(config, gpustream::probe_factory(), io.get_executor());
    std::atomic<int> delivered{0};
    // 2. Callbacks run on the program's loop thread, next to its own handlers.
    auto sub = telemetry.channel().subscribe({}, [&](const gpustream::SnapshotPtr& s) {
      if (delivered++ < 3)
        std::cout << "snapshot " << s->sequence << " from " << s->probe << ": " << s->devices.size()
                  << " device(s)\n";
    });
    telemetry.start();

    // 3. Blocking calls from this thread, which does not run the loop.
    const auto first = telemetry.wait_for_first_samples(std::chrono::seconds{10});
    telemetry.begin_window("example");
    const auto fresh = telemetry.sample_now();
    const auto window = telemetry.end_window("example");
    std::cout << "probes: " << first.size() << ", fresh snapshots: " << fresh.size()
              << ", window devices: " << window.devices.size() << "\n";
    if (first.empty()) status = 1;

    // 4. stop() on the loop's thread (allowed there; from this thread it would race the loop).
    std::promise<void> stopped;
    boost::asio::post(io, [&] {
      telemetry.stop();
      stopped.set_value();
    });
    stopped.get_future().wait();
  }  // the Telemetry is gone; nothing of gpustream is queued any more except an abandoned
     // worker's late result, which the still-living io_context accepts

  // 5. Let the loop return, then join it. `io` is destroyed last.
  guard.reset();
  loop.join();
  return status;
}
