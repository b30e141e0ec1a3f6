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
// Memory: two samples per GPU (the driver's allocation) and one 13 kB request per backend.
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
  }
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

}  // namespace

void NvmlBackend::release_gpm() {
  for (auto& dev : devices_) dev.gpm.release();
}

void NvmlBackend::sample_gpm(NvmlDevice& dev, DeviceSample& out, std::vector<SampleError>& errors) {
  auto& g = dev.gpm;
  auto& m = out.metrics;
  const auto absent_all = [&](Absence why) {
    for (const auto& f : kGpmFeeds) m.set_absent(f.metric, why, Source::nvml);
  };
  const auto unsupported = [&](std::string reason) {
    if (g.support != GpmState::Support::unsupported || g.reason != reason) {
      logger()->info("nvidia probe: GPU {}: activity metrics (GPM) unsupported: {}", dev.uuid,
                     reason);
      g.support = GpmState::Support::unsupported;
      g.reason = std::move(reason);
    }
    g.release();
    out.attributes["gpm"] = "unsupported: " + g.reason;
    absent_all(Absence::unsupported);
  };
  const auto version_mismatch = [&](const char* function, const char* type) {
    return std::string(function) + " rejects " + type +
           " version 1 (NVML_ERROR_ARGUMENT_VERSION_MISMATCH): the library wants a layout "
           "gpustream does not know";
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
      absent_all(failed(dev, Call::gpm_support, rc, "nvmlGpmQueryDeviceSupport", errors));
      return;
    }
    succeeded(dev, Call::gpm_support);
    if (!support.is_supported_device)
      return unsupported("nvmlGpmQueryDeviceSupport: the device has no GPM");
    g.support = GpmState::Support::supported;
  }
  out.attributes["gpm"] = "supported";

  // A pair belongs to one NVML session.
  const auto generation = generation_.load();
  if (g.previous && g.generation != generation) g.previous.reset();
  const auto now = options_.clock();
  if (g.previous && now - g.previous_at < kGpmMinInterval) {
    absent_all(Absence::not_yet_seeded);  // too soon: the interval grows until the next sample
    return;
  }
  // A failed call: this sample's metrics absent with its reason, the pair seeded again.
  const auto call_failed = [&](Call call, nvml::Return rc, const char* function) {
    const auto why = failed(dev, call, rc, function, errors);
    absent_all(why);
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
  if (const auto rc = api_.gpm_sample_get(dev.handle, g.spare.get()); rc != nvml::kSuccess) {
    g.previous.reset();
    return call_failed(Call::gpm_sample, rc, "nvmlGpmSampleGet");
  }
  succeeded(dev, Call::gpm_sample);
  const auto interval = now - g.previous_at;
  const bool seeded = static_cast<bool>(g.previous);
  // The sample just read is the newer one of this pair and the older one of the next.
  swap(g.previous, g.spare);
  g.previous_at = now;
  g.generation = generation;
  if (!seeded) {
    absent_all(Absence::not_yet_seeded);
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
    return unsupported(version_mismatch("nvmlGpmMetricsGet", "nvmlGpmMetricsGet_t"));
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
