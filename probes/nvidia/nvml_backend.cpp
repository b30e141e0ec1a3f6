// NvmlBackend: library, session, enumeration, lost GPUs, and the per-process query. Per-device
// metric reading is in nvml_device.cpp.
#include "nvidia/nvml_backend.hpp"

#include "gpustream/probes/readers.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace gpustream::nvidia_detail {
namespace {

using std::chrono::milliseconds;

std::string c_string(const char* buf, std::size_t size) {
  return std::string(buf, std::find(buf, buf + size, '\0'));
}

}  // namespace

NvmlBackend::NvmlBackend(NvmlOptions options)
    : options_(std::move(options)),
      library_(DynamicLibrary::load(options_.library)),
      api_(nvml::Api::load(library_)),
      processes_(options_.paths.procfs_root, options_.clock) {
  if (!options_.clock) options_.clock = [] { return std::chrono::steady_clock::now(); };
  if (!options_.host_clock) options_.host_clock = &read_host_clock;
  new_session();
}

NvmlBackend::~NvmlBackend() {
  std::lock_guard lock(mu_);
  release_gpm();     // GPM samples are freed while NVML is still up
  session_.reset();  // shuts NVML down (persistent mode) while the library is still loaded
}

void NvmlBackend::new_session() {
  if (session_ && reinit_hook_) reinit_hook_();  // the event watcher lets its session go
  release_gpm();                                 // a GPM sample pair belongs to one session
  session_.reset();
  session_ = std::make_unique<LibrarySession>(
      "NVML", options_.mode,
      [this]() -> std::optional<std::string> {
        const auto rc = api_.init();
        if (rc != nvml::kSuccess) return api_.init_name + ": " + api_.describe(rc);
        generation_.fetch_add(1);
        return std::nullopt;
      },
      [this] { api_.shutdown(); });
}

LibrarySession::Guard NvmlBackend::acquire() {
  boost::system::error_code ec;
  std::string message;
  auto guard = session_->acquire(ec, &message);
  if (!guard) {
    troubled_ = true;
    if (init_failure_ != message) {
      init_failure_ = message;
      logger()->warn("nvidia probe: {}", message);
    }
    throw std::runtime_error(message);
  }
  init_failure_.clear();
  return guard;
}

LibrarySession::Stats NvmlBackend::session_stats() const {
  std::lock_guard lock(mu_);
  return session_->stats();
}

std::string NvmlBackend::key(const NvmlDevice& dev, Call call, nvml::Return rc) const {
  return dev.uuid + ":" + std::to_string(static_cast<int>(call)) + ":" + std::to_string(rc);
}

void NvmlBackend::succeeded(NvmlDevice& dev, Call call) {
  auto& last = dev.failing[static_cast<std::size_t>(call)];
  if (last == nvml::kSuccess) return;
  log_once_.clear(key(dev, call, last));
  last = nvml::kSuccess;
}

Absence NvmlBackend::failed(NvmlDevice& dev, Call call, nvml::Return rc, const char* function,
                            std::vector<SampleError>& errors) {
  auto& last = dev.failing[static_cast<std::size_t>(call)];
  if (last != rc && last != nvml::kSuccess) log_once_.clear(key(dev, call, last));
  last = rc;
  const bool first = log_once_.first(key(dev, call, rc));
  switch (rc) {
    case nvml::kErrorNotSupported:
    case nvml::kErrorFunctionNotFound:
      if (first) logger()->debug("nvidia probe: {} on GPU {}: not supported", function, dev.uuid);
      return Absence::unsupported;
    case nvml::kErrorNoPermission:
      if (first)
        logger()->info("nvidia probe: {} on GPU {}: no permission ({})", function, dev.uuid,
                       api_.describe(rc));
      return Absence::no_permission;
    case nvml::kErrorGpuIsLost:
      mark_lost(dev, rc, function);
      return Absence::lost;
    default: {
      const auto message = std::string(function) + " failed on GPU " + dev.uuid + ": " +
                           api_.describe(rc) + " (" + std::string(nvml::return_code_name(rc)) + ")";
      if (first) logger()->warn("nvidia probe: {}", message);
      errors.push_back({"nvml_error", message, dev.uuid});
      return Absence::tool_failed;
    }
  }
}

bool NvmlBackend::record(NvmlDevice& dev, nvml::Return rc, Call call, const char* function,
                         MetricSet& into, std::initializer_list<Metric> metrics,
                         std::vector<SampleError>& errors) {
  if (rc == nvml::kSuccess) {
    succeeded(dev, call);
    return true;
  }
  const auto why = failed(dev, call, rc, function, errors);
  for (auto metric : metrics) into.set_absent(metric, why, Source::nvml);
  return false;
}

void NvmlBackend::mark_lost(NvmlDevice& dev, nvml::Return rc, const char* function) {
  dev.retry_delay = dev.retry_delay.count() == 0
                        ? options_.lost_retry_initial
                        : std::min(dev.retry_delay * 2, options_.lost_retry_max);
  dev.lost = true;
  dev.retry_at = options_.clock() + dev.retry_delay;
  dev.handle_generation = 0;
  dev.gpm.release();
  dev.lost_message = "GPU " + dev.uuid + (dev.name.empty() ? "" : " (" + dev.name + ")") +
                     " is lost: " + function + " returned " +
                     std::string(nvml::return_code_name(rc));
  if (log_once_.first("lost:" + dev.uuid))
    logger()->warn("nvidia probe: {}; the other GPUs keep reporting", dev.lost_message);
}

Detection NvmlBackend::detect() {
  std::lock_guard lock(mu_);
  Detection d;
  try {
    const bool any_lost =
        std::any_of(devices_.begin(), devices_.end(), [](const auto& x) { return x.lost; });
    if (options_.mode == LibrarySessionMode::persistent && (troubled_ || any_lost)) new_session();
    auto guard = acquire();
    enumerate();
    troubled_ = false;
    for (auto& dev : devices_) {  // each GPU, then its MIG instances (nvml_mig.cpp)
      d.devices.push_back({dev.uuid, Vendor::nvidia, dev.index, dev.name, dev.pci_bus_id});
      detect_mig(dev, d.devices);
    }
  } catch (const std::exception& e) {
    troubled_ = true;
    d = Detection{};
    d.reason = e.what();
    return d;
  }
  d.available = !devices_.empty();
  if (!d.available) d.reason = "NVML (" + library_.path() + ") reports no GPU";
  return d;
}

void NvmlBackend::enumerate() {
  unsigned count = 0;
  if (const auto rc = api_.device_count(&count); rc != nvml::kSuccess)
    throw std::runtime_error("nvmlDeviceGetCount: " + api_.describe(rc));
  if (api_.driver_version && driver_version_.empty()) {
    char buf[nvml::kDriverVersionBufferSize] = {};
    if (api_.driver_version(buf, sizeof buf) == nvml::kSuccess)
      driver_version_ = c_string(buf, sizeof buf);
  }
  const auto generation = generation_.load();
  std::vector<NvmlDevice> found;
  for (unsigned i = 0; i < count; ++i) {
    nvml::Device handle = nullptr;
    auto rc = api_.handle_by_index(i, &handle);
    char buf[nvml::kDeviceUuidBufferSize] = {};
    if (rc == nvml::kSuccess) rc = api_.uuid(handle, buf, sizeof buf);
    if (rc != nvml::kSuccess) {
      if (log_once_.first("enumerate:" + std::to_string(i) + ":" + std::to_string(rc)))
        logger()->warn("nvidia probe: GPU index {} skipped: {}", i, api_.describe(rc));
      continue;
    }
    NvmlDevice dev;
    dev.uuid = c_string(buf, sizeof buf);
    // Carry what must survive a re-enumeration (time stamps, buffers, failure memory).
    for (auto& old : devices_) {
      if (old.uuid != dev.uuid) continue;
      dev = std::move(old);
      old = NvmlDevice{};  // consumed (its uuid no longer matches)
      break;
    }
    dev.index = static_cast<int>(i);
    dev.handle = handle;
    dev.handle_generation = generation;
    dev.lost = false;
    if (api_.name) {
      char name[nvml::kDeviceNameBufferSize] = {};
      if (api_.name(handle, name, sizeof name) == nvml::kSuccess)
        dev.name = c_string(name, sizeof name);
    }
    if (api_.pci_info) {
      nvml::PciInfo pci{};
      if (api_.pci_info(handle, &pci) == nvml::kSuccess) {
        dev.pci_bus_id = api_.pci_legacy ? c_string(pci.bus_id_legacy, sizeof pci.bus_id_legacy)
                                         : c_string(pci.bus_id, sizeof pci.bus_id);
        dev.pci_bus_id = nvidia::normalize_pci_bus_id(dev.pci_bus_id);
        dev.pci_device_id = pci.pci_device_id;
      }
    }
    dev.architecture.reset();
    if (api_.architecture) {
      unsigned arch = nvml::kArchUnknown;
      if (api_.architecture(handle, &arch) == nvml::kSuccess && arch != nvml::kArchUnknown)
        dev.architecture = arch;
    }
    dev.power_fields_unsupported = false;
    dev.power_ring.unsupported = false;
    if (api_.memory_v2) {
      nvml::MemoryV2 m{};
      m.version = nvml::kMemoryV2Version;
      if (api_.memory_v2(handle, &m) == nvml::kSuccess) dev.memory_total_bytes = m.total;
    } else if (api_.memory) {
      nvml::Memory m{};
      if (api_.memory(handle, &m) == nvml::kSuccess) dev.memory_total_bytes = m.total;
    }
    found.push_back(std::move(dev));
  }
  devices_ = std::move(found);
  enumerated_ = true;
}

void NvmlBackend::resolve_handles(std::vector<SampleError>& errors) {
  const auto generation = generation_.load();
  const auto now = options_.clock();
  for (auto& dev : devices_) {
    if (dev.handle_generation == generation) continue;
    if (dev.lost && now < dev.retry_at) continue;
    nvml::Device handle = nullptr;
    const auto rc = api_.handle_by_uuid(dev.uuid.c_str(), &handle);
    if (rc == nvml::kSuccess) {
      dev.handle = handle;
      dev.handle_generation = generation;
      succeeded(dev, Call::handle);
      if (dev.lost) {
        dev.lost = false;
        log_once_.clear("lost:" + dev.uuid);
        logger()->info("nvidia probe: GPU {} is back", dev.uuid);
      }
    } else if (rc == nvml::kErrorGpuIsLost || rc == nvml::kErrorNotFound) {
      mark_lost(dev, rc, "nvmlDeviceGetHandleByUUID");
    } else {
      failed(dev, Call::handle, rc, "nvmlDeviceGetHandleByUUID", errors);
    }
  }
}

bool NvmlBackend::retry_due() const {
  const auto now = options_.clock();
  return std::any_of(devices_.begin(), devices_.end(),
                     [&](const auto& d) { return d.lost && now >= d.retry_at; });
}

NvmlSample NvmlBackend::sample(std::int64_t monotonic_ns) {
  std::lock_guard lock(mu_);
  NvmlSample out;
  auto& snap = out.snapshot;
  snap.probe = "nvidia";
  if (options_.mode == LibrarySessionMode::persistent && retry_due()) new_session();
  {
    auto guard = acquire();
    if (!enumerated_) enumerate();
    resolve_handles(snap.errors);
    snap.devices.reserve(devices_.size());
    const auto generation = generation_.load();
    // One offset per sample from the host clocks to the steady clock (the power sample ring).
    const auto clocks =
        api_.samples ? HostClocks::now(options_.clock, options_.host_clock) : HostClocks{};
    for (auto& dev : devices_) {
      DeviceSample d = device_base(dev);
      const bool sampled = !dev.lost && dev.handle_generation == generation;
      if (sampled) sample_device(dev, d, snap.errors);
      if (sampled && !dev.lost) sample_health(dev, d, snap.errors);
      if (sampled && !dev.lost) sample_gpm(dev, d, snap.errors);
      if (sampled && !dev.lost) sample_power_ring(dev, d, clocks, monotonic_ns, snap.errors);
      if (dev.lost) {
        d.metrics.fill_absent(Absence::lost, Source::nvml);
        d.attributes["state"] = "lost";
        const auto wait = std::chrono::duration_cast<milliseconds>(
            std::max(dev.retry_at - options_.clock(), std::chrono::steady_clock::duration{}));
        snap.errors.push_back(
            {"gpu_lost",
             dev.lost_message + "; looking for it again in " + std::to_string(wait.count()) + " ms",
             dev.uuid});
      } else if (dev.handle_generation != generation) {
        d.metrics.fill_absent(Absence::tool_failed, Source::nvml);  // its handle lookup failed
      } else {
        d.metrics.fill_absent(Absence::unsupported, Source::nvml);  // metrics NVML has not
      }
      snap.devices.push_back(std::move(d));
      if (sampled && !dev.lost) sample_mig(dev, snap.devices.size() - 1, snap);
    }
  }  // the guard is released here: in lazy mode NVML is shut down before the /proc reads
  fill_process_details(snap);
  const bool all_lost = !devices_.empty() && std::all_of(devices_.begin(), devices_.end(),
                                                         [](const auto& d) { return d.lost; });
  if (all_lost) {
    troubled_ = true;
    out.failed = true;
  }
  return out;
}

void NvmlBackend::fill_process_details(GpuSnapshot& snap) {
  for (auto& d : snap.devices)  // the contract: processes sorted by pid
    std::sort(d.processes.begin(), d.processes.end(),
              [](const ProcessSample& a, const ProcessSample& b) { return a.pid < b.pid; });
  processes_.fill(snap.devices);
}

std::vector<ProcessDeviceUsage> NvmlBackend::process_usage(std::int64_t pid,
                                                           std::vector<SampleError>& errors) {
  std::lock_guard lock(mu_);
  if (options_.mode == LibrarySessionMode::persistent && retry_due()) new_session();
  auto guard = acquire();
  if (!enumerated_) enumerate();
  resolve_handles(errors);
  std::vector<ProcessDeviceUsage> out;
  const auto generation = generation_.load();
  for (auto& dev : devices_) {
    ProcessDeviceUsage u{.device_id = dev.uuid,
                         .index = dev.index,
                         .name = dev.name,
                         .device_memory_total_bytes = dev.memory_total_bytes,
                         .source = Source::nvml};
    if (!dev.lost && dev.handle_generation == generation) usage_on_device(dev, pid, u, errors);
    if (dev.lost) errors.push_back({"gpu_lost", dev.lost_message, dev.uuid});
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace gpustream::nvidia_detail
