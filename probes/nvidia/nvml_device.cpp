// NvmlBackend: reading one device's metrics and processes (under the backend's lock, inside a
// session, with a valid handle).
#include <algorithm>
#include <cstring>
#include <span>

#include "nvidia/nvml_backend.hpp"

namespace gpustream::nvidia_detail {
namespace {

constexpr std::size_t kMaxProcesses = 1 << 16;

void merge_by_pid(std::vector<nvidia::NvmlProcessEntry>& into,
                  const std::vector<nvidia::NvmlProcessEntry>& more) {
  for (const auto& e : more) {
    auto it = std::find_if(into.begin(), into.end(), [&](const auto& x) { return x.pid == e.pid; });
    if (it == into.end()) {
      into.push_back(e);
    } else if (e.used_gpu_memory_bytes) {
      // The same process in both lists (a CUDA app that also renders): NVML reports its memory
      // in each; count it once.
      it->used_gpu_memory_bytes =
          std::max(it->used_gpu_memory_bytes.value_or(0), *e.used_gpu_memory_bytes);
    }
  }
}

}  // namespace

DeviceSample NvmlBackend::device_base(const NvmlDevice& dev) const {
  DeviceSample d;
  d.id = dev.uuid;
  d.vendor = Vendor::nvidia;
  d.index = dev.index;
  d.name = dev.name;
  d.pci_bus_id = dev.pci_bus_id;
  d.attributes["uuid"] = dev.uuid;
  if (!driver_version_.empty()) d.attributes["driver_version"] = driver_version_;
  return d;
}

void NvmlBackend::sample_device(NvmlDevice& dev, DeviceSample& out,
                                std::vector<SampleError>& errors) {
  auto& m = out.metrics;
  const auto h = dev.handle;
  // record() bound to this device and its metrics.
  const auto ok = [&](nvml::Return rc, Call call, const char* function,
                      std::initializer_list<Metric> metrics) {
    return record(dev, rc, call, function, m, metrics, errors);
  };
  const auto absent_without = [&](bool present, std::initializer_list<Metric> metrics) {
    if (present) return false;
    for (auto metric : metrics) m.set_absent(metric, Absence::unsupported, Source::nvml);
    return true;
  };

  // Memory: v2 (used excludes the driver's reservation) when the library has it. Free memory
  // is NVML's own `free` in both versions (v2: total − reserved − used; v1: total − used).
  const std::initializer_list<Metric> kMemory{Metric::memory_used_bytes, Metric::memory_total_bytes,
                                              Metric::memory_free_bytes};
  if (api_.memory_v2) {
    nvml::MemoryV2 mem{};
    mem.version = nvml::kMemoryV2Version;
    if (ok(api_.memory_v2(h, &mem), Call::memory, "nvmlDeviceGetMemoryInfo_v2", kMemory)) {
      m.set(Metric::memory_used_bytes, static_cast<double>(mem.used), Source::nvml);
      m.set(Metric::memory_total_bytes,
            static_cast<double>(dev.memory_total_bytes.value_or(mem.total)), Source::nvml);
      m.set(Metric::memory_free_bytes, static_cast<double>(mem.free), Source::nvml);
    }
  } else if (!absent_without(api_.memory != nullptr, kMemory)) {
    nvml::Memory mem{};
    if (ok(api_.memory(h, &mem), Call::memory, "nvmlDeviceGetMemoryInfo", kMemory)) {
      m.set(Metric::memory_used_bytes, static_cast<double>(mem.used), Source::nvml);
      m.set(Metric::memory_total_bytes,
            static_cast<double>(dev.memory_total_bytes.value_or(mem.total)), Source::nvml);
      m.set(Metric::memory_free_bytes, static_cast<double>(mem.free), Source::nvml);
    }
  }
  if (dev.lost) return;

  if (!absent_without(api_.utilization != nullptr,
                      {Metric::utilization_percent, Metric::memory_utilization_percent})) {
    nvml::Utilization u{};
    if (ok(api_.utilization(h, &u), Call::utilization, "nvmlDeviceGetUtilizationRates",
           {Metric::utilization_percent, Metric::memory_utilization_percent})) {
      m.set(Metric::utilization_percent, u.gpu, Source::nvml);
      m.set(Metric::memory_utilization_percent, u.memory, Source::nvml);
    }
  }
  if (dev.lost) return;

  if (api_.temperature_v) {
    nvml::TemperatureV1 t{nvml::kTemperatureV1Version, nvml::kTemperatureGpu, 0};
    if (ok(api_.temperature_v(h, &t), Call::temperature, "nvmlDeviceGetTemperatureV",
           {Metric::temperature_celsius}))
      m.set(Metric::temperature_celsius, t.temperature, Source::nvml);
  } else if (!absent_without(api_.temperature != nullptr, {Metric::temperature_celsius})) {
    unsigned t = 0;
    if (ok(api_.temperature(h, nvml::kTemperatureGpu, &t), Call::temperature,
           "nvmlDeviceGetTemperature", {Metric::temperature_celsius}))
      m.set(Metric::temperature_celsius, t, Source::nvml);
  }
  if (dev.lost) return;

  sample_power(dev, out, errors);
  if (dev.lost) return;

  if (!absent_without(api_.power_limit != nullptr, {Metric::power_limit_watts})) {
    unsigned mw = 0;
    if (ok(api_.power_limit(h, &mw), Call::power_limit, "nvmlDeviceGetEnforcedPowerLimit",
           {Metric::power_limit_watts}))
      m.set(Metric::power_limit_watts, mw / 1000.0, Source::nvml);
  }
  if (dev.lost) return;

  if (!absent_without(api_.total_energy != nullptr, {Metric::energy_joules})) {
    unsigned long long mj = 0;
    if (ok(api_.total_energy(h, &mj), Call::energy, "nvmlDeviceGetTotalEnergyConsumption",
           {Metric::energy_joules})) {
      m.set(Metric::energy_joules, static_cast<double>(mj) / 1000.0, Source::nvml);
      out.energy_kind = EnergyKind::counter;
    }
  }
  if (dev.lost) return;

  static constexpr struct {
    unsigned type;
    Call call;
    Metric metric;
  } kClocks[] = {{nvml::kClockGraphics, Call::clock_graphics, Metric::clock_graphics_mhz},
                 {nvml::kClockSm, Call::clock_sm, Metric::clock_sm_mhz},
                 {nvml::kClockMem, Call::clock_memory, Metric::clock_memory_mhz}};
  for (const auto& c : kClocks) {
    if (absent_without(api_.clock_info != nullptr, {c.metric})) continue;
    unsigned mhz = 0;
    if (ok(api_.clock_info(h, c.type, &mhz), c.call, "nvmlDeviceGetClockInfo", {c.metric}))
      m.set(c.metric, mhz, Source::nvml);
    if (dev.lost) return;
  }

  if (!absent_without(api_.fan_speed != nullptr, {Metric::fan_percent})) {
    unsigned percent = 0;
    if (ok(api_.fan_speed(h, &percent), Call::fan, "nvmlDeviceGetFanSpeed", {Metric::fan_percent}))
      m.set(Metric::fan_percent, percent, Source::nvml);
  }
  if (dev.lost) return;

  // Why the clocks are held down; a failed read is absent with its reason (an empty list would
  // say "not throttled"), and a library without the call does not read throttling.
  if (api_.clock_reasons) {
    unsigned long long bits = 0;
    const auto rc = api_.clock_reasons(h, &bits);
    if (rc == nvml::kSuccess) {
      succeeded(dev, Call::clock_reasons);
      out.throttle_reasons = nvidia::decode_clock_event_reasons(bits);
    } else {
      out.throttle_reasons_absent =
          failed(dev, Call::clock_reasons, rc, "nvmlDeviceGetCurrentClocksEventReasons", errors);
    }
  } else {
    out.throttle_reasons_absent = Absence::unsupported;
  }
  if (dev.lost) return;

  // Processes, with their SM utilization since the last sample seen.
  Absence why = Absence::unsupported;
  if (!read_all_processes(dev, scratch_, errors, &why)) {
    if (!dev.lost) out.processes_absent = why;
    return;
  }
  std::vector<std::pair<unsigned, const nvml::ProcessUtilizationSample*>> util;
  if (api_.process_utilization && !scratch_.empty()) {
    auto& buf = dev.utilization_buffer;
    if (buf.size() < scratch_.size() + 8) buf.resize(scratch_.size() * 2 + 8);
    for (int attempt = 0; attempt < 3; ++attempt) {
      unsigned n = static_cast<unsigned>(buf.size());
      const auto rc = api_.process_utilization(h, buf.data(), &n, dev.last_seen_timestamp);
      if (rc == nvml::kErrorInsufficientSize && n > buf.size() && n < kMaxProcesses * 4) {
        buf.resize(n + 8);
        continue;
      }
      if (rc == nvml::kErrorNotFound) {  // no sample newer than last_seen_timestamp
        succeeded(dev, Call::process_utilization);
        break;
      }
      if (!ok(rc, Call::process_utilization, "nvmlDeviceGetProcessUtilization", {})) break;
      n = std::min<unsigned>(n, static_cast<unsigned>(buf.size()));
      auto newest = dev.last_seen_timestamp;
      for (unsigned i = 0; i < n; ++i) {
        const auto& s = buf[i];
        if (s.time_stamp <= dev.last_seen_timestamp) continue;
        newest = std::max(newest, s.time_stamp);
        auto it =
            std::find_if(util.begin(), util.end(), [&](const auto& x) { return x.first == s.pid; });
        if (it == util.end()) {
          util.emplace_back(s.pid, &s);
        } else if (s.time_stamp > it->second->time_stamp) {
          it->second = &s;
        }
      }
      dev.last_seen_timestamp = newest;
      break;
    }
    if (dev.lost) return;
  }
  if (dev.process_stride != 0)
    out.attributes["nvml_process_entry_bytes"] = std::to_string(dev.process_stride);
  out.processes.reserve(scratch_.size());
  for (const auto& e : scratch_) {
    ProcessSample p;
    p.pid = e.pid;
    p.gpu_memory_bytes = e.used_gpu_memory_bytes;
    auto it =
        std::find_if(util.begin(), util.end(), [&](const auto& x) { return x.first == e.pid; });
    if (it != util.end()) p.gpu_utilization_percent = it->second->sm_util;
    out.processes.push_back(std::move(p));
  }
  dev.retry_delay = std::chrono::milliseconds{0};  // a whole healthy sample
}

bool NvmlBackend::read_processes(NvmlDevice& dev, nvml::ProcessesFn* fn, Call call,
                                 const char* function, std::vector<nvidia::NvmlProcessEntry>& out,
                                 std::vector<SampleError>& errors) {
  out.clear();
  const bool v1 = api_.process_layout == nvml::ProcessLayout::v1;
  const std::size_t room = v1 ? nvidia::kProcessInfoV1Stride : nvidia::kProcessInfoV3Stride;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const std::size_t capacity = dev.process_capacity;
    const std::size_t bytes = capacity * room;
    if (dev.process_buffer.size() < bytes) dev.process_buffer.resize(bytes);
    // Sentinel-filled, so the entry size the driver really wrote can be seen afterwards.
    if (!v1) std::memset(dev.process_buffer.data(), nvidia::kProcessInfoSentinel, bytes);
    unsigned n = static_cast<unsigned>(capacity);
    const auto rc = fn(dev.handle, &n, dev.process_buffer.data());
    if (rc == nvml::kErrorInsufficientSize) {
      const std::size_t need = std::max<std::size_t>(n, capacity + 1);
      if (need > kMaxProcesses) break;
      dev.process_capacity = need + need / 4 + 8;
      continue;
    }
    if (rc != nvml::kSuccess) {
      failed(dev, call, rc, function, errors);
      return false;
    }
    succeeded(dev, call);
    const std::span<const std::byte> buf(dev.process_buffer.data(), bytes);
    const std::size_t count = std::min<std::size_t>(n, capacity);
    std::size_t stride = nvidia::kProcessInfoV1Stride;
    if (!v1) {
      stride = nvidia::detect_process_info_stride(buf, count);
      if (count == 0) stride = dev.process_stride;  // nothing to learn from an empty list
      if (count != 0 && stride != dev.process_stride) {
        if (log_once_.first("stride:" + dev.uuid + ":" + std::to_string(stride)))
          logger()->info("nvidia probe: GPU {}: the driver writes {}-byte process entries ({})",
                         dev.uuid, stride, function);
        dev.process_stride = stride;
      }
    }
    out = nvidia::parse_process_infos(buf, count, stride);
    return true;
  }
  const std::string message = std::string(function) + " on GPU " + dev.uuid +
                              ": the process list kept growing; skipped this sample";
  errors.push_back({"nvml_error", message, dev.uuid});
  return false;
}

bool NvmlBackend::read_all_processes(NvmlDevice& dev, std::vector<nvidia::NvmlProcessEntry>& out,
                                     std::vector<SampleError>& errors, Absence* why) {
  out.clear();
  bool any = false;
  *why = Absence::unsupported;
  if (api_.compute_processes) {
    if (read_processes(dev, api_.compute_processes, Call::compute_processes,
                       api_.processes_name.c_str(), out, errors)) {
      any = true;
    } else {
      *why = dev.lost ? Absence::lost
                      : (dev.failing[static_cast<std::size_t>(Call::compute_processes)] ==
                                 nvml::kErrorNoPermission
                             ? Absence::no_permission
                             : Absence::unsupported);
    }
  }
  if (dev.lost) return false;
  if (api_.graphics_processes &&
      read_processes(dev, api_.graphics_processes, Call::graphics_processes,
                     "nvmlDeviceGetGraphicsRunningProcesses", scratch2_, errors)) {
    merge_by_pid(out, scratch2_);
    any = true;
  }
  return any && !dev.lost;
}

void NvmlBackend::usage_on_device(NvmlDevice& dev, std::int64_t pid, ProcessDeviceUsage& out,
                                  std::vector<SampleError>& errors) {
  if (api_.memory_v2) {
    nvml::MemoryV2 mem{};
    mem.version = nvml::kMemoryV2Version;
    const auto rc = api_.memory_v2(dev.handle, &mem);
    if (rc == nvml::kSuccess) {
      out.device_memory_used_bytes = mem.used;
      out.device_memory_total_bytes = mem.total;
    } else {
      failed(dev, Call::memory, rc, "nvmlDeviceGetMemoryInfo_v2", errors);
    }
  } else if (api_.memory) {
    nvml::Memory mem{};
    const auto rc = api_.memory(dev.handle, &mem);
    if (rc == nvml::kSuccess) {
      out.device_memory_used_bytes = mem.used;
      out.device_memory_total_bytes = mem.total;
    } else {
      failed(dev, Call::memory, rc, "nvmlDeviceGetMemoryInfo", errors);
    }
  }
  if (dev.lost) return;
  Absence why = Absence::unsupported;
  if (!read_all_processes(dev, scratch_, errors, &why)) {
    if (!dev.lost)
      errors.push_back({"processes_" + std::string(to_string(why)),
                        "cannot list the processes on GPU " + dev.uuid + " (" +
                            std::string(to_string(why)) + ")",
                        dev.uuid});
    return;
  }
  // Both lists read (or the one the library has): the process is either in them or uses none.
  auto it = std::find_if(scratch_.begin(), scratch_.end(),
                         [&](const auto& e) { return static_cast<std::int64_t>(e.pid) == pid; });
  if (it == scratch_.end()) {
    out.gpu_memory_bytes = 0;
    out.exact = true;
  } else if (it->used_gpu_memory_bytes) {
    out.gpu_memory_bytes = *it->used_gpu_memory_bytes;
    out.exact = true;
  }
}

}  // namespace gpustream::nvidia_detail
