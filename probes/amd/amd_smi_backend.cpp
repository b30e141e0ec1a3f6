// AmdSmiBackend: enumeration, handle re-resolution by UUID/BDF, and the per-device metrics read
// through libamd_smi.so (layouts in amd_smi_api.hpp).
#include "amd/amd_smi_backend.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "amd/amdgpu_gpu_metrics.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/power.hpp"

namespace gpustream::amd_lib_detail {
namespace {

using amdsmi::Status;

std::string bounded(const char* s, std::size_t n) { return std::string(s, ::strnlen(s, n)); }

/// Power fields the library could not read: 0xFFFF (v6) or UINT32_MAX (v26).
bool power_valid(std::uint64_t w) { return w < 0xFFFFU; }

}  // namespace

AmdSmiBackend::AmdSmiBackend(AmdSmiOptions options)
    : options_(std::move(options)),
      lib_(AmdSmiLibrary::get(options_.library, options_.mode)),
      process_table_(options_.procfs_root) {
  if (!options_.clock) options_.clock = [] { return steady_now_ns(); };
}

std::string AmdSmiBackend::describe() const {
  std::string out = lib_->path();
  if (auto v = lib_->version())
    out += " " + v->text + " (struct layout " + std::string(to_string(v->layout)) + ")";
  out += ", " + std::string(to_string(lib_->mode())) + " session";
  if (lib_->host_owned()) out += ", shared with the host program (never shut down)";
  return out;
}

std::vector<AmdSmiBackend::Listed> AmdSmiBackend::list_devices() {
  const auto& api = lib_->api();
  std::uint32_t sockets = 0;
  if (auto rc = api.socket_handles(&sockets, nullptr); rc != amdsmi::kSuccess)
    throw std::runtime_error("amdsmi_get_socket_handles: " + api.describe(rc));
  std::vector<amdsmi::SocketHandle> socket_handles(sockets);
  if (sockets > 0) {
    if (auto rc = api.socket_handles(&sockets, socket_handles.data()); rc != amdsmi::kSuccess)
      throw std::runtime_error("amdsmi_get_socket_handles: " + api.describe(rc));
    socket_handles.resize(sockets);
  }
  std::vector<Listed> out;
  for (auto* socket : socket_handles) {
    std::uint32_t n = 0;
    if (api.processor_handles(socket, &n, nullptr) != amdsmi::kSuccess || n == 0) continue;
    std::vector<amdsmi::ProcessorHandle> handles(n);
    if (api.processor_handles(socket, &n, handles.data()) != amdsmi::kSuccess) continue;
    handles.resize(std::min<std::size_t>(n, handles.size()));
    for (auto* h : handles) {
      Listed l{h, {}, {}};
      char uuid[amdsmi::kUuidSize + 2] = {};
      unsigned length = sizeof uuid;
      if (api.uuid(h, &length, uuid) == amdsmi::kSuccess) l.uuid = bounded(uuid, sizeof uuid);
      std::uint64_t bdf = 0;
      if (api.bdf(h, &bdf) == amdsmi::kSuccess) l.bdf = amdsmi::format_bdf(bdf);
      if (l.uuid.empty() && l.bdf.empty()) continue;  // nothing to know it by again
      out.push_back(std::move(l));
    }
  }
  return out;
}

void AmdSmiBackend::enumerate() {
  const auto& api = lib_->api();
  const auto version = lib_->version();
  std::vector<AmdSmiDevice> found;
  int index = 0;
  for (auto& l : list_devices()) {
    AmdSmiDevice dev;
    dev.uuid = l.uuid;
    dev.bdf = l.bdf;
    dev.index = index++;
    dev.handle = l.handle;
    dev.handle_generation = lib_->generation();
    if (api.asic_info && version) {
      std::vector<char> buf(amdsmi::kAsicInfoBuffer, '\0');
      if (api.asic_info(l.handle, buf.data()) == amdsmi::kSuccess)
        dev.name = bounded(buf.data(), amdsmi::market_name_length(*version));
    }
    if (dev.name.empty()) dev.name = "AMD GPU " + dev.bdf;
    if (api.memory_total) {
      std::uint64_t total = 0;
      if (api.memory_total(l.handle, amdsmi::kMemVram, &total) == amdsmi::kSuccess)
        dev.vram_total_bytes = static_cast<double>(total);
    }
    found.push_back(std::move(dev));
  }
  devices_ = std::move(found);
  enumerated_ = true;
}

void AmdSmiBackend::resolve_handles() {
  const auto generation = lib_->generation();
  if (std::all_of(devices_.begin(), devices_.end(),
                  [&](const auto& d) { return d.handle_generation == generation; }))
    return;
  const auto listed = list_devices();
  for (auto& dev : devices_) {
    if (dev.handle_generation == generation) continue;
    auto it = std::find_if(listed.begin(), listed.end(), [&](const Listed& l) {
      return !dev.uuid.empty() && l.uuid == dev.uuid;
    });
    if (it == listed.end())
      it = std::find_if(listed.begin(), listed.end(),
                        [&](const Listed& l) { return !dev.bdf.empty() && l.bdf == dev.bdf; });
    if (it != listed.end()) {
      dev.handle = it->handle;
      dev.handle_generation = generation;
      if (dev.lost) {
        dev.lost = false;
        log_once_.clear("lost:" + dev.bdf);
        logger()->info("amd library: GPU {} is back", dev.bdf);
      }
      continue;
    }
    dev.lost = true;
    dev.lost_message =
        "GPU " + dev.bdf + " (UUID " + dev.uuid + ") is no longer listed by the AMD SMI library";
    if (log_once_.first("lost:" + dev.bdf))
      logger()->warn("amd library: {}; the other GPUs keep reporting", dev.lost_message);
  }
}

Detection AmdSmiBackend::detect() {
  std::lock_guard lock(mu_);
  Detection d;
  try {
    auto guard = lib_->acquire();
    enumerate();
  } catch (const std::exception& e) {
    d.reason = e.what();
    return d;
  }
  d.available = !devices_.empty();
  if (!d.available) d.reason = "the AMD SMI library (" + lib_->path() + ") reports no GPU";
  for (const auto& dev : devices_)
    d.devices.push_back({amd_device_id(dev.bdf), Vendor::amd, dev.index, dev.name, dev.bdf});
  return d;
}

Absence AmdSmiBackend::failed(const AmdSmiDevice& dev, const char* function, Status rc,
                              std::vector<SampleError>& errors) {
  const bool first = log_once_.first(dev.bdf + ":" + function + ":" + std::to_string(rc));
  switch (rc) {
    case amdsmi::kNotSupported:
    case amdsmi::kNotYetImplemented:
    case amdsmi::kNoData:
      if (first) logger()->debug("amd library: {} on GPU {}: not supported", function, dev.bdf);
      return Absence::unsupported;
    case amdsmi::kNoPerm:
      if (first) logger()->info("amd library: {} on GPU {}: no permission", function, dev.bdf);
      return Absence::no_permission;
    default: {
      const auto message = std::string(function) + " failed on GPU " + dev.bdf + ": " +
                           lib_->api().describe(rc) + " (" + amdsmi::status_name(rc) + ")";
      if (first) logger()->warn("amd library: {}", message);
      errors.push_back({"amdsmi_error", message, amd_device_id(dev.bdf)});
      return Absence::tool_failed;
    }
  }
}

void AmdSmiBackend::sample_device(AmdSmiDevice& dev, DeviceSample& out,
                                  std::vector<SampleError>& errors) {
  const auto& api = lib_->api();
  const auto version = *lib_->version();
  const auto layout = version.layout;
  auto& m = out.metrics;
  const auto src = Source::amd_smi;
  auto* h = dev.handle;
  const auto fail = [&](Metric metric, const char* fn, Status rc) {
    m.set_absent(metric, failed(dev, fn, rc, errors), src);
  };

  if (api.activity) {
    amdsmi::EngineUsage u{};
    if (auto rc = api.activity(h, &u); rc == amdsmi::kSuccess) {
      m.set(Metric::utilization_percent, u.gfx_activity, src);
      m.set(Metric::memory_utilization_percent, u.umc_activity, src);
      out.engines.push_back({"gfx", Reading::of(u.gfx_activity, src)});
      out.engines.push_back({"umc", Reading::of(u.umc_activity, src)});
      out.engines.push_back({"mm", Reading::of(u.mm_activity, src)});
    } else {
      fail(Metric::utilization_percent, "amdsmi_get_gpu_activity", rc);
      m[Metric::memory_utilization_percent] = m[Metric::utilization_percent];
    }
  }
  const auto memory = [&](amdsmi::MemoryFn* fn, std::uint32_t type, Metric metric,
                          const char* name) {
    if (!fn) return;
    std::uint64_t v = 0;
    if (auto rc = fn(h, type, &v); rc == amdsmi::kSuccess) {
      m.set(metric, static_cast<double>(v), src);
    } else {
      fail(metric, name, rc);
    }
  };
  memory(api.memory_usage, amdsmi::kMemVram, Metric::memory_used_bytes,
         "amdsmi_get_gpu_memory_usage");
  memory(api.memory_total, amdsmi::kMemVram, Metric::memory_total_bytes,
         "amdsmi_get_gpu_memory_total");
  memory(api.memory_usage, amdsmi::kMemGtt, Metric::gtt_used_bytes, "amdsmi_get_gpu_memory_usage");
  memory(api.memory_total, amdsmi::kMemGtt, Metric::gtt_total_bytes, "amdsmi_get_gpu_memory_total");

  if (api.power_info) {
    std::uint64_t current = 0xFFFFU, average = 0xFFFFU, limit = 0xFFFFU;
    Status rc = 0;
    if (layout == amdsmi::Layout::v26) {
      amdsmi::PowerInfoV26 p{};
      rc = api.power_info(h, &p);
      current = p.current_socket_power;
      average = p.average_socket_power;
      limit = p.power_limit;  // W in 26.x
    } else {
      amdsmi::PowerInfoV6 p{};
      rc = api.power_info(h, &p);
      current = p.current_socket_power;
      average = p.average_socket_power;
      limit = p.power_limit;  // W or µW by release: converted below
    }
    if (rc == amdsmi::kSuccess) {
      if (power_valid(current)) {
        m.set(Metric::power_watts, static_cast<double>(current), src);
      } else {
        m.set_absent(Metric::power_watts, Absence::unsupported, src);
      }
      if (power_valid(average)) {
        m.set(Metric::power_average_watts, static_cast<double>(average), src);
      } else {
        m.set_absent(Metric::power_average_watts, Absence::unsupported, src);
      }
      const bool microwatts = amdsmi::power_limit_in_microwatts(version);
      // µW releases still mark "not read" with 0xFFFF; 0 is no cap at all.
      const bool limit_valid =
          microwatts ? limit != 0xFFFFU && limit < 0xFFFFFFFFU && limit > 0 : power_valid(limit);
      if (limit_valid) {
        m.set(Metric::power_limit_watts, static_cast<double>(limit) * (microwatts ? 1e-6 : 1.0),
              src);
      } else {
        m.set_absent(Metric::power_limit_watts, Absence::unsupported, src);
      }
      if (m[Metric::power_watts]) out.power_kind = PowerKind::instant;
      // A board with only the average (Navi, MI200 and older): power::settle below makes
      // power_watts that average (power_kind average).
    } else {
      fail(Metric::power_watts, "amdsmi_get_power_info", rc);
      m[Metric::power_average_watts] = m[Metric::power_watts];
      m[Metric::power_limit_watts] = m[Metric::power_watts];
    }
  }
  if (api.energy) {
    std::uint64_t counter = 0, timestamp = 0;
    float resolution_uj = 0;
    if (auto rc = api.energy(h, &counter, &resolution_uj, &timestamp); rc == amdsmi::kSuccess) {
      if (resolution_uj > 0) {
        m.set(Metric::energy_joules, static_cast<double>(counter) * resolution_uj * 1e-6, src);
        out.energy_kind = EnergyKind::counter;
        out.attributes["energy_resolution_uj"] = std::to_string(resolution_uj);
      } else {
        m.set_absent(Metric::energy_joules, Absence::unsupported, src);
      }
    } else {
      fail(Metric::energy_joules, "amdsmi_get_energy_count", rc);
    }
  }
  if (api.temp_metric) {
    std::int64_t edge = 0, hotspot = 0, mem = 0;
    const auto edge_rc = api.temp_metric(h, amdsmi::kTempEdge, amdsmi::kTempCurrent, &edge);
    const auto hot_rc = api.temp_metric(h, amdsmi::kTempHotspot, amdsmi::kTempCurrent, &hotspot);
    const auto mem_rc = api.temp_metric(h, amdsmi::kTempVram, amdsmi::kTempCurrent, &mem);
    // amdsmi answers degrees Celsius (it divides the hwmon millidegrees by 1000).
    if (edge_rc == amdsmi::kSuccess) {
      m.set(Metric::temperature_celsius, static_cast<double>(edge), src);
      out.attributes["temperature_sensor"] = "edge";
    } else if (hot_rc == amdsmi::kSuccess) {  // MI300-class boards have no edge sensor
      m.set(Metric::temperature_celsius, static_cast<double>(hotspot), src);
      out.attributes["temperature_sensor"] = "junction";
    } else {
      fail(Metric::temperature_celsius, "amdsmi_get_temp_metric", edge_rc);
    }
    if (hot_rc == amdsmi::kSuccess)
      out.attributes["temperature_junction_celsius"] = std::to_string(hotspot);
    if (mem_rc == amdsmi::kSuccess) out.attributes["temperature_mem_celsius"] = std::to_string(mem);
  }
  if (api.clock_info) {
    for (auto [type, metric] : {std::pair{amdsmi::kClkGfx, Metric::clock_graphics_mhz},
                                std::pair{amdsmi::kClkMem, Metric::clock_memory_mhz}}) {
      amdsmi::ClkInfo c{};
      if (auto rc = api.clock_info(h, type, &c); rc == amdsmi::kSuccess) {
        m.set(metric, c.clk, src);
      } else {
        fail(metric, "amdsmi_get_clock_info", rc);
      }
    }
  }
  if (api.fan_speed) {
    std::int64_t speed = 0;
    if (auto rc = api.fan_speed(h, 0, &speed); rc == amdsmi::kSuccess && speed >= 0) {
      m.set(Metric::fan_percent, static_cast<double>(speed) * 100.0 / amdsmi::kMaxFanSpeed, src);
    } else {
      fail(Metric::fan_percent, "amdsmi_get_gpu_fan_speed", rc ? rc : amdsmi::kNotSupported);
    }
  }
  if (api.fan_rpms) {
    std::int64_t rpm = 0;
    if (auto rc = api.fan_rpms(h, 0, &rpm); rc == amdsmi::kSuccess && rpm >= 0) {
      m.set(Metric::fan_rpm, static_cast<double>(rpm), src);
    } else {
      fail(Metric::fan_rpm, "amdsmi_get_gpu_fan_rpms", rc ? rc : amdsmi::kNotSupported);
    }
  }
  if (api.gpu_metrics) {
    read_gpu_metrics(dev, out, errors);
  } else {
    out.throttle_reasons_absent = Absence::unsupported;  // a library without gpu_metrics
  }
  power::settle(out);
  if (options_.processes && api.process_list) {
    read_processes(dev, out, errors);
  } else {
    out.processes_absent = options_.processes ? Absence::unsupported : Absence::not_collected;
  }
}

void AmdSmiBackend::read_gpu_metrics(const AmdSmiDevice& dev, DeviceSample& out,
                                     std::vector<SampleError>& errors) {
  // The library writes its whole amdsmi_gpu_metrics_t (352 bytes in 23.4 up to 4720 in 26.5)
  // into the buffer; only the v1.0-v1.3 head, the same in every known release, is read from it.
  // (A library of another release never gets here: its init is refused.)
  auto& m = out.metrics;
  metrics_buffer_.assign(amdsmi::kGpuMetricsBuffer, std::byte{0});
  const auto rc = lib_->api().gpu_metrics(dev.handle, metrics_buffer_.data());
  if (rc != amdsmi::kSuccess) {
    const auto why = failed(dev, "amdsmi_get_gpu_metrics_info", rc, errors);
    out.throttle_reasons_absent = why;
    m.set_absent(Metric::graphics_activity_percent, why, Source::amd_smi);
    m.set_absent(Metric::dram_activity_percent, why, Source::amd_smi);
    return;
  }
  amdsmi::GpuMetricsHead head{};
  std::memcpy(&head, metrics_buffer_.data(), sizeof head);
  read_activity(dev, head, out, errors);
  if (auto reasons = amdsmi::throttle_reasons(head)) {
    out.throttle_reasons = std::move(*reasons);
    if (head.content_revision >= 3 && head.indep_throttle_status != ~std::uint64_t{0}) {
      char hex[24];
      std::snprintf(hex, sizeof hex, "0x%llx",
                    static_cast<unsigned long long>(head.indep_throttle_status));
      out.attributes["indep_throttle_status"] = hex;
    }
    return;
  }
  out.throttle_reasons_absent = Absence::unsupported;
  if (log_once_.first(dev.bdf + ":throttle_table"))
    logger()->debug("amd library: GPU {}: gpu_metrics table {}.{} has no throttle status", dev.bdf,
                    unsigned{head.format_revision}, unsigned{head.content_revision});
}

void AmdSmiBackend::read_activity(const AmdSmiDevice& dev, const amdsmi::GpuMetricsHead& head,
                                  DeviceSample& out, std::vector<SampleError>& errors) {
  auto& m = out.metrics;
  if (head.format_revision != 1) {
    // An APU's 2.x/3.x table: amdsmi's 1.x fields do not hold its figures (see
    // amdgpu_gpu_metrics.hpp for the sysfs reading of those tables).
    m.set_absent(Metric::graphics_activity_percent, Absence::unsupported, Source::amd_smi);
    m.set_absent(Metric::dram_activity_percent, Absence::unsupported, Source::amd_smi);
    if (log_once_.first(dev.bdf + ":activity_table"))
      logger()->debug(
          "amd library: GPU {}: gpu_metrics table {}.{} is not a discrete GPU's (1.x): "
          "no graphics or memory controller activity from it",
          dev.bdf, unsigned{head.format_revision}, unsigned{head.content_revision});
    return;
  }
  // average_gfx_activity and average_umc_activity, whole percents in every 1.x table.
  m[Metric::graphics_activity_percent] =
      amdgpu::activity_percent(head.average_activity[0], 1.0, Source::amd_smi);
  m[Metric::dram_activity_percent] =
      amdgpu::activity_percent(head.average_activity[1], 1.0, Source::amd_smi);
  for (auto metric : {Metric::graphics_activity_percent, Metric::dram_activity_percent}) {
    if (m[metric] || m[metric].reason() != Absence::tool_failed) continue;
    const std::string message = "amdsmi_get_gpu_metrics_info: " + std::string(to_string(metric)) +
                                " beyond 100 % on GPU " + dev.bdf + ": not read";
    errors.push_back({"amdsmi_error", message, amd_device_id(dev.bdf)});
    if (log_once_.first(message)) logger()->warn("amd library: {}", message);
  }
}

namespace {

template <class Info>
void add_processes(const std::vector<std::byte>& buffer, std::uint32_t n, DeviceSample& out,
                   EngineBusyTracker& engines) {
  for (std::uint32_t i = 0; i < n; ++i) {
    Info info;
    std::memcpy(&info, buffer.data() + std::size_t{i} * sizeof(Info), sizeof(Info));
    ProcessSample p;
    p.pid = info.pid;
    p.name = bounded(info.name, sizeof info.name);
    p.gpu_memory_bytes = info.memory_usage.vram_mem;
    p.gtt_memory_bytes = info.memory_usage.gtt_mem;
    set_engine_usage(p,
                     engines.update({p.pid, out.id, 0}, {{"gfx", info.engine_usage.gfx},
                                                         {"enc", info.engine_usage.enc}}),
                     Source::amd_smi);
    out.processes.push_back(std::move(p));
  }
}

}  // namespace

void AmdSmiBackend::read_processes(AmdSmiDevice& dev, DeviceSample& out,
                                   std::vector<SampleError>& errors) {
  const auto& api = lib_->api();
  const bool v26 = lib_->version()->layout == amdsmi::Layout::v26;
  const bool pids = amdsmi::process_list_gives_pids(*lib_->version());
  if (pids && !api.process_info) {
    out.processes_absent = Absence::unsupported;
    return;
  }
  const std::size_t entry = pids  ? sizeof(std::uint32_t)
                            : v26 ? sizeof(amdsmi::ProcInfoV26)
                                  : sizeof(amdsmi::ProcInfoV6);
  constexpr std::uint32_t kMaxProcesses = 1024;  // the bound: 1024 * 704 B = 704 KiB at most
  std::uint32_t n = 0;
  auto rc = api.process_list(dev.handle, &n, nullptr);  // max 0: the count
  if (rc == amdsmi::kSuccess && n > 0) {
    n = std::min(n + 8, kMaxProcesses);  // room for processes that start meanwhile
    process_buffer_.assign(std::size_t{n} * entry, std::byte{0});
    rc = api.process_list(dev.handle, &n, process_buffer_.data());
    if (rc == amdsmi::kOutOfResources) rc = amdsmi::kSuccess;  // filled up to the bound
    n = std::min<std::uint32_t>(n, static_cast<std::uint32_t>(process_buffer_.size() / entry));
  }
  if (rc != amdsmi::kSuccess) {
    out.processes_absent = failed(dev, "amdsmi_get_gpu_process_list", rc, errors);
    return;
  }
  if (pids) {
    // 23.x and 24.5.0: the list holds pids; each one's amdsmi_proc_info_t is asked for. A
    // process that ended in between (or a slot the library left empty) is skipped.
    std::vector<std::byte> infos;
    std::uint32_t found = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      std::uint32_t pid = 0;
      std::memcpy(&pid, process_buffer_.data() + std::size_t{i} * sizeof pid, sizeof pid);
      amdsmi::ProcInfoV6 info{};
      if (pid == 0 || api.process_info(dev.handle, pid, &info) != amdsmi::kSuccess) continue;
      infos.resize(infos.size() + sizeof info);
      std::memcpy(infos.data() + std::size_t{found++} * sizeof info, &info, sizeof info);
    }
    add_processes<amdsmi::ProcInfoV6>(infos, found, out, engines_);
  } else if (v26) {
    add_processes<amdsmi::ProcInfoV26>(process_buffer_, n, out, engines_);
  } else {
    add_processes<amdsmi::ProcInfoV6>(process_buffer_, n, out, engines_);
  }
  std::sort(out.processes.begin(), out.processes.end(),
            [](const ProcessSample& a, const ProcessSample& b) { return a.pid < b.pid; });
}

GpuSnapshot AmdSmiBackend::sample() {
  std::lock_guard lock(mu_);
  GpuSnapshot snap;
  snap.monotonic_ns = options_.clock();
  {
    auto guard = lib_->acquire();
    if (!enumerated_) enumerate();
    resolve_handles();
    engines_.begin(snap.monotonic_ns);
    const auto generation = lib_->generation();
    for (auto& dev : devices_) {
      DeviceSample d;
      d.id = amd_device_id(dev.bdf);
      d.vendor = Vendor::amd;
      d.index = dev.index;
      d.name = dev.name;
      d.pci_bus_id = dev.bdf;
      if (!dev.uuid.empty()) d.attributes["uuid"] = dev.uuid;
      d.attributes["metrics_source"] = "amd-smi-library";
      if (dev.lost) {
        d.metrics.fill_absent(Absence::lost, Source::amd_smi);
        d.processes_absent = Absence::lost;
        d.throttle_reasons_absent = Absence::lost;
        d.attributes["state"] = "lost";
        snap.errors.push_back({"gpu_lost", dev.lost_message, d.id});
      } else if (dev.handle_generation == generation) {
        sample_device(dev, d, snap.errors);
        d.metrics.fill_absent(Absence::unsupported, Source::amd_smi);  // what amdsmi lacks
      }
      snap.devices.push_back(std::move(d));
    }
  }  // lazy mode: the library is shut down here, before the /proc reads
  process_table_.fill(snap.devices);
  return snap;
}

}  // namespace gpustream::amd_lib_detail
