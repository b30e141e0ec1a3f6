// One-shot runs: async_run() and run() (see gpustream/subprocess.hpp).
#include <signal.h>

#include <array>
#include <atomic>
#include <memory>
#include <utility>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/system/system_error.hpp>

#include "gpustream/errors.hpp"
#include "gpustream/subprocess.hpp"
#include "subprocess_posix.hpp"

namespace gpustream {
namespace detail {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

// The state of one run. Every member is touched only on `strand_`; pending operations keep the
// object alive through shared_ptr captures.
class RunOp : public std::enable_shared_from_this<RunOp> {
 public:
  RunOp(const asio::any_io_executor& io, RunOptions options, RunHandler handler)
      : io_(io),
        strand_(asio::make_strand(io)),
        options_(std::move(options)),
        handler_(std::move(handler)),
        out_(strand_),
        err_(strand_),
        timer_(strand_) {}

  void start() {
    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) {
      slot.assign([weak = weak_from_this()](asio::cancellation_type) {
        if (auto self = weak.lock()) {
          self->cancel_requested_.store(true);  // seen by a spawn that has not happened yet
          asio::post(self->strand_, [self] { self->end_early(Ending::cancelled); });
        }
      });
    }
    asio::post(strand_, [self = shared_from_this()] { self->spawn_and_watch(); });
  }

 private:
  enum class Ending { none, timeout, cancelled };

  void spawn_and_watch() {
    if (cancel_requested_.load()) {  // cancelled before it started
      finish(asio::error::operation_aborted);
      return;
    }
    Spawned spawned;
    if (auto ec = spawn(options_.argv, options_.env, spawned)) {
      finish(ec);
      return;
    }
    result_.pid = spawned.pid;
    child_.emplace(strand_, spawned.pid);
    out_.assign(spawned.out_fd);
    err_.assign(spawned.err_fd);

    if (options_.timeout.count() > 0) {
      timer_.expires_after(options_.timeout);
      timer_.async_wait([self = shared_from_this()](error_code ec) {
        if (!ec) self->end_early(Ending::timeout);
      });
    }
    read_out();
    read_err();
    child_->async_wait([self = shared_from_this()](const ExitStatus&) { self->maybe_finish(); });
  }

  void read_out() {
    out_.async_read_some(
        asio::buffer(out_buf_),
        [self = shared_from_this()](error_code ec, std::size_t n) { self->on_out(ec, n); });
  }

  void read_err() {
    err_.async_read_some(
        asio::buffer(err_buf_),
        [self = shared_from_this()](error_code ec, std::size_t n) { self->on_err(ec, n); });
  }

  void on_out(error_code ec, std::size_t n) {
    const std::size_t room = options_.max_output_bytes - result_.output.size();
    const std::size_t keep = std::min(n, room);
    result_.output.append(out_buf_.data(), keep);
    if (keep < n) result_.truncated = true;  // the excess is read and dropped
    if (ec || done_) {
      out_done_ = true;
      maybe_finish();
      return;
    }
    read_out();
  }

  void on_err(error_code ec, std::size_t n) {
    append_tail(result_.stderr_tail, std::string_view(err_buf_.data(), n),
                options_.stderr_tail_bytes);
    if (ec || done_) {
      err_done_ = true;
      maybe_finish();
      return;
    }
    read_err();
  }

  // Timeout or cancellation: kill the whole group (also what an exited child left behind, still
  // holding the pipes), stop reading, and complete once the child exited and was reaped.
  void end_early(Ending why) {
    if (done_ || ending_ != Ending::none) return;
    ending_ = why;
    if (why == Ending::timeout) result_.timed_out = true;
    if (child_) child_->signal_group(SIGKILL);
    error_code ignored;
    out_.close(ignored);
    err_.close(ignored);
    maybe_finish();
  }

  void maybe_finish() {
    if (done_ || !child_ || !child_->exited()) return;
    if (ending_ == Ending::none && !(out_done_ && err_done_)) return;
    child_->reap();
    result_.exit_code = child_->status().exit_code;
    result_.signal = child_->status().signal;
    switch (ending_) {
      case Ending::none:
        finish({});
        break;
      case Ending::timeout:
        finish(errc::timeout);
        break;
      case Ending::cancelled:
        finish(asio::error::operation_aborted);
        break;
    }
  }

  void finish(error_code ec) {
    if (done_) return;
    done_ = true;
    error_code ignored;
    timer_.cancel();
    out_.close(ignored);
    err_.close(ignored);
    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
    auto ex = asio::get_associated_executor(handler_, io_);
    // Never complete inside the initiating call: this runs from a posted handler at least.
    asio::dispatch(ex, [h = std::move(handler_), ec, r = std::move(result_)]() mutable {
      std::move(h)(ec, std::move(r));
    });
  }

  asio::any_io_executor io_;
  asio::strand<asio::any_io_executor> strand_;
  RunOptions options_;
  RunHandler handler_;
  asio::posix::stream_descriptor out_;
  asio::posix::stream_descriptor err_;
  asio::steady_timer timer_;
  std::optional<ChildProcess> child_;
  std::array<char, 65536> out_buf_{};
  std::array<char, 16384> err_buf_{};
  RunResult result_;
  Ending ending_ = Ending::none;
  bool out_done_ = false;
  bool err_done_ = false;
  bool done_ = false;
  std::atomic<bool> cancel_requested_{false};
};

}  // namespace

void start_run(const asio::any_io_executor& io, RunOptions options, RunHandler handler) {
  std::make_shared<RunOp>(io, std::move(options), std::move(handler))->start();
}

}  // namespace detail

RunResult run(RunOptions options, boost::system::error_code& ec) {
  boost::asio::io_context ctx;
  RunResult result;
  async_run(ctx.get_executor(), std::move(options), [&](boost::system::error_code e, RunResult r) {
    ec = e;
    result = std::move(r);
  });
  ctx.run();
  return result;
}

RunResult run(RunOptions options) {
  boost::system::error_code ec;
  const std::string program = detail::program_name(options.argv);
  RunResult result = run(std::move(options), ec);
  if (ec) throw boost::system::system_error(ec, "running " + program);
  return result;
}

}  // namespace gpustream
