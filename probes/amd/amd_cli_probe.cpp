// AmdProbe: amd-smi / rocm-smi, one invocation per sample for all GPUs.
#include <stdexcept>
#include <utility>

#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/subprocess.hpp"

namespace gpustream {

AmdProbe::AmdProbe(ProbeExecutors executors, AmdProbeOptions options)
    : BlockingProbe(std::move(executors)), options_(std::move(options)) {
  if (options_.path.empty()) options_.path = options_.tool == AmdTool::amd_smi ? "amd-smi" : "rocm-smi";
}

std::chrono::milliseconds AmdProbe::min_interval() const noexcept {
  return std::max(options_.min_interval, std::chrono::milliseconds{2000});
}

std::string AmdProbe::run_tool(const std::vector<std::string>& args) const {
  RunOptions run_options;
  run_options.argv.push_back(options_.path);
  run_options.argv.insert(run_options.argv.end(), args.begin(), args.end());
  run_options.timeout = options_.timeout;
  boost::system::error_code ec;
  auto result = run(std::move(run_options), ec);
  std::string what = options_.path;
  for (const auto& a : args) what += " " + a;
  if (ec) {
    if (result.timed_out)
      throw std::runtime_error(what + ": timed out after " +
                               std::to_string(options_.timeout.count()) + " ms and was killed");
    throw std::runtime_error(what + ": " + ec.message());
  }
  if (!result.success()) throw std::runtime_error(what + ": " + result.describe());
  if (result.output.find_first_not_of(" \t\r\n") == std::string::npos)
    throw std::runtime_error(what + " printed nothing (exit code 0): the amdgpu driver is "
                             "probably not loaded");
  return std::move(result.output);
}

Detection AmdProbe::detect() {
  Detection d;
  try {
    if (options_.tool == AmdTool::amd_smi) {
      auto info = amd_cli::parse_amd_smi_static(run_tool({"static", "--json"}));
      for (const auto& s : info) {
        DeviceInfo di;
        di.vendor = Vendor::amd;
        di.index = s.index;
        di.pci_bus_id = s.bus_id;
        di.id = s.bus_id.empty() ? "amd:gpu" + std::to_string(s.index) : amd_device_id(s.bus_id);
        di.name = s.name;
        d.devices.push_back(std::move(di));
      }
      std::lock_guard lock(mutex_);
      static_ = std::move(info);
    } else {
      for (auto& s : amd_cli::parse_rocm_smi(run_tool(amd_cli::rocm_smi_args())))
        d.devices.push_back({s.id, Vendor::amd, s.index, s.name, s.pci_bus_id});
    }
  } catch (const std::exception& e) {
    d.reason = e.what();
    return d;
  }
  d.available = !d.devices.empty();
  if (!d.available) d.reason = options_.path + " reported no GPUs";
  return d;
}

GpuSnapshot AmdProbe::sample() {
  GpuSnapshot snap;
  if (options_.tool == AmdTool::rocm_smi) {
    snap.devices = amd_cli::parse_rocm_smi(run_tool(amd_cli::rocm_smi_args()));
    return snap;
  }
  std::vector<amd_cli::StaticInfo> info;
  {
    std::lock_guard lock(mutex_);
    if (static_.empty()) static_ = amd_cli::parse_amd_smi_static(run_tool({"static", "--json"}));
    info = static_;
  }
  auto metrics = amd_cli::parse_amd_smi_metric(run_tool({"metric", "--json"}));
  std::map<int, std::vector<ProcessSample>> processes;
  if (options_.processes) {
    try {
      processes = amd_cli::parse_amd_smi_process(run_tool({"process", "--json"}));
    } catch (const std::exception& e) {
      snap.errors.push_back({"tool_failed", e.what(), {}});
    }
  }
  for (const auto& s : info) {
    DeviceSample d;
    d.vendor = Vendor::amd;
    d.index = s.index;
    d.pci_bus_id = s.bus_id;
    d.id = s.bus_id.empty() ? "amd:gpu" + std::to_string(s.index) : amd_device_id(s.bus_id);
    d.name = s.name;
    if (!s.uuid.empty()) d.attributes["uuid"] = s.uuid;
    if (auto it = metrics.find(s.index); it != metrics.end()) {
      d.metrics = it->second;
    } else {
      d.metrics.fill_absent(Absence::tool_failed, Source::amd_smi);
    }
    if (!d.metrics[Metric::memory_total_bytes] && s.vram_total_bytes)
      d.metrics.set(Metric::memory_total_bytes, *s.vram_total_bytes, Source::amd_smi);
    if (d.metrics[Metric::energy_joules]) d.energy_kind = EnergyKind::counter;
    if (auto it = processes.find(s.index); it != processes.end()) d.processes = it->second;
    snap.devices.push_back(std::move(d));
  }
  return snap;
}

std::shared_ptr<AmdProbe> make_amd_cli_probe(ProbeExecutors executors, AmdProbeOptions options) {
  return std::make_shared<AmdProbe>(std::move(executors), std::move(options));
}

}  // namespace gpustream
