#include "gpustream/telemetry.hpp"

#include <algorithm>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "gpustream/detail/log_in_process.hpp"
#include "gpustream/detail/scheduler_book.hpp"
#include "gpustream/errors.hpp"
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
  std::function<void(GpuSnapshot&)> annotate;  // set before start(), then read-only

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

  // Named windows. windows_mu is never held while sampling.
  struct NamedWindow {
    SubscriptionFilter filter;
    std::unique_ptr<MeasurementWindow> window;
  };
  mutable std::mutex windows_mu;
  std::map<std::string, NamedWindow, std::less<>> windows;  // guarded by windows_mu
  std::uint64_t fed_sequence = 0;  // the last snapshot fed to the windows; guarded by windows_mu

  /// The Scheduler's publish sink (on the io thread, or on the thread of an inline edge
  /// sample): publishes, then feeds every open named window (MeasurementWindow::ExternalFeed)
  /// on this same thread — the windows subscribe nothing, so a publish wakes no other thread for
  /// them. windows_mu is held across both, so the windows get the snapshots in the channel's
  /// order whichever thread publishes. Lock order: windows_mu, a window's lock, the channel's.
  SnapshotPtr publish_and_feed(GpuSnapshot s) {
    std::lock_guard lock(windows_mu);
    auto published = channel.publish(std::move(s));
    if (!published) return published;
    // A sequence skipped: something was published into the channel other than through this
    // sink; the windows take it from the channel's history.
    const bool skipped = fed_sequence != 0 && published->sequence != fed_sequence + 1;
    fed_sequence = published->sequence;
    for (auto& [name, w] : windows) {
      if (skipped) w.window->feed_gap();
      w.window->feed(published);
    }
    return published;
  }

  Impl(Config c, ProbeFactory f, boost::asio::any_io_executor ex,
       std::unique_ptr<boost::asio::io_context> own)
      : config(std::move(c)),
        factory(std::move(f)),
        own_io(std::move(own)),
        io(std::move(ex)),
        pool(2),
        channel(io, config.history, config.history_max_bytes) {}

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
          if (gpu_devices == 0)
            add = true;  // fallback_pending stays set until it is added
          else
            fallback_pending = false;
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
        if (first_in_process("no-gpu-no-simulated"))
          logger()->warn("no GPU found on this machine, and no simulated probe could be built");
      } else if (!stop_requested) {
        if (first_in_process("no-gpu-simulated"))  // once per process, not per Telemetry
          logger()->warn(
              "no GPU found on this machine: adding 2 simulated GPUs (probe 'simulated'; said "
              "once per process)");
        for (auto& p : made) {
          p->start_events(channel.events().sink());
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
    std::vector<ProbePtr> event_sources;
    {
      std::lock_guard lock(mu);
      thread = std::move(io_thread);
      sched = scheduler.get();
      event_sources = probes;
    }
    // The probes' event threads end within their wait timeout (never on the io thread).
    for (const auto& p : event_sources) p->stop_events();
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
/// about the process: the log level and format.
const Config& apply_process_settings(const Config& config) {
  validate_config(config);
  if (!config.log_level.empty()) set_log_level(config.log_level);
  if (const auto f = log_format_from_string(config.log_format)) set_log_format(*f);
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
    : impl_((
          apply_process_settings(config),
          std::make_unique<Impl>(std::move(config), std::move(factory), std::move(io), nullptr))) {}

namespace {

/// A window-name mistake: logged once per kind of mistake and process (the names are the
/// caller's, so the set of keys stays bounded), then thrown.
[[noreturn]] void window_error(const char* kind, const std::string& what) {
  if (first_in_process(std::string("window:") + kind))
    logger()->warn("{} (logged once per process)", what);
  throw std::invalid_argument(what);
}

/// The probes of several filters: all when one of them names none.
SubscriptionFilter union_of(const std::vector<const SubscriptionFilter*>& filters) {
  SubscriptionFilter u;
  for (const auto* f : filters) {
    if (f->probes.empty()) return {};
    for (const auto& p : f->probes)
      if (std::find(u.probes.begin(), u.probes.end(), p) == u.probes.end()) u.probes.push_back(p);
  }
  return u;
}

}  // namespace

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
        im.io, Scheduler::PublishShared{},
        [impl = &im, annotate = im.annotate](GpuSnapshot s) {
          for (auto& d : s.devices)
            derive_metrics(d);  // free memory where only total/used is known
          if (annotate) annotate(s);
          return impl->publish_and_feed(std::move(s));
        },
        [impl = &im](const ProbeStats& s) { impl->on_stats(s); });
    for (const auto& p : im.probes) {
      p->start_events(im.channel.events().sink());
      im.scheduler->add(p, ScheduleOptions::from_config(im.config, p->name()));
    }

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

void Telemetry::set_annotator(std::function<void(GpuSnapshot&)> annotate) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->started) impl_->annotate = std::move(annotate);
}

SnapshotChannel& Telemetry::channel() noexcept { return impl_->channel; }
EventChannel& Telemetry::events() noexcept { return impl_->channel.events(); }
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
  FitOptions o;
  o.fatal_event_window = impl_->config.fatal_event_window;
  return fits(bytes, o).fits;
}

std::optional<DeviceFit> Telemetry::best_device(std::uint64_t bytes) const {
  FitOptions o;
  o.fatal_event_window = impl_->config.fatal_event_window;
  return best_device(bytes, o);
}

FitPlan Telemetry::fits(std::uint64_t bytes, const FitOptions& options) const {
  return gpustream::fits(impl_->channel.latest(), bytes, options, impl_->channel.events().fatal(),
                         wall_now_ns());
}

std::optional<DeviceFit> Telemetry::best_device(std::uint64_t bytes,
                                                const FitOptions& options) const {
  return fits(bytes, options).best();
}

MyProcessUsage Telemetry::my_process() const {
  return my_process_usage(impl_->channel.latest(), impl_->config.paths.procfs_root);
}

// ---- sampling now ----

void Telemetry::request_sample(SubscriptionFilter filter, std::chrono::milliseconds timeout,
                               std::function<void(std::vector<EdgeSample>)> done) {
  Impl& im = *impl_;
  Scheduler* sched = nullptr;
  bool stopping = false;
  {
    std::lock_guard lock(im.mu);
    sched = im.scheduler.get();
    stopping = im.stop_requested;
  }
  std::vector<std::string> names;
  if (sched) {
    // A probe whose detection said its source is not there is no edge (it has no devices): it is
    // not asked, so a window lists no error for it and exact_edges speaks of real edges only.
    // One still detecting is asked (the request waits for its detection).
    for (auto& st : sched->stats()) {
      if (st.state == ProbeState::unavailable) continue;
      auto& name = st.probe;
      if (!filter.probes.empty() &&
          std::find(filter.probes.begin(), filter.probes.end(), name) == filter.probes.end())
        continue;
      if (!filter.devices.empty()) {
        // Only probes that (as far as is known) see one of the devices.
        if (const auto latest = im.channel.latest(name); latest && !latest->devices.empty()) {
          const bool sees = std::any_of(
              latest->devices.begin(), latest->devices.end(), [&](const DeviceSample& d) {
                return std::find(filter.devices.begin(), filter.devices.end(), d.id) !=
                       filter.devices.end();
              });
          if (!sees) continue;
        }
      }
      names.push_back(std::move(name));
    }
  }
  if (names.empty()) {
    if (done) done({});
    return;
  }
  if (stopping || sched->stopped()) {
    // Nothing samples any more (and the io thread may be gone): answer at once.
    std::vector<EdgeSample> out;
    for (auto& n : names) {
      EdgeSample e;
      e.probe = std::move(n);
      e.error = "stopped";
      e.message = "the telemetry was stopped";
      out.push_back(std::move(e));
    }
    if (done) done(std::move(out));
    return;
  }
  struct Pending {
    std::mutex mu;
    std::vector<EdgeSample> results;
    std::size_t left = 0;
    std::function<void(std::vector<EdgeSample>)> done;
  };
  auto pending = std::make_shared<Pending>();
  pending->results.resize(names.size());
  pending->left = names.size();
  pending->done = std::move(done);
  const auto requested = steady_now_ns();
  for (std::size_t i = 0; i < names.size(); ++i) {
    pending->results[i].probe = names[i];
    auto answer = [pending, i, requested](boost::system::error_code ec, SnapshotPtr snap) {
      std::function<void(std::vector<EdgeSample>)> finish;
      std::vector<EdgeSample> results;
      {
        std::lock_guard lock(pending->mu);
        EdgeSample& r = pending->results[i];
        r.latency_ns = steady_now_ns() - requested;
        if (ec) {
          r.error = detail::error_code_name(ec);
          r.message = ec.message();
          if (snap && !snap->errors.empty()) r.message += ": " + snap->errors.front().message;
        }
        r.snapshot = std::move(snap);
        if (--pending->left == 0) {
          finish = std::move(pending->done);
          results = std::move(pending->results);
        }
      }
      if (finish) finish(std::move(results));  // user code, no lock held
    };
    try {
      sched->request_sample(names[i], answer, timeout);
    } catch (const std::exception& e) {  // the probe is gone (cannot happen: names are its own)
      answer(make_error_code(errc::probe_unavailable), nullptr);
      logger()->error("request_sample {}: {}", names[i], e.what());
    }
  }
}

std::vector<EdgeSample> Telemetry::request_samples(const SubscriptionFilter& filter,
                                                   std::chrono::milliseconds timeout) {
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<std::vector<EdgeSample>> results;
  };
  auto wait = std::make_shared<Wait>();
  // Every probe the filter selects, answered with `error` without sampling.
  const auto unanswered = [&](const char* error, const std::string& message,
                              std::int64_t latency_ns) {
    std::vector<EdgeSample> out;
    for (const auto& name : probe_names()) {
      if (!filter.probes.empty() &&
          std::find(filter.probes.begin(), filter.probes.end(), name) == filter.probes.end())
        continue;
      EdgeSample e;
      e.probe = name;
      e.error = error;
      e.message = message;
      e.latency_ns = latency_ns;
      out.push_back(std::move(e));
    }
    return out;
  };
  if (impl_->on_own_io_thread()) {
    // Waiting here would block the thread that takes the samples.
    return unanswered("would_block",
                      "sampling now was asked on the io thread that takes the samples", 0);
  }
  request_sample(filter, timeout, [wait](std::vector<EdgeSample> r) {
    {
      std::lock_guard lock(wait->mu);
      wait->results = std::move(r);
    }
    wait->cv.notify_all();
  });
  std::unique_lock lock(wait->mu);
  // Each request ends by its own deadline on the io thread; the margin covers a busy io thread.
  const auto margin = std::chrono::milliseconds{100} + timeout / 10;
  if (wait->cv.wait_for(lock, timeout + margin, [&] { return wait->results.has_value(); }))
    return std::move(*wait->results);
  lock.unlock();
  // The io thread did not answer in time (it is stuck): report every probe as late.
  return unanswered(
      "timeout", "the io thread did not answer within " + std::to_string(timeout.count()) + " ms",
      std::chrono::duration_cast<std::chrono::nanoseconds>(timeout + margin).count());
}

std::vector<SnapshotPtr> Telemetry::sample_now(std::chrono::milliseconds timeout) {
  std::vector<SnapshotPtr> out;
  for (auto& e : request_samples({}, timeout))
    if (e.ok()) out.push_back(std::move(e.snapshot));
  return out;
}

EdgeSampler Telemetry::edge_sampler(std::chrono::milliseconds timeout) {
  return [this, timeout](const SubscriptionFilter& f) { return request_samples(f, timeout); };
}

// ---- named windows ----

void Telemetry::begin_window(const std::string& name, SubscriptionFilter filter) {
  Impl& im = *impl_;
  if (name.empty()) window_error("empty", "begin_window: the window name is empty");
  MeasurementWindow* window = nullptr;
  {
    std::lock_guard lock(im.windows_mu);
    if (im.windows.count(name) > 0)
      window_error("duplicate", "begin_window: window '" + name + "' is already open");
    auto w = std::make_unique<MeasurementWindow>(im.channel, edge_sampler(), filter,
                                                 MeasurementWindow::ExternalFeed{});
    window = w.get();
    im.windows.emplace(name, Impl::NamedWindow{std::move(filter), std::move(w)});
  }
  // Sampling runs with no lock held. The window stays in the map (owned there) until
  // end_window takes it out; a concurrent end_window of the same name waits for nothing and
  // gets an empty window (begin() notices and stops).
  window->begin();
}

WindowSummary Telemetry::end_window(const std::string& name) {
  auto summaries = end_windows({name});
  return std::move(summaries.front());
}

std::vector<WindowSummary> Telemetry::end_windows(const std::vector<std::string>& names) {
  Impl& im = *impl_;
  std::vector<Impl::NamedWindow> taken;
  {
    std::lock_guard lock(im.windows_mu);
    std::set<std::string> seen;
    for (const auto& n : names) {
      if (!seen.insert(n).second)
        window_error("twice", "end_windows: window '" + n + "' is listed twice");
      if (im.windows.count(n) == 0)
        window_error("unknown", "end_window: no open window named '" + n + "'");
    }
    for (const auto& n : names) {
      auto node = im.windows.extract(n);
      taken.push_back(std::move(node.mapped()));
    }
  }
  std::vector<const SubscriptionFilter*> filters;
  filters.reserve(taken.size());
  for (const auto& w : taken) filters.push_back(&w.filter);
  const auto t0 = steady_now_ns();
  const auto edges = request_samples(union_of(filters));  // one shared edge sample
  const auto latency_ns = steady_now_ns() - t0;
  std::vector<WindowSummary> out;
  out.reserve(taken.size());
  for (std::size_t i = 0; i < taken.size(); ++i) {
    out.push_back(taken[i].window->end(edges));
    out.back().name = names[i];
    out.back().overhead.end_latency_ns = latency_ns;  // what end_windows waited for its edges
  }
  return out;
}

WindowSummary Telemetry::next_window(const std::string& name) {
  Impl& im = *impl_;
  Impl::NamedWindow old;
  MeasurementWindow* next = nullptr;
  {
    std::lock_guard lock(im.windows_mu);
    auto it = im.windows.find(name);
    if (it == im.windows.end())
      window_error("unknown", "next_window: no open window named '" + name + "'");
    old = std::move(it->second);
    auto w = std::make_unique<MeasurementWindow>(im.channel, edge_sampler(), old.filter,
                                                 MeasurementWindow::ExternalFeed{});
    next = w.get();
    it->second = Impl::NamedWindow{old.filter, std::move(w)};
  }
  const auto t0 = steady_now_ns();
  const auto edges = request_samples(old.filter);  // the boundary: one sample for both
  const auto latency_ns = steady_now_ns() - t0;
  auto summary = old.window->end(edges);
  summary.name = name;
  summary.overhead.end_latency_ns = latency_ns;
  next->begin(edges);  // its begin_latency_ns: the same sample's (the slowest edge's latency)
  return summary;
}

std::vector<std::string> Telemetry::open_windows() const {
  std::lock_guard lock(impl_->windows_mu);
  std::vector<std::string> out;
  for (const auto& [name, w] : impl_->windows) out.push_back(name);
  return out;
}

}  // namespace gpustream
