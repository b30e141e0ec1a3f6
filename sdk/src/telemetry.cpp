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

struct Telemetry::Impl {
  Config config;
  ProbeFactory factory;

  // Own-thread mode only.
  std::unique_ptr<boost::asio::io_context> own_io;
  std::size_t abandoned_workers = 0;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard;
  std::thread io_thread;

  boost::asio::any_io_executor io;
  WorkPool pool;
  SnapshotChannel channel;
  std::unique_ptr<Scheduler> scheduler;
  std::vector<ProbePtr> probes;

  mutable std::mutex mu;
  std::condition_variable changed;  // with mu: a probe published or answered a detection
  std::vector<std::string> setup_errors;
  bool started = false;
  bool stopped = false;

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

  static bool is_gpu_probe(std::string_view name) { return name != "host" && name != "simulated"; }

  /// The Scheduler's stats callback (on its strand): settles the no-GPU fallback, wakes
  /// wait_for_first_samples.
  void on_stats(const ProbeStats& s) {
    {
      std::lock_guard lock(mu);
      if (fallback_pending && s.detections > 0 && s.state != ProbeState::detecting &&
          awaiting_detection.erase(s.probe) > 0) {
        gpu_devices += s.devices;
        if (awaiting_detection.empty()) {
          fallback_pending = false;
          if (gpu_devices == 0) add_simulated_locked();
        }
      }
    }
    changed.notify_all();
  }

  /// Builds the simulated probe (2 GPUs) through the factory and schedules it. Call with mu held.
  void add_simulated_locked() {
    if (stopped || !scheduler) return;
    Config c = config;
    c.probes = {"simulated"};
    c.simulate = 2;
    std::vector<std::string> errors;
    auto made = factory(c, ProbeExecutors{io, pool.executor()}, errors);
    for (auto& e : errors) {
      logger()->warn("{}", e);
      setup_errors.push_back(std::move(e));
    }
    if (made.empty()) {
      logger()->warn("no GPU found on this machine, and no simulated probe could be built");
      return;
    }
    logger()->warn("no GPU found on this machine: adding 2 simulated GPUs (probe 'simulated')");
    for (auto& p : made) {
      scheduler->add(p, ScheduleOptions::from_config(config, p->name()));
      probes.push_back(std::move(p));
    }
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
};

Telemetry::Telemetry(Config config, ProbeFactory factory) {
  auto io = std::make_unique<boost::asio::io_context>(1);
  auto ex = io->get_executor();
  impl_ = std::make_unique<Impl>(std::move(config), std::move(factory), ex, std::move(io));
}

Telemetry::Telemetry(Config config, ProbeFactory factory, boost::asio::any_io_executor io)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(factory), std::move(io),
                                   nullptr)) {}

Telemetry::~Telemetry() {
  stop();
  if (impl_->abandoned_workers > 0 && impl_->own_io) {
    // A worker is still stuck in a vendor call. When it returns it will post its result to
    // our io_context, so that io_context must outlive it: it is deliberately leaked (stopped,
    // it runs nothing; the late result is queued and never executed).
    static std::mutex graveyard_mu;
    static auto* graveyard = new std::vector<std::unique_ptr<boost::asio::io_context>>();
    std::lock_guard lock(graveyard_mu);
    graveyard->push_back(std::move(impl_->own_io));
  }
}

void Telemetry::start() {
  std::lock_guard lock(impl_->mu);
  if (impl_->started) return;  // a Telemetry runs once: start() after stop() does nothing
  impl_->started = true;

  ProbeExecutors ex{impl_->io, impl_->pool.executor()};
  std::vector<std::string> errors;
  if (impl_->factory) impl_->probes = impl_->factory(impl_->config, ex, errors);
  for (const auto& e : errors) logger()->warn("{}", e);
  impl_->setup_errors = std::move(errors);

  impl_->scheduler = std::make_unique<Scheduler>(
      impl_->io, [ch = &impl_->channel](GpuSnapshot s) { ch->publish(std::move(s)); },
      [impl = impl_.get()](const ProbeStats& s) { impl->on_stats(s); });
  for (const auto& p : impl_->probes)
    impl_->scheduler->add(p, ScheduleOptions::from_config(impl_->config, p->name()));

  // No GPU → simulated GPUs, decided from the probes' own first detections (not a second,
  // separate detection pass). With no GPU probe at all, at once.
  const auto& c = impl_->config;
  const bool has_simulated = std::any_of(impl_->probes.begin(), impl_->probes.end(),
                                         [](const ProbePtr& p) { return p->name() == "simulated"; });
  if (c.simulate_when_no_gpu && c.simulate == 0 && !has_simulated) {
    for (const auto& p : impl_->probes)
      if (Impl::is_gpu_probe(p->name())) impl_->awaiting_detection.emplace(p->name());
    impl_->fallback_pending = !impl_->awaiting_detection.empty();
    if (!impl_->fallback_pending) impl_->add_simulated_locked();
  }

  if (impl_->own_io) {
    impl_->guard.emplace(impl_->own_io->get_executor());
    boost::asio::post(impl_->io, [s = impl_->scheduler.get()] { s->start(); });
    impl_->io_thread = std::thread([io = impl_->own_io.get()] {
      for (;;) {
        try {
          io->run();
          return;
        } catch (const std::exception& e) {
          // Handlers must not throw; if one does, log it and keep the loop alive.
          logger()->error("uncaught exception on the io thread: {}", e.what());
        }
      }
    });
  } else {
    boost::asio::post(impl_->io, [s = impl_->scheduler.get()] { s->start(); });
  }
}

void Telemetry::stop(std::chrono::milliseconds deadline) {
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->started || impl_->stopped) return;  // not running: nothing to do
    impl_->stopped = true;
    impl_->fallback_pending = false;
  }
  impl_->changed.notify_all();
  const auto until = std::chrono::steady_clock::now() + deadline;
  if (impl_->own_io) {
    // Stop the scheduler on the io thread, then let the loop run dry.
    std::promise<void> done;
    auto fut = done.get_future();
    boost::asio::post(impl_->io, [&] {
      impl_->scheduler->stop();
      done.set_value();
    });
    if (fut.wait_until(until) != std::future_status::ready)
      logger()->warn("telemetry stop: the io thread did not answer within the deadline");
    impl_->guard.reset();
    impl_->own_io->stop();
    if (impl_->io_thread.joinable()) impl_->io_thread.join();
  } else if (impl_->scheduler) {
    impl_->scheduler->stop();
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      until - std::chrono::steady_clock::now());
  impl_->abandoned_workers =
      impl_->pool.stop(std::max(left, std::chrono::milliseconds{100})).abandoned;
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
  impl_->changed.wait_for(lock, timeout, [&] { return impl_->first_samples_settled(); });
  std::vector<SnapshotPtr> out;
  for (const auto& p : impl_->probes)
    if (auto s = impl_->channel.latest(p->name())) out.push_back(std::move(s));
  return out;
}

}  // namespace gpustream
