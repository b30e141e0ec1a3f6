// The command table's row of `gpustream capture DIR` (capture.hpp; the capture itself is in
// cmd_capture.cpp).
#include <cmath>
#include <memory>

#include "capture.hpp"
#include "commands.hpp"

namespace gpustream::cli {

Command capture_command() {
  return {"capture",
          "Write a support bundle to DIR: the sysfs files, DRM fdinfo, /proc/meminfo, vendor "
          "tool outputs and NVML answers the probes read, to replay offline with `snapshot "
          "--replay-capture DIR`. Not captured: command lines, environments, other /proc files, "
          "the host name. See docs/operations.md (Sending a capture)",
          [](CLI::App& sub, CommandContext& context) -> CommandRun {
            struct State {
              CaptureOptions o;
              double tool_timeout_seconds = 15.0;
            };
            auto s = std::make_shared<State>();
            add_common_options(sub, context.common);
            sub.add_option("dir", s->o.dir, "A new (or empty) folder")->required();
            sub.add_option("--max-file-bytes", s->o.max_file_bytes,
                           "Larger files and tool outputs are left out (default 1 MiB)")
                ->check(CLI::Range(std::uint64_t{1024}, std::uint64_t{1} << 32));
            sub.add_option("--max-bytes", s->o.max_total_bytes,
                           "Cap of the whole bundle (default 64 MiB)")
                ->check(CLI::Range(std::uint64_t{4096}, std::uint64_t{1} << 36));
            sub.add_option("--tool-timeout", s->tool_timeout_seconds,
                           "Each tool run is killed after this many seconds (default 15)")
                ->check(CLI::Range(0.1, 600.0));
            sub.add_option("--max-processes", s->o.max_processes,
                           "DRM client processes captured at most (default 1024)")
                ->check(CLI::PositiveNumber);
            return [s, &context] {
              const auto config = make_config(context.common);
              s->o.tool_timeout =
                  std::chrono::milliseconds(std::llround(s->tool_timeout_seconds * 1000));
              return run_capture(config, s->o);
            };
          }};
}

}  // namespace gpustream::cli
