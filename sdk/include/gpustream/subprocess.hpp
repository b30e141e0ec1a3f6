// gpustream/subprocess.hpp — child processes on the caller's io_context: one-shot runs with a
// timeout and capped output, and persistent children that stream lines.
//
// Children are started with posix_spawn (stdin from /dev/null, stdout and stderr to pipes read
// with Asio, default signal dispositions, an empty signal mask, in a process group of their
// own so that a kill reaches whatever the tool started). Every child is reaped: by the
// operation itself, or, if the io_context goes away first, by a SIGKILL and a blocking wait in
// the destructor. Nothing here installs a SIGCHLD handler or reaps children that are not ours.
//
// Boost.Process v2 as shipped in Boost 1.81 is not used: its launcher calls
// io_context::notify_fork() in the forked child, which takes Asio's reactor mutexes and can
// deadlock when other threads run the same io_context (docs/platform.md has the details).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>

namespace gpustream {

/// What to run, and the limits of a one-shot run.
struct RunOptions {
  /// argv[0] is the program: a path, or a name searched in PATH.
  std::vector<std::string> argv;
  /// Kill the child (its whole process group, SIGKILL) after this long. Zero: no timeout.
  std::chrono::milliseconds timeout{10000};
  /// Captured stdout is cut at this many bytes; the rest is read and thrown away.
  std::size_t max_output_bytes = 4 * 1024 * 1024;
  /// How much of the end of stderr is kept for error messages.
  std::size_t stderr_tail_bytes = 4096;
  /// Variables set (or replaced) on top of this process's environment.
  std::map<std::string, std::string> env;
};

/// What a one-shot run produced.
struct RunResult {
  int pid = -1;
  std::optional<int> exit_code;  // set when the child exited normally
  std::optional<int> signal;     // set when a signal ended it (also after a timeout kill)
  std::string output;            // stdout, at most max_output_bytes
  std::string stderr_tail;       // the last stderr_tail_bytes of stderr
  bool timed_out = false;
  bool truncated = false;  // stdout was longer than max_output_bytes

  /// Exited with code 0 and was not killed.
  bool success() const noexcept { return exit_code == 0 && !timed_out; }
  /// One line for an error message: "exited with code 2: <last stderr line>",
  /// "killed by signal 11 (SIGSEGV)", "timed out and was killed", ...
  std::string describe() const;
};

/// The name of a signal ("SIGSEGV"), or "signal N".
std::string signal_name(int signal);

using RunHandler = boost::asio::any_completion_handler<void(boost::system::error_code, RunResult)>;

namespace detail {
void start_run(const boost::asio::any_io_executor& io, RunOptions options, RunHandler handler);
}  // namespace detail

/// Runs `options.argv` once and completes with what it printed and how it ended, on the
/// handler's associated executor (default: `io`).
///
/// The error code is about the run, not the tool: a tool that exits non-zero or crashes
/// completes with success and a RunResult that says so. Errors: the spawn failure (e.g.
/// no_such_file_or_directory), errc::timeout (the child was killed; result.timed_out), and
/// operation_aborted (cancelled). In every case the child has been reaped when the handler runs.
///
/// Cancellation: through the handler's associated cancellation slot (any cancellation type):
/// the child's process group is killed with SIGKILL and the operation completes with
/// operation_aborted. Internal work runs on a private strand, so `io` may be run by any number
/// of threads.
template <class CompletionToken>
auto async_run(const boost::asio::any_io_executor& io, RunOptions options,
               CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, RunResult)>(
      [](auto handler, const boost::asio::any_io_executor& ex, RunOptions opts) {
        detail::start_run(ex, std::move(opts), RunHandler(std::move(handler)));
      },
      token, io, std::move(options));
}

/// Blocking form for command-line use: runs the child on a private io_context.
RunResult run(RunOptions options, boost::system::error_code& ec);
/// Throws boost::system::system_error when the run failed (not when the tool failed).
RunResult run(RunOptions options);

/// Settings of a LineChild.
struct LineChildOptions {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  /// A longer line is reported once (LineChildEvent::line_too_long) and skipped.
  std::size_t max_line_bytes = 64 * 1024;
  std::size_t stderr_tail_bytes = 4096;
  /// Restart after the child ends: first delay, doubling per consecutive failure, capped.
  bool restart = true;
  std::chrono::milliseconds restart_initial{1000};
  std::chrono::milliseconds restart_max{60000};
  /// A run that lasted at least this long resets the restart delay to restart_initial.
  std::chrono::milliseconds healthy_after{30000};
  /// stop(): SIGTERM first, SIGKILL after this long.
  std::chrono::milliseconds stop_grace{2000};
  /// After the child exited, wait this long for its pipes to close (a grandchild may hold
  /// them) before giving up on the rest of its output.
  std::chrono::milliseconds drain_grace{500};
};

/// Something that happened to a LineChild besides a line.
struct LineChildEvent {
  enum class Kind {
    started,        // a child was spawned (pid)
    spawn_failed,   // posix_spawn failed (message); a restart follows if enabled
    line_too_long,  // a line exceeded max_line_bytes; its first bytes are in `message`
    exited,         // the child ended (exit_code / signal, stderr_tail); restart_in if any
    stopped,        // after stop(): the child is gone and reaped; the last event
  };
  Kind kind = Kind::started;
  int pid = -1;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string stderr_tail;
  std::string message;  // human-readable summary
  /// For exited/spawn_failed: when the next start is due (nullopt: no restart).
  std::optional<std::chrono::milliseconds> restart_in;
};

/// A long-running child whose stdout is a stream of lines (e.g. `macmon pipe`).
///
/// on_line gets each line without its '\n' (and without a trailing '\r'); `partial` is true for
/// a last line that ended at EOF without a newline. on_event gets everything else. When the
/// child ends it is restarted with exponential backoff. stop() sends SIGTERM to the child's
/// process group, SIGKILL after stop_grace, reaps it, then reports `stopped`.
///
/// Thread safety: not thread-safe. Create, use and destroy it on `io`, which must be serial
/// (a single-threaded io_context, or a strand); the callbacks run there too. Callbacks may call
/// stop() or destroy the LineChild. No callback runs after the destructor; a child still
/// running then is stopped in the background (and killed, reaped, if `io` goes away).
class LineChild {
 public:
  using LineHandler = std::function<void(std::string_view line, bool partial)>;
  using EventHandler = std::function<void(const LineChildEvent& event)>;

  LineChild(boost::asio::any_io_executor io, LineChildOptions options, LineHandler on_line,
            EventHandler on_event = {});
  ~LineChild();
  LineChild(const LineChild&) = delete;
  LineChild& operator=(const LineChild&) = delete;

  /// Spawns the child (again, after stop()). No effect while running.
  void start();
  /// Terminates the child and cancels restarts. Idempotent.
  void stop();

  /// The running child's pid.
  std::optional<int> pid() const noexcept;
  bool running() const noexcept;
  /// Children started so far, minus one (0 before the first restart).
  std::size_t restarts() const noexcept;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace gpustream
