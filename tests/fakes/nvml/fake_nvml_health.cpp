// The fake NVML's interconnect and health functions (signatures and nvmlFieldValue_t as in
// nvml.h): PCIe throughput and link, ECC counters, retired pages, remapped rows, NVLink state and
// the NVLink data counters and the power fields (NVML_FI_DEV_POWER_INSTANT/_AVERAGE) through
// nvmlDeviceGetFieldValues, and nvmlDeviceGetArchitecture. Not exported by the legacy variant.
#include <cmath>
#include <string>

#include "fake_nvml_state.hpp"

#ifndef FAKE_NVML_VARIANT
#define FAKE_NVML_VARIANT 0
#endif
#define EXPORT extern "C" __attribute__((visibility("default")))

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
struct nvmlFieldValue_t {
  unsigned fieldId;
  unsigned scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
};
static_assert(sizeof(nvmlFieldValue_t) == 40);

}  // namespace

#define DEVICE_CALL(fn)           \
  Call c(fn);                     \
  fake_nvml::Device* d = nullptr; \
  if (auto rc = c.device(device, &d); rc != kOk) return rc;

EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, unsigned counter,
                                                unsigned* value) {
  DEVICE_CALL("nvmlDeviceGetPcieThroughput");
  if (counter > 1 || !value) return kInvalid;
  *value = counter == 0 ? d->health.pcie_tx_kb : d->health.pcie_rx_kb;
  return kOk;
}

#define LINK_FN(name, field)                                   \
  EXPORT nvmlReturn_t name(nvmlDevice_t device, unsigned* v) { \
    DEVICE_CALL(#name);                                        \
    *v = d->health.field;                                      \
    return kOk;                                                \
  }
LINK_FN(nvmlDeviceGetCurrPcieLinkGeneration, pcie_gen)
LINK_FN(nvmlDeviceGetMaxPcieLinkGeneration, pcie_gen_max)
LINK_FN(nvmlDeviceGetCurrPcieLinkWidth, pcie_width)
LINK_FN(nvmlDeviceGetMaxPcieLinkWidth, pcie_width_max)

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, unsigned type,
                                                unsigned counter, unsigned long long* count) {
  DEVICE_CALL("nvmlDeviceGetTotalEccErrors");
  if (type > 1 || counter > 1 || !count) return kInvalid;
  *count = d->health.ecc[counter * 2 + type];
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, unsigned cause, unsigned* count,
                                              unsigned long long* addresses) {
  DEVICE_CALL("nvmlDeviceGetRetiredPages");
  if (cause > 1 || !count) return kInvalid;
  const unsigned n = cause == 0 ? d->health.retired_single : d->health.retired_double;
  if (*count < n) {
    *count = n;
    return kInsufficient;
  }
  for (unsigned i = 0; i < n && addresses; ++i) addresses[i] = 0x1000ULL * (i + 1);
  *count = n;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, unsigned* pending) {
  DEVICE_CALL("nvmlDeviceGetRetiredPagesPendingStatus");
  *pending = d->health.retired_pending;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned* corrected,
                                              unsigned* uncorrected, unsigned* pending,
                                              unsigned* failure) {
  DEVICE_CALL("nvmlDeviceGetRemappedRows");
  *corrected = d->health.remapped_corrected;
  *uncorrected = d->health.remapped_uncorrected;
  *pending = d->health.remapped_pending;
  *failure = d->health.remapped_failure;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned link, unsigned* active) {
  DEVICE_CALL("nvmlDeviceGetNvLinkState");
  if (d->health.nvlinks == 0) return kNotSupported;
  if (link >= d->health.nvlinks) return kInvalid;
  *active = (d->health.nvlink_active >> link) & 1u;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count,
                                             nvmlFieldValue_t* values) {
  DEVICE_CALL("nvmlDeviceGetFieldValues");
  if (count < 0 || (count > 0 && !values)) return kInvalid;
  for (int i = 0; i < count; ++i) {
    auto& v = values[i];
    v.timestamp = 1000;
    v.latencyUsec = 0;
    ++c.st.counts["field." + std::to_string(v.fieldId)];
    if (v.fieldId == 185 || v.fieldId == 186) {  // NVML_FI_DEV_POWER_AVERAGE / _INSTANT
      const auto& mw = v.fieldId == 186 ? d->power_instant_mw : d->power_average_mw;
      if (!mw) {
        v.nvmlReturn = kNotSupported;
        continue;
      }
      v.nvmlReturn = kOk;
      v.valueType = 1;  // NVML_VALUE_TYPE_UNSIGNED_INT, as the driver answers power fields
      v.value.uiVal =
          v.fieldId == 186 && d->power_curve
              ? static_cast<unsigned>(std::lround(d->power_curve->power_mw(c.st.time_ns)))
              : *mw;
      continue;
    }
    v.valueType = 3;  // NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    const bool link_ok = v.scopeId < d->health.nvlinks;
    if ((v.fieldId != 138 && v.fieldId != 139) || !link_ok) {
      v.nvmlReturn = kNotSupported;
      continue;
    }
    v.nvmlReturn = kOk;
    v.value.ullVal = v.fieldId == 139 ? d->health.nvlink_rx_kib : d->health.nvlink_tx_kib;
  }
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned* arch) {
  DEVICE_CALL("nvmlDeviceGetArchitecture");
  if (!arch) return kInvalid;
  if (!d->architecture) return kNotSupported;
  *arch = *d->architecture;  // nvmlDeviceArchitecture_t is an unsigned int
  return kOk;
}

#endif
