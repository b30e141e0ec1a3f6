// The fake NVML's power sample ring: nvmlDeviceGetSamples as nvml.h declares it (nvmlSample_t:
// a 64-bit CPU time stamp in µs and an 8-byte nvmlValue_t), for NVML_TOTAL_POWER_SAMPLES only,
// from the scenario's device.<i>.power_samples keys; and gpustreamFakeNvmlSamplesLastSeen(slot),
// the lastSeenTimeStamp of the device's latest call (~0 before any). Not exported by the legacy
// variant: a library without the function.
#include <time.h>

#include <cstdio>
#include <map>
#include <sstream>

#include "fake_nvml_state.hpp"

#ifndef FAKE_NVML_VARIANT
#define FAKE_NVML_VARIANT 0
#endif
#define EXPORT extern "C" __attribute__((visibility("default")))

namespace fake_nvml {

bool set_power_samples(Device& d, const std::string& key, const std::string& v) {
  auto& r = d.power_samples;
  if (key == "power_samples") {
    r.entries.clear();
    std::stringstream ss(v);
    for (std::string item; std::getline(ss, item, ',');) {
      unsigned long long ts = 0, value = 0;
      if (std::sscanf(item.c_str(), " %llu:%llu", &ts, &value) != 2) return false;
      r.entries.emplace_back(ts, value);
    }
  } else if (key == "power_samples_type") {
    r.type = std::stoi(v);
  } else if (key == "power_samples_live") {
    r.live_step_us = std::stoull(v);
  } else if (key == "power_samples_lose") {
    r.lose = v == "1";
  } else {
    return false;
  }
  return true;
}

namespace {
std::map<unsigned, unsigned long long>& last_seen() {  // guarded by state().mu
  static auto* m = new std::map<unsigned, unsigned long long>;
  return *m;
}
}  // namespace

}  // namespace fake_nvml

using namespace fake_nvml;

#if FAKE_NVML_VARIANT != 1

namespace {

union nvmlValue_t {
  double dVal;
  unsigned uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  int siVal;
  unsigned short usVal;
};
struct nvmlSample_t {
  unsigned long long timeStamp;
  nvmlValue_t sampleValue;
};
static_assert(sizeof(nvmlSample_t) == 16);

nvmlValue_t value_of(int type, unsigned long long v) {
  nvmlValue_t out{};
  switch (type) {
    case 0:
      out.dVal = static_cast<double>(v);
      break;
    case 1:
      out.uiVal = static_cast<unsigned>(v);
      break;
    case 2:
      out.ulVal = static_cast<unsigned long>(v);
      break;
    case 4:
      out.sllVal = static_cast<long long>(v);
      break;
    case 5:
      out.siVal = static_cast<int>(v);
      break;
    default:
      out.ullVal = v;
  }
  return out;
}

/// power_samples_live: the last 120 multiples of the step up to now (CLOCK_REALTIME, µs).
nvmlReturn_t live(const SampleRing& r, unsigned mw, unsigned long long last_seen, int* value_type,
                  unsigned* count, nvmlSample_t* samples) {
  constexpr unsigned long long kRing = 120;
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  const auto now = static_cast<unsigned long long>(ts.tv_sec) * 1000000ULL +
                   static_cast<unsigned long long>(ts.tv_nsec) / 1000;
  const auto newest = now - now % r.live_step_us;
  auto oldest = newest - (kRing - 1) * r.live_step_us;
  if (last_seen >= oldest) oldest = last_seen - last_seen % r.live_step_us + r.live_step_us;
  if (oldest > newest) return kNotFound;
  const auto n = static_cast<unsigned>((newest - oldest) / r.live_step_us + 1);
  *value_type = 1;
  if (!samples) {
    *count = n;
    return kOk;
  }
  unsigned k = 0;
  for (auto t = oldest; t <= newest && k < *count; t += r.live_step_us, ++k) {
    samples[k].timeStamp = t;
    samples[k].sampleValue.uiVal = mw;
  }
  *count = k;
  return kOk;
}

}  // namespace

EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, unsigned type,
                                         unsigned long long last_seen, int* value_type,
                                         unsigned* count, nvmlSample_t* samples) {
  Call c("nvmlDeviceGetSamples");
  fake_nvml::Device* d = nullptr;
  if (auto rc = c.device(device, &d); rc != kOk) return rc;
  if (!value_type || !count) return kInvalid;
  fake_nvml::last_seen()[c.slot] = last_seen;
  if (type != 0) return kNotSupported;  // only NVML_TOTAL_POWER_SAMPLES here
  const auto& r = d->power_samples;
  if (r.live_step_us > 0) return live(r, d->power_mw, last_seen, value_type, count, samples);
  unsigned n = 0;
  for (const auto& [ts, v] : r.entries) n += ts > last_seen ? 1 : 0;
  if (n == 0) return kNotFound;
  *value_type = r.type;
  if (!samples) {
    *count = n;
    return kOk;
  }
  unsigned k = 0;
  for (const auto& [ts, v] : r.entries) {
    if (r.lose || k >= *count) break;
    if (ts <= last_seen) continue;
    samples[k].timeStamp = ts;
    samples[k].sampleValue = value_of(r.type, v);
    ++k;
  }
  *count = k;
  return kOk;
}

#endif

EXPORT unsigned long long gpustreamFakeNvmlSamplesLastSeen(unsigned slot) {
  auto& st = state();
  std::lock_guard lock(st.mu);
  const auto& m = fake_nvml::last_seen();
  const auto it = m.find(slot);
  return it == m.end() ? ~0ULL : it->second;
}
