// A fake libnvidia-ml.so.1: the NVML C functions the NVIDIA probe uses, with NVML's signatures
// and struct layouts (written here independently of the probe's own declarations), driven by a
// scenario file (fake_nvml_scenario.hpp). It counts every call, init and shutdown, and flags
// misuse: a call while not initialized, a handle from an earlier session (handles are tagged
// with the session that issued them, so a probe that does not re-resolve them after a re-init
// is caught), a shutdown while not initialized.
//
// Built in five variants (FAKE_NVML_VARIANT): 0 full (NVML 12.x names), 1 legacy (only the
// unversioned v1 names; no energy, power limit, clock reasons, process utilization,
// memory v2, MIG, interconnect/health, GPM), 2 without nvmlDeviceGetHandleByUUID (a required
// function), 3 full without the MIG functions (fake_nvml_mig.cpp; fake_nvml_health.cpp), 4 full
// without nvmlGpmMigSampleGet (fake_nvml_gpm.cpp).
//
// Test controls (not NVML, in fake_nvml_state.cpp): gpustreamFakeNvmlCount(what),
// gpustreamFakeNvmlReset(), gpustreamFakeNvmlLastSeen(device), gpustreamFakeNvmlBlock(on),
// gpustreamFakeNvmlReload(), gpustreamFakeNvmlSetTimeNs(ns) (the time of power_curve).
#include <cmath>
#include <cstdio>

#include "fake_nvml_state.hpp"

#ifndef FAKE_NVML_VARIANT
#define FAKE_NVML_VARIANT 0
#endif
#define FULL (FAKE_NVML_VARIANT != 1)
#define EXPORT extern "C" __attribute__((visibility("default")))

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlMemory_v2_t {
  unsigned version;
  unsigned long long total, reserved, free, used;
};
struct nvmlUtilization_t {
  unsigned gpu, memory;
};
struct nvmlTemperature_v1_t {
  unsigned version;
  unsigned sensorType;
  int temperature;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlProcessInfo_v1_t {
  unsigned pid;
  unsigned long long usedGpuMemory;
};
struct nvmlProcessInfo_v3_t {  // v2 fields + usedGpuCcProtectedMemory, as R535 writes
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId, computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
};
struct nvmlProcessUtilizationSample_t {
  unsigned pid;
  unsigned long long timeStamp;
  unsigned smUtil, memUtil, encUtil, decUtil;
};
static_assert(sizeof(nvmlMemory_v2_t) == 40 && sizeof(nvmlPciInfo_t) == 68);
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16 && sizeof(nvmlProcessInfo_v3_t) == 32);

using namespace fake_nvml;

namespace {

nvmlReturn_t do_init(const char* fn) {
  Call c(fn);
  std::string error;
  auto scenario = fake_nvml::load_scenario(&error);
  if (!error.empty()) {
    std::fprintf(stderr, "fake NVML: scenario: %s\n", error.c_str());
    return 999;
  }
  if (scenario.init_fail) return scenario.init_fail;
  if (c.st.initialized) ++c.st.counts["violations"];  // we never nest: LibrarySession counts
  c.st.scenario = std::move(scenario);
  c.st.initialized = true;
  ++c.st.generation;
  c.st.device_calls.clear();
  ++c.st.counts["init"];
  return kOk;
}

nvmlReturn_t processes(const char* fn, nvmlDevice_t h, unsigned* count, void* infos,
                       unsigned stride /* 0: the scenario's */, bool graphics) {
  Call c(fn);
  fake_nvml::Device* d = nullptr;
  const std::vector<Process>* from = nullptr;
  static const std::vector<Process> kNone;
  if (is_mig_handle(h)) {  // the processes of one MIG instance (compute only)
    fake_nvml::MigInstance* m = nullptr;
    if (auto rc = c.mig(h, &d, &m); rc != kOk) return rc;
    from = graphics ? &kNone : &m->compute;
  } else {
    if (auto rc = c.device(h, &d); rc != kOk) return rc;
    from = graphics ? &d->graphics : &d->compute;
  }
  if (!count) return kInvalid;
  if (stride == 0) stride = c.st.scenario.process_stride;
  if (stride != 16 && stride != 24) stride = 32;
  const auto& list = *from;
  const auto n = static_cast<unsigned>(list.size());
  if (*count < n || (n > 0 && !infos)) {
    *count = n;
    return kInsufficient;
  }
  auto* out = static_cast<unsigned char*>(infos);
  for (unsigned i = 0; i < n; ++i) {
    nvmlProcessInfo_v3_t e{};
    e.pid = list[i].pid;
    e.usedGpuMemory = list[i].memory;
    e.gpuInstanceId = e.computeInstanceId = 0xFFFFFFFFu;
    e.usedGpuCcProtectedMemory = 0;
    std::memcpy(out + std::size_t{i} * stride, &e, stride);  // first `stride` bytes of it
  }
  *count = n;
  return kOk;
}

}  // namespace

// ---- NVML ----------------------------------------------------------------------------------

#if FULL
EXPORT nvmlReturn_t nvmlInit_v2(void) { return do_init("nvmlInit_v2"); }
#endif
EXPORT nvmlReturn_t nvmlInit(void) { return do_init("nvmlInit"); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
  Call c("nvmlShutdown");
  if (!c.st.initialized) {
    ++c.st.counts["violations"];
    return kUninitialized;
  }
  c.st.initialized = false;
  ++c.st.counts["shutdown"];
  return kOk;
}

EXPORT const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case 0:
      return "Success";
    case 1:
      return "Uninitialized";
    case 2:
      return "Invalid Argument";
    case 3:
      return "Not Supported";
    case 4:
      return "Insufficient Permissions";
    case 6:
      return "Not Found";
    case 7:
      return "Insufficient Size";
    case 9:
      return "Driver Not Loaded";
    case 15:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned length) {
  Call c("nvmlSystemGetDriverVersion");
  if (auto rc = c.begin(); rc != kOk) return rc;
  return copy_string(c.st.scenario.driver_version, version, length);
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned length) {
  Call c("nvmlSystemGetNVMLVersion");
  if (auto rc = c.begin(); rc != kOk) return rc;
  return copy_string("12.535.183.01-fake", version, length);
}

static nvmlReturn_t count_impl(const char* fn, unsigned* count) {
  Call c(fn);
  if (auto rc = c.begin(); rc != kOk) return rc;
  *count = static_cast<unsigned>(c.st.scenario.devices.size());
  return kOk;
}
#if FULL
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  return count_impl("nvmlDeviceGetCount_v2", count);
}
#endif
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned* count) {
  return count_impl("nvmlDeviceGetCount", count);
}

static nvmlReturn_t by_index(const char* fn, unsigned index, nvmlDevice_t* device) {
  Call c(fn);
  if (auto rc = c.begin(); rc != kOk) return rc;
  if (index >= c.st.scenario.devices.size()) return kInvalid;
  const unsigned slot = slot_of_index(c.st, index);
  fake_nvml::Device* d = nullptr;
  if (auto rc = c.on_slot(slot, &d); rc != kOk) return rc;
  *device = handle_of(c.st, slot);
  return kOk;
}
#if FULL
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device) {
  return by_index("nvmlDeviceGetHandleByIndex_v2", index, device);
}
#endif
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned index, nvmlDevice_t* device) {
  return by_index("nvmlDeviceGetHandleByIndex", index, device);
}

#if FAKE_NVML_VARIANT != 2
EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  Call c("nvmlDeviceGetHandleByUUID");
  if (auto rc = c.begin(); rc != kOk) return rc;
  for (unsigned slot = 0; slot < c.st.scenario.devices.size(); ++slot) {
    if (c.st.scenario.devices[slot].uuid != uuid) continue;
    fake_nvml::Device* d = nullptr;
    if (auto rc = c.on_slot(slot, &d); rc != kOk) return rc;
    *device = handle_of(c.st, slot);
    return kOk;
  }
  return kNotFound;
}
#endif

#define DEVICE_CALL(fn)           \
  Call c(fn);                     \
  fake_nvml::Device* d = nullptr; \
  if (auto rc = c.device(device, &d); rc != kOk) return rc;

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned length) {
  if (is_mig_handle(device)) return mig_name(device, name, length);
  DEVICE_CALL("nvmlDeviceGetName");
  return copy_string(d->name, name, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned length) {
  if (is_mig_handle(device)) return mig_uuid(device, uuid, length);
  DEVICE_CALL("nvmlDeviceGetUUID");
  return copy_string(d->uuid, uuid, length);
}

static void fill_pci(const fake_nvml::Device& d, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busId, sizeof pci->busId, "%s", d.pci.c_str());
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", d.pci.c_str() + 4);
  pci->pciDeviceId = d.pci_device_id;
}
#if FULL
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  DEVICE_CALL("nvmlDeviceGetPciInfo_v3");
  fill_pci(*d, pci);
  return kOk;
}
#else
// v1 wrote a 16-character bus id ("0000:17:00.0") at offset 0.
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  DEVICE_CALL("nvmlDeviceGetPciInfo");
  fill_pci(*d, pci);
  return kOk;
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (is_mig_handle(device)) {
    const auto rc = mig_memory("nvmlDeviceGetMemoryInfo", device, &memory->total, &memory->used);
    memory->free = memory->total - memory->used;
    return rc;
  }
  DEVICE_CALL("nvmlDeviceGetMemoryInfo");
  memory->total = d->memory_total;
  memory->used = d->memory_used + d->memory_reserved;  // v1 counts the reservation as used
  memory->free = d->memory_total - memory->used;
  return kOk;
}

#if FULL
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  if (is_mig_handle(device)) {
    if (memory->version != (sizeof(nvmlMemory_v2_t) | (2u << 24))) return 25;
    const auto rc = mig_memory("nvmlDeviceGetMemoryInfo_v2", device, &memory->total, &memory->used);
    memory->reserved = 0;
    memory->free = memory->total - memory->used;
    return rc;
  }
  DEVICE_CALL("nvmlDeviceGetMemoryInfo_v2");
  if (memory->version != (sizeof(nvmlMemory_v2_t) | (2u << 24))) return 25;  // version mismatch
  memory->total = d->memory_total;
  memory->reserved = d->memory_reserved;
  memory->used = d->memory_used;
  memory->free = d->memory_total - d->memory_used - d->memory_reserved;
  return kOk;
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* u) {
  DEVICE_CALL("nvmlDeviceGetUtilizationRates");
  u->gpu = d->util_gpu;
  u->memory = d->util_memory;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, unsigned sensor, unsigned* t) {
  DEVICE_CALL("nvmlDeviceGetTemperature");
  if (sensor != 0) return kInvalid;
  *t = d->temperature;
  return kOk;
}

#if FULL
EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_v1_t* t) {
  DEVICE_CALL("nvmlDeviceGetTemperatureV");
  if (t->version != (sizeof(nvmlTemperature_v1_t) | (1u << 24)) || t->sensorType != 0)
    return kInvalid;
  t->temperature = static_cast<int>(d->temperature);
  return kOk;
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned* mw) {
  DEVICE_CALL("nvmlDeviceGetPowerUsage");
  *mw = d->power_curve ? static_cast<unsigned>(std::lround(d->power_curve->power_mw(c.st.time_ns)))
                       : d->power_mw;
  return kOk;
}

#if FULL
EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned* mw) {
  DEVICE_CALL("nvmlDeviceGetEnforcedPowerLimit");
  *mw = d->power_limit_mw;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                        unsigned long long* mj) {
  DEVICE_CALL("nvmlDeviceGetTotalEnergyConsumption");
  *mj = d->energy_mj;
  if (d->power_curve) *mj += std::llround(d->power_curve->energy_mj(c.st.time_ns));
  return kOk;
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, unsigned type, unsigned* mhz) {
  DEVICE_CALL("nvmlDeviceGetClockInfo");
  switch (type) {
    case 0:
      *mhz = d->clock_graphics;
      return kOk;
    case 1:
      *mhz = d->clock_sm;
      return kOk;
    case 2:
      *mhz = d->clock_memory;
      return kOk;
    default:
      return kInvalid;
  }
}

EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned* speed) {
  DEVICE_CALL("nvmlDeviceGetFanSpeed");
  *speed = d->fan;
  return kOk;
}

#if FULL
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                           unsigned long long* reasons) {
  DEVICE_CALL("nvmlDeviceGetCurrentClocksEventReasons");
  *reasons = d->clock_reasons;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                              unsigned long long* reasons) {
  DEVICE_CALL("nvmlDeviceGetCurrentClocksThrottleReasons");
  *reasons = d->clock_reasons;
  return kOk;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned* count,
                                                            void* infos) {
  return processes("nvmlDeviceGetComputeRunningProcesses_v3", device, count, infos, 0, false);
}
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned* count,
                                                             void* infos) {
  return processes("nvmlDeviceGetGraphicsRunningProcesses_v3", device, count, infos, 0, true);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned* count,
                                                            void* infos) {
  return processes("nvmlDeviceGetComputeRunningProcesses_v2", device, count, infos, 24, false);
}
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned* count,
                                                             void* infos) {
  return processes("nvmlDeviceGetGraphicsRunningProcesses_v2", device, count, infos, 24, true);
}

EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                    nvmlProcessUtilizationSample_t* samples,
                                                    unsigned* count, unsigned long long last_seen) {
  DEVICE_CALL("nvmlDeviceGetProcessUtilization");
  if (!count) return kInvalid;
  const auto n = static_cast<unsigned>(d->process_util.size());
  if (!samples || *count < n) {
    *count = n;
    return kInsufficient;
  }
  c.st.last_seen[c.slot] = last_seen;
  // One sample per process per call, 100 ms apart on NVML's microsecond clock.
  const unsigned long long now = 1000000ULL + 100000ULL * ++c.st.util_tick[c.slot];
  if (now <= last_seen || n == 0) {
    *count = 0;
    return kNotFound;
  }
  for (unsigned i = 0; i < n; ++i)
    samples[i] = {d->process_util[i].pid, now, d->process_util[i].sm, d->process_util[i].mem, 0, 0};
  *count = n;
  return kOk;
}
#endif

// The v1 process functions: 16-byte entries.
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned* count,
                                                         void* infos) {
  return processes("nvmlDeviceGetComputeRunningProcesses", device, count, infos, 16, false);
}
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned* count,
                                                          void* infos) {
  return processes("nvmlDeviceGetGraphicsRunningProcesses", device, count, infos, 16, true);
}
