#include "gpustream/probes/nvidia_probe.hpp"

#include <unistd.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "gpustream/errors.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/host_probe.hpp"
#include "gpustream/probes/readers.hpp"
#include "nvidia/nvml_backend.hpp"
#include "nvidia/nvml_events.hpp"
#include "nvidia/smi_backend.hpp"

namespace gpustream {

using nvidia_detail::NvmlBackend;
using nvidia_detail::SmiBackend;
using Use = NvidiaProbeOptions::Use;

std::string_view to_string(NvidiaBackend backend) noexcept {
  switch (backend) {
    case NvidiaBackend::none:
      return "none";
    case NvidiaBackend::nvml:
      return "nvml";
    case NvidiaBackend::nvidia_smi:
      return "nvidia-smi";
  }
  return "none";
}

struct NvidiaProbe::Impl : std::enable_shared_from_this<Impl> {
  Impl(ProbeExecutors ex, NvidiaProbeOptions o)
      : executors(std::move(ex)),
        options(std::move(o)),
        mode(resolve_library_session_mode(options.library_session)) {
    if (!options.clock) options.clock = [] { return std::chrono::steady_clock::now(); };
  }

  /// The NVML backend, loading the library on first use; null (and `reason`) when unusable.
  std::shared_ptr<NvmlBackend> nvml_backend(std::string* reason) {
    std::lock_guard lock(mu);
    if (nvml) return nvml;
    try {
      nvml = std::make_shared<NvmlBackend>(nvidia_detail::NvmlOptions{
          options.nvml_library, mode, options.paths, options.lost_retry_initial,
          options.lost_retry_max, options.clock, options.host_clock});
    } catch (const DynamicLibraryError& e) {
      *reason = e.code() == errc::symbol_missing ? "NVML unusable: " + e.message() : e.message();
    } catch (const std::exception& e) {
      *reason = std::string("NVML unusable: ") + e.what();
    }
    return nvml;
  }

  std::shared_ptr<SmiBackend> smi_backend() {
    std::lock_guard lock(mu);
    if (!smi) {
      smi = std::make_shared<SmiBackend>(
          executors, nvidia_detail::SmiOptions{options.nvidia_smi, options.nvidia_smi_timeout,
                                               options.paths, options.clock});
    }
    return smi;
  }

  /// Runs on the work executor; completes on the io executor.
  static void detect(std::shared_ptr<Impl> self, DetectHandler handler) {
    std::string nvml_reason;
    if (self->options.use != Use::nvidia_smi_only) {
      if (auto nvml = self->nvml_backend(&nvml_reason)) {
        Detection d = nvml->detect();
        if (d.available) self->start_event_watcher(nvml);
        if (d.available || self->options.use == Use::nvml_only) {
          self->active = d.available ? NvidiaBackend::nvml : NvidiaBackend::none;
          return complete(self, std::move(handler), std::move(d));
        }
        nvml_reason = std::move(d.reason);
      } else if (self->options.use == Use::nvml_only) {
        self->active = NvidiaBackend::none;
        Detection d;
        d.reason = std::move(nvml_reason);
        return complete(self, std::move(handler), std::move(d));
      }
    }
    self->smi_backend()->async_detect(
        [self, h = std::move(handler), nvml_reason = std::move(nvml_reason)](Detection d) mutable {
          if (d.available) {
            if (!nvml_reason.empty() && self->log_once.first("fallback:" + nvml_reason))
              logger()->info("nvidia probe: {}; using {} instead", nvml_reason,
                             self->options.nvidia_smi);
            self->active = NvidiaBackend::nvidia_smi;
          } else {
            self->active = NvidiaBackend::none;
            d.reason = (nvml_reason.empty() ? std::string() : "NVML: " + nvml_reason + "; ") +
                       "nvidia-smi: " + d.reason;
          }
          h(std::move(d));
        });
  }

  static void complete(const std::shared_ptr<Impl>& self, DetectHandler handler, Detection d) {
    boost::asio::post(self->executors.io,
                      [h = std::move(handler), d = std::move(d)]() mutable { h(std::move(d)); });
  }

  static void sample(std::shared_ptr<Impl> self, SampleHandler handler) {
    switch (self->active.load()) {
      case NvidiaBackend::nvidia_smi:
        return self->smi_backend()->async_sample(std::move(handler));
      case NvidiaBackend::nvml:
        return boost::asio::post(self->executors.work, [self, h = std::move(handler)]() mutable {
          sample_nvml(self, std::move(h));
        });
      case NvidiaBackend::none:
        break;
    }
    // Not detected yet (or nothing was there last time): detect, then sample.
    boost::asio::post(self->executors.work, [self, h = std::move(handler)]() mutable {
      detect(self, [self, h = std::move(h)](const Detection& d) mutable {
        if (d.available) return sample(self, std::move(h));
        GpuSnapshot s;
        s.probe = std::string(kName);
        s.time_unix_ns = wall_now_ns();
        s.monotonic_ns = nvidia_detail::steady_time_ns(self->options.clock());
        s.errors.push_back({"probe_unavailable", d.reason, {}});
        h(make_error_code(errc::probe_unavailable), std::move(s));
      });
    });
  }

  /// Runs on the work executor.
  static void sample_nvml(const std::shared_ptr<Impl>& self, SampleHandler handler) {
    const auto t0 = steady_now_ns();  // the cost, on the real clock
    const auto at = nvidia_detail::steady_time_ns(self->options.clock());
    const auto wall = wall_now_ns();
    GpuSnapshot snap;
    boost::system::error_code ec;
    try {
      std::string unused;
      auto result = self->nvml_backend(&unused)->sample(at);
      snap = std::move(result.snapshot);
      if (result.failed) ec = errc::sample_failed;
    } catch (const std::exception& e) {
      ec = errc::sample_failed;
      snap.errors.push_back({"sample_failed", e.what(), {}});
    }
    snap.probe = std::string(kName);
    snap.time_unix_ns = wall;
    snap.monotonic_ns = at;
    snap.sample_duration_ns = steady_now_ns() - t0;
    boost::asio::post(self->executors.io, [h = std::move(handler), ec,
                                           s = std::move(snap)]() mutable { h(ec, std::move(s)); });
  }

  std::int64_t self_pid() const {
    if (auto target = readers::read_link(readers::join_path(options.paths.procfs_root, "self")))
      if (auto pid = readers::parse_int(*target)) return *pid;
    return static_cast<std::int64_t>(::getpid());
  }

  ProcessGpuUsage process_usage() {
    ProcessGpuUsage u;
    u.pid = self_pid();
    u.host_rss_bytes = current_process_rss_bytes(options.paths);
    std::string nvml_reason;
    auto backend = active.load();
    if (backend != NvidiaBackend::nvidia_smi && options.use != Use::nvidia_smi_only) {
      if (auto nvml = nvml_backend(&nvml_reason)) {
        try {
          u.devices = nvml->process_usage(u.pid, u.errors);
          u.backend = NvidiaBackend::nvml;
          return u;
        } catch (const std::exception& e) {
          nvml_reason = e.what();
        }
      }
      if (options.use == Use::nvml_only) {
        u.errors.push_back({"probe_unavailable", nvml_reason, {}});
        return u;
      }
    }
    // The backend is the one that answered: none when nvidia-smi did not run or failed.
    if (auto devices = smi_backend()->process_usage(u.pid, u.errors)) {
      u.devices = std::move(*devices);
      u.backend = NvidiaBackend::nvidia_smi;
    }
    if (u.devices.empty() && !nvml_reason.empty())
      u.errors.push_back({"probe_unavailable", "NVML: " + nvml_reason, {}});
    return u;
  }

  /// Starts the event thread once NVML has devices, if events were asked for (start_events).
  void start_event_watcher(const std::shared_ptr<NvmlBackend>& backend) {
    std::lock_guard lock(mu);
    if (!event_sink || events_stopped || watcher) return;
    watcher = std::make_unique<nvidia_detail::NvmlEventWatcher>(
        backend, event_sink,
        nvidia_detail::EventWatcherOptions{options.event_wait_timeout, std::string(kName)});
  }

  const ProbeExecutors executors;
  NvidiaProbeOptions options;
  const LibrarySessionMode mode;
  std::atomic<NvidiaBackend> active{NvidiaBackend::none};
  std::mutex mu;
  std::shared_ptr<NvmlBackend> nvml;  // guarded by mu (the pointer; the backend locks itself)
  std::shared_ptr<SmiBackend> smi;    // guarded by mu
  EventSink event_sink;               // guarded by mu
  bool events_stopped = false;        // guarded by mu
  std::unique_ptr<nvidia_detail::NvmlEventWatcher> watcher;  // guarded by mu
  LogOnce log_once;
};

NvidiaProbe::NvidiaProbe(ProbeExecutors executors, NvidiaProbeOptions options)
    : impl_(std::make_shared<Impl>(std::move(executors), std::move(options))) {}

NvidiaProbe::~NvidiaProbe() {
  cancel();
  stop_events();
}

void NvidiaProbe::start_events(EventSink sink) {
  std::shared_ptr<NvmlBackend> nvml;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->events_stopped) return;
    impl_->event_sink = std::move(sink);
    if (impl_->active.load() == NvidiaBackend::nvml) nvml = impl_->nvml;
  }
  if (nvml) impl_->start_event_watcher(nvml);  // already detected: start now
}

void NvidiaProbe::stop_events() noexcept {
  std::unique_ptr<nvidia_detail::NvmlEventWatcher> watcher;
  try {
    std::lock_guard lock(impl_->mu);
    impl_->events_stopped = true;
    impl_->event_sink = nullptr;
    watcher = std::move(impl_->watcher);
  } catch (...) {  // a mutex error: nothing to stop then
  }
  watcher.reset();  // joins the thread (within one wait timeout)
}

std::chrono::milliseconds NvidiaProbe::min_interval() const noexcept {
  const auto smi = std::max(impl_->options.nvidia_smi_min_interval,
                            std::chrono::milliseconds{std::chrono::seconds{1}});
  if (impl_->options.use == Use::nvidia_smi_only) return smi;
  if (impl_->active.load() == NvidiaBackend::nvidia_smi) return smi;
  return kNvmlMinInterval;
}

void NvidiaProbe::async_detect(DetectHandler handler) {
  boost::asio::post(impl_->executors.work, [self = impl_, h = std::move(handler)]() mutable {
    Impl::detect(std::move(self), std::move(h));
  });
}

void NvidiaProbe::async_sample(SampleHandler handler) { Impl::sample(impl_, std::move(handler)); }

void NvidiaProbe::cancel() noexcept {
  try {
    std::shared_ptr<SmiBackend> smi;
    {
      std::lock_guard lock(impl_->mu);
      smi = impl_->smi;
    }
    if (smi) smi->cancel();
  } catch (...) {  // nothing to report from a noexcept cancel
  }
}

NvidiaBackend NvidiaProbe::backend() const noexcept { return impl_->active.load(); }

ProcessGpuUsage NvidiaProbe::process_usage() { return impl_->process_usage(); }

std::optional<LibrarySession::Stats> NvidiaProbe::library_session_stats() const {
  std::shared_ptr<NvmlBackend> nvml;
  {
    std::lock_guard lock(impl_->mu);
    nvml = impl_->nvml;
  }
  if (!nvml) return std::nullopt;
  return nvml->session_stats();
}

std::shared_ptr<NvidiaProbe> make_nvidia_probe(ProbeExecutors executors,
                                               NvidiaProbeOptions options) {
  return std::make_shared<NvidiaProbe>(std::move(executors), std::move(options));
}

ProcessGpuUsage query_process_gpu_usage(NvidiaProbeOptions options) {
  try {
    boost::asio::io_context io;  // never run: the blocking paths do not need it
    NvidiaProbe probe({io.get_executor(), io.get_executor()}, std::move(options));
    return probe.process_usage();
  } catch (const std::exception& e) {
    ProcessGpuUsage u;
    u.errors.push_back({"sample_failed", e.what(), {}});
    return u;
  }
}

}  // namespace gpustream
