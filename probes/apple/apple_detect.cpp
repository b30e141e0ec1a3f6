// AppleSiliconProbe detection (one `macmon pipe -s 1 --soc-info` run) and its configuration.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/json/object.hpp>

#include "apple/apple_core.hpp"
#include "gpustream/errors.hpp"
#include "gpustream/json.hpp"
#include "gpustream/probes/settings.hpp"

namespace gpustream {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::milliseconds;

constexpr milliseconds kMacmonMinInterval{100};  // macmon clamps -i to at least this

constexpr std::string_view kNotMacos =
    "macmon is not configured and this is not macOS: Apple Silicon GPUs are read through macmon "
    "on macOS (give --macmon PATH to use a macmon-compatible tool anyway)";

struct DetectRun : std::enable_shared_from_this<DetectRun> {
  std::shared_ptr<AppleSiliconProbe::Core> core;
  asio::any_io_executor io;
  Probe::DetectHandler handler;
  std::string program;
  bool explicit_path = false;

  void finish(Detection d) {
    asio::post(io, [h = std::move(handler), d = std::move(d)]() mutable { h(std::move(d)); });
  }

  void unavailable(std::string reason) {
    Detection d;
    d.reason = std::move(reason);
    finish(std::move(d));
  }

  void run(bool with_soc) {
    RunOptions o;
    o.argv = {program, "-i", std::to_string(kMacmonMinInterval.count()), "pipe", "-s", "1"};
    if (with_soc) o.argv.emplace_back("--soc-info");
    o.timeout = core->options().detect_timeout;
    o.max_output_bytes = 1 << 20;
    o.env = core->options().env;
    std::string command;
    for (const auto& a : o.argv) command += (command.empty() ? "" : " ") + a;
    async_run(io, std::move(o),
              [self = shared_from_this(), with_soc, command](error_code ec, RunResult r) {
                self->on_result(with_soc, command, ec, std::move(r));
              });
  }

  void on_result(bool with_soc, const std::string& command, error_code ec, RunResult r) {
    if (ec == boost::system::errc::no_such_file_or_directory) {
      return unavailable(explicit_path
                             ? "macmon not found at '" + program + "'"
                             : std::string("macmon not found in PATH (install it with `brew "
                                           "install macmon`, or give --macmon PATH)"));
    }
    if (ec == errc::timeout || r.timed_out) {
      return unavailable("`" + command + "` printed no sample within " +
                         std::to_string(core->options().detect_timeout.count()) + " ms");
    }
    if (ec) return unavailable("cannot run '" + program + "': " + ec.message());
    if (!r.success()) {
      // macmon before v0.7 has no --soc-info (clap: "unexpected argument"): try without.
      if (with_soc) return run(false);
      return unavailable("`" + command + "` " + r.describe());
    }
    std::string_view out = r.output;
    while (!out.empty() && (out.front() == '\n' || out.front() == '\r')) out.remove_prefix(1);
    const std::string_view line = out.substr(0, out.find('\n'));
    MacmonSample sample;
    try {
      sample = parse_macmon_line(line);
    } catch (const std::exception& e) {
      const std::string head = apple_detail::printable(line.substr(0, 80));
      return unavailable("`" + command + "` printed something that is not a macmon line (" +
                         apple_detail::printable(e.what()) +
                         "): " + (head.empty() ? "(nothing)" : head));
    }
    if (with_soc && sample.soc) {
      core->set_soc(sample.soc);
    } else if (!with_soc) {
      logger()->info("apple: {} has no --soc-info (macmon before v0.7): the chip name is unknown",
                     program);
    }
    Detection d;
    d.available = true;
    d.devices.push_back(apple_device_info(core->soc()));
    finish(std::move(d));
  }
};

}  // namespace

void AppleSiliconProbe::async_detect(DetectHandler handler) {
  auto run = std::make_shared<DetectRun>();
  run->core = core_;
  run->io = executors_.io;
  run->handler = std::move(handler);
  run->program = core_->options().macmon;
  run->explicit_path = !run->program.empty();
  if (!run->explicit_path) {
    if (!core_->options().search_path) return run->unavailable(std::string(kNotMacos));
    run->program = "macmon";
  }
  run->run(true);
}

AppleProbeOptions apple_probe_options(const Config& config) {
  AppleProbeOptions o;
  o.interval = config.interval;
  if (const auto it = config.probe_intervals.find(std::string(AppleSiliconProbe::kName));
      it != config.probe_intervals.end())
    o.interval = it->second;
  o.interval = std::max(o.interval, kMacmonMinInterval);
  const auto* section = settings::section(config, AppleSiliconProbe::kName, {"macmon"});
  if (auto macmon = settings::string_at(section, AppleSiliconProbe::kName, "macmon"))
    o.macmon = std::move(*macmon);
  return o;
}

ProbePtr make_apple_probe_from_config(const Config& config, ProbeExecutors executors) {
  return make_apple_probe(std::move(executors), apple_probe_options(config));
}

}  // namespace gpustream
