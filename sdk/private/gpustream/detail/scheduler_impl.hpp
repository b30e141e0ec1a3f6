// gpustream/detail/scheduler_impl.hpp — member definitions of BasicScheduler. Included by
// scheduler.cpp (which instantiates BasicScheduler<steady_clock>) and by tests that instantiate
// it with a manual clock. The behaviour is described in gpustream/scheduler.hpp.
//
// Per-probe state machine (on the strand, except an on-demand sample taken on the requesting
// thread, below):
//
//   detect ──available──► tick (sample now) ──► tick every interval (drift-free grid)
//     ▲  └─unavailable──► wait unavailable backoff ──► detect
//     │                                   sample failed / timed out
//     │                                           ▼
//     └──── every K-th consecutive failure ◄── wait backoff(n) ──► sample ──ok──► tick grid
//
// `op_` is what is in flight (at most one: a detection or a sample), `op_id_` tells a current
// completion from a stale one, `timer_gen_` a current timer expiry from a stale one (a
// cancelled timer whose handler was already queued still runs with success).
//
// On demand (request_sample): `waiters_` are the requests waiting for the next sample result;
// each sample completion (or timeout) answers all of them. `on_demand_` marks a sample started
// by a request rather than by a tick: it leaves the grid and the backoff alone, and a tick that
// comes while it runs adopts it (clears the flag) instead of counting an overrun.
//
// On the requesting thread (Entry::sample_here): for a probe that samples inline
// (Probe::samples_inline) and is idle, request_sample claims `op_` under the entry's mutex,
// samples, counts, publishes and reports on the caller's own thread, then releases the claim —
// no post to the strand and no wait for it. The state the strand and the caller share (`op_`,
// `on_demand_`, `available_`, `armed_`, `waiters_`, ...) is guarded by that mutex; the timers
// stay the strand's own. What needs a timer (requests that joined the sample meanwhile, a tick
// that adopted it and must back off, a grid to re-arm) is finished on the strand
// (settle_sample_here), the claim held until then. While the strand publishes the result of
// its own sample (`delivering_`), a request goes to the strand instead, so that the channel
// gets each probe's snapshots in the order they were taken; and a request that reaches the
// strand once a caller's sample is counted and being published (`here_out_`) does not join it
// (it was taken before the request): it waits in `next_` for a fresh sample, started when that
// claim ends.
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "gpustream/detail/scheduler_book.hpp"
#include "gpustream/errors.hpp"
#include "gpustream/log.hpp"
#include "gpustream/scheduler.hpp"

namespace gpustream {

template <class Clock, class WaitTraits>
struct BasicScheduler<Clock, WaitTraits>::Shared {
  Shared(boost::asio::any_io_executor io, PublishFn p, PublishSharedFn ps, StatsFn s)
      : strand(boost::asio::make_strand(std::move(io))),
        publish(std::move(p)),
        publish_shared(std::move(ps)),
        on_stats(std::move(s)) {}

  boost::asio::strand<boost::asio::any_io_executor> strand;
  const PublishFn publish;
  const PublishSharedFn publish_shared;
  const StatsFn on_stats;
  std::atomic<bool> stopped{false};
};

template <class Clock, class WaitTraits>
class BasicScheduler<Clock, WaitTraits>::Entry
    : public std::enable_shared_from_this<typename BasicScheduler<Clock, WaitTraits>::Entry> {
 public:
  Entry(std::shared_ptr<Shared> shared, ProbePtr probe, const ScheduleOptions& options)
      : shared_(std::move(shared)),
        probe_(std::move(probe)),
        book_(*probe_, options),
        timer_(shared_->strand),
        timeout_timer_(shared_->strand) {}

  ProbeStats stats() const { return book_.snapshot(); }
  const std::string& name() const noexcept { return book_.name(); }
  void mark_stopped() { book_.stop(); }

  // ---- on the requesting thread (any thread) ----

  /// An on-demand sample taken here, on the calling thread, when the probe samples inline and
  /// is idle: started, available, nothing in flight, nothing being published. Otherwise it does
  /// nothing and returns false (the request then goes to the strand: request()). When it
  /// returns true, `handler` has been called, on this thread.
  bool sample_here(const SampleNowHandler& handler) {
    if (!probe_->samples_inline()) return false;
    {
      std::lock_guard lock(mu_);
      if (stopped() || !started_ || !available_ || op_ != Op::none || delivering_) return false;
      op_ = Op::sample;  // the claim: no other sample of this probe starts until it is released
      ++op_id_;          // a stale timeout or completion no longer matches
      timed_out_ = false;
      on_demand_ = true;
    }
    const auto start = Clock::now();
    boost::system::error_code ec;
    GpuSnapshot snap;
    try {
      snap = probe_->sample_inline(ec);
    } catch (const std::exception& e) {
      ec = make_error_code(errc::sample_failed);
      snap = failed_snapshot(std::string("sample threw: ") + e.what());
    } catch (...) {
      ec = make_error_code(errc::sample_failed);
      snap = failed_snapshot("sample threw a non-standard exception");
    }
    const auto latency =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    {
      Lock lock(mu_);
      if (stopped()) {
        // stop_on_strand answers whoever joined; nothing is published after a stop.
        op_ = Op::none;
        on_demand_ = false;
        here_out_ = false;
        lock.unlock();
        answer(handler, make_error_code(errc::stopped), nullptr);
        return true;
      }
      if (!ec) {
        book_.sample_ok(snap, latency);
        available_ = true;
      } else {
        book_.sample_failed(snap, ec, latency);  // published; the grid goes on (as on_sample)
      }
      here_out_ = true;  // from here on, a request waits for the next sample (next_)
    }
    // Still claimed while it is published and reported: the channel gets each probe's
    // snapshots in the order they were taken, and its stats callbacks never overlap.
    const SnapPtr published = publish(std::move(snap), /*want_result=*/true);
    report_stats();
    bool settle_on_strand = false;
    {
      std::lock_guard lock(mu_);
      // What needs the strand: requests that joined this sample meanwhile (their deadlines
      // are timers there), requests that came once it was out and want the next one, a tick
      // that adopted it and must now back off after its failure, a grid to re-arm. Otherwise
      // the claim ends here.
      settle_on_strand = !stopped() && (!waiters_.empty() || !next_.empty() ||
                                        (ec && !on_demand_) || (!ec && armed_ != Action::tick));
      if (!settle_on_strand) {
        op_ = Op::none;
        on_demand_ = false;
        here_out_ = false;
      }
    }
    if (settle_on_strand) {
      boost::asio::post(shared_->strand, [self = this->shared_from_this(), ec, published] {
        self->settle_sample_here(ec, published);
      });
    }
    answer(handler, ec, published);
    return true;
  }

  // ---- everything below runs on the strand (mu_ guards what sample_here also touches) ----

  void start() {
    std::unique_lock lock(mu_);
    started_ = true;
    begin_detect(lock);
  }

  void stop_on_strand() noexcept {
    std::unique_lock lock(mu_);
    try {
      disarm();
      timeout_timer_.cancel();
    } catch (const std::exception& e) {
      logger()->error("probe {}: cancelling its timers: {}", book_.name(), e.what());
    }
    const bool in_flight = op_ != Op::none;
    auto waiters = take_waiters();
    auto next = std::exchange(next_, {});
    lock.unlock();
    if (in_flight) probe_->cancel();  // the late completion is dropped (stopped)
    answer_all(waiters, make_error_code(errc::stopped), nullptr);
    answer_all(next, make_error_code(errc::stopped), nullptr);
  }

  /// A request_sample, on the strand: join, start, wait for detection, or answer at once.
  void request(SampleNowHandler handler, std::chrono::milliseconds deadline) {
    std::unique_lock lock(mu_);
    if (stopped()) {
      lock.unlock();
      answer(handler, make_error_code(errc::stopped), nullptr);
      return;
    }
    if (op_ == Op::sample && timed_out_) {
      // The timed-out sample has not returned yet; never two in flight.
      lock.unlock();
      answer(handler, make_error_code(errc::timeout), nullptr);
      return;
    }
    if (op_ == Op::sample && here_out_) {
      // A sample taken on a requesting thread is being published: it was taken before this
      // request, so the request gets the next one, started when that claim ends.
      add_waiter(next_, std::move(handler), deadline);
      return;
    }
    if (op_ == Op::sample || op_ == Op::detect || !started_) {
      // Joins the sample in flight or the next one.
      add_waiter(waiters_, std::move(handler), deadline);
      return;
    }
    if (!available_) {  // unavailable, or backing off after failures
      lock.unlock();
      answer(handler, make_error_code(errc::probe_unavailable), nullptr);
      return;
    }
    add_waiter(waiters_, std::move(handler), deadline);
    begin_sample(lock, sample_due_, /*on_demand=*/true);
  }

 private:
  using Timer = boost::asio::basic_waitable_timer<Clock, WaitTraits, boost::asio::any_io_executor>;
  using TimePoint = typename Clock::time_point;
  using SnapPtr = std::shared_ptr<const GpuSnapshot>;
  using Lock = std::unique_lock<std::mutex>;
  struct Waiter {
    std::uint64_t id = 0;
    SampleNowHandler handler;
    std::unique_ptr<Timer> deadline;  // null: no deadline of its own
  };
  enum class Op : std::uint8_t { none, detect, sample };
  enum class Action : std::uint8_t { none, tick, sample, detect };

  static std::chrono::nanoseconds ns(TimePoint t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch());
  }
  static TimePoint tp(std::chrono::nanoseconds d) {
    return TimePoint(std::chrono::duration_cast<typename Clock::duration>(d));
  }
  static GpuSnapshot failed_snapshot(std::string message) {
    GpuSnapshot s;
    s.errors.push_back({"sample_failed", std::move(message), {}});
    return s;
  }
  bool stopped() const noexcept { return shared_->stopped.load(); }
  std::chrono::nanoseconds interval() const { return book_.options().interval; }

  // -- the main timer: next tick, next retry, or next detection (with mu_ held) --

  void arm(TimePoint at, Action a) {
    const auto gen = ++timer_gen_;
    armed_ = a;
    timer_.expires_at(at);
    timer_.async_wait([self = this->shared_from_this(), gen, a](boost::system::error_code ec) {
      self->on_timer(ec, gen, a);
    });
  }

  void disarm() {
    ++timer_gen_;
    armed_ = Action::none;
    timer_.cancel();
  }

  void on_timer(boost::system::error_code ec, std::uint64_t gen, Action a) {
    Lock lock(mu_);
    if (ec || gen != timer_gen_ || stopped()) return;
    armed_ = Action::none;
    switch (a) {
      case Action::tick:
        on_tick(lock);
        break;
      case Action::sample:
        begin_sample(lock, timer_.expiry());
        break;
      case Action::detect:
        begin_detect(lock);
        break;
      case Action::none:
        break;
    }
  }

  void on_tick(Lock& lock) {
    const TimePoint due = timer_.expiry();
    const auto plan = detail::plan_next_tick(ns(due), ns(Clock::now()), interval());
    if (plan.skipped > 0) book_.missed(plan.skipped);
    arm(tp(plan.next), Action::tick);
    if (op_ == Op::sample && on_demand_ && !timed_out_) {
      // An on-demand sample is running (here or on a requesting thread): it serves as this
      // tick's sample (not an overrun). From here on it is a periodic sample (a failure backs
      // off as usual).
      on_demand_ = false;
      sample_due_ = due;
      return;
    }
    if (op_ != Op::none) {
      book_.overrun();  // never two in flight: skip this tick
      return;
    }
    begin_sample(lock, due);
  }

  // After a retry succeeded: back onto the grid anchored at the retry's own due time.
  void resume_ticking() {
    const auto plan = detail::plan_next_tick(ns(sample_due_), ns(Clock::now()), interval());
    arm(tp(plan.next), Action::tick);
  }

  // -- the per-operation timeout --

  void arm_timeout(std::uint64_t id) {
    const auto timeout = book_.options().timeout;
    if (timeout <= std::chrono::milliseconds::zero()) return;
    timeout_timer_.expires_after(timeout);
    timeout_timer_.async_wait([self = this->shared_from_this(), id](boost::system::error_code ec) {
      self->on_timeout(ec, id);
    });
  }

  void on_timeout(boost::system::error_code ec, std::uint64_t id) {
    Lock lock(mu_);
    if (ec || id != op_id_ || op_ == Op::none || timed_out_ || stopped()) return;
    timed_out_ = true;
    if (op_ == Op::detect) {
      book_.detect_timed_out();
      auto waiters = take_waiters();  // no sample is coming soon
      lock.unlock();
      probe_->cancel();
      report_stats();
      answer_all(waiters, make_error_code(errc::timeout), nullptr);
      return;  // the retry is scheduled when the late completion arrives
    }
    if (!on_demand_) disarm();  // no ticks while the timed-out sample is still out there
    auto snap = book_.sample_timed_out();
    lock.unlock();
    probe_->cancel();  // probe code, no lock held; the sample stays claimed (timed_out_)
    lock.lock();
    deliver(lock, std::move(snap), make_error_code(errc::timeout));
  }

  // -- detection --

  void begin_detect(Lock& lock) {
    if (stopped()) return;
    op_ = Op::detect;
    const auto id = ++op_id_;
    timed_out_ = false;
    book_.detect_started();
    arm_timeout(id);
    lock.unlock();  // claimed (op_): the probe is called with no lock held
    auto self = this->shared_from_this();
    try {
      probe_->async_detect([self, id](Detection d) {
        boost::asio::post(self->shared_->strand, [self, id, d = std::move(d)]() mutable {
          self->on_detect(id, std::move(d));
        });
      });
    } catch (const std::exception& e) {
      fail_detect_inline(id, std::string("detection threw: ") + e.what());
    } catch (...) {
      fail_detect_inline(id, "detection threw a non-standard exception");
    }
  }

  void fail_detect_inline(std::uint64_t id, std::string reason) {
    Detection d;
    d.reason = std::move(reason);
    boost::asio::post(shared_->strand,
                      [self = this->shared_from_this(), id, d = std::move(d)]() mutable {
                        self->on_detect(id, std::move(d));
                      });
  }

  void on_detect(std::uint64_t id, Detection d) {
    Lock lock(mu_);
    if (op_ != Op::detect || id != op_id_) return;  // a second call of the handler
    op_ = Op::none;
    timeout_timer_.cancel();
    if (stopped()) {
      auto waiters = take_waiters();
      lock.unlock();
      answer_all(waiters, make_error_code(errc::stopped), nullptr);
      return;
    }
    if (!timed_out_ && d.available) {
      book_.detected_available(*probe_, d);  // may change interval(): a new grid starts here
      available_ = true;
      arm(Clock::now(), Action::tick);  // first sample at once (waiters join it)
      lock.unlock();
      report_stats();
      return;
    }
    available_ = false;
    auto waiters = take_waiters();
    const bool report = !timed_out_;  // a timed-out detection was reported when it timed out
    if (report) book_.detected_unavailable(d.reason);
    arm(Clock::now() + book_.unavailable_backoff(), Action::detect);
    lock.unlock();
    answer_all(waiters, make_error_code(errc::probe_unavailable), nullptr);
    if (report) report_stats();
  }

  // -- sampling --

  void begin_sample(Lock& lock, TimePoint due, bool on_demand = false) {
    if (stopped()) return;
    op_ = Op::sample;
    const auto id = ++op_id_;
    timed_out_ = false;
    on_demand_ = on_demand;
    if (!on_demand) sample_due_ = due;  // an on-demand sample keeps the grid's anchor
    sample_start_ = Clock::now();
    arm_timeout(id);
    lock.unlock();  // claimed (op_): the probe is called with no lock held
    auto self = this->shared_from_this();
    try {
      probe_->async_sample([self, id](boost::system::error_code ec, GpuSnapshot s) {
        boost::asio::post(self->shared_->strand, [self, id, ec, s = std::move(s)]() mutable {
          self->on_sample(id, ec, std::move(s));
        });
      });
    } catch (const std::exception& e) {
      fail_sample_inline(id, std::string("sample threw: ") + e.what());
    } catch (...) {
      fail_sample_inline(id, "sample threw a non-standard exception");
    }
  }

  void fail_sample_inline(std::uint64_t id, std::string message) {
    boost::asio::post(shared_->strand, [self = this->shared_from_this(), id,
                                        s = failed_snapshot(std::move(message))]() mutable {
      self->on_sample(id, make_error_code(errc::sample_failed), std::move(s));
    });
  }

  void on_sample(std::uint64_t id, boost::system::error_code ec, GpuSnapshot snap) {
    Lock lock(mu_);
    if (op_ != Op::sample || id != op_id_) return;  // a second call of the handler
    op_ = Op::none;
    timeout_timer_.cancel();
    if (stopped()) {
      auto waiters = take_waiters();
      lock.unlock();
      answer_all(waiters, make_error_code(errc::stopped), nullptr);
      return;
    }
    if (timed_out_) {
      // Already counted and published as a timeout; the result is dropped. Only now may the
      // next try be scheduled (never two in flight). An on-demand sample leaves the grid alone.
      if (!on_demand_) schedule_after_failure();
      on_demand_ = false;
      return;
    }
    const auto latency =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - sample_start_).count();
    const bool on_demand = std::exchange(on_demand_, false);
    if (!ec) {
      book_.sample_ok(snap, latency);
      available_ = true;
      if (armed_ != Action::tick) resume_ticking();
    } else if (on_demand) {
      book_.sample_failed(snap, ec, latency);  // counted and published; the grid goes on
    } else {
      disarm();
      book_.sample_failed(snap, ec, latency);
      schedule_after_failure();
    }
    deliver(lock, std::move(snap), ec);
  }

  /// The end of a sample taken by sample_here that needs the strand (see there): it is
  /// counted and published already; this releases the claim, applies the grid's rules and
  /// answers the requests that joined it.
  void settle_sample_here(boost::system::error_code ec, const SnapPtr& published) {
    Lock lock(mu_);
    op_ = Op::none;
    here_out_ = false;
    const bool on_demand = std::exchange(on_demand_, false);
    auto waiters = take_waiters();
    auto next = std::exchange(next_, {});
    if (stopped()) {
      lock.unlock();
      answer_all(waiters, make_error_code(errc::stopped), nullptr);
      answer_all(next, make_error_code(errc::stopped), nullptr);
      return;
    }
    if (!ec) {
      if (armed_ != Action::tick) resume_ticking();
    } else if (!on_demand) {  // adopted by a tick: a periodic sample that failed backs off
      disarm();
      schedule_after_failure();
    }
    // The requests that came once the sample was out get a fresh one (as request() would).
    const bool next_unavailable = !next.empty() && !available_;
    if (!next.empty() && available_) {
      waiters_ = std::move(next);
      next.clear();
      begin_sample(lock, sample_due_, /*on_demand=*/true);  // unlocks
    }
    if (lock.owns_lock()) lock.unlock();
    answer_all(waiters, ec, published);
    if (next_unavailable) answer_all(next, make_error_code(errc::probe_unavailable), nullptr);
  }

  void schedule_after_failure() {
    const auto n = book_.consecutive_failures();
    const auto delay = detail::backoff_delay(book_.options(), n);
    const auto k = book_.options().failures_before_redetect;
    const bool redetect = k > 0 && n > 0 && n % k == 0;
    book_.backing_off(delay);
    available_ = false;  // requests are answered probe_unavailable until a sample succeeds
    arm(Clock::now() + delay, redetect ? Action::detect : Action::sample);
  }

  // -- user code: called last, after every state change, never under mu_ --

  /// Publishes the sample of the claim in flight (op_ is still set, so no other sample of this
  /// probe is taken or published meanwhile), then reports and answers the waiters.
  void deliver(Lock& lock, GpuSnapshot snap, boost::system::error_code ec) {
    auto waiters = take_waiters();
    if (stopped()) {
      lock.unlock();
      answer_all(waiters, make_error_code(errc::stopped), nullptr);
      return;
    }
    delivering_ = true;  // sample_here waits its turn on the strand until this is published
    lock.unlock();
    const SnapPtr published = publish(std::move(snap), !waiters.empty());
    report_stats();
    lock.lock();
    delivering_ = false;
    lock.unlock();
    answer_all(waiters, ec, published);
  }

  /// The publish sink, with no lock held. `want_result`: a plain sink's waiters get a copy of
  /// what it was given (no sequence number).
  SnapPtr publish(GpuSnapshot snap, bool want_result) noexcept {
    SnapPtr published;
    try {
      if (shared_->publish_shared) {
        published = shared_->publish_shared(std::move(snap));
      } else if (shared_->publish) {
        if (want_result) published = std::make_shared<const GpuSnapshot>(snap);
        shared_->publish(std::move(snap));
      }
    } catch (const std::exception& e) {
      logger()->error("probe {}: the publish sink threw: {}", book_.name(), e.what());
    } catch (...) {
      logger()->error("probe {}: the publish sink threw", book_.name());
    }
    return published;
  }

  // -- request_sample's waiters (strand only, with mu_ held) --

  void add_waiter(std::vector<Waiter>& to, SampleNowHandler handler,
                  std::chrono::milliseconds deadline) {
    Waiter w;
    w.id = ++waiter_id_;
    w.handler = std::move(handler);
    if (deadline > std::chrono::milliseconds::zero()) {
      w.deadline = std::make_unique<Timer>(shared_->strand);
      w.deadline->expires_after(deadline);
      w.deadline->async_wait(
          [self = this->shared_from_this(), id = w.id](boost::system::error_code ec) {
            if (!ec) self->on_waiter_deadline(id);
          });
    }
    to.push_back(std::move(w));
  }

  std::vector<Waiter> take_waiters() {
    std::vector<Waiter> out;
    out.swap(waiters_);
    return out;
  }

  void on_waiter_deadline(std::uint64_t id) {
    Lock lock(mu_);
    SampleNowHandler handler;
    for (auto* list : {&waiters_, &next_}) {
      const auto it =
          std::find_if(list->begin(), list->end(), [id](const Waiter& w) { return w.id == id; });
      if (it == list->end()) continue;
      handler = std::move(it->handler);
      list->erase(it);
      break;
    }
    if (!handler) return;  // already answered
    lock.unlock();
    answer(handler, make_error_code(errc::timeout), nullptr);
  }

  /// Answers waiters taken from waiters_ (on the strand: their deadline timers live there).
  void answer_all(std::vector<Waiter>& waiters, boost::system::error_code ec, const SnapPtr& snap) {
    for (auto& w : waiters) {
      if (w.deadline) w.deadline->cancel();
      answer(w.handler, ec, snap);
    }
  }

  void answer(const SampleNowHandler& handler, boost::system::error_code ec,
              const SnapPtr& snap) noexcept {
    if (!handler) return;
    try {
      handler(ec, snap);
    } catch (const std::exception& e) {
      logger()->error("probe {}: a request_sample handler threw: {}", book_.name(), e.what());
    } catch (...) {
      logger()->error("probe {}: a request_sample handler threw", book_.name());
    }
  }

  void report_stats() {
    if (shared_->on_stats && !stopped()) {
      try {
        shared_->on_stats(book_.snapshot());
      } catch (const std::exception& e) {
        logger()->error("probe {}: the stats callback threw: {}", book_.name(), e.what());
      } catch (...) {
        logger()->error("probe {}: the stats callback threw", book_.name());
      }
    }
  }

  const std::shared_ptr<Shared> shared_;
  const ProbePtr probe_;
  detail::ProbeBook book_;  // thread-safe on its own
  Timer timer_;             // the timers: strand only
  Timer timeout_timer_;

  // The probe's state. The strand's handlers and sample_here (any thread) take mu_ to read or
  // change it, and release it before calling the probe or user code (the publish sink, the
  // stats callback, handlers).
  std::mutex mu_;
  Op op_ = Op::none;  // the claim: at most one detection or sample in flight
  std::uint64_t op_id_ = 0;
  bool timed_out_ = false;
  Action armed_ = Action::none;
  std::uint64_t timer_gen_ = 0;
  TimePoint sample_due_{};
  TimePoint sample_start_{};
  bool started_ = false;         // start() ran
  bool available_ = false;       // detected available and not backing off after failures
  bool on_demand_ = false;       // the sample in flight was started by a request
  bool delivering_ = false;      // the strand is publishing the result of the last claim
  bool here_out_ = false;        // the claim's sample (taken on a requesting thread) is published
  std::vector<Waiter> waiters_;  // requests for the sample in flight (or the next)
  std::vector<Waiter> next_;     // requests made once here_out_: they get a fresh sample
  std::uint64_t waiter_id_ = 0;
};

template <class Clock, class WaitTraits>
BasicScheduler<Clock, WaitTraits>::BasicScheduler(boost::asio::any_io_executor io,
                                                  PublishFn publish, StatsFn on_stats)
    : shared_(std::make_shared<Shared>(std::move(io), std::move(publish), PublishSharedFn{},
                                       std::move(on_stats))) {}

template <class Clock, class WaitTraits>
BasicScheduler<Clock, WaitTraits>::BasicScheduler(boost::asio::any_io_executor io, PublishShared,
                                                  PublishSharedFn publish, StatsFn on_stats)
    : shared_(std::make_shared<Shared>(std::move(io), PublishFn{}, std::move(publish),
                                       std::move(on_stats))) {}

template <class Clock, class WaitTraits>
BasicScheduler<Clock, WaitTraits>::~BasicScheduler() {
  stop();
}

template <class Clock, class WaitTraits>
void BasicScheduler<Clock, WaitTraits>::add(ProbePtr probe, ScheduleOptions options) {
  if (!probe) throw std::invalid_argument("Scheduler::add: null probe");
  auto entry = std::make_shared<Entry>(shared_, std::move(probe), options);
  bool start_now = false;
  {
    std::lock_guard lock(mu_);
    entries_.push_back(entry);
    start_now = started_ && !shared_->stopped.load();
  }
  if (shared_->stopped.load()) {
    entry->mark_stopped();
  } else if (start_now) {
    boost::asio::post(shared_->strand, [entry] { entry->start(); });
  }
}

template <class Clock, class WaitTraits>
void BasicScheduler<Clock, WaitTraits>::start() {
  std::vector<std::shared_ptr<Entry>> entries;
  {
    std::lock_guard lock(mu_);
    if (started_ || shared_->stopped.load()) return;
    started_ = true;
    entries = entries_;
  }
  boost::asio::post(shared_->strand, [entries = std::move(entries)] {
    for (const auto& e : entries) e->start();
  });
}

template <class Clock, class WaitTraits>
void BasicScheduler<Clock, WaitTraits>::stop() noexcept {
  if (shared_->stopped.exchange(true)) return;
  try {
    std::vector<std::shared_ptr<Entry>> entries;
    {
      std::lock_guard lock(mu_);
      entries = entries_;
    }
    for (const auto& e : entries) e->mark_stopped();
    boost::asio::dispatch(shared_->strand, [entries = std::move(entries)] {
      for (const auto& e : entries) e->stop_on_strand();
    });
  } catch (const std::exception& e) {
    logger()->error("Scheduler::stop: {}", e.what());
  }
}

template <class Clock, class WaitTraits>
bool BasicScheduler<Clock, WaitTraits>::stopped() const noexcept {
  return shared_->stopped.load();
}

template <class Clock, class WaitTraits>
void BasicScheduler<Clock, WaitTraits>::request_sample(std::string_view probe,
                                                       SampleNowHandler handler,
                                                       std::chrono::milliseconds deadline) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard lock(mu_);
    for (const auto& e : entries_)
      if (e->name() == probe) entry = e;
  }
  if (!entry)
    throw std::invalid_argument("Scheduler::request_sample: no probe named '" + std::string(probe) +
                                "'");
  if (entry->sample_here(handler)) return;  // sampled, published and answered on this thread
  boost::asio::post(shared_->strand, [entry, handler = std::move(handler), deadline]() mutable {
    entry->request(std::move(handler), deadline);
  });
}

template <class Clock, class WaitTraits>
std::vector<std::string> BasicScheduler<Clock, WaitTraits>::probe_names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e->name());
  return out;
}

template <class Clock, class WaitTraits>
std::vector<ProbeStats> BasicScheduler<Clock, WaitTraits>::stats() const {
  std::vector<std::shared_ptr<Entry>> entries;
  {
    std::lock_guard lock(mu_);
    entries = entries_;
  }
  std::vector<ProbeStats> out;
  out.reserve(entries.size());
  for (const auto& e : entries) out.push_back(e->stats());
  return out;
}

}  // namespace gpustream
