// A fake Level Zero loader: the ze*/zes* C functions the Intel probe calls, answering from a
// scenario. Tests open this library themselves (dlopen of the same path returns the same
// instance the probe gets) and drive it through three extra exports:
//
//   void fake_ze_configure(const char* text)   "key=value" lines, see below; resets everything
//   void fake_ze_set_tick(int tick)            selects the tick-th value of every list
//   int  fake_ze_init_calls(void)              how many times zeInit/zesInit were called
//
// zeDriverGetApiVersion answers 1.17 (ZE_MAKE_VERSION(1, 17)).
//
// Scenario keys (N = device index; lists are comma-separated, the last value repeats):
//   init=0x78000001          result of zeInit/zesInit (default 0)
//   devices=2
//   dN.bus=0000:03:00.0
//   dN.engines=compute,render,media,copy     engine groups (*_ALL)
//   dN.engine_result=0x70010000              what zesEngineGetActivity returns
//   dN.active.<group>=0,500000               active time (us) per tick; timestamp = (tick+1)*1e6
//   dN.energy=1000000,3000000,500000         uJ per tick; timestamp = (tick+1)*1e6 us
//   dN.temp=61.5   dN.freq=2100   dN.mem_total=17179869184   dN.mem_free=8589934592
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "level_zero_api.hpp"

using namespace gpustream::ze;

namespace {

struct Engine {
  std::uint32_t type;
  std::string name;
};
struct Device {
  PciAddress pci{};
  std::vector<Engine> engines;
  Result engine_result = kSuccess;
  std::map<std::string, std::vector<std::uint64_t>> active;
  std::vector<std::uint64_t> energy;
  double temp = -1, freq = -1;
  std::uint64_t mem_total = 0, mem_free = 0;
  int power_domain = 0, temp_sensor = 0, freq_domain = 0, mem_module = 0;  // handle targets
};

std::mutex g_mu;
Result g_init_result = kSuccess;
std::vector<Device> g_devices;
int g_driver = 0;
std::atomic<int> g_tick{0};
std::atomic<int> g_init_calls{0};
std::atomic<bool> g_sysman_enabled{false};

std::uint64_t at(const std::vector<std::uint64_t>& v) {
  if (v.empty()) return 0;
  const auto i = static_cast<std::size_t>(g_tick.load());
  return v[i < v.size() ? i : v.size() - 1];
}

std::uint64_t timestamp_us() { return static_cast<std::uint64_t>(g_tick.load() + 1) * 1000000u; }

std::vector<std::uint64_t> parse_list(const std::string& s) {
  std::vector<std::uint64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::strtoull(item.c_str(), nullptr, 0));
  return out;
}

std::uint32_t group_of(const std::string& name) {
  if (name == "all") return kEngineGroupAll;
  if (name == "compute") return kEngineGroupComputeAll;
  if (name == "media") return kEngineGroupMediaAll;
  if (name == "copy") return kEngineGroupCopyAll;
  if (name == "render") return kEngineGroupRenderAll;
  return 4;  // COMPUTE_SINGLE: a per-engine group the probe must skip
}

Device* device_of(void* h) {
  for (auto& d : g_devices)
    if (&d == h) return &d;
  return nullptr;
}

bool sysman_ready() {
#ifdef FAKE_ZE_LEGACY
  return g_sysman_enabled.load();
#else
  return true;
#endif
}

template <class T>
Result enum_one(std::vector<void*> handles, std::uint32_t* count, void** out) {
  if (!count) return 0x78000004;  // ZE_RESULT_ERROR_INVALID_NULL_POINTER
  if (*count == 0 || !out) {
    *count = static_cast<std::uint32_t>(handles.size());
    return kSuccess;
  }
  const auto n = std::min<std::size_t>(*count, handles.size());
  for (std::size_t i = 0; i < n; ++i) out[i] = handles[i];
  *count = static_cast<std::uint32_t>(n);
  return kSuccess;
}

}  // namespace

extern "C" {

void fake_ze_configure(const char* text) {
  std::lock_guard lock(g_mu);
  g_init_result = kSuccess;
  g_devices.clear();
  g_tick = 0;
  g_init_calls = 0;
  std::stringstream ss(text ? text : "");
  std::string line;
  std::map<std::string, std::string> kv;
  while (std::getline(ss, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  if (kv.count("init"))
    g_init_result = static_cast<Result>(std::strtoul(kv["init"].c_str(), nullptr, 0));
  const int n = kv.count("devices") ? std::atoi(kv["devices"].c_str()) : 0;
  g_devices.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    Device& d = g_devices[static_cast<std::size_t>(i)];
    const std::string p = "d" + std::to_string(i) + ".";
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    std::sscanf(kv[p + "bus"].c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
    d.pci = {dom, bus, dev, fn};
    std::stringstream es(kv[p + "engines"]);
    std::string name;
    while (std::getline(es, name, ','))
      if (!name.empty()) {
        d.engines.push_back({group_of(name), name});
        d.active[name] = parse_list(kv[p + "active." + name]);
      }
    if (kv.count(p + "engine_result"))
      d.engine_result =
          static_cast<Result>(std::strtoul(kv[p + "engine_result"].c_str(), nullptr, 0));
    d.energy = parse_list(kv[p + "energy"]);
    if (kv.count(p + "temp")) d.temp = std::atof(kv[p + "temp"].c_str());
    if (kv.count(p + "freq")) d.freq = std::atof(kv[p + "freq"].c_str());
    if (kv.count(p + "mem_total"))
      d.mem_total = std::strtoull(kv[p + "mem_total"].c_str(), nullptr, 0);
    if (kv.count(p + "mem_free"))
      d.mem_free = std::strtoull(kv[p + "mem_free"].c_str(), nullptr, 0);
  }
}

void fake_ze_set_tick(int tick) { g_tick = tick; }
int fake_ze_init_calls(void) { return g_init_calls.load(); }

Result zeInit(std::uint32_t) {
  ++g_init_calls;
  const char* env = std::getenv("ZES_ENABLE_SYSMAN");
  g_sysman_enabled = env && std::strcmp(env, "1") == 0;
  return g_init_result;
}

Result zeDriverGet(std::uint32_t* count, void** drivers) {
  if (g_init_calls == 0 || g_init_result != kSuccess) return kErrorUninitialized;
  if (*count == 0 || !drivers) {
    *count = g_devices.empty() ? 0 : 1;
    return kSuccess;
  }
  drivers[0] = &g_driver;
  *count = 1;
  return kSuccess;
}

Result zeDriverGetApiVersion(void* driver, std::uint32_t* version) {
  if (driver != &g_driver || !version) return 0x78000005;
  *version = (1u << 16) | 17u;  // ZE_API_VERSION_1_17
  return kSuccess;
}

Result zeDeviceGet(void* driver, std::uint32_t* count, void** devices) {
  if (driver != &g_driver) return 0x78000005;  // ZE_RESULT_ERROR_INVALID_NULL_HANDLE
  std::vector<void*> h;
  for (auto& d : g_devices) h.push_back(&d);
  return enum_one<Device>(h, count, devices);
}

#ifndef FAKE_ZE_LEGACY
Result zesInit(std::uint32_t flags) {
  if (flags != 0) return 0x78000004;
  ++g_init_calls;
  return g_init_result;
}
Result zesDriverGet(std::uint32_t* count, void** drivers) { return zeDriverGet(count, drivers); }
Result zesDeviceGet(void* driver, std::uint32_t* count, void** devices) {
  return zeDeviceGet(driver, count, devices);
}
#endif

Result zesDevicePciGetProperties(void* device, PciProperties* props) {
  Device* d = device_of(device);
  if (!d) return 0x78000005;
  if (!sysman_ready()) return kErrorUninitialized;
  if (props->stype != kStypePciProperties) return 0x78000004;
  props->address = d->pci;
  return kSuccess;
}

Result zesDeviceEnumEngineGroups(void* device, std::uint32_t* count, void** out) {
  Device* d = device_of(device);
  if (!d) return 0x78000005;
  std::vector<void*> h;
  for (auto& e : d->engines) h.push_back(&e);
  return enum_one<Engine>(h, count, out);
}

Result zesEngineGetProperties(void* engine, EngineProperties* props) {
  for (auto& d : g_devices)
    for (auto& e : d.engines)
      if (&e == engine) {
        props->type = e.type;
        props->on_subdevice = 0;
        props->subdevice_id = 0;
        return kSuccess;
      }
  return 0x78000005;
}

Result zesEngineGetActivity(void* engine, EngineStats* stats) {
  for (auto& d : g_devices)
    for (auto& e : d.engines)
      if (&e == engine) {
        if (d.engine_result != kSuccess) return d.engine_result;
        stats->active_time = at(d.active[e.name]);
        stats->timestamp = timestamp_us();
        return kSuccess;
      }
  return 0x78000005;
}

Result zesDeviceGetCardPowerDomain(void* device, void** power) {
  Device* d = device_of(device);
  if (!d || d->energy.empty()) return kErrorUnsupportedFeature;
  *power = &d->power_domain;
  return kSuccess;
}

Result zesDeviceEnumPowerDomains(void* device, std::uint32_t* count, void** out) {
  Device* d = device_of(device);
  if (!d) return 0x78000005;
  std::vector<void*> h;
  if (!d->energy.empty()) h.push_back(&d->power_domain);
  return enum_one<int>(h, count, out);
}

Result zesPowerGetEnergyCounter(void* power, EnergyCounter* e) {
  for (auto& d : g_devices)
    if (&d.power_domain == power) {
      e->energy = at(d.energy);
      e->timestamp = timestamp_us();
      return kSuccess;
    }
  return 0x78000005;
}

Result zesDeviceEnumTemperatureSensors(void* device, std::uint32_t* count, void** out) {
  Device* d = device_of(device);
  if (!d) return 0x78000005;
  std::vector<void*> h;
  if (d->temp >= 0) h.push_back(&d->temp_sensor);
  return enum_one<int>(h, count, out);
}

Result zesTemperatureGetProperties(void*, TempProperties* p) {
  p->type = kTempSensorsGpu;
  return kSuccess;
}

Result zesTemperatureGetState(void* sensor, double* c) {
  for (auto& d : g_devices)
    if (&d.temp_sensor == sensor) {
      *c = d.temp;
      return kSuccess;
    }
  return 0x78000005;
}

Result zesDeviceEnumFrequencyDomains(void* device, std::uint32_t* count, void** out) {
  Device* d = device_of(device);
  if (!d) return 0x78000005;
  std::vector<void*> h;
  if (d->freq >= 0) h.push_back(&d->freq_domain);
  return enum_one<int>(h, count, out);
}

Result zesFrequencyGetProperties(void*, FreqProperties* p) {
  p->type = kFreqDomainGpu;
  return kSuccess;
}

Result zesFrequencyGetState(void* freq, FreqState* s) {
  if (s->stype != kStypeFreqState) return 0x78000004;
  for (auto& d : g_devices)
    if (&d.freq_domain == freq) {
      s->actual = d.freq;
      s->request = d.freq;
      return kSuccess;
    }
  return 0x78000005;
}

Result zesDeviceEnumMemoryModules(void* device, std::uint32_t* count, void** out) {
  Device* d = device_of(device);
  if (!d) return 0x78000005;
  std::vector<void*> h;
  if (d->mem_total > 0) h.push_back(&d->mem_module);
  return enum_one<int>(h, count, out);
}

Result zesMemoryGetProperties(void* mem, MemProperties* p) {
  for (auto& d : g_devices)
    if (&d.mem_module == mem) {
      p->location = kMemLocDevice;
      p->physical_size = d.mem_total;
      return kSuccess;
    }
  return 0x78000005;
}

Result zesMemoryGetState(void* mem, MemState* s) {
  if (s->stype != kStypeMemState) return 0x78000004;
  for (auto& d : g_devices)
    if (&d.mem_module == mem) {
      s->free = d.mem_free;
      s->size = d.mem_total;
      return kSuccess;
    }
  return 0x78000005;
}

}  // extern "C"
