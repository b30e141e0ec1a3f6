// LineChild: a persistent child whose stdout is read line by line (see gpustream/subprocess.hpp).
#include <signal.h>

#include <algorithm>
#include <array>
#include <exception>
#include <memory>
#include <utility>

#include <boost/asio/post.hpp>

#include "gpustream/log.hpp"
#include "gpustream/subprocess.hpp"
#include "subprocess_posix.hpp"

namespace gpustream {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::milliseconds;

class LineChild::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::any_io_executor io, LineChildOptions options, LineHandler on_line,
       EventHandler on_event)
      : io_(std::move(io)),
        options_(std::move(options)),
        on_line_(std::move(on_line)),
        on_event_(std::move(on_event)),
        out_(io_),
        err_(io_),
        restart_timer_(io_),
        kill_timer_(io_),
        drain_timer_(io_),
        next_delay_(options_.restart_initial),
        name_(detail::program_name(options_.argv)) {}

  void start() {
    if (phase_ != Phase::idle) return;
    stop_requested_ = false;
    next_delay_ = options_.restart_initial;
    spawn_child();
  }

  void stop() {
    if (stop_requested_ || phase_ == Phase::idle) return;
    stop_requested_ = true;
    restart_timer_.cancel();
    if (phase_ == Phase::waiting_restart) {
      // No child: report `stopped` from a fresh handler, never from inside stop().
      phase_ = Phase::idle;
      asio::post(io_, [self = shared_from_this()] {
        self->emit({LineChildEvent::Kind::stopped, -1, {}, {}, {}, "stopped", {}});
      });
      return;
    }
    // Running: ask politely, then insist. Output after stop() is not delivered.
    child_->signal_group(SIGTERM);
    close_pipes();
    kill_timer_.expires_after(options_.stop_grace);
    kill_timer_.async_wait([self = shared_from_this(), gen = generation_](error_code ec) {
      if (!ec && gen == self->generation_ && self->child_) self->child_->signal_group(SIGKILL);
    });
  }

  // The owner is gone: no callback runs any more. A callback that is running right now (and
  // destroyed the LineChild) is released once it returns, never while it executes.
  void detach() {
    detached_ = true;
    if (callback_depth_ == 0) release_callbacks();
    stop();
  }

  std::optional<int> pid() const noexcept {
    if (phase_ == Phase::running && child_ && !child_->exited()) return child_->pid();
    return std::nullopt;
  }
  bool running() const noexcept { return phase_ == Phase::running; }
  std::size_t restarts() const noexcept { return starts_ == 0 ? 0 : starts_ - 1; }

 private:
  enum class Phase { idle, running, waiting_restart };

  void spawn_child() {
    const auto gen = ++generation_;
    detail::Spawned spawned;
    if (auto ec = detail::spawn(options_.argv, options_.env, spawned)) {
      LineChildEvent event{LineChildEvent::Kind::spawn_failed,
                           -1,
                           {},
                           {},
                           {},
                           "cannot start " + name_ + ": " + ec.message(),
                           {}};
      schedule_restart(event);
      return;
    }
    child_.reset();
    child_ = std::make_unique<detail::ChildProcess>(io_, spawned.pid);
    out_.assign(spawned.out_fd);
    err_.assign(spawned.err_fd);
    phase_ = Phase::running;
    out_open_ = err_open_ = true;
    pending_.clear();
    skipping_ = false;
    stderr_tail_.clear();
    started_at_ = std::chrono::steady_clock::now();
    ++starts_;
    read_out(gen);
    read_err(gen);
    child_->async_wait(
        [self = shared_from_this(), gen](const detail::ExitStatus&) { self->on_exit(gen); });
    emit({LineChildEvent::Kind::started, spawned.pid, {}, {}, {}, "started " + name_, {}});
  }

  void read_out(std::uint64_t gen) {
    out_.async_read_some(asio::buffer(out_buf_),
                         [self = shared_from_this(), gen](error_code ec, std::size_t n) {
                           self->on_out(gen, ec, n);
                         });
  }

  void read_err(std::uint64_t gen) {
    err_.async_read_some(asio::buffer(err_buf_),
                         [self = shared_from_this(), gen](error_code ec, std::size_t n) {
                           self->on_err(gen, ec, n);
                         });
  }

  void on_out(std::uint64_t gen, error_code ec, std::size_t n) {
    if (gen != generation_) return;
    consume(gen, std::string_view(out_buf_.data(), n));
    if (gen != generation_) return;
    if (ec || stop_requested_) {
      out_open_ = false;
      if (!stop_requested_ && !skipping_ && !pending_.empty()) {
        std::string last = std::move(pending_);
        pending_.clear();
        deliver(last, true);
        if (gen != generation_) return;
      }
      maybe_end_run(gen);
      return;
    }
    read_out(gen);
  }

  void on_err(std::uint64_t gen, error_code ec, std::size_t n) {
    if (gen != generation_) return;
    detail::append_tail(stderr_tail_, std::string_view(err_buf_.data(), n),
                        options_.stderr_tail_bytes);
    if (ec || stop_requested_) {
      err_open_ = false;
      maybe_end_run(gen);
      return;
    }
    read_err(gen);
  }

  // Splits a chunk of stdout into lines. Callbacks may stop or destroy the LineChild: after
  // each one, continue only if this run is still the current one and not stopping.
  void consume(std::uint64_t gen, std::string_view data) {
    while (!data.empty() && gen == generation_ && !stop_requested_) {
      const auto nl = data.find('\n');
      if (skipping_) {
        if (nl == std::string_view::npos) return;
        skipping_ = false;
        data.remove_prefix(nl + 1);
        continue;
      }
      const std::string_view piece = data.substr(0, nl);  // all of it when there is no '\n'
      if (pending_.size() + piece.size() > options_.max_line_bytes) {
        std::string head = pending_;
        head.append(piece.substr(0, std::min<std::size_t>(piece.size(), 80)));
        head.resize(std::min<std::size_t>(head.size(), 80));
        pending_.clear();
        skipping_ = nl == std::string_view::npos;
        data = skipping_ ? std::string_view() : data.substr(nl + 1);
        emit({LineChildEvent::Kind::line_too_long,
              current_pid(),
              {},
              {},
              {},
              name_ + " printed a line longer than " + std::to_string(options_.max_line_bytes) +
                  " bytes; skipped it (it began with: " + head + ")",
              {}});
        continue;
      }
      if (nl == std::string_view::npos) {
        pending_.append(piece);
        return;
      }
      data.remove_prefix(nl + 1);
      if (pending_.empty()) {
        deliver(piece, false);
      } else {
        pending_.append(piece);
        std::string line = std::move(pending_);
        pending_.clear();
        deliver(line, false);
      }
    }
  }

  void deliver(std::string_view line, bool partial) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (detached_ || !on_line_) return;
    invoke([&] { on_line_(line, partial); });
  }

  void emit(const LineChildEvent& event) {
    if (detached_ || !on_event_) return;
    invoke([&] { on_event_(event); });
  }

  // Runs a user callback: exceptions stay here, and the Impl outlives a callback that
  // destroys the LineChild.
  template <class F>
  void invoke(F&& call) {
    auto keep_alive = shared_from_this();
    ++callback_depth_;
    try {
      call();
    } catch (const std::exception& e) {
      logger()->error("{}: callback threw: {}", name_, e.what());
    } catch (...) {
      logger()->error("{}: callback threw an unknown exception", name_);
    }
    if (--callback_depth_ == 0 && detached_) release_callbacks();
  }

  void release_callbacks() {
    on_line_ = nullptr;
    on_event_ = nullptr;
  }

  void on_exit(std::uint64_t gen) {
    if (gen != generation_) return;
    if (out_open_ || err_open_) {
      // Give the pipes a moment to deliver what the child wrote; a grandchild may hold them.
      drain_timer_.expires_after(options_.drain_grace);
      drain_timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
        if (ec || gen != self->generation_) return;
        self->child_->signal_group(SIGKILL);  // whatever it left behind in its group
        self->close_pipes();
      });
    }
    maybe_end_run(gen);
  }

  void close_pipes() {
    error_code ignored;
    out_.close(ignored);
    err_.close(ignored);
  }

  int current_pid() const { return child_ ? child_->pid() : -1; }

  // The run is over once the child is reaped and both pipes are done.
  void maybe_end_run(std::uint64_t gen) {
    if (gen != generation_ || phase_ != Phase::running) return;
    if (!child_ || !child_->exited() || out_open_ || err_open_) return;
    drain_timer_.cancel();
    kill_timer_.cancel();
    close_pipes();
    child_->reap();
    const detail::ExitStatus status = child_->status();
    if (stop_requested_) {
      phase_ = Phase::idle;
      emit({LineChildEvent::Kind::stopped,
            child_->pid(),
            status.exit_code,
            status.signal,
            stderr_tail_,
            name_ + " stopped",
            {}});
      return;
    }
    const auto ran_for = std::chrono::steady_clock::now() - started_at_;
    if (ran_for >= options_.healthy_after) next_delay_ = options_.restart_initial;
    LineChildEvent event{LineChildEvent::Kind::exited,
                         child_->pid(),
                         status.exit_code,
                         status.signal,
                         stderr_tail_,
                         name_ + " " + detail::describe_exit(status, stderr_tail_),
                         {}};
    schedule_restart(event);
  }

  // Reports `event` (exited or spawn_failed) with the restart delay, then arms the restart.
  void schedule_restart(LineChildEvent& event) {
    const auto gen = ++generation_;  // outdate every handler of the run that just ended
    if (!options_.restart) {
      phase_ = Phase::idle;
      emit(event);
      return;
    }
    const milliseconds delay = next_delay_;
    next_delay_ =
        std::min(next_delay_ * 2, std::max(options_.restart_max, options_.restart_initial));
    phase_ = Phase::waiting_restart;
    event.restart_in = delay;
    event.message += "; restarting in " + std::to_string(delay.count()) + " ms";
    emit(event);
    if (gen != generation_ || stop_requested_ || phase_ != Phase::waiting_restart) return;
    restart_timer_.expires_after(delay);
    restart_timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
      if (ec || gen != self->generation_ || self->stop_requested_) return;
      self->spawn_child();
    });
  }

  asio::any_io_executor io_;
  LineChildOptions options_;
  LineHandler on_line_;
  EventHandler on_event_;
  asio::posix::stream_descriptor out_;
  asio::posix::stream_descriptor err_;
  asio::steady_timer restart_timer_;
  asio::steady_timer kill_timer_;
  asio::steady_timer drain_timer_;
  std::unique_ptr<detail::ChildProcess> child_;
  std::array<char, 16384> out_buf_{};
  std::array<char, 4096> err_buf_{};
  std::string pending_;    // the start of a line whose '\n' has not arrived yet
  bool skipping_ = false;  // inside an overlong line, dropping bytes until '\n'
  std::string stderr_tail_;
  milliseconds next_delay_;
  std::chrono::steady_clock::time_point started_at_{};
  std::size_t starts_ = 0;
  std::uint64_t generation_ = 0;  // bumped per run; handlers of older runs do nothing
  Phase phase_ = Phase::idle;
  bool out_open_ = false;
  bool err_open_ = false;
  bool stop_requested_ = false;
  bool detached_ = false;
  int callback_depth_ = 0;
  std::string name_;
};

LineChild::LineChild(asio::any_io_executor io, LineChildOptions options, LineHandler on_line,
                     EventHandler on_event)
    : impl_(std::make_shared<Impl>(std::move(io), std::move(options), std::move(on_line),
                                   std::move(on_event))) {}

LineChild::~LineChild() { impl_->detach(); }

// A callback run from inside start() or stop() may destroy the LineChild: keep the Impl alive.
void LineChild::start() {
  auto keep_alive = impl_;
  keep_alive->start();
}
void LineChild::stop() {
  auto keep_alive = impl_;
  keep_alive->stop();
}
std::optional<int> LineChild::pid() const noexcept { return impl_->pid(); }
bool LineChild::running() const noexcept { return impl_->running(); }
std::size_t LineChild::restarts() const noexcept { return impl_->restarts(); }

}  // namespace gpustream
