// AmdProbe: amd-smi / rocm-smi, one invocation per sample for all GPUs.
#include <string_view>
#include <utility>

#include "gpustream/log.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/power.hpp"
#include "gpustream/subprocess.hpp"

namespace gpustream {
namespace {

using amd_cli::ToolError;

// A DeviceInfo or DeviceSample named from `amd-smi static`.
template <class Device>
Device device_of(const amd_cli::StaticInfo& s) {
  Device d;
  d.vendor = Vendor::amd;
  d.index = s.index;
  d.pci_bus_id = s.bus_id;
  d.id = s.bus_id.empty() ? "amd:gpu" + std::to_string(s.index) : amd_device_id(s.bus_id);
  d.name = s.name;
  return d;
}

// The last non-empty line of a tool's stderr, at most 200 characters.
std::string last_line(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  if (const auto nl = text.rfind('\n'); nl != std::string_view::npos) text.remove_prefix(nl + 1);
  return std::string(text.substr(0, 200));
}

}  // namespace

AmdProbe::AmdProbe(ProbeExecutors executors, AmdProbeOptions options)
    : BlockingProbe(std::move(executors)),
      options_(std::move(options)),
      process_table_(options_.procfs_root) {
  if (options_.path.empty())
    options_.path = options_.tool == AmdTool::amd_smi ? "amd-smi" : "rocm-smi";
  if (!options_.clock) options_.clock = [] { return steady_now_ns(); };
}

std::chrono::milliseconds AmdProbe::min_interval() const noexcept {
  return std::max(options_.min_interval, std::chrono::milliseconds{2000});
}

void AmdProbe::note_failure(const ToolError& e) {
  // The Scheduler logs what() once (it is the same every tick); the particulars, which may
  // differ every run, are worth one debug line per kind of failure, not one per tick.
  if (detail_log_.first(e.what())) logger()->debug("probe amd: {} ({})", e.what(), e.detail());
}

std::string AmdProbe::run_tool(const std::vector<std::string>& args) const {
  RunOptions run_options;
  run_options.argv.push_back(options_.path);
  run_options.argv.insert(run_options.argv.end(), args.begin(), args.end());
  run_options.timeout = options_.timeout;
  std::string what = options_.path;
  for (const auto& a : args) what += " " + a;
  boost::system::error_code ec;
  auto result = run(std::move(run_options), ec);
  // The summaries hold nothing that changes between runs (no pid, no stderr text, no byte
  // count); result.describe(), with the tool's last stderr line, is the detail.
  if (ec && result.timed_out)
    throw ToolError(what + ": timed out after " + std::to_string(options_.timeout.count()) +
                        " ms and was killed",
                    result.stderr_tail.empty() ? "nothing on stderr"
                                               : "stderr: " + last_line(result.stderr_tail));
  if (ec) throw ToolError(what + ": could not be run: " + ec.message(), ec.to_string());
  if (result.signal)
    throw ToolError(what + ": killed by " + signal_name(*result.signal), result.describe());
  if (result.exit_code != 0)
    throw ToolError(what + ": exited with code " + std::to_string(result.exit_code.value_or(-1)),
                    result.describe());
  if (result.output.find_first_not_of(" \t\r\n") == std::string::npos)
    throw ToolError(what +
                        " printed nothing (exit code 0): the amdgpu driver is probably not "
                        "loaded",
                    "empty output");
  return std::move(result.output);
}

Detection AmdProbe::detect() {
  Detection d;
  try {
    if (options_.tool == AmdTool::amd_smi) {
      auto info = amd_cli::parse_amd_smi_static(run_tool({"static", "--json"}));
      for (const auto& s : info) d.devices.push_back(device_of<DeviceInfo>(s));
      std::lock_guard lock(mutex_);
      static_ = std::move(info);
    } else {
      for (auto& s : amd_cli::parse_rocm_smi(run_tool(amd_cli::rocm_smi_args())))
        d.devices.push_back({s.id, Vendor::amd, s.index, s.name, s.pci_bus_id});
    }
  } catch (const ToolError& e) {
    note_failure(e);
    d.reason = e.what();
    return d;
  } catch (const std::exception& e) {
    d.reason = e.what();
    return d;
  }
  d.available = !d.devices.empty();
  if (!d.available) d.reason = options_.path + " reported no GPUs";
  return d;
}

std::vector<ProcessSample> AmdProbe::processes_of(const DeviceSample& device,
                                                  std::vector<amd_cli::ProcessUsage>& found) {
  std::vector<ProcessSample> out;
  for (auto& u : found) {
    auto p = std::move(u.process);
    set_engine_usage(p, engines_.update({p.pid, device.id, 0}, u.engine_busy_ns), Source::amd_smi);
    out.push_back(std::move(p));
  }
  return out;
}

GpuSnapshot AmdProbe::sample() {
  GpuSnapshot snap;
  snap.monotonic_ns = options_.clock();  // the sample time, also the base of engine deltas
  try {
    if (options_.tool == AmdTool::rocm_smi) {
      snap.devices = amd_cli::parse_rocm_smi(run_tool(amd_cli::rocm_smi_args()));
      // What rocm-smi does not print is absent with a reason, never "not collected".
      // The rocm-smi path lists no processes (the amd-smi path and sysfs do).
      for (auto& d : snap.devices) {
        d.metrics.fill_absent(Absence::unsupported, Source::rocm_smi);
        d.processes_absent = Absence::unsupported;
      }
      detail_log_.clear_all();
      return snap;
    }
    std::lock_guard lock(mutex_);
    if (static_.empty()) static_ = amd_cli::parse_amd_smi_static(run_tool({"static", "--json"}));
    std::map<int, amd_cli::ThrottleStatus> throttle;
    auto metrics = amd_cli::parse_amd_smi_metric(run_tool({"metric", "--json"}), &throttle);
    std::map<int, std::vector<amd_cli::ProcessUsage>> processes;
    bool have_processes = false;
    if (options_.processes) {
      try {
        processes = amd_cli::parse_amd_smi_process(run_tool({"process", "--json"}));
        have_processes = true;
      } catch (const ToolError& e) {
        note_failure(e);
        snap.errors.push_back({"tool_failed", e.what(), {}});
      }
    }
    // Only a successful process run moves the engine baseline: a failed one leaves the
    // previous counters in place, so the next good run still has something to compare with.
    if (have_processes) engines_.begin(snap.monotonic_ns);
    for (const auto& s : static_) {
      auto d = device_of<DeviceSample>(s);
      if (!s.uuid.empty()) d.attributes["uuid"] = s.uuid;
      if (auto it = metrics.find(s.index); it != metrics.end()) {
        d.metrics = it->second;
      } else {
        d.metrics.fill_absent(Absence::tool_failed, Source::amd_smi);
      }
      if (!d.metrics[Metric::memory_total_bytes] && s.vram_total_bytes)
        d.metrics.set(Metric::memory_total_bytes, *s.vram_total_bytes, Source::amd_smi);
      if (d.metrics[Metric::energy_joules]) d.energy_kind = EnergyKind::counter;
      power::settle(d);
      d.metrics.fill_absent(Absence::unsupported, Source::amd_smi);  // what amd-smi lacks
      // amd-smi says only whether the GPU is throttled, not why: one reason, "throttled".
      if (auto it = throttle.find(s.index); it != throttle.end()) {
        if (it->second == amd_cli::ThrottleStatus::throttled)
          d.throttle_reasons = {"throttled"};
        else if (it->second == amd_cli::ThrottleStatus::unknown)
          d.throttle_reasons_absent = Absence::unsupported;
      }
      if (auto it = processes.find(s.index); it != processes.end())
        d.processes = processes_of(d, it->second);
      if (!have_processes)
        d.processes_absent = options_.processes ? Absence::tool_failed : Absence::not_collected;
      snap.devices.push_back(std::move(d));
    }
    if (have_processes) process_table_.fill(snap.devices);  // host RSS (and missing names)
  } catch (const ToolError& e) {
    note_failure(e);
    throw;
  }
  if (snap.errors.empty()) detail_log_.clear_all();
  return snap;
}

std::shared_ptr<AmdProbe> make_amd_cli_probe(ProbeExecutors executors, AmdProbeOptions options) {
  return std::make_shared<AmdProbe>(std::move(executors), std::move(options));
}

}  // namespace gpustream
