// NVML events: the optional event functions, the backend's event session, and the watcher
// thread (see nvml_events.hpp).
#include "nvidia/nvml_events.hpp"

#include <algorithm>
#include <exception>
#include <utility>

#include "gpustream/log.hpp"
#include "gpustream/model.hpp"
#include "nvidia/nvml_backend.hpp"

namespace gpustream::nvml {

EventApi EventApi::load(const DynamicLibrary& lib) {
  EventApi api;
  api.create = lib.optional<EventSetCreateFn>("nvmlEventSetCreate");
  api.free = lib.optional<EventSetFreeFn>("nvmlEventSetFree");
  api.register_events = lib.optional<RegisterEventsFn>("nvmlDeviceRegisterEvents");
  api.supported = lib.optional<SupportedEventsFn>("nvmlDeviceGetSupportedEventTypes");
  const auto wait = lib.first_of<EventSetWaitFn>({"nvmlEventSetWait_v2", "nvmlEventSetWait"});
  api.wait = wait.function;
  api.wait_name = wait.function ? std::string(wait.name) : std::string("nvmlEventSetWait_v2");
  if (!api.create)
    api.missing = "nvmlEventSetCreate";
  else if (!api.register_events)
    api.missing = "nvmlDeviceRegisterEvents";
  else if (!api.wait)
    api.missing = "nvmlEventSetWait_v2";
  else if (!api.free)
    api.missing = "nvmlEventSetFree";
  return api;
}

EventKind event_kind_of(unsigned long long event_type) noexcept {
  switch (event_type) {
    case kEventXidCriticalError:
      return EventKind::xid;
    case kEventSingleBitEccError:
      return EventKind::ecc_single_bit;
    case kEventDoubleBitEccError:
      return EventKind::ecc_double_bit;
    case kEventClock:
      return EventKind::clock_event;
    case kEventPowerSourceChange:
      return EventKind::power_source;
    case kEventPState:
      return EventKind::pstate;
    default:
      return EventKind::other;
  }
}

}  // namespace gpustream::nvml

namespace gpustream::nvidia_detail {

// --- the backend's part ---

NvmlBackend::EventSession NvmlBackend::event_session() {
  std::lock_guard lock(mu_);
  EventSession s;
  s.guard = acquire();
  if (!enumerated_) enumerate();
  std::vector<SampleError> errors;  // reported by the samples, which meet the same problems
  resolve_handles(errors);
  s.generation = generation_.load();
  for (const auto& dev : devices_)
    if (!dev.lost && dev.handle_generation == s.generation)
      s.devices.emplace_back(dev.uuid, dev.handle);
  return s;
}

void NvmlBackend::set_reinit_hook(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  reinit_hook_ = std::move(hook);
}

// --- the watcher ---

NvmlEventWatcher::NvmlEventWatcher(std::shared_ptr<NvmlBackend> backend, Probe::EventSink sink,
                                   EventWatcherOptions options)
    : backend_(std::move(backend)),
      sink_(std::move(sink)),
      options_(std::move(options)),
      api_(nvml::EventApi::load(backend_->library())) {
  backend_->set_reinit_hook([this] { release_for_reinit(); });
  thread_ = std::thread([this] { run(); });
}

NvmlEventWatcher::~NvmlEventWatcher() { stop(); }

void NvmlEventWatcher::stop() noexcept {
  try {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
    backend_->set_reinit_hook({});
  } catch (const std::exception& e) {
    logger()->error("nvidia probe: stopping the event thread: {}", e.what());
  }
}

void NvmlEventWatcher::release_for_reinit() {
  std::unique_lock lock(mu_);
  if (!holding_) return;
  release_requested_ = true;
  cv_.notify_all();
  cv_.wait(lock, [&] { return !holding_; });
}

bool NvmlEventWatcher::stopping() {
  std::lock_guard lock(mu_);
  return stop_;
}

void NvmlEventWatcher::pause(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, d, [&] { return stop_; });
}

void NvmlEventWatcher::run() {
  const auto& lib = backend_->library().path();
  if (!api_.missing.empty()) {
    if (log_once_.first("missing"))
      logger()->info("nvidia probe: no GPU events: {} missing from {}", api_.missing, lib);
    return;
  }
  if (backend_->mode() == LibrarySessionMode::lazy) {
    if (log_once_.first("lazy"))
      logger()->info(
          "nvidia probe: no GPU events: they need NVML initialized all along, and the library "
          "session is lazy (GPUSTREAM_LIBRARY_SESSION / library_session)");
    return;
  }
  const auto timeout = static_cast<unsigned>(std::max<long long>(options_.wait_timeout.count(), 1));
  std::uint64_t idle_generation = 0;  // nothing to watch in this NVML session: wait for another
  while (!stopping()) {
    if (!set_) {
      if (idle_generation != 0 && backend_->generation() == idle_generation) {
        pause(options_.wait_timeout);
        continue;
      }
      if (!begin()) {
        idle_generation = std::max<std::uint64_t>(backend_->generation(), 1);
        pause(options_.wait_timeout);
        continue;
      }
      idle_generation = 0;
    }
    bool release = false;
    {
      std::lock_guard lock(mu_);
      release = release_requested_;
    }
    if (release || backend_->generation() != generation_) {
      end();
      continue;
    }
    nvml::EventData data{};
    const auto rc = api_.wait(set_, &data, timeout);
    if (rc == nvml::kSuccess) {
      deliver(data);
    } else if (rc != nvml::kErrorTimeout) {
      if (log_once_.first("wait:" + std::to_string(rc)))
        logger()->warn("nvidia probe: {}: {} ({}); events resume when it answers again",
                       api_.wait_name, backend_->api().describe(rc), nvml::return_code_name(rc));
      if (rc == nvml::kErrorGpuIsLost || rc == nvml::kErrorUninitialized) end();
      pause(options_.wait_timeout);
    }
  }
  end();
}

bool NvmlEventWatcher::begin() {
  NvmlBackend::EventSession s;
  try {
    s = backend_->event_session();
  } catch (const std::exception& e) {
    if (log_once_.first(std::string("session:") + e.what()))
      logger()->info("nvidia probe: no GPU events for now: {}", e.what());
    return false;
  }
  const auto& api = backend_->api();
  nvml::EventSet set = nullptr;
  if (const auto rc = api_.create(&set); rc != nvml::kSuccess || !set) {
    if (log_once_.first("create:" + std::to_string(rc)))
      logger()->warn("nvidia probe: no GPU events: nvmlEventSetCreate: {}", api.describe(rc));
    return false;
  }
  std::vector<Registered> registered;
  for (const auto& [uuid, handle] : s.devices) {
    unsigned long long mask = nvml::kWatchedEvents;
    if (api_.supported) {
      unsigned long long supported = 0;
      const auto rc = api_.supported(handle, &supported);
      if (rc == nvml::kSuccess) {
        mask &= supported;
      } else if (rc == nvml::kErrorNotSupported) {
        mask = 0;
      } else if (log_once_.first("supported:" + uuid + ":" + std::to_string(rc))) {
        logger()->info("nvidia probe: GPU {}: nvmlDeviceGetSupportedEventTypes: {}", uuid,
                       api.describe(rc));
      }
    }
    if (mask == 0) {
      if (log_once_.first("none:" + uuid))
        logger()->info("nvidia probe: GPU {} reports none of the events gpustream watches", uuid);
      continue;
    }
    const auto rc = api_.register_events(handle, mask, set);
    if (rc != nvml::kSuccess) {
      if (log_once_.first("register:" + uuid + ":" + std::to_string(rc)))
        logger()->info("nvidia probe: GPU {}: no events: nvmlDeviceRegisterEvents: {} ({})", uuid,
                       api.describe(rc), nvml::return_code_name(rc));
      continue;
    }
    logger()->debug("nvidia probe: GPU {}: watching events 0x{:x}", uuid, mask);
    registered.push_back({uuid, handle});
  }
  if (registered.empty()) {
    api_.free(set);
    return false;
  }
  std::lock_guard lock(mu_);
  set_ = set;
  registered_ = std::move(registered);
  generation_ = s.generation;
  session_ = std::move(s.guard);
  holding_ = true;
  return true;
}

void NvmlEventWatcher::end() {
  if (set_) api_.free(set_);
  set_ = nullptr;
  registered_.clear();
  session_.release();
  {
    std::lock_guard lock(mu_);
    holding_ = false;
    release_requested_ = false;
  }
  cv_.notify_all();
}

void NvmlEventWatcher::deliver(const nvml::EventData& data) {
  GpuEvent e;
  e.time_unix_ns = wall_now_ns();
  e.probe = options_.probe;
  e.kind = nvml::event_kind_of(data.event_type);
  const auto it = std::find_if(registered_.begin(), registered_.end(),
                               [&](const Registered& r) { return r.handle == data.device; });
  if (it == registered_.end()) {
    if (log_once_.first("unknown-device"))
      logger()->warn(
          "nvidia probe: an NVML event (type 0x{:x}) names a device it was not "
          "registered for; ignored",
          data.event_type);
    return;
  }
  e.device_id = it->uuid;
  switch (e.kind) {
    case EventKind::xid:
      e.data = data.event_data;
      break;
    case EventKind::clock_event:
      if (const auto& api = backend_->api(); api.clock_reasons) {
        unsigned long long reasons = 0;
        if (api.clock_reasons(data.device, &reasons) == nvml::kSuccess) e.data = reasons;
      }
      break;
    case EventKind::other:
      e.data = data.event_type;
      break;
    default:
      break;
  }
  try {
    sink_(std::move(e));
  } catch (const std::exception& ex) {
    if (log_once_.first("sink"))
      logger()->error("nvidia probe: publishing an event failed: {}", ex.what());
  }
}

}  // namespace gpustream::nvidia_detail
