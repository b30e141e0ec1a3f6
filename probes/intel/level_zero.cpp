#include "level_zero.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "gpustream/probes/pci.hpp"
#include "intel_sysfs.hpp"
#include "level_zero_api.hpp"

namespace gpustream {

struct LevelZeroFunctions {
  ze::InitFn* zes_init = nullptr;
  ze::InitFn* ze_init = nullptr;
  ze::DriverGetFn* driver_get = nullptr;
  ze::DeviceGetFn* device_get = nullptr;
  ze::PciGetPropertiesFn* pci_properties = nullptr;
  ze::EnumFn* enum_engines = nullptr;
  ze::EngineGetPropertiesFn* engine_properties = nullptr;
  ze::EngineGetActivityFn* engine_activity = nullptr;
  ze::GetCardPowerDomainFn* card_power = nullptr;
  ze::EnumFn* enum_power = nullptr;
  ze::PowerGetEnergyCounterFn* energy_counter = nullptr;
  ze::EnumFn* enum_temps = nullptr;
  ze::TemperatureGetPropertiesFn* temp_properties = nullptr;
  ze::TemperatureGetStateFn* temp_state = nullptr;
  ze::EnumFn* enum_freqs = nullptr;
  ze::FrequencyGetPropertiesFn* freq_properties = nullptr;
  ze::FrequencyGetStateFn* freq_state = nullptr;
  ze::EnumFn* enum_mems = nullptr;
  ze::MemoryGetPropertiesFn* mem_properties = nullptr;
  ze::MemoryGetStateFn* mem_state = nullptr;
};

namespace {

std::string hex(ze::Result r) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", r);
  return buf;
}

std::string result_name(ze::Result r) {
  switch (r) {
    case ze::kErrorUninitialized:
      return "ZE_RESULT_ERROR_UNINITIALIZED (" + hex(r) + ")";
    case ze::kErrorInsufficientPermissions:
      return "ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS (" + hex(r) + ")";
    case ze::kErrorUnsupportedFeature:
      return "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE (" + hex(r) + ")";
    default:
      return hex(r);
  }
}

/// The two-call enumeration pattern; empty on any failure.
std::vector<void*> enumerate_handles(ze::EnumFn* f, void* device) {
  if (!f) return {};
  std::uint32_t count = 0;
  if (f(device, &count, nullptr) != ze::kSuccess || count == 0) return {};
  std::vector<void*> out(count);
  if (f(device, &count, out.data()) != ze::kSuccess) return {};
  out.resize(std::min<std::size_t>(count, out.size()));
  return out;
}

std::string engine_group_name(std::uint32_t type) {
  switch (type) {
    case ze::kEngineGroupAll:
      return "all";
    case ze::kEngineGroupComputeAll:
      return "compute";
    case ze::kEngineGroupMediaAll:
      return "media";
    case ze::kEngineGroupCopyAll:
      return "copy";
    case ze::kEngineGroupRenderAll:
      return "render";
    case ze::kEngineGroup3dAll:
      return "3d";
    default:
      return {};
  }
}

/// A Level Zero reading fills a metric only where sysfs has nothing.
void fill(MetricSet& m, Metric metric, const Reading& r) {
  const Reading& current = m[metric];
  if (current.has_value()) return;
  if (r.has_value() || current.reason() == Absence::unsupported ||
      current.reason() == Absence::not_collected)
    m[metric] = r;
}

}  // namespace

LevelZeroAugment::LevelZeroAugment(std::string library, LibrarySessionMode mode)
    : library_(std::move(library)), mode_(mode) {}

LevelZeroAugment::~LevelZeroAugment() {
  session_.reset();  // before the library is closed
}

bool LevelZeroAugment::load() {
  if (lib_) return session_ != nullptr;
  std::string error;
  lib_ = DynamicLibrary::open(library_, &error);
  if (!lib_) {
    status_ = "not loaded: " + error;
    return false;
  }
  fn_ = std::make_unique<LevelZeroFunctions>();
  auto& f = *fn_;
  const auto& l = *lib_;
  f.zes_init = l.optional<ze::InitFn>("zesInit");
  f.ze_init = l.optional<ze::InitFn>("zeInit");
  if (f.zes_init) {
    f.driver_get = l.optional<ze::DriverGetFn>("zesDriverGet");
    f.device_get = l.optional<ze::DeviceGetFn>("zesDeviceGet");
  }
  if (!f.zes_init || !f.driver_get || !f.device_get) {  // older loaders: ze handles are Sysman's
    f.zes_init = nullptr;
    f.driver_get = l.optional<ze::DriverGetFn>("zeDriverGet");
    f.device_get = l.optional<ze::DeviceGetFn>("zeDeviceGet");
  }
  f.pci_properties = l.optional<ze::PciGetPropertiesFn>("zesDevicePciGetProperties");
  f.enum_engines = l.optional<ze::EnumFn>("zesDeviceEnumEngineGroups");
  f.engine_properties = l.optional<ze::EngineGetPropertiesFn>("zesEngineGetProperties");
  f.engine_activity = l.optional<ze::EngineGetActivityFn>("zesEngineGetActivity");
  f.card_power = l.optional<ze::GetCardPowerDomainFn>("zesDeviceGetCardPowerDomain");
  f.enum_power = l.optional<ze::EnumFn>("zesDeviceEnumPowerDomains");
  f.energy_counter = l.optional<ze::PowerGetEnergyCounterFn>("zesPowerGetEnergyCounter");
  f.enum_temps = l.optional<ze::EnumFn>("zesDeviceEnumTemperatureSensors");
  f.temp_properties = l.optional<ze::TemperatureGetPropertiesFn>("zesTemperatureGetProperties");
  f.temp_state = l.optional<ze::TemperatureGetStateFn>("zesTemperatureGetState");
  f.enum_freqs = l.optional<ze::EnumFn>("zesDeviceEnumFrequencyDomains");
  f.freq_properties = l.optional<ze::FrequencyGetPropertiesFn>("zesFrequencyGetProperties");
  f.freq_state = l.optional<ze::FrequencyGetStateFn>("zesFrequencyGetState");
  f.enum_mems = l.optional<ze::EnumFn>("zesDeviceEnumMemoryModules");
  f.mem_properties = l.optional<ze::MemoryGetPropertiesFn>("zesMemoryGetProperties");
  f.mem_state = l.optional<ze::MemoryGetStateFn>("zesMemoryGetState");

  const auto init = f.zes_init ? f.zes_init : f.ze_init;
  if (!init || !f.driver_get || !f.device_get || !f.pci_properties) {
    status_ = "unusable: " + library_ +
              " lacks zesInit/zeInit, a driver/device enumeration or zesDevicePciGetProperties";
    failed_ = true;
    return false;
  }
  const std::string init_name = f.zes_init ? "zesInit" : "zeInit";
  session_ = std::make_unique<LibrarySession>(
      "Level Zero", mode_,
      [init, init_name]() -> std::optional<std::string> {
        const ze::Result r = init(0);
        if (r == ze::kSuccess) return std::nullopt;
        return init_name + " returned " + result_name(r);
      },
      [] {});  // Level Zero has no shutdown call
  return true;
}

std::string LevelZeroAugment::refresh() {
  failed_ = false;
  if (!load()) return status_;
  boost::system::error_code ec;
  std::string message;
  auto guard = session_->acquire(ec, &message);
  if (!guard) {  // e.g. zeInit: ZE_RESULT_ERROR_UNINITIALIZED, the loader found no driver
    status_ = "no Level Zero devices (" + message + ")";
    failed_ = true;
    return status_;
  }
  auto devices = enumerate();
  if (!devices.empty()) {
    status_ = std::to_string(devices.size()) + " Level Zero device(s)";
    if (!fn_->zes_init) status_ += " (legacy loader without zesInit)";
  }
  return status_;
}

std::vector<std::pair<std::string, void*>> LevelZeroAugment::enumerate() {
  std::vector<std::pair<std::string, void*>> out;
  bus_ids_.clear();
  auto& f = *fn_;
  std::uint32_t ndrivers = 0;
  if (f.driver_get(&ndrivers, nullptr) != ze::kSuccess || ndrivers == 0) {
    status_ = "no Level Zero devices (no driver)";
    failed_ = true;
    return out;
  }
  std::vector<void*> drivers(ndrivers);
  if (f.driver_get(&ndrivers, drivers.data()) != ze::kSuccess) ndrivers = 0;
  drivers.resize(std::min<std::size_t>(ndrivers, drivers.size()));
  bool pci_refused = false;
  for (void* driver : drivers) {
    std::uint32_t n = 0;
    if (f.device_get(driver, &n, nullptr) != ze::kSuccess || n == 0) continue;
    std::vector<void*> handles(n);
    if (f.device_get(driver, &n, handles.data()) != ze::kSuccess) continue;
    handles.resize(std::min<std::size_t>(n, handles.size()));
    for (void* h : handles) {
      ze::PciProperties pci;
      if (f.pci_properties(h, &pci) != ze::kSuccess) {
        pci_refused = true;
        continue;
      }
      char bus[32];
      std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.%x", pci.address.domain, pci.address.bus,
                    pci.address.device, pci.address.function);
      const auto id = pci::normalize_bus_id(bus);  // the form sysfs devices are keyed by
      out.emplace_back(id, h);
      bus_ids_.emplace_back(id);
    }
  }
  if (out.empty()) {
    status_ = pci_refused && !f.zes_init
                  ? "no Level Zero Sysman devices: this loader has no zesInit; start the program "
                    "with ZES_ENABLE_SYSMAN=1 in its environment"
                  : "no Level Zero devices";
    failed_ = true;
  }
  return out;
}

void LevelZeroAugment::augment(std::vector<DeviceSample>& devices, std::int64_t now_ns) {
  (void)now_ns;  // Level Zero carries its own timestamps
  for (auto& d : devices) d.attributes["metrics_source"] = "sysfs";
  if (failed_ || !load()) return;
  try {
    boost::system::error_code ec;
    std::string message;
    auto guard = session_->acquire(ec, &message);
    if (!guard) {
      // zeInit failed, e.g. ZE_RESULT_ERROR_UNINITIALIZED: the loader has no driver.
      status_ = "no Level Zero devices (" + message + ")";
      failed_ = true;
      if (log_once_.first("init")) logger()->info("intel probe: {}", status_);
      return;
    }
    for (const auto& [bus, handle] : enumerate()) {
      for (auto& d : devices) {
        if (d.pci_bus_id != bus) continue;
        add_metrics(handle, d, states_[bus]);
        d.attributes["metrics_source"] = "sysfs+level-zero";
      }
    }
  } catch (const std::exception& e) {
    if (log_once_.first("augment")) logger()->warn("intel probe: level zero: {}", e.what());
  }
}

void LevelZeroAugment::add_metrics(void* device, DeviceSample& out, DeviceState& state) {
  auto& f = *fn_;
  add_engines(device, out, state);
  add_energy(device, out, state.energy);

  if (f.temp_properties && f.temp_state) {
    std::optional<double> gpu, global;
    for (void* h : enumerate_handles(f.enum_temps, device)) {
      ze::TempProperties p;
      double c = 0;
      if (f.temp_properties(h, &p) != ze::kSuccess || f.temp_state(h, &c) != ze::kSuccess) continue;
      if (p.type == ze::kTempSensorsGpu) gpu = std::max(gpu.value_or(c), c);
      if (p.type == ze::kTempSensorsGlobal) global = std::max(global.value_or(c), c);
    }
    if (auto t = gpu ? gpu : global)
      fill(out.metrics, Metric::temperature_celsius, Reading::of(*t, Source::level_zero));
  }
  if (f.freq_properties && f.freq_state) {
    for (void* h : enumerate_handles(f.enum_freqs, device)) {
      ze::FreqProperties p;
      ze::FreqState s;
      if (f.freq_properties(h, &p) != ze::kSuccess || f.freq_state(h, &s) != ze::kSuccess) continue;
      if (s.actual < 0) continue;  // negative: not known
      if (p.type == ze::kFreqDomainGpu)
        fill(out.metrics, Metric::clock_graphics_mhz, Reading::of(s.actual, Source::level_zero));
      if (p.type == ze::kFreqDomainMemory)
        fill(out.metrics, Metric::clock_memory_mhz, Reading::of(s.actual, Source::level_zero));
    }
  }
  if (f.mem_properties && f.mem_state) {
    std::optional<std::uint64_t> total, used;
    for (void* h : enumerate_handles(f.enum_mems, device)) {
      ze::MemProperties p;
      ze::MemState s;
      if (f.mem_properties(h, &p) != ze::kSuccess || f.mem_state(h, &s) != ze::kSuccess) continue;
      if (p.location != ze::kMemLocDevice || p.physical_size == 0 || s.free > p.physical_size)
        continue;
      total = total.value_or(0) + p.physical_size;
      used = used.value_or(0) + (p.physical_size - s.free);
    }
    if (total) {
      fill(out.metrics, Metric::memory_total_bytes,
           Reading::of(static_cast<double>(*total), Source::level_zero));
      fill(out.metrics, Metric::memory_used_bytes,
           Reading::of(static_cast<double>(*used), Source::level_zero));
    }
  }
}

void LevelZeroAugment::add_engines(void* device, DeviceSample& out, DeviceState& state) {
  auto& f = *fn_;
  if (!f.engine_properties || !f.engine_activity) return;
  struct Acc {
    double sum = 0;
    int n = 0;
    bool seeding = false;
    bool refused = false;
  };
  std::map<std::string, Acc> groups;
  state.engines.begin();  // engines that are gone are forgotten
  for (void* h : enumerate_handles(f.enum_engines, device)) {
    ze::EngineProperties p;
    if (f.engine_properties(h, &p) != ze::kSuccess) continue;
    const auto name = engine_group_name(p.type);
    if (name.empty()) continue;  // a *_SINGLE engine
    auto& acc = groups[name];
    ze::EngineStats s{};
    const ze::Result r = f.engine_activity(h, &s);
    if (r != ze::kSuccess) {
      acc.refused |= r == ze::kErrorInsufficientPermissions;
      if (log_once_.first("engine:" + result_name(r)))
        logger()->info("intel probe: level zero engine activity: {}", result_name(r));
      continue;
    }
    const EngineKey key{p.type, p.on_subdevice ? p.subdevice_id : 0xffffffffu};
    const auto step = state.engines.update(key, s.active_time, s.timestamp);
    if (step.rate) {
      acc.sum += std::clamp(*step.rate * 100.0, 0.0, 100.0);
      ++acc.n;
    } else {
      acc.seeding = true;  // first reading, a reset, or a timestamp that did not advance
    }
  }
  for (const auto& [group_name, acc] : groups) {
    // clang 14 refuses a lambda capturing a structured binding: a plain reference instead.
    const std::string& name = group_name;
    const bool present = std::any_of(out.engines.begin(), out.engines.end(),
                                     [&](const EngineSample& e) { return e.name == name; });
    if (present) continue;  // fdinfo (sysfs side) stays in charge
    Reading r = acc.n > 0     ? Reading::of(acc.sum / acc.n, Source::level_zero)
                : acc.refused ? Reading::missing(Absence::no_permission, Source::level_zero)
                : acc.seeding ? Reading::missing(Absence::not_yet_seeded, Source::level_zero)
                              : Reading::missing(Absence::tool_failed, Source::level_zero);
    out.engines.push_back({name, r});
  }
}

void LevelZeroAugment::add_energy(void* device, DeviceSample& out, EnergyState& st) {
  auto& f = *fn_;
  if (!f.energy_counter) return;
  void* domain = nullptr;
  if (!f.card_power || f.card_power(device, &domain) != ze::kSuccess || !domain) {
    auto all = enumerate_handles(f.enum_power, device);
    if (all.empty()) return;
    domain = all.front();
  }
  ze::EnergyCounter e{};
  if (f.energy_counter(domain, &e) != ze::kSuccess) return;
  Reading power = Reading::missing(Absence::not_yet_seeded, Source::level_zero);
  const auto step = st.uj_per_us.update(e.energy, e.timestamp);  // probes/toolkit counter_rate
  if (step.reset && st.last_uj) {
    // A drop is a counter reset: keep the total monotonic, seed the power again.
    st.offset_uj += static_cast<double>(*st.last_uj);
    logger()->info("intel probe: level zero energy counter reset on {}", out.pci_bus_id);
  } else if (step.rate) {
    power = Reading::of(*step.rate, Source::level_zero);
  }
  st.last_uj = e.energy;
  const bool had_energy = out.metrics[Metric::energy_joules].has_value();
  fill(out.metrics, Metric::energy_joules,
       Reading::of((st.offset_uj + static_cast<double>(e.energy)) / 1e6, Source::level_zero));
  if (!had_energy) {
    out.energy_kind = EnergyKind::counter;
    fill(out.metrics, Metric::power_watts, power);
  }
}

}  // namespace gpustream
