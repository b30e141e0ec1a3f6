// The fake NVML's MIG functions (NVML R450+ signatures, written from nvml.h's documentation):
// MIG mode, MIG device handles by index, their GPU/compute instance ids, and the MIG-handle
// forms of nvmlDeviceGetName/UUID/MemoryInfo used by fake_nvml.cpp. Not exported by the legacy
// variant (1) nor by the "no MIG" variant (3): an older driver, whose dlsym finds none of them.
#include <cstdio>

#include "fake_nvml_state.hpp"

#ifndef FAKE_NVML_VARIANT
#define FAKE_NVML_VARIANT 0
#endif
#define EXPORT extern "C" __attribute__((visibility("default")))

using namespace fake_nvml;

namespace fake_nvml {

nvmlReturn_t mig_name(nvmlDevice_t h, char* name, unsigned length) {
  Call c("nvmlDeviceGetName");
  Device* d = nullptr;
  MigInstance* m = nullptr;
  if (auto rc = c.mig(h, &d, &m); rc != kOk) return rc;
  return copy_string(d->name + " MIG " + m->profile, name, length);
}

nvmlReturn_t mig_uuid(nvmlDevice_t h, char* uuid, unsigned length) {
  Call c("nvmlDeviceGetUUID");
  Device* d = nullptr;
  MigInstance* m = nullptr;
  if (auto rc = c.mig(h, &d, &m); rc != kOk) return rc;
  return copy_string(m->uuid, uuid, length);
}

nvmlReturn_t mig_memory(const char* fn, nvmlDevice_t h, unsigned long long* total,
                        unsigned long long* used) {
  Call c(fn);
  Device* d = nullptr;
  MigInstance* m = nullptr;
  if (auto rc = c.mig(h, &d, &m); rc != kOk) return rc;
  *total = m->memory_total;
  *used = m->memory_used;
  return kOk;
}

}  // namespace fake_nvml

#if FAKE_NVML_VARIANT != 1 && FAKE_NVML_VARIANT != 3

#define DEVICE_CALL(fn)           \
  Call c(fn);                     \
  fake_nvml::Device* d = nullptr; \
  if (auto rc = c.device(device, &d); rc != kOk) return rc;

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned* current,
                                         unsigned* pending) {
  DEVICE_CALL("nvmlDeviceGetMigMode");
  if (d->mig_mode < 0) return kNotSupported;
  if (!current || !pending) return kInvalid;
  *current = static_cast<unsigned>(d->mig_mode);
  *pending = static_cast<unsigned>(d->mig_pending < 0 ? d->mig_mode : d->mig_pending);
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned* count) {
  DEVICE_CALL("nvmlDeviceGetMaxMigDeviceCount");
  if (d->mig_mode < 0) return kNotSupported;
  *count = d->max_mig;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned index,
                                                        nvmlDevice_t* mig) {
  DEVICE_CALL("nvmlDeviceGetMigDeviceHandleByIndex");
  if (d->mig_mode < 0) return kNotSupported;
  if (d->mig_mode != 1 || index >= d->max_mig) return kInvalid;
  if (index >= d->mig.size() || !d->mig[index]) return kNotFound;
  *mig = mig_handle_of(c.st, c.slot, index);
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned* is_mig) {
  Call c("nvmlDeviceIsMigDeviceHandle");
  if (auto rc = c.begin(); rc != kOk) return rc;
  *is_mig = is_mig_handle(device) ? 1 : 0;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig,
                                                                 nvmlDevice_t* device) {
  Call c("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  Device* d = nullptr;
  MigInstance* m = nullptr;
  if (auto rc = c.mig(mig, &d, &m); rc != kOk) return rc;
  *device = handle_of(c.st, c.slot);
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned* id) {
  Call c("nvmlDeviceGetGpuInstanceId");
  Device* d = nullptr;
  MigInstance* m = nullptr;
  if (auto rc = c.mig(device, &d, &m); rc != kOk) return rc;
  *id = m->gi;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned* id) {
  Call c("nvmlDeviceGetComputeInstanceId");
  Device* d = nullptr;
  MigInstance* m = nullptr;
  if (auto rc = c.mig(device, &d, &m); rc != kOk) return rc;
  *id = m->ci;
  return kOk;
}

#endif
