// The fake NVML's GPM functions (signatures and struct layouts of nvml.h, NVML 13.3.29, written
// here independently of the probe's declarations): nvmlGpmQueryDeviceSupport,
// nvmlGpmSampleAlloc/Free, nvmlGpmSampleGet, nvmlGpmMigSampleGet and nvmlGpmMetricsGet. Not
// exported by the legacy variant (a driver before R525); the "no GPM MIG" variant (4) lacks
// nvmlGpmMigSampleGet alone.
//
// Every device has one counter per nvmlGpmMetricId_t (from 0 in every NVML session) that runs at
// the scenario's device.<i>.gpm.<id> percent of the fake's time (gpustreamFakeNvmlSetTimeNs): a
// sample records the counters and the time, and nvmlGpmMetricsGet answers (counter2 −
// counter1) / (t2 − t1), so a test knows the exact value of any pair (a rate changed by a reload
// counts from the last nvmlGpmSampleGet on). A MIG GPU instance (nvmlGpmMigSampleGet on the GPU's
// handle with the instance's gi) has counters of its own, at the rates of its first MIG device's
// mig.<k>.gpm.<id> keys. The library checks what the real one does: the
// struct versions (gpm_version, gpm_metrics_version, default 1: otherwise
// NVML_ERROR_ARGUMENT_VERSION_MISMATCH),
// numMetrics, that both samples were allocated here and read from one device in one session,
// and support (architecture >= Hopper, or gpm=0|1).
// Live samples are counted: gpustreamFakeNvmlCount("gpm_samples_live"); a free of something
// not allocated here counts "gpm_bad_free", one while NVML is shut down
// "gpm_free_after_shutdown".
#include <cmath>
#include <set>

#include "fake_nvml_state.hpp"

#ifndef FAKE_NVML_VARIANT
#define FAKE_NVML_VARIANT 0
#endif
#define EXPORT extern "C" __attribute__((visibility("default")))

using namespace fake_nvml;

#if FAKE_NVML_VARIANT != 1

struct nvmlGpmSample_st {
  bool filled = false;
  unsigned slot = 0, generation = 0;
  long long gi = -1;  // the MIG GPU instance it was read for (nvmlGpmMigSampleGet), else -1
  long long t_ns = 0;
  std::map<unsigned, double> counters;  // metric id -> percent · ns
};
using nvmlGpmSample_t = nvmlGpmSample_st*;

namespace {

constexpr unsigned kMetricMax = 333;  // NVML_GPM_METRIC_MAX (13.3)
constexpr nvmlReturn_t kVersionMismatch = 25;

struct nvmlGpmSupport_t {
  unsigned version;
  unsigned isSupportedDevice;
};
struct nvmlGpmMetric_t {
  unsigned metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
};
struct nvmlGpmMetricsGet_t {
  unsigned version;
  unsigned numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[kMetricMax];
};
static_assert(sizeof(nvmlGpmMetric_t) == 40 && sizeof(nvmlGpmMetricsGet_t) == 24 + 40 * 333);

// Under the state's lock (every entry holds a Call).
struct DeviceCounters {
  unsigned generation = 0;  // counters start at 0 in every session
  long long t_ns = 0;
  std::map<unsigned, double> counters;
};
std::map<unsigned, DeviceCounters>& counters() {
  static auto* m = new std::map<unsigned, DeviceCounters>;
  return *m;
}
std::set<nvmlGpmSample_t>& live() {
  static auto* s = new std::set<nvmlGpmSample_t>;
  return *s;
}
void count_live(State& st) { st.counts["gpm_samples_live"] = static_cast<int>(live().size()); }

bool supports_gpm(const fake_nvml::Device& d) {
  if (d.gpm) return *d.gpm;
  return d.architecture && *d.architecture >= 9;  // NVML_DEVICE_ARCH_HOPPER
}

/// The counters' rates of a device (gi -1) or of its MIG GPU instance `gi` (null: none has it).
const std::map<unsigned, double>* rates_of(const fake_nvml::Device& d, long long gi) {
  if (gi < 0) return &d.gpm_rate;
  for (const auto& m : d.mig)
    if (m && static_cast<long long>(m->gi) == gi) return &m->gpm_rate;
  return nullptr;
}

/// Runs the counters of a device (gi -1) or of one of its GPU instances up to the fake's time.
DeviceCounters& advance(State& st, unsigned slot, long long gi,
                        const std::map<unsigned, double>& rates) {
  auto& c = counters()[slot | static_cast<unsigned>((gi + 1) << 16)];
  if (c.generation != st.generation) c = DeviceCounters{st.generation, st.time_ns, {}};
  const long long dt = st.time_ns - c.t_ns;
  if (dt > 0)
    for (const auto& [id, rate] : rates) c.counters[id] += rate * static_cast<double>(dt);
  c.t_ns = st.time_ns;  // a clock set back restarts from there
  return c;
}

char kShort[] = "fake", kLong[] = "fake GPM metric", kUnit[] = "%";

}  // namespace

EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* support) {
  Call c("nvmlGpmQueryDeviceSupport");
  fake_nvml::Device* d = nullptr;
  if (auto rc = c.device(device, &d); rc != kOk) return rc;
  if (!support) return kInvalid;
  if (support->version != c.st.scenario.gpm_version) return kVersionMismatch;
  support->isSupportedDevice = supports_gpm(*d) ? 1 : 0;
  return kOk;
}

EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  Call c("nvmlGpmSampleAlloc");
  if (auto rc = c.begin(); rc != kOk) return rc;
  if (!sample) return kInvalid;
  *sample = new nvmlGpmSample_st;
  live().insert(*sample);
  count_live(c.st);
  return kOk;
}

EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  Call c("nvmlGpmSampleFree");  // works without init (it frees memory), but counted apart
  if (!c.st.initialized) ++c.st.counts["gpm_free_after_shutdown"];
  if (live().erase(sample) == 0) {
    ++c.st.counts["gpm_bad_free"];
    return kInvalid;
  }
  delete sample;
  count_live(c.st);
  return kOk;
}

EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
  Call c("nvmlGpmSampleGet");
  fake_nvml::Device* d = nullptr;
  if (auto rc = c.device(device, &d); rc != kOk) return rc;
  if (!live().count(sample)) return kInvalid;
  if (!supports_gpm(*d)) return kNotSupported;
  const auto& now = advance(c.st, c.slot, -1, d->gpm_rate);
  sample->filled = true;
  sample->slot = c.slot;
  sample->gi = -1;
  sample->generation = c.st.generation;
  sample->t_ns = now.t_ns;
  sample->counters = now.counters;
  return kOk;
}

#if FAKE_NVML_VARIANT != 4
// On the GPU's handle (a MIG device handle answers NOT_SUPPORTED, as device() does for every
// per-GPU function), for one of its GPU instances.
EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned gpu_instance_id,
                                        nvmlGpmSample_t sample) {
  Call c("nvmlGpmMigSampleGet");
  fake_nvml::Device* d = nullptr;
  if (auto rc = c.device(device, &d); rc != kOk) return rc;
  if (!live().count(sample)) return kInvalid;
  if (!supports_gpm(*d) || d->mig_mode != 1) return kNotSupported;
  const auto gi = static_cast<long long>(gpu_instance_id);
  const auto* rates = rates_of(*d, gi);
  if (!rates) return kNotFound;  // no such GPU instance
  const auto& now = advance(c.st, c.slot, gi, *rates);
  sample->filled = true;
  sample->slot = c.slot;
  sample->gi = gi;
  sample->generation = c.st.generation;
  sample->t_ns = now.t_ns;
  sample->counters = now.counters;
  return kOk;
}
#endif

EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* get) {
  Call c("nvmlGpmMetricsGet");
  if (auto rc = c.begin(); rc != kOk) return rc;
  if (!get) return kInvalid;
  if (get->version != c.st.scenario.gpm_metrics_version) return kVersionMismatch;
  if (get->numMetrics > kMetricMax) return kInvalid;
  const auto* a = get->sample1;
  const auto* b = get->sample2;
  if (!live().count(get->sample1) || !live().count(get->sample2) || !a->filled || !b->filled ||
      a->slot != b->slot || a->gi != b->gi || a->generation != b->generation ||
      b->t_ns <= a->t_ns) {
    ++c.st.counts["gpm_bad_pair"];
    return kInvalid;
  }
  if (a->slot >= c.st.scenario.devices.size()) return kInvalid;
  const auto& d = c.st.scenario.devices[a->slot];
  const auto* rates = rates_of(d, a->gi);
  if (!rates) return kNotFound;  // the GPU instance is gone
  const double dt = static_cast<double>(b->t_ns - a->t_ns);
  for (unsigned i = 0; i < get->numMetrics; ++i) {
    auto& m = get->metrics[i];
    m.value = 0;
    m.metricInfo = {kShort, kLong, kUnit};
    if (m.metricId == 0 || m.metricId >= kMetricMax) {
      m.nvmlReturn = kInvalid;
    } else if (auto f = d.gpm_fail.find(m.metricId); f != d.gpm_fail.end()) {
      m.nvmlReturn = f->second;
    } else {
      const auto at = [&](const nvmlGpmSample_st* s) {
        auto it = s->counters.find(m.metricId);
        return it == s->counters.end() ? 0.0 : it->second;
      };
      m.nvmlReturn = kOk;
      // A rate that is NaN or infinite in the scenario passes through as it is.
      const auto rate = rates->find(m.metricId);
      m.value = rate != rates->end() && !std::isfinite(rate->second) ? rate->second
                                                                     : (at(b) - at(a)) / dt;
    }
  }
  return kOk;
}

#endif
