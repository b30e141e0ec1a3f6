// NvmlBackend: MIG (Multi-Instance GPU). When a GPU's MIG mode is on, each of its MIG instances
// becomes a device of its own in the snapshot: id = the instance's UUID ("MIG-..."), `parent` =
// the GPU's UUID, its GPU-instance and compute-instance ids, its profile, its memory and its
// processes, all read on the MIG device handle. Its activity metrics (GPM, Hopper and newer) are
// those of its GPU instance: nvmlGpmMigSampleGet on the GPU's handle with the id from
// nvmlDeviceGetGpuInstanceId (nvml_gpm.cpp), so compute instances of one GPU instance report the
// same figures. NVML has no per-instance utilization, power, temperature, clocks or fan: those
// are absent `unsupported`, never copied from the GPU. The GPU keeps its device-wide metrics and
// is marked `partitioned` (docs/probes.md, "MIG").
//
// Instance handles are looked up again in every sample (nvmlDeviceGetMigDeviceHandleByIndex), so
// a reconfiguration (instances created or destroyed) shows in the next sample, and lazy sessions
// need nothing more. Every MIG function is optional: a library without nvmlDeviceGetMigMode is an
// older driver with no MIG, said once in the log.
#include <algorithm>
#include <string_view>

#include "nvidia/nvml_backend.hpp"

namespace gpustream::nvidia_detail {
namespace {

std::string c_string(const char* buf, std::size_t size) {
  return std::string(buf, std::find(buf, buf + size, '\0'));
}

/// "1g.5gb" from "NVIDIA A100-SXM4-40GB MIG 1g.5gb"; the whole name when it has no " MIG ".
std::string profile_of(const std::string& name) {
  constexpr std::string_view kMarker = "MIG ";
  const auto at = name.rfind(kMarker);
  if (at == std::string::npos || (at > 0 && name[at - 1] != ' ')) return name;
  return name.substr(at + kMarker.size());
}

}  // namespace

void NvmlBackend::sample_mig(NvmlDevice& dev, std::size_t at, GpuSnapshot& snap) {
  if (!api_.mig_mode) {
    if (log_once_.first("mig:no_symbol"))
      logger()->info("nvidia probe: no MIG: {} lacks nvmlDeviceGetMigMode (a driver before R450)",
                     library_.path());
    return;
  }
  unsigned current = 0, pending = 0;
  const auto rc = api_.mig_mode(dev.handle, &current, &pending);
  if (rc == nvml::kErrorNotSupported) {  // a GPU without MIG: nothing to say
    succeeded(dev, Call::mig_mode);
    dev.mig_instances.clear();
    return;
  }
  if (rc != nvml::kSuccess) {
    failed(dev, Call::mig_mode, rc, "nvmlDeviceGetMigMode", snap.errors);
    return;
  }
  succeeded(dev, Call::mig_mode);
  {
    auto& gpu = snap.devices[at];
    gpu.attributes["mig_mode"] = current == nvml::kDeviceMigEnable ? "enabled" : "disabled";
    if (pending != current)
      gpu.attributes["mig_mode_pending"] =
          pending == nvml::kDeviceMigEnable ? "enabled" : "disabled";
    if (current != nvml::kDeviceMigEnable) {
      dev.mig_instances.clear();
      return;
    }
    gpu.partitioned = true;
  }
  if (!api_.max_mig_device_count || !api_.mig_handle_by_index) {
    if (log_once_.first("mig:partial"))
      logger()->warn(
          "nvidia probe: GPU {} is in MIG mode but {} lacks {}: its instances are not "
          "reported",
          dev.uuid, library_.path(), api_.mig_missing);
    return;
  }
  unsigned max = 0;
  if (const auto c = api_.max_mig_device_count(dev.handle, &max); c != nvml::kSuccess) {
    failed(dev, Call::mig_count, c, "nvmlDeviceGetMaxMigDeviceCount", snap.errors);
    return;
  }
  succeeded(dev, Call::mig_count);
  max = std::min(max, nvml::kMaxMigDevices);
  std::vector<NvmlDevice> seen;
  for (unsigned i = 0; i < max && !dev.lost; ++i) {
    nvml::Device mh = nullptr;
    const auto hr = api_.mig_handle_by_index(dev.handle, i, &mh);
    if (hr == nvml::kErrorNotFound || hr == nvml::kErrorInvalidArgument) continue;  // empty slot
    if (hr != nvml::kSuccess) {
      failed(dev, Call::mig_handle, hr, "nvmlDeviceGetMigDeviceHandleByIndex", snap.errors);
      continue;
    }
    succeeded(dev, Call::mig_handle);
    // Sanity checks where the library has them: a MIG handle, of this GPU.
    unsigned is_mig = 1;
    if (api_.is_mig_device_handle && api_.is_mig_device_handle(mh, &is_mig) == nvml::kSuccess &&
        is_mig == 0)
      continue;
    nvml::Device owner = nullptr;
    if (api_.mig_parent && api_.mig_parent(mh, &owner) == nvml::kSuccess && owner != dev.handle)
      continue;
    char buf[nvml::kDeviceUuidBufferSize] = {};
    std::string uuid;
    if (api_.uuid(mh, buf, sizeof buf) == nvml::kSuccess) uuid = c_string(buf, sizeof buf);
    NvmlDevice inst;
    auto old = std::find_if(dev.mig_instances.begin(), dev.mig_instances.end(),
                            [&](const NvmlDevice& x) { return !uuid.empty() && x.uuid == uuid; });
    if (old != dev.mig_instances.end()) inst = std::move(*old);
    inst.uuid = uuid;
    inst.handle = mh;
    inst.handle_generation = dev.handle_generation;
    inst.index = dev.index;
    inst.pci_bus_id = dev.pci_bus_id;
    inst.lost = false;
    auto d = sample_mig_instance(dev, inst, i, snap.errors);
    if (inst.lost) {  // the instance's GPU is gone: the GPU is, too
      mark_lost(dev, nvml::kErrorGpuIsLost, "a MIG device call");
      break;
    }
    snap.devices.push_back(std::move(d));
    seen.push_back(std::move(inst));
  }
  dev.mig_instances = std::move(seen);
}

void NvmlBackend::detect_mig(const NvmlDevice& dev, std::vector<DeviceInfo>& out) {
  if (!api_.mig_mode || !api_.max_mig_device_count || !api_.mig_handle_by_index) return;
  unsigned current = 0, pending = 0, max = 0;
  if (api_.mig_mode(dev.handle, &current, &pending) != nvml::kSuccess ||
      current != nvml::kDeviceMigEnable ||
      api_.max_mig_device_count(dev.handle, &max) != nvml::kSuccess)
    return;  // a failure here is reported by the next sample
  max = std::min(max, nvml::kMaxMigDevices);
  for (unsigned i = 0; i < max; ++i) {
    nvml::Device mh = nullptr;
    if (api_.mig_handle_by_index(dev.handle, i, &mh) != nvml::kSuccess) continue;
    char buf[nvml::kDeviceUuidBufferSize] = {};
    if (api_.uuid(mh, buf, sizeof buf) != nvml::kSuccess) continue;
    DeviceInfo info{c_string(buf, sizeof buf), Vendor::nvidia, dev.index, "", dev.pci_bus_id};
    char name[nvml::kDeviceNameBufferSize] = {};
    if (api_.name && api_.name(mh, name, sizeof name) == nvml::kSuccess)
      info.name = c_string(name, sizeof name);
    out.push_back(std::move(info));
  }
}

DeviceSample NvmlBackend::sample_mig_instance(NvmlDevice& parent, NvmlDevice& inst, unsigned slot,
                                              std::vector<SampleError>& errors) {
  DeviceSample d;
  d.vendor = Vendor::nvidia;
  d.index = parent.index;
  d.pci_bus_id = parent.pci_bus_id;
  d.parent = parent.uuid;
  d.attributes["mig_index"] = std::to_string(slot);
  if (!driver_version_.empty()) d.attributes["driver_version"] = driver_version_;
  MigIdentity mig;
  auto& m = d.metrics;
  const auto id = [&](nvml::UintFn* fn, const char* function, unsigned& into) {
    if (!fn) return false;
    const auto rc = fn(inst.handle, &into);
    if (rc == nvml::kSuccess) return true;
    failed(parent, Call::mig_ids, rc, function, errors);
    return false;
  };
  const bool gi = id(api_.gpu_instance_id, "nvmlDeviceGetGpuInstanceId", mig.gpu_instance_id);
  const bool ci =
      id(api_.compute_instance_id, "nvmlDeviceGetComputeInstanceId", mig.compute_instance_id);
  if (gi && ci) succeeded(parent, Call::mig_ids);
  if (inst.uuid.empty()) {  // no UUID from the driver: a stable id of our own
    inst.uuid = parent.uuid + "/mig/" +
                (gi && ci ? std::to_string(mig.gpu_instance_id) + "/" +
                                std::to_string(mig.compute_instance_id)
                          : std::to_string(slot));
  }
  d.id = inst.uuid;
  d.attributes["uuid"] = inst.uuid;
  if (api_.name) {
    char name[nvml::kDeviceNameBufferSize] = {};
    if (api_.name(inst.handle, name, sizeof name) == nvml::kSuccess)
      inst.name = c_string(name, sizeof name);
  }
  d.name = inst.name;
  mig.profile = profile_of(inst.name);
  // Without the ids the instance is still reported, with the slot as its identity.
  if (!(gi && ci)) d.attributes["mig_ids"] = "unknown";
  d.mig = std::move(mig);

  // Memory: the instance's own slice.
  const std::initializer_list<Metric> kMemory{Metric::memory_used_bytes, Metric::memory_total_bytes,
                                              Metric::memory_free_bytes};
  const auto memory = [&](nvml::Return rc, const char* function, unsigned long long used,
                          unsigned long long total, unsigned long long free) {
    if (!record(inst, rc, Call::memory, function, m, kMemory, errors)) return;
    m.set(Metric::memory_used_bytes, static_cast<double>(used), Source::nvml);
    m.set(Metric::memory_total_bytes, static_cast<double>(total), Source::nvml);
    m.set(Metric::memory_free_bytes, static_cast<double>(free), Source::nvml);
  };
  if (api_.memory_v2) {
    nvml::MemoryV2 mem{};
    mem.version = nvml::kMemoryV2Version;
    const auto rc = api_.memory_v2(inst.handle, &mem);
    memory(rc, "nvmlDeviceGetMemoryInfo_v2", mem.used, mem.total, mem.free);
  } else if (api_.memory) {
    nvml::Memory mem{};
    const auto rc = api_.memory(inst.handle, &mem);
    memory(rc, "nvmlDeviceGetMemoryInfo", mem.used, mem.total, mem.free);
  }
  if (inst.lost) return d;

  // Processes: those running in this instance.
  Absence why = Absence::unsupported;
  if (read_all_processes(inst, scratch_, errors, &why)) {
    d.processes.reserve(scratch_.size());
    for (const auto& e : scratch_) {
      ProcessSample p;
      p.pid = e.pid;
      p.gpu_memory_bytes = e.used_gpu_memory_bytes;
      d.processes.push_back(std::move(p));
    }
  } else if (!inst.lost) {
    d.processes_absent = why;
  }
  // Activity (GPM): the samples of the instance's GPU instance (shared by its compute
  // instances).
  sample_gpm_mig(parent, inst, gi ? std::optional<unsigned>(d.mig->gpu_instance_id) : std::nullopt,
                 d, errors);
  if (inst.lost) return d;
  // Everything else NVML has only for the whole GPU (throttling included).
  m.fill_absent(Absence::unsupported, Source::nvml);
  d.throttle_reasons_absent = Absence::unsupported;
  return d;
}

}  // namespace gpustream::nvidia_detail
