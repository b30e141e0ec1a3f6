// NvmlBackend: activity that means work, from NVML's GPM API (Hopper and newer), under the
// backend's lock, inside a session, with a valid handle.
//
// GPM figures are computed by the library from two samples of the GPU's performance counters
// (nvmlGpmSampleGet), so each GPU keeps its previous sample across probe samples: the first
// sample only seeds (absent `not_yet_seeded`), every later one reports the activity over the
// interval since the previous one (attribute gpm_interval_ms). NVML wants at least 100 ms
// between the two samples; a probe sample sooner than that keeps the older sample and reports
// `not_yet_seeded`, so the interval just grows.
//
// Support is decided once per GPU: a library without the GPM functions (a driver before R525),
// the lazy session mode (NVML is shut down between samples, and a pair must come from one
// session), an architecture before Hopper, a library that rejects our struct version
// (NVML_ERROR_ARGUMENT_VERSION_MISMATCH: a layout we do not know is never read) or a device
// that says it has no GPM: the eight metrics are absent `unsupported` and the attribute `gpm`
// says why. A GPM call that fails is that sample's absence (tool_failed, logged once) and the
// pair is seeded again; a metric whose own nvmlReturn failed, or whose value is not a
// percentage (NaN, < 0, > 100), is absent on its own (logged once).
//
// MIG: an instance of a GPU in MIG mode reads the samples of its GPU instance
// (nvmlGpmMigSampleGet(GPU handle, GPU instance id)) into a pair of its own, under the same rules;
// the GPU's support decides for its instances. A library with GPM but without
// nvmlGpmMigSampleGet leaves the instances' metrics absent `unsupported` (logged once).
//
// Memory: two samples per GPU and per MIG instance (the driver's allocation) and one 13 kB
// request per backend.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "nvidia/nvml_backend.hpp"

namespace gpustream::nvml {

void Api::load_gpm(const DynamicLibrary& lib) {
  gpm_query_support = lib.optional<GpmQuerySupportFn>("nvmlGpmQueryDeviceSupport");
  gpm_sample_alloc = lib.optional<GpmSampleAllocFn>("nvmlGpmSampleAlloc");
  gpm_sample_free = lib.optional<GpmSampleFreeFn>("nvmlGpmSampleFree");
  gpm_sample_get = lib.optional<GpmSampleGetFn>("nvmlGpmSampleGet");
  gpm_metrics_get = lib.optional<GpmMetricsGetFn>("nvmlGpmMetricsGet");
  gpm_missing = !gpm_query_support  ? "nvmlGpmQueryDeviceSupport"
                : !gpm_sample_alloc ? "nvmlGpmSampleAlloc"
                : !gpm_sample_free  ? "nvmlGpmSampleFree"
                : !gpm_sample_get   ? "nvmlGpmSampleGet"
                : !gpm_metrics_get  ? "nvmlGpmMetricsGet"
                                    : "";
  if (!gpm_missing.empty()) {  // all or none
    gpm_query_support = nullptr;
    gpm_sample_alloc = nullptr;
    gpm_sample_free = nullptr;
    gpm_sample_get = nullptr;
    gpm_metrics_get = nullptr;
    return;
  }
  gpm_mig_sample_get = lib.optional<GpmMigSampleGetFn>("nvmlGpmMigSampleGet");
}

}  // namespace gpustream::nvml

namespace gpustream::nvidia_detail {
namespace {

/// Which GPM metric feeds which gpustream metric (all percentages, 0-100).
struct GpmFeed {
  unsigned id;
  Metric metric;
  const char* name;
};
constexpr GpmFeed kGpmFeeds[] = {
    {nvml::kGpmGraphicsUtil, Metric::graphics_activity_percent, "NVML_GPM_METRIC_GRAPHICS_UTIL"},
    {nvml::kGpmSmUtil, Metric::sm_activity_percent, "NVML_GPM_METRIC_SM_UTIL"},
    {nvml::kGpmSmOccupancy, Metric::sm_occupancy_percent, "NVML_GPM_METRIC_SM_OCCUPANCY"},
    {nvml::kGpmAnyTensorUtil, Metric::tensor_activity_percent, "NVML_GPM_METRIC_ANY_TENSOR_UTIL"},
    {nvml::kGpmDramBwUtil, Metric::dram_activity_percent, "NVML_GPM_METRIC_DRAM_BW_UTIL"},
    {nvml::kGpmFp64Util, Metric::fp64_activity_percent, "NVML_GPM_METRIC_FP64_UTIL"},
    {nvml::kGpmFp32Util, Metric::fp32_activity_percent, "NVML_GPM_METRIC_FP32_UTIL"},
    {nvml::kGpmFp16Util, Metric::fp16_activity_percent, "NVML_GPM_METRIC_FP16_UTIL"},
};
constexpr unsigned kGpmFeedCount = sizeof kGpmFeeds / sizeof kGpmFeeds[0];
static_assert(kGpmFeedCount <= 16, "GpmState::failing_metrics has 16 bits");

/// NVML wants at least this much between the two samples of a pair.
constexpr auto kGpmMinInterval = std::chrono::milliseconds(100);

std::string architecture_name(unsigned a) {
  switch (a) {
    case nvml::kArchKepler:
      return "Kepler";
    case nvml::kArchMaxwell:
      return "Maxwell";
    case nvml::kArchPascal:
      return "Pascal";
    case nvml::kArchVolta:
      return "Volta";
    case nvml::kArchTuring:
      return "Turing";
    case nvml::kArchAmpere:
      return "Ampere";
    case nvml::kArchAda:
      return "Ada";
    default:
      return "architecture " + std::to_string(a);
  }
}

/// Every activity metric absent, for one reason.
void absent_all(DeviceSample& out, Absence why) {
  for (const auto& f : kGpmFeeds) out.metrics.set_absent(f.metric, why, Source::nvml);
}

std::string version_mismatch(const char* function, const char* type) {
  return std::string(function) + " rejects " + type +
         " version 1 (NVML_ERROR_ARGUMENT_VERSION_MISMATCH): the library wants a layout "
         "gpustream does not know";
}

}  // namespace

void NvmlBackend::release_gpm() {
  for (auto& dev : devices_) {
    dev.gpm.release();
    for (auto& inst : dev.mig_instances) inst.gpm.release();
  }
}

void NvmlBackend::gpm_unsupported(NvmlDevice& dev, DeviceSample& out, std::string reason,
                                  bool log) {
  auto& g = dev.gpm;
  if (g.support != GpmState::Support::unsupported || g.reason != reason) {
    if (log)
      logger()->info("nvidia probe: GPU {}: activity metrics (GPM) unsupported: {}", dev.uuid,
                     reason);
    g.support = GpmState::Support::unsupported;
    g.reason = std::move(reason);
  }
  g.release();
  out.attributes["gpm"] = "unsupported: " + g.reason;
  absent_all(out, Absence::unsupported);
}

void NvmlBackend::sample_gpm(NvmlDevice& dev, DeviceSample& out, std::vector<SampleError>& errors) {
  auto& g = dev.gpm;
  const auto unsupported = [&](std::string reason) {
    gpm_unsupported(dev, out, std::move(reason), true);
  };

  if (g.support == GpmState::Support::unsupported) return unsupported(g.reason);
  if (!api_.gpm_missing.empty())
    return unsupported(api_.gpm_missing + " missing from " + library_.path() +
                       " (a driver before R525)");
  if (options_.mode == LibrarySessionMode::lazy)
    return unsupported(
        "needs the persistent NVML session (library_session lazy shuts NVML down between "
        "samples; a GPM sample pair must come from one session)");
  if (g.support == GpmState::Support::unknown) {
    if (dev.architecture && *dev.architecture < nvml::kArchHopper)
      return unsupported(architecture_name(*dev.architecture) + " GPU: GPM needs Hopper or newer");
    nvml::GpmSupport support{nvml::kGpmSupportVersion, 0};
    const auto rc = api_.gpm_query_support(dev.handle, &support);
    if (rc == nvml::kErrorArgumentVersionMismatch)
      return unsupported(version_mismatch("nvmlGpmQueryDeviceSupport", "nvmlGpmSupport_t"));
    if (rc == nvml::kErrorNotSupported || rc == nvml::kErrorFunctionNotFound)
      return unsupported("nvmlGpmQueryDeviceSupport: " + std::string(nvml::return_code_name(rc)));
    if (rc != nvml::kSuccess) {  // asked again next time
      absent_all(out, failed(dev, Call::gpm_support, rc, "nvmlGpmQueryDeviceSupport", errors));
      return;
    }
    succeeded(dev, Call::gpm_support);
    if (!support.is_supported_device)
      return unsupported("nvmlGpmQueryDeviceSupport: the device has no GPM");
    g.support = GpmState::Support::supported;
  }
  out.attributes["gpm"] = "supported";
  sample_gpm_pair(dev, nullptr, 0, out, errors);
}

void NvmlBackend::sample_gpm_mig(NvmlDevice& gpu, NvmlDevice& inst,
                                 std::optional<unsigned> gpu_instance_id, DeviceSample& out,
                                 std::vector<SampleError>& errors) {
  // The GPU's own support decides (sample_gpm ran on it first in this sample): its reason is
  // the instance's, logged once for the GPU.
  if (gpu.gpm.support == GpmState::Support::unsupported)
    return gpm_unsupported(inst, out, gpu.gpm.reason, false);
  if (gpu.gpm.support == GpmState::Support::unknown) {  // the GPU's query failed (its error)
    absent_all(out, Absence::tool_failed);
    return;
  }
  if (!api_.gpm_mig_sample_get) {
    if (log_once_.first("gpm:mig:no-symbol"))
      logger()->info(
          "nvidia probe: {} has GPM but no nvmlGpmMigSampleGet: activity metrics of MIG "
          "instances are absent (unsupported)",
          library_.path());
    return gpm_unsupported(inst, out,
                           "nvmlGpmMigSampleGet missing from " + library_.path() +
                               " (GPM per MIG GPU instance needs it)",
                           false);
  }
  if (!gpu_instance_id) {
    if (!api_.gpu_instance_id)
      return gpm_unsupported(inst, out,
                             "nvmlDeviceGetGpuInstanceId missing from " + library_.path() +
                                 " (GPM per MIG GPU instance needs the instance's id)",
                             false);
    absent_all(out, Absence::tool_failed);  // nvmlDeviceGetGpuInstanceId failed (its error)
    return;
  }
  auto& g = inst.gpm;
  if (g.support == GpmState::Support::unsupported)  // decided for good (struct version)
    return gpm_unsupported(inst, out, g.reason, false);
  if (g.gpu_instance_id != gpu_instance_id) g.previous.reset();  // another instance now
  g.gpu_instance_id = gpu_instance_id;
  out.attributes["gpm"] = "supported";
  sample_gpm_pair(inst, &gpu, *gpu_instance_id, out, errors);
}

void NvmlBackend::sample_gpm_pair(NvmlDevice& dev, const NvmlDevice* gpu, unsigned gpu_instance_id,
                                  DeviceSample& out, std::vector<SampleError>& errors) {
  auto& g = dev.gpm;
  auto& m = out.metrics;
  // A pair belongs to one NVML session.
  const auto generation = generation_.load();
  if (g.previous && g.generation != generation) g.previous.reset();
  const auto now = options_.clock();
  if (g.previous && now - g.previous_at < kGpmMinInterval) {
    absent_all(out, Absence::not_yet_seeded);  // too soon: the interval grows until the next sample
    return;
  }
  // A failed call: this sample's metrics absent with its reason, the pair seeded again.
  const auto call_failed = [&](Call call, nvml::Return rc, const char* function) {
    const auto why = failed(dev, call, rc, function, errors);
    absent_all(out, why);
    if (dev.lost) g.release();
  };
  if (!g.spare) {
    nvml::GpmSample sample = nullptr;
    const auto rc = api_.gpm_sample_alloc(&sample);
    if (rc != nvml::kSuccess || !sample) {
      g.previous.reset();
      return call_failed(Call::gpm_sample, rc == nvml::kSuccess ? nvml::kErrorUnknown : rc,
                         "nvmlGpmSampleAlloc");
    }
    g.spare = GpmSampleOwner(sample, api_.gpm_sample_free);
  }
  const auto rc_sample = gpu ? api_.gpm_mig_sample_get(gpu->handle, gpu_instance_id, g.spare.get())
                             : api_.gpm_sample_get(dev.handle, g.spare.get());
  if (rc_sample != nvml::kSuccess) {
    g.previous.reset();
    return call_failed(Call::gpm_sample, rc_sample,
                       gpu ? "nvmlGpmMigSampleGet" : "nvmlGpmSampleGet");
  }
  succeeded(dev, Call::gpm_sample);
  const auto interval = now - g.previous_at;
  const bool seeded = static_cast<bool>(g.previous);
  // The sample just read is the newer one of this pair and the older one of the next.
  swap(g.previous, g.spare);
  g.previous_at = now;
  g.generation = generation;
  if (!seeded) {
    absent_all(out, Absence::not_yet_seeded);
    return;
  }

  if (!gpm_request_) gpm_request_ = std::make_unique<nvml::GpmMetricsGet>();
  auto& req = *gpm_request_;
  // Only the header and the entries we ask for are read by the library.
  std::memset(&req, 0,
              offsetof(nvml::GpmMetricsGet, metrics) + sizeof(nvml::GpmMetric) * kGpmFeedCount);
  req.version = nvml::kGpmMetricsGetVersion;
  req.num_metrics = kGpmFeedCount;
  req.sample1 = g.spare.get();  // the older sample
  req.sample2 = g.previous.get();
  for (unsigned i = 0; i < kGpmFeedCount; ++i) req.metrics[i].metric_id = kGpmFeeds[i].id;
  const auto rc = api_.gpm_metrics_get(&req);
  if (rc == nvml::kErrorArgumentVersionMismatch)
    return gpm_unsupported(dev, out, version_mismatch("nvmlGpmMetricsGet", "nvmlGpmMetricsGet_t"),
                           true);
  if (rc != nvml::kSuccess) return call_failed(Call::gpm_metrics, rc, "nvmlGpmMetricsGet");
  succeeded(dev, Call::gpm_metrics);
  out.attributes["gpm_interval_ms"] =
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(interval).count());

  for (unsigned i = 0; i < kGpmFeedCount; ++i) {
    const auto& f = kGpmFeeds[i];
    const auto& r = req.metrics[i];
    const std::uint16_t bit = static_cast<std::uint16_t>(1U << i);
    const auto key = [&] { return "gpm:" + dev.uuid + ":" + std::to_string(f.id); };
    std::string problem;
    Absence why = Absence::tool_failed;
    if (r.nvml_return != nvml::kSuccess) {
      if (r.nvml_return == nvml::kErrorNotSupported) why = Absence::unsupported;
      problem = std::string(nvml::return_code_name(r.nvml_return));
    } else if (!std::isfinite(r.value) || r.value < 0 || r.value > 100) {
      problem = "value " + std::to_string(r.value) + " is not a percentage";
    }
    if (problem.empty()) {
      m.set(f.metric, r.value, Source::nvml);
      if (g.failing_metrics & bit) {
        g.failing_metrics &= static_cast<std::uint16_t>(~bit);
        log_once_.clear(key());
      }
      continue;
    }
    m.set_absent(f.metric, why, Source::nvml);
    if (!(g.failing_metrics & bit)) {
      g.failing_metrics |= bit;
      if (log_once_.first(key())) {
        const auto text = fmt::format("nvidia probe: GPU {}: nvmlGpmMetricsGet {}: {}; {} absent",
                                      dev.uuid, f.name, problem, to_string(f.metric));
        if (why == Absence::unsupported)
          logger()->info("{}", text);  // the device lacks it: not a problem
        else
          logger()->warn("{}", text);
      }
    }
  }
}

}  // namespace gpustream::nvidia_detail
