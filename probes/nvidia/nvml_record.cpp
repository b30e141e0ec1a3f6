// capture::record_nvml: one pass of the NVIDIA probe's NVML calls, written as a scenario of the
// fake libnvidia-ml.so.1 (see nvidia/nvml_record.hpp).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/probes/nvidia_formats.hpp"
#include "nvidia/nvml_api.hpp"
#include "nvidia/nvml_record.hpp"

namespace gpustream::capture {
namespace {

std::string c_string(const char* buf, std::size_t size) {
  return std::string(buf, std::find(buf, buf + size, '\0'));
}

/// A scenario value must stay on its line and keep its '#' (the fake cuts comments at '#').
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '#') c = ' ';
  return s;
}

constexpr std::size_t kMaxRecordedProcesses = 4096;

/// The scenario of one device, built call by call. `fail` names are the ones the fake (NVML 12.x
/// names) answers to, so the probe meets the same return code in the replay.
struct DeviceWriter {
  unsigned index;
  std::string out;
  std::vector<std::string>* notes;

  void set(const std::string& key, const std::string& value) {
    out += "device." + std::to_string(index) + "." + key + "=" + one_line(value) + "\n";
  }
  /// True on success; otherwise records the failure for `fake_fn`.
  bool check(nvml::Return rc, const char* fake_fn) {
    if (rc == nvml::kSuccess) return true;
    set(std::string("fail.") + fake_fn, std::to_string(rc));
    notes->push_back("GPU " + std::to_string(index) + ": " + fake_fn + " returned " +
                     std::string(nvml::return_code_name(rc)));
    return false;
  }
  /// True (and recorded as not supported) when the library lacks the function.
  bool missing(bool present, const char* fake_fn) {
    if (present) return false;
    set(std::string("fail.") + fake_fn, std::to_string(nvml::kErrorNotSupported));
    auto note = std::string(fake_fn) + ": not exported by the library (or an older form only)";
    if (std::find(notes->begin(), notes->end(), note) == notes->end()) notes->push_back(note);
    return true;
  }
};

/// One process list, read the way NvmlBackend::read_processes does; "" on failure (recorded).
std::string record_processes(const nvml::Api& api, nvml::ProcessesFn* fn, nvml::Device h,
                             DeviceWriter& w, const char* fake_fn, std::size_t& stride_seen,
                             std::vector<std::int64_t>& pids) {
  if (w.missing(fn != nullptr, fake_fn)) return {};
  const bool v1 = api.process_layout == nvml::ProcessLayout::v1;
  const std::size_t room = v1 ? nvidia::kProcessInfoV1Stride : nvidia::kProcessInfoV3Stride;
  std::size_t capacity = 64;
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::vector<std::byte> buf(capacity * room, std::byte{nvidia::kProcessInfoSentinel});
    unsigned n = static_cast<unsigned>(capacity);
    const auto rc = fn(h, &n, buf.data());
    if (rc == nvml::kErrorInsufficientSize && n > capacity && n <= kMaxRecordedProcesses) {
      capacity = n + 8;
      continue;
    }
    if (!w.check(rc, fake_fn)) return {};
    const std::size_t count = std::min<std::size_t>(n, capacity);
    std::size_t stride = nvidia::kProcessInfoV1Stride;
    if (!v1) {
      stride = nvidia::detect_process_info_stride(buf, count);
      if (count != 0) stride_seen = stride;
    }
    std::string list;
    for (const auto& e : nvidia::parse_process_infos(buf, count, stride)) {
      if (!list.empty()) list += ',';
      pids.push_back(e.pid);
      list += std::to_string(e.pid) + ":" +
              (e.used_gpu_memory_bytes ? std::to_string(*e.used_gpu_memory_bytes) : "na");
    }
    return list.empty() ? std::string("-") : list;  // "-": read, empty
  }
  w.check(nvml::kErrorInsufficientSize, fake_fn);
  return {};
}

void record_device(const nvml::Api& api, unsigned i, NvmlRecording& r, std::size_t& stride) {
  DeviceWriter w{i, {}, &r.notes};
  nvml::Device h = nullptr;
  if (!w.check(api.handle_by_index(i, &h), "nvmlDeviceGetHandleByIndex_v2")) {
    r.scenario += w.out;
    return;
  }
  char buf[nvml::kDeviceUuidBufferSize] = {};
  if (w.check(api.uuid(h, buf, sizeof buf), "nvmlDeviceGetUUID"))
    w.set("uuid", c_string(buf, sizeof buf));
  if (!w.missing(api.name != nullptr, "nvmlDeviceGetName")) {
    char name[nvml::kDeviceNameBufferSize] = {};
    if (w.check(api.name(h, name, sizeof name), "nvmlDeviceGetName"))
      w.set("name", c_string(name, sizeof name));
  }
  const char* pci_fn = "nvmlDeviceGetPciInfo_v3";
  if (!w.missing(api.pci_info != nullptr, pci_fn)) {
    nvml::PciInfo pci{};
    if (w.check(api.pci_info(h, &pci), pci_fn))
      // The fake's pci= is the 8-digit-domain form of busId; its v1 busIdLegacy is the same
      // text without the first 4 characters, as NVML's.
      w.set("pci", api.pci_legacy ? "0000" + c_string(pci.bus_id_legacy, sizeof pci.bus_id_legacy)
                                  : c_string(pci.bus_id, sizeof pci.bus_id));
  }
  // Memory: the fake's v2 answers total, reserved, used and free = total - used - reserved.
  const char* mem_fn = "nvmlDeviceGetMemoryInfo_v2";
  if (api.memory_v2) {
    nvml::MemoryV2 m{};
    m.version = nvml::kMemoryV2Version;
    if (w.check(api.memory_v2(h, &m), mem_fn)) {
      w.set("memory_total", std::to_string(m.total));
      w.set("memory_used", std::to_string(m.used));
      w.set("memory_reserved", std::to_string(m.total - std::min(m.total, m.used + m.free)));
    }
  } else if (!w.missing(api.memory != nullptr, mem_fn)) {
    nvml::Memory m{};
    if (w.check(api.memory(h, &m), mem_fn)) {
      w.set("memory_total", std::to_string(m.total));
      w.set("memory_used", std::to_string(m.used));
      w.set("memory_reserved", "0");
    }
  }
  if (!w.missing(api.utilization != nullptr, "nvmlDeviceGetUtilizationRates")) {
    nvml::Utilization u{};
    if (w.check(api.utilization(h, &u), "nvmlDeviceGetUtilizationRates")) {
      w.set("util_gpu", std::to_string(u.gpu));
      w.set("util_memory", std::to_string(u.memory));
    }
  }
  if (api.temperature_v) {
    nvml::TemperatureV1 t{nvml::kTemperatureV1Version, nvml::kTemperatureGpu, 0};
    if (w.check(api.temperature_v(h, &t), "nvmlDeviceGetTemperatureV"))
      w.set("temperature", std::to_string(std::max(t.temperature, 0)));
  } else if (!w.missing(api.temperature != nullptr, "nvmlDeviceGetTemperatureV")) {
    unsigned t = 0;
    if (w.check(api.temperature(h, nvml::kTemperatureGpu, &t), "nvmlDeviceGetTemperatureV"))
      w.set("temperature", std::to_string(t));
  }
  const auto uint_call = [&](nvml::UintFn* fn, const char* fake_fn, const char* key) {
    if (w.missing(fn != nullptr, fake_fn)) return;
    unsigned v = 0;
    if (w.check(fn(h, &v), fake_fn)) w.set(key, std::to_string(v));
  };
  const auto ull_call = [&](nvml::UllFn* fn, const char* fake_fn, const char* key) {
    if (w.missing(fn != nullptr, fake_fn)) return;
    unsigned long long v = 0;
    if (w.check(fn(h, &v), fake_fn)) w.set(key, std::to_string(v));
  };
  uint_call(api.power_usage, "nvmlDeviceGetPowerUsage", "power_mw");
  uint_call(api.power_limit, "nvmlDeviceGetEnforcedPowerLimit", "power_limit_mw");
  ull_call(api.total_energy, "nvmlDeviceGetTotalEnergyConsumption", "energy_mj");
  // One fake function answers the three clocks: a failure of one fails all three in the replay
  // (noted); the values of the others are kept.
  if (!w.missing(api.clock_info != nullptr, "nvmlDeviceGetClockInfo")) {
    static constexpr struct {
      unsigned type;
      const char* key;
    } kClocks[] = {{nvml::kClockGraphics, "clock_graphics"},
                   {nvml::kClockSm, "clock_sm"},
                   {nvml::kClockMem, "clock_memory"}};
    for (const auto& c : kClocks) {
      unsigned mhz = 0;
      if (w.check(api.clock_info(h, c.type, &mhz), "nvmlDeviceGetClockInfo"))
        w.set(c.key, std::to_string(mhz));
    }
  }
  uint_call(api.fan_speed, "nvmlDeviceGetFanSpeed", "fan");
  if (!w.missing(api.clock_reasons != nullptr, "nvmlDeviceGetCurrentClocksEventReasons")) {
    unsigned long long bits = 0;
    if (w.check(api.clock_reasons(h, &bits), "nvmlDeviceGetCurrentClocksEventReasons")) {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%llx", bits);
      w.set("clock_reasons", hex);
    }
  }
  const auto compute = record_processes(api, api.compute_processes, h, w,
                                        "nvmlDeviceGetComputeRunningProcesses_v3", stride, r.pids);
  const auto graphics =
      record_processes(api, api.graphics_processes, h, w,
                       "nvmlDeviceGetGraphicsRunningProcesses_v3", stride, r.pids);
  if (!compute.empty()) w.set("compute", compute == "-" ? "" : compute);
  if (!graphics.empty()) w.set("graphics", graphics == "-" ? "" : graphics);
  // Per-process SM utilization: every sample NVML keeps (since time stamp 0, as the probe's
  // first sample asks).
  if (!w.missing(api.process_utilization != nullptr, "nvmlDeviceGetProcessUtilization")) {
    std::vector<nvml::ProcessUtilizationSample> buf(256);
    unsigned n = static_cast<unsigned>(buf.size());
    auto rc = api.process_utilization(h, buf.data(), &n, 0);
    if (rc == nvml::kErrorInsufficientSize && n > buf.size() && n <= kMaxRecordedProcesses) {
      buf.resize(n + 8);
      n = static_cast<unsigned>(buf.size());
      rc = api.process_utilization(h, buf.data(), &n, 0);
    }
    if (rc != nvml::kErrorNotFound && w.check(rc, "nvmlDeviceGetProcessUtilization")) {
      // The newest sample of each pid, as the probe keeps.
      std::vector<const nvml::ProcessUtilizationSample*> newest;
      for (unsigned k = 0; k < std::min<std::size_t>(n, buf.size()); ++k) {
        const auto& s = buf[k];
        auto it = std::find_if(newest.begin(), newest.end(),
                               [&](const auto* x) { return x->pid == s.pid; });
        if (it == newest.end())
          newest.push_back(&s);
        else if (s.time_stamp > (*it)->time_stamp)
          *it = &s;
      }
      std::string list;
      for (const auto* s : newest) {
        if (!list.empty()) list += ',';
        list += std::to_string(s->pid) + ":" + std::to_string(s->sm_util) + ":" +
                std::to_string(s->mem_util);
      }
      if (!list.empty()) w.set("process_util", list);
    }
  }
  // GPM activity is a figure over the time between two samples, which one pass cannot record:
  // the replay reports it unsupported rather than a rate the fake would make up.
  w.set("gpm", "0");
  r.scenario += w.out;
}

}  // namespace

NvmlRecording record_nvml(const std::string& library) {
  NvmlRecording r;
  std::string error;
  auto lib = DynamicLibrary::open(library, &error);
  if (!lib) {
    r.notes.push_back(error);
    r.scenario = "init_fail=LIBRARY_NOT_FOUND\n";
    return r;
  }
  nvml::Api api;
  try {
    api = nvml::Api::load(*lib);
  } catch (const std::exception& e) {
    r.notes.push_back(e.what());
    r.scenario = "init_fail=FUNCTION_NOT_FOUND\n";
    return r;
  }
  r.loaded = true;
  if (const auto rc = api.init(); rc != nvml::kSuccess) {
    r.notes.push_back(api.init_name + " returned " + std::string(nvml::return_code_name(rc)));
    r.scenario = "init_fail=" + std::to_string(rc) + "\n";
    return r;
  }
  r.initialized = true;
  r.notes.push_back("functions used: " + api.init_name + ", " + api.memory_name + ", " +
                    api.processes_name +
                    (api.process_layout == nvml::ProcessLayout::v1
                         ? " (16-byte process entries: replay with the nvml-legacy fake)"
                         : ""));
  if (api.driver_version) {
    char buf[nvml::kDriverVersionBufferSize] = {};
    if (api.driver_version(buf, sizeof buf) == nvml::kSuccess)
      r.driver_version = c_string(buf, sizeof buf);
  }
  unsigned count = 0;
  std::string devices;
  std::size_t stride = 0;
  if (const auto rc = api.device_count(&count); rc != nvml::kSuccess) {
    r.notes.push_back("nvmlDeviceGetCount returned " + std::string(nvml::return_code_name(rc)));
    devices = "fail.nvmlDeviceGetCount_v2=" + std::to_string(rc) + "\n";
    count = 0;
  }
  count = std::min<unsigned>(count, 64);
  for (unsigned i = 0; i < count; ++i) record_device(api, i, r, stride);
  api.shutdown();
  r.devices = static_cast<int>(count);
  std::string head = "# Recorded by gpustream capture from " + one_line(library) + "\n";
  head += "devices=" + std::to_string(count) + "\n";
  if (stride != 0) head += "process_stride=" + std::to_string(stride) + "\n";
  if (!r.driver_version.empty()) head += "driver_version=" + one_line(r.driver_version) + "\n";
  r.scenario = head + devices + r.scenario;
  return r;
}

}  // namespace gpustream::capture
