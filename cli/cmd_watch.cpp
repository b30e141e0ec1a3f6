// gpustream watch — a live table (or JSON lines) until interrupted or --count snapshots;
// gpustream record FILE — the same JSON lines, and a line per gap, into a file.
//
// Output errors end the command: a reader that went away (`watch | head -n1`) ends `watch`
// quietly with exit code 0, as soon as it is seen (without waiting for the next snapshot); any
// other write error is reported and gives exit code 1. `record` fsyncs the file when it ends,
// whether by --count, --duration, SIGINT or SIGTERM. docs/cli.md has the recording format.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <iostream>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "commands.hpp"
#include "format.hpp"
#include "gpustream/json.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/telemetry.hpp"
#include "gpustream/terminal_text.hpp"
#include "gpustream/transport/remote_subscriber.hpp"
#include "kubelet_options.hpp"
#include "options.hpp"
#include "output.hpp"
#include "remote_watch.hpp"
#include "stream.hpp"
#include "token_file.hpp"

namespace gpustream::cli {

namespace {

// The exit code of `watch` once it stopped writing to stdout.
int watch_exit_code(const Output& out, int code) {
  if (out.error() == 0 || out.broken_pipe()) return code;
  std::cerr << "gpustream: " << out.describe_error() << "\n";
  return kExitFailure;
}

// A GPU event: a line on stderr (stdout keeps its one format), and under the live table.
void print_event(const GpuEvent& e, Printer& printer) {
  const auto line = event_line(e);
  std::cerr << "gpustream: event " + line + "\n";
  printer.note_event(line);
}

// Sets `stop` on SIGINT/SIGTERM or as soon as the reader of `out` is gone, for the remote watch
// whose loop only looks at one flag.
class StopWatcher {
 public:
  StopWatcher(const Output& out, std::atomic<bool>& stop)
      : thread_([&out, &stop](const std::stop_token& st) {
          while (!st.stop_requested() && !stop.load()) {
            if (g_interrupted.load() || out.reader_gone()) stop.store(true);
            pollfd p{out.fd(), 0, 0};
            ::poll(&p, 1, 50);  // wakes at once when the reader goes away
          }
        }) {}

 private:
  std::jthread thread_;
};

// watch --connect: the same output, fed by a RemoteSubscriber instead of local probes.
int run_connected_watch(const Config& config, const WatchOptions& o) {
  RemoteSubscriberOptions ro;
  ro.url = o.connect;
  ro.probes = config.probes;
  if (!o.token_file.empty()) ro.token = read_token_file(o.token_file);
  ro.tls_ca_file = o.ca_file;
  ro.tls_cert_file = o.cert_file;
  ro.tls_key_file = o.key_file;
  RemoteWatchLimits limits;
  limits.count = o.count > 0 ? static_cast<std::uint64_t>(o.count) : 0;
  limits.duration = std::chrono::milliseconds(static_cast<long>(o.duration_seconds * 1000));
  Output out = Output::standard_output();
  Printer printer(o.json, !o.json && ::isatty(out.fd()) != 0, o.container);
  std::atomic<bool> stop{false};
  RemoteWatchHandlers h;
  h.on_snapshot = [&](const GpuSnapshot& s) {
    if (!out.write(printer.render(s))) stop.store(true);
  };
  h.on_gap = print_gap;
  h.on_event = [&printer](const GpuEvent& e) { print_event(e, printer); };
  h.on_status = [](const RemoteStatus& st) {
    if (!st.reason.empty()) std::cerr << "gpustream: " << terminal_safe(st.reason) << "\n";
  };
  int code;
  {
    StopWatcher watcher(out, stop);
    try {
      code = run_remote_watch(ro, limits, h, stop);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(e.what());
    }
  }
  if (out.reader_gone()) return kExitOk;  // `watch --connect ... | head`: stopped by the reader
  return watch_exit_code(out, code);
}

}  // namespace

// NOLINTNEXTLINE(performance-unnecessary-value-param): the signature every command has
int run_watch(Config config, const WatchOptions& o) {
  if (!o.connect.empty()) return run_connected_watch(config, o);
  const bool recording = !o.output_file.empty();
  // `record FIFO`: the open waits for a reader, said once, and SIGINT/SIGTERM end the wait.
  bool said_waiting = false;
  const auto keep_waiting = [&] {
    if (!said_waiting) {
      std::cerr << "gpustream: waiting for a reader of the FIFO '" << terminal_safe(o.output_file)
                << "' (Ctrl-C to give up)\n";
      said_waiting = true;
    }
    return !wait_interrupted_for(std::chrono::milliseconds{100});
  };
  Output out =
      recording ? Output::create_file(o.output_file, keep_waiting) : Output::standard_output();
  if (!out.open()) {
    if (out.error() == EINTR && g_interrupted.load()) {
      const int sig = g_interrupt_signal.load();
      std::cerr << "gpustream: interrupted while waiting for a reader of the FIFO '"
                << terminal_safe(o.output_file) << "'; nothing was recorded\n";
      return 128 + (sig != 0 ? sig : SIGINT);
    }
    std::cerr << "gpustream: cannot open '" << terminal_safe(o.output_file)
              << "' for writing: " << std::generic_category().message(out.error()) << "\n";
    return kExitFailure;
  }
  const bool json = o.json || recording;
  Printer printer(json, !json && ::isatty(out.fd()) != 0, o.container);

  Telemetry t(config, probe_factory());
  std::unique_ptr<probes::KubeletWatcher> kubelet;  // pod names (--kubelet-socket)
  try {
    kubelet = attach_kubelet(t, o.kubelet_socket, true);
  } catch (const ConfigError& e) {
    std::cerr << "gpustream: " << e.what() << "\n";
    return kExitUsage;
  }
  SubscribeOptions so;
  so.policy = Backpressure::lossless;
  so.capacity = 4096;
  auto queue = t.channel().subscribe_queue(so);
  // GPU events (Xid, ECC, ...) as they happen, on stderr: stdout keeps its one format.
  EventSubscription events;
  if (!recording)
    events = t.events().subscribe([&printer](const EventPtr& e) { print_event(*e, printer); });
  t.start();
  for (const auto& e : t.setup_errors()) std::cerr << "gpustream: " << terminal_safe(e) << "\n";

  StreamLimits limits;
  limits.count = o.count;
  limits.duration_seconds = o.duration_seconds;
  limits.write_gaps = recording;
  limits.stop_when_reader_gone = !recording;
  const auto r = stream_queue(*queue, out, printer, limits, g_interrupted);
  t.stop();
  if (!recording) {
    if (r.end == StreamResult::End::reader_gone) return kExitOk;  // `watch | head`
    return watch_exit_code(out, kExitOk);
  }
  // Whatever ended the recording (a limit, SIGINT, SIGTERM): what was written reaches the disk.
  if (!out.finish()) {
    std::cerr << "gpustream: " << out.describe_error() << " (after " << r.snapshots
              << " snapshots; the recording is incomplete)\n";
    return kExitFailure;
  }
  std::cerr << "gpustream: recorded " << r.snapshots << " snapshots to "
            << terminal_safe(o.output_file);
  if (r.gaps > 0) std::cerr << " (and " << r.gaps << " gaps, written into the file)";
  std::cerr << "\n";
  return kExitOk;
}

}  // namespace gpustream::cli

namespace gpustream::cli {

Command watch_command() {
  return {
      "watch",
      "A live table of every GPU (or JSON lines); GPU events (Xid, ECC, ...) on stderr, also "
      "with --connect",
      [](CLI::App& sub, CommandContext& context) -> CommandRun {
        auto o = std::make_shared<WatchOptions>();
        add_common_options(sub, context.common);
        sub.add_flag("--json", o->json, "One snapshot per line, JSON");
        sub.add_option("--count", o->count, "Stop after N snapshots")->check(CLI::PositiveNumber);
        sub.add_option("--duration", o->duration_seconds, "Stop after this many seconds")
            ->check(CLI::PositiveNumber);
        sub.add_option("--connect", o->connect,
                       "Watch a running `gpustream serve`: tcp://HOST:PORT or "
                       "ws://HOST:PORT/ws, over TLS tls://HOST:PORT or wss://HOST:PORT/ws "
                       "(reconnects and resumes by sequence)");
        sub.add_option("--token-file", o->token_file, "Bearer token for --connect");
        sub.add_option("--ca", o->ca_file,
                       "--connect over TLS: the CA file (PEM) that signed the server's "
                       "certificate (default: the system's trusted CAs)");
        sub.add_option("--cert", o->cert_file,
                       "--connect over TLS to a server asking for client certificates: this "
                       "client's certificate (PEM; with --key)");
        sub.add_option("--key", o->key_file, "The private key of --cert (PEM)");
        sub.add_option("--container", o->container,
                       "Only the processes of this container (a prefix of its id, at least 4 "
                       "characters, or a Kubernetes pod UID) and the GPUs they use")
            ->check([](const std::string& v) {
              return v.size() >= 4 ? std::string{}
                                   : std::string("give at least 4 characters of the id");
            });
        add_kubelet_socket_flag(sub, o->kubelet_socket);
        return [o, &context] { return run_watch(make_config(context.common), *o); };
      }};
}

Command record_command() {
  return {
      "record", "Record snapshots to FILE (JSON lines)",
      [](CLI::App& sub, CommandContext& context) -> CommandRun {
        auto o = std::make_shared<WatchOptions>();
        add_common_options(sub, context.common);
        sub.add_option("file", o->output_file, "Output file")->required();
        sub.add_option("--count", o->count, "Stop after N snapshots")->check(CLI::PositiveNumber);
        sub.add_option("--duration", o->duration_seconds, "Stop after this many seconds")
            ->check(CLI::PositiveNumber);
        add_kubelet_socket_flag(sub, o->kubelet_socket);
        return [o, &context] { return run_watch(make_config(context.common), *o); };
      }};
}

}  // namespace gpustream::cli
