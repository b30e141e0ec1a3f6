#include "gpustream/telemetry.hpp"

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "gpustream/log.hpp"
#include "gpustream/scheduler.hpp"
#include "gpustream/work_pool.hpp"

namespace gpustream {

namespace {

// The Telemetry::Impl whose own io thread this is; null on every other thread. Per-thread
// state set by run_io_thread, hence not const:
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
thread_local const void* t_io_thread_of = nullptr;

}  // namespace

struct Telemetry::Impl {
  Config config;
  ProbeFactory factory;

  // Own-thread mode only.
  std::unique_ptr<boost::asio::io_context> own_io;
  std::size_t abandoned_workers = 0;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard;
  std::thread io_thread;  // guarded by mu
  // Set by ~Telemetry when it runs on the io thread itself: that thread then owns this Impl
  // and deletes it once its loop has returned. Only touched on the io thread.
  bool orphaned = false;

  boost::asio::any_io_executor io;
  WorkPool pool;
  SnapshotChannel channel;
  std::unique_ptr<Scheduler> scheduler;
  std::vector<ProbePtr> probes;

  mutable std::mutex mu;
  std::condition_variable changed;  // with mu: a probe published or answered a detection
  std::vector<std::string> setup_errors;
  bool started = false;
  bool stop_requested = false;

  // Completing a stop (joining the io thread, stopping the pool) happens once, under finish_mu,
  // never on the io thread.
  std::mutex finish_mu;
  bool finished = false;  // guarded by finish_mu

  // simulate_when_no_gpu: the GPU probes whose first detection has not answered yet, and the
  // devices the others found. When the last one answers with no device in all, the simulated
  // probe is added.
  bool fallback_pending = false;
  std::set<std::string> awaiting_detection;
  std::size_t gpu_devices = 0;

  Impl(Config c, ProbeFactory f, boost::asio::any_io_executor ex,
       std::unique_ptr<boost::asio::io_context> own)
      : config(std::move(c)),
        factory(std::move(f)),
        own_io(std::move(own)),
        io(std::move(ex)),
        pool(2),
        channel(io, config.history) {}

  bool on_own_io_thread() const noexcept { return own_io && t_io_thread_of == this; }

  /// The Scheduler's stats callback (on its strand): settles the no-GPU fallback, wakes
  /// wait_for_first_samples.
  void on_stats(const ProbeStats& s) {
    bool add = false;
    {
      std::lock_guard lock(mu);
      if (fallback_pending && s.detections > 0 && s.state != ProbeState::detecting &&
          awaiting_detection.erase(s.probe) > 0) {
        gpu_devices += s.devices;
        if (awaiting_detection.empty()) {
          if (gpu_devices == 0) add = true;  // fallback_pending stays set until it is added
          else fallback_pending = false;
        }
      }
    }
    changed.notify_all();
    if (add) add_simulated();
  }

  /// Builds the simulated probe (2 GPUs) through the factory and schedules it. The factory is
  /// user code: it runs with no lock held, and may itself call stop().
  void add_simulated() {
    {
      std::lock_guard lock(mu);
      if (stop_requested || !scheduler) return;
    }
    Config c = config;
    c.probes = {std::string(kSimulatedProbe)};
    c.simulate = 2;
    std::vector<std::string> errors;
    std::vector<ProbePtr> made;
    try {
      made = factory(c, ProbeExecutors{io, pool.executor()}, errors);
    } catch (const std::exception& e) {
      errors.push_back(std::string("the probe factory threw: ") + e.what());
    }
    {
      std::lock_guard lock(mu);
      fallback_pending = false;
      for (auto& e : errors) {
        logger()->warn("{}", e);
        setup_errors.push_back(std::move(e));
      }
      if (made.empty()) {
        logger()->warn("no GPU found on this machine, and no simulated probe could be built");
      } else if (!stop_requested) {
        logger()->warn("no GPU found on this machine: adding 2 simulated GPUs (probe 'simulated')");
        for (auto& p : made) {
          scheduler->add(p, ScheduleOptions::from_config(config, p->name()));
          probes.push_back(std::move(p));
        }
      }
    }
    changed.notify_all();
  }

  /// Every probe has published at least once or is unavailable, and no fallback is pending.
  /// Call with mu held.
  bool first_samples_settled() const {
    if (fallback_pending) return false;
    const auto st = scheduler ? scheduler->stats() : std::vector<ProbeStats>{};
    for (const auto& p : probes) {
      if (channel.latest(p->name())) continue;
      const auto it = std::find_if(st.begin(), st.end(),
                                   [&](const ProbeStats& s) { return s.probe == p->name(); });
      if (it == st.end() || it->state != ProbeState::unavailable) return false;
    }
    return true;
  }

  /// The second half of stop(), on any thread but the io thread: stops the scheduler on the io
  /// thread, ends the loop, joins the io thread and stops the work pool. Once.
  void finish(std::chrono::milliseconds deadline) {
    std::lock_guard finish_lock(finish_mu);
    if (finished) return;
    finished = true;
    const auto until = std::chrono::steady_clock::now() + deadline;
    std::thread thread;
    Scheduler* sched = nullptr;
    {
      std::lock_guard lock(mu);
      thread = std::move(io_thread);
      sched = scheduler.get();
    }
    if (own_io && thread.joinable()) {
      // Stop the scheduler on the io thread (its cancellations run there), then end the loop.
      auto done = std::make_shared<std::promise<void>>();
      auto fut = done->get_future();
      boost::asio::post(io, [sched, done] {
        sched->stop();
        done->set_value();
      });
      if (fut.wait_until(until) != std::future_status::ready)
        logger()->warn("telemetry stop: the io thread did not answer within the deadline");
      guard.reset();
      own_io->stop();
      thread.join();
    } else if (sched) {
      sched->stop();
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    abandoned_workers = pool.stop(std::max(left, std::chrono::milliseconds{100})).abandoned;
  }

  /// Keeps the own io_context alive forever when a worker abandoned by the pool may still post
  /// its late result to it (stopped, it runs nothing; the result is queued and never executed).
  void bury_io_if_workers_abandoned() {
    if (abandoned_workers == 0 || !own_io) return;
    static std::mutex graveyard_mu;
    // Leaked on purpose (see above);
    // NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
    static auto* graveyard = new std::vector<std::unique_ptr<boost::asio::io_context>>();
    std::lock_guard lock(graveyard_mu);
    graveyard->push_back(std::move(own_io));
  }

  /// The own io thread's body. When ~Telemetry ran on this thread (from a callback), this
  /// thread owns the Impl once the loop has returned: it completes the stop and deletes it.
  static void run_io_thread(Impl* impl) {
    t_io_thread_of = impl;
    for (;;) {
      try {
        impl->own_io->run();
        break;
      } catch (const std::exception& e) {
        // Handlers must not throw; if one does, log it and keep the loop alive.
        logger()->error("uncaught exception on the io thread: {}", e.what());
      }
    }
    t_io_thread_of = nullptr;
    if (!impl->orphaned) return;
    {
      std::lock_guard lock(impl->mu);
      impl->io_thread.detach();
    }
    impl->abandoned_workers = impl->pool.stop(WorkPool::kDefaultStopDeadline).abandoned;
    impl->bury_io_if_workers_abandoned();
    delete impl;
  }
};

namespace {

/// Validates a Config (throws ConfigError before anything is built) and applies what it says
/// about the process: the log level.
const Config& apply_process_settings(const Config& config) {
  validate_config(config);
  if (!config.log_level.empty()) set_log_level(config.log_level);
  return config;
}

}  // namespace

Telemetry::Telemetry(Config config, ProbeFactory factory) {
  apply_process_settings(config);
  auto io = std::make_unique<boost::asio::io_context>(1);
  auto ex = io->get_executor();
  impl_ = std::make_unique<Impl>(std::move(config), std::move(factory), ex, std::move(io));
}

Telemetry::Telemetry(Config config, ProbeFactory factory, boost::asio::any_io_executor io)
    : impl_((apply_process_settings(config),
             std::make_unique<Impl>(std::move(config), std::move(factory), std::move(io),
                                    nullptr))) {}

Telemetry::~Telemetry() {
  if (!impl_) return;
  if (impl_->on_own_io_thread()) {
    // Destroyed from a callback on our own io thread: that thread is inside a handler of the
    // io_context this Impl owns, so it can neither be joined here nor have its state freed
    // under it. Request the stop, end the loop after this handler, and let the io thread
    // finish the stop and delete the Impl when its loop returns.
    stop();
    Impl* impl = impl_.release();
    impl->orphaned = true;
    boost::asio::post(impl->io, [impl] {
      impl->guard.reset();
      impl->own_io->stop();
    });
    return;
  }
  stop();
  impl_->bury_io_if_workers_abandoned();
}

void Telemetry::start() {
  Impl& im = *impl_;
  {
    std::lock_guard lock(im.mu);
    if (im.started) return;  // a Telemetry runs once: start() after stop() does nothing
    im.started = true;
  }

  // The factory is user code: no lock is held while it runs (it may call stop() or stats()).
  ProbeExecutors ex{im.io, im.pool.executor()};
  std::vector<std::string> errors;
  std::vector<ProbePtr> made;
  if (im.factory) made = im.factory(im.config, ex, errors);
  if (!errors.empty()) {
    // The factory knows the probe names and their settings: what it rejects is a mistake in
    // the Config (an unknown probe, a misspelt setting), not a condition of this machine.
    made.clear();
    {
      std::lock_guard lock(im.mu);
      im.started = false;
    }
    std::string what = errors.front();
    for (std::size_t i = 1; i < errors.size(); ++i) what += "; " + errors[i];
    throw ConfigError("the probe factory rejected the configuration: " + what);
  }

  bool add_simulated_now = false;
  {
    std::lock_guard lock(im.mu);
    im.probes = std::move(made);
    if (im.stop_requested) return;  // stop() was called meanwhile (e.g. by the factory)

    im.scheduler = std::make_unique<Scheduler>(
        im.io,
        [ch = &im.channel](GpuSnapshot s) {
          for (auto& d : s.devices) derive_metrics(d);  // free memory where only total/used is known
          ch->publish(std::move(s));
        },
        [impl = &im](const ProbeStats& s) { impl->on_stats(s); });
    for (const auto& p : im.probes)
      im.scheduler->add(p, ScheduleOptions::from_config(im.config, p->name()));

    // No GPU → simulated GPUs, decided from the probes' own first detections (not a second,
    // separate detection pass). With no GPU probe at all, at once.
    const auto& c = im.config;
    const bool has_simulated =
        std::any_of(im.probes.begin(), im.probes.end(),
                    [](const ProbePtr& p) { return p->kind() == ProbeKind::simulated; });
    if (c.simulate_when_no_gpu && c.simulate == 0 && !has_simulated) {
      for (const auto& p : im.probes)
        if (p->kind() == ProbeKind::gpu) im.awaiting_detection.emplace(p->name());
      im.fallback_pending = true;
      add_simulated_now = im.awaiting_detection.empty();
    }

    boost::asio::post(im.io, [s = im.scheduler.get()] { s->start(); });
    if (im.own_io) {
      im.guard.emplace(im.own_io->get_executor());
      im.io_thread = std::thread(&Impl::run_io_thread, &im);
    }
  }
  if (add_simulated_now) im.add_simulated();
}

void Telemetry::stop(std::chrono::milliseconds deadline) {
  Impl& im = *impl_;
  Scheduler* sched = nullptr;
  {
    std::lock_guard lock(im.mu);
    if (!im.started) return;  // not running: nothing to do
    im.stop_requested = true;
    im.fallback_pending = false;
    sched = im.scheduler.get();
  }
  im.changed.notify_all();
  if (im.on_own_io_thread()) {
    // From a callback on our io thread: the thread cannot join itself. Stop sampling now (no
    // new sample starts, nothing more is published); the io thread is joined and the work pool
    // stopped by a later stop() from another thread or by the destructor.
    if (sched) sched->stop();
    return;
  }
  im.finish(deadline);
}

SnapshotChannel& Telemetry::channel() noexcept { return impl_->channel; }
const Config& Telemetry::config() const noexcept { return impl_->config; }

std::vector<ProbeStats> Telemetry::stats() const {
  std::lock_guard lock(impl_->mu);
  if (!impl_->scheduler) return {};
  return impl_->scheduler->stats();
}

std::vector<std::string> Telemetry::setup_errors() const {
  std::lock_guard lock(impl_->mu);
  return impl_->setup_errors;
}

std::vector<std::string> Telemetry::probe_names() const {
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> names;
  for (const auto& p : impl_->probes) names.emplace_back(p->name());
  return names;
}

std::vector<SnapshotPtr> Telemetry::wait_for_first_samples(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  // On the io thread, waiting would block the very thread that produces the samples: answer
  // with what is there at once.
  if (impl_->on_own_io_thread()) timeout = std::chrono::milliseconds{0};
  impl_->changed.wait_for(lock, timeout, [&] { return impl_->first_samples_settled(); });
  std::vector<SnapshotPtr> out;
  for (const auto& p : impl_->probes)
    if (auto s = impl_->channel.latest(p->name())) out.push_back(std::move(s));
  return out;
}

std::vector<DeviceFit> Telemetry::fits(std::uint64_t bytes) const {
  return gpustream::fits(impl_->channel.latest(), bytes);
}

std::optional<DeviceFit> Telemetry::best_device(std::uint64_t bytes) const {
  return gpustream::best_device(impl_->channel.latest(), bytes);
}

MyProcessUsage Telemetry::my_process() const {
  return my_process_usage(impl_->channel.latest(), impl_->config.paths.procfs_root);
}

}  // namespace gpustream
