// The scenario of the fake libnvidia-ml.so.1: what its GPUs report and how it misbehaves.
//
// Read from the file named by GPUSTREAM_FAKE_NVML_SCENARIO at every nvmlInit (and on
// gpustreamFakeNvmlReload()), one `key=value` per line, `#` comments:
//
//   devices=N                  number of GPUs (default 1)
//   process_stride=24|32       entry size the _v3 process functions write (default 32, as R535+
//                              drivers do; _v2 always writes 24, v1 16)
//   processes_per_device=N     generated compute processes: pid 100000+1000*dev+k, (k+1) MiB,
//                              SM utilization k % 100
//   call_delay_us=N            sleep in every call;   call_cost_ns=N   burn N ns of CPU per call
//   init_fail=CODE             nvmlInit answers CODE
//   rotate_on_init=1           the index order rotates by one at every init (UUIDs stay)
//   driver_version=TEXT        what nvmlSystemGetDriverVersion answers (default 535.183.01-fake)
//   event_trigger=PATH         an out-of-process way to fire events (fake_nvml_events.cpp):
//                              when the file PATH exists, the next nvmlEventSetWait_v2 reads
//                              it (device=SLOT, type=xid|ecc_single|ecc_double|pstate|clock|
//                              power_source|MASK, data=N, count=N; one per line), removes it
//                              and delivers those events once. Write it elsewhere and rename it
//                              to PATH, so that it is never read half-written.
//   fail.<function>=CODE       that function answers CODE on every device
//   device.<i>.mig_mode=0|1    MIG mode (unset: the GPU has no MIG); mig_pending=0|1, max_mig=N
//   device.<i>.mig.<k>.<key>   MIG instance at MIG device index k: gi, ci, profile, uuid,
//                              memory_total, memory_used, compute=pid:bytes,...,
//                              gpm.<metric id>=PERCENT (its GPU instance's GPM counters, read by
//                              nvmlGpmMigSampleGet; the first instance of a gi sets them)
//   device.<i>.<health key>    pcie_rx_kb, pcie_tx_kb, pcie_gen, pcie_gen_max, pcie_width,
//                              pcie_width_max, ecc_corrected_volatile, ecc_uncorrected_volatile,
//                              ecc_corrected_aggregate, ecc_uncorrected_aggregate,
//                              retired_single, retired_double, retired_pending,
//                              remapped_corrected, remapped_uncorrected, remapped_pending,
//                              remapped_failure, nvlinks, nvlink_active (mask), nvlink_rx_kib,
//                              nvlink_tx_kib (cumulative KiB per active link)
//   device.<i>.<key>=value     uuid, name, pci, memory_total, memory_used, memory_reserved,
//                              util_gpu, util_memory, temperature, power_mw, power_limit_mw,
//                              energy_mj, clock_graphics, clock_sm, clock_memory, fan,
//                              clock_reasons, compute=pid:bytes|na,..., graphics=...,
//                              process_util=pid:sm:mem,..., fail.<function>=CODE,
//                              lost_after=N (after N calls on it in one session: GPU_IS_LOST),
//                              power_curve=BASE_MW:AMPLITUDE_MW:PERIOD_MS (below),
//                              supported_events=MASK (nvmlEventType bits; default 0x9F: ECC
//                              single/double, PState, Xid, clock, power source),
//                              architecture=N (nvmlDeviceArchitecture_t: 5 Volta, 7 Ampere,
//                              8 Ada, 9 Hopper...; unset: nvmlDeviceGetArchitecture answers
//                              NOT_SUPPORTED), pci_device_id=0xDDDD10DE (nvmlPciInfo_t's
//                              pciDeviceId; default 0),
//                              power_instant_mw=N, power_average_mw=N (the fields
//                              NVML_FI_DEV_POWER_INSTANT 186 / NVML_FI_DEV_POWER_AVERAGE 185 of
//                              nvmlDeviceGetFieldValues; unset: that field answers NOT_SUPPORTED;
//                              with a power_curve the instantaneous field follows P(t))
//   real_clock=1               the fake's time (power curves, GPM counters) follows the steady
//                              clock at every call instead of gpustreamFakeNvmlSetTimeNs: for a
//                              whole `gpustream serve` whose time no test drives
//   gpm_version=N              the nvmlGpmSupport_t version the library accepts (default 1, as
//                              nvml.h; others: ARGUMENT_VERSION_MISMATCH); gpm_metrics_version=N
//                              the same for nvmlGpmMetricsGet_t
//   device.<i>.<GPM key>       gpm=0|1 (nvmlGpmQueryDeviceSupport's isSupportedDevice; unset:
//                              1 from architecture 9, Hopper, on), gpm.<metric id>=PERCENT (how
//                              busy the counter of that nvmlGpmMetricId_t runs from the fake's
//                              time of the last nvmlGpmSampleGet on; default 0; nan, -5, 150
//                              pass through), gpm_fail.<metric id>=CODE (that metric's own
//                              nvmlReturn in nvmlGpmMetricsGet) — fake_nvml_gpm.cpp
//
//   device.<i>.power_samples=TS:MW,...   the driver's power sample ring (nvmlDeviceGetSamples,
//                              NVML_TOTAL_POWER_SAMPLES; fake_nvml_samples.cpp): entries of
//                              time stamp (µs, the test's choice of host clock) and value, in
//                              the order the driver answers them; the call returns those newer
//                              than lastSeenTimeStamp (none: NVML_ERROR_NOT_FOUND)
//   device.<i>.power_samples_type=N     the nvmlValueType_t it answers (default 1, unsigned int)
//   device.<i>.power_samples_lose=1     the call that reads announces the entries, then returns
//                              none (count 0)
//   device.<i>.power_samples_live=STEP  a ring as a driver keeps it: at every call, the 120
//                              multiples of STEP µs of CLOCK_REALTIME up to now, of power_mw
//                              (the benchmark's ring; power_samples is then ignored)
//
// A known power curve (power_curve): the device draws P(t) = BASE + AMPLITUDE * sin(2π t /
// PERIOD) mW, t the fake's own time, set by the test with gpustreamFakeNvmlSetTimeNs(ns) (0
// until then); nvmlDeviceGetPowerUsage answers P(t) and nvmlDeviceGetTotalEnergyConsumption
// answers energy_mj + E(t), E(t) = ∫₀ᵗ P exactly (mW·s = mJ, rounded to 1 mJ), so the energy
// between two instants is known (FakePowerCurve::energy_mj in fake_nvml_scenario.hpp).
//
// CODE: a name such as NOT_SUPPORTED, NO_PERMISSION, GPU_IS_LOST, UNKNOWN (with or without the
// NVML_ERROR_ prefix), or a number.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fake_nvml {

struct Process {
  unsigned pid = 0;
  unsigned long long memory = 0;  // ~0ULL: NVML_VALUE_NOT_AVAILABLE
};

struct ProcessUtil {
  unsigned pid = 0;
  unsigned sm = 0;
  unsigned mem = 0;
};

struct PowerCurve {
  double base_mw = 0, amplitude_mw = 0, period_ms = 1000;
  double power_mw(long long t_ns) const;   // P(t)
  double energy_mj(long long t_ns) const;  // ∫₀ᵗ P, mJ
};

/// A MIG instance of a device (fake_nvml_mig.cpp).
struct MigInstance {
  std::string uuid;                 // default "MIG-<n>-fake-..." from the device and slot
  std::string profile = "1g.10gb";  // nvmlDeviceGetName answers "<device name> MIG <profile>"
  unsigned gi = 0, ci = 0;
  unsigned long long memory_total = 10ULL << 30, memory_used = 0;
  std::vector<Process> compute;
  std::map<unsigned, double>
      gpm_rate;  // its GPU instance's GPM counters, percent (mig.<k>.gpm.<id>)
};

/// Interconnect and health counters of a device (fake_nvml_health.cpp).
struct Health {
  unsigned pcie_rx_kb = 2048, pcie_tx_kb = 1024;  // KB/s
  unsigned pcie_gen = 4, pcie_gen_max = 4, pcie_width = 16, pcie_width_max = 16;
  // corrected volatile, uncorrected volatile, corrected aggregate, uncorrected aggregate
  unsigned long long ecc[4] = {0, 0, 0, 0};
  unsigned retired_single = 0, retired_double = 0, retired_pending = 0;
  unsigned remapped_corrected = 0, remapped_uncorrected = 0, remapped_pending = 0,
           remapped_failure = 0;
  unsigned nvlinks = 0;          // links the device has (0: no NVLink, NOT_SUPPORTED)
  unsigned nvlink_active = ~0u;  // bit mask of the active ones
  unsigned long long nvlink_rx_kib = 0, nvlink_tx_kib = 0;  // cumulative, per active link
};

/// The driver's power sample ring of a device (fake_nvml_samples.cpp).
struct SampleRing {
  std::vector<std::pair<unsigned long long, unsigned long long>> entries;  // µs, value
  int type = 1;                         // nvmlValueType_t: NVML_VALUE_TYPE_UNSIGNED_INT
  bool lose = false;                    // the reading call returns no entry
  unsigned long long live_step_us = 0;  // power_samples_live
};

struct Device {
  std::string uuid, name, pci;
  unsigned long long memory_total = 0, memory_used = 0, memory_reserved = 0;
  unsigned util_gpu = 0, util_memory = 0, temperature = 0, power_mw = 0, power_limit_mw = 0;
  unsigned long long energy_mj = 0, clock_reasons = 0;
  unsigned long long supported_events = 0x9F;  // nvmlDeviceGetSupportedEventTypes (events)
  unsigned clock_graphics = 0, clock_sm = 0, clock_memory = 0, fan = 0;
  std::vector<Process> compute, graphics;
  std::vector<ProcessUtil> process_util;
  std::map<std::string, int> fail;  // function -> return code
  std::optional<long> lost_after;
  std::optional<PowerCurve> power_curve;
  std::optional<unsigned> architecture, power_instant_mw, power_average_mw;
  unsigned pci_device_id = 0;
  // MIG: -1 the GPU has no MIG (NOT_SUPPORTED), 0 off, 1 on; pending -1: as current.
  int mig_mode = -1, mig_pending = -1;
  unsigned max_mig = 7;
  std::vector<std::optional<MigInstance>> mig;  // by MIG device index; empty slot: NOT_FOUND
  Health health;
  // GPM (fake_nvml_gpm.cpp): support (unset: architecture >= 9), counter rate and failure per
  // nvmlGpmMetricId_t.
  std::optional<bool> gpm;
  std::map<unsigned, double> gpm_rate;  // percent
  std::map<unsigned, int> gpm_fail;
  SampleRing power_samples;
};

/// device.<i>.mig.* and device.<i>.mig_mode / mig_pending / max_mig keys (false: not one).
bool set_mig(Device& d, unsigned device_index, const std::string& key, const std::string& v);
/// device.<i>.power_samples* keys (false: not one; fake_nvml_samples.cpp).
bool set_power_samples(Device& d, const std::string& key, const std::string& v);
/// device.<i>.<health key> (false: not one).
bool set_health(Device& d, const std::string& key, const std::string& v);
/// device.<i>.gpm, gpm.<id>, gpm_fail.<id> (fake_nvml_scenario_gpm.cpp; false: not one).
bool set_gpm(Device& d, const std::string& key, const std::string& v);
/// CODE of a `fail.` key as a number (NOT_SUPPORTED, NVML_ERROR_UNKNOWN, 25, ...).
int code_of_name(const std::string& v);

struct Scenario {
  std::vector<Device> devices;
  unsigned process_stride = 32;
  long call_delay_us = 0;
  long call_cost_ns = 0;
  int init_fail = 0;
  bool rotate_on_init = false;
  std::string driver_version = "535.183.01-fake";
  std::string event_trigger;  // event_trigger=PATH (empty: none)
  std::map<std::string, int> fail;
  unsigned gpm_version = 1, gpm_metrics_version = 1;  // gpm_version=N, gpm_metrics_version=N
  bool real_clock = false;                            // real_clock=1
};

/// Parses a scenario document; unknown keys and bad values are reported in `error`.
Scenario parse_scenario(const std::string& text, std::string* error);
/// The scenario of GPUSTREAM_FAKE_NVML_SCENARIO (one default GPU when unset or unreadable).
Scenario load_scenario(std::string* error);

}  // namespace fake_nvml
