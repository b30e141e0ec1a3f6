// Private to sdk/src/subprocess_*.cpp: spawning a child with posix_spawn, and waiting for it
// (reaping it) asynchronously on an executor.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

namespace gpustream::detail {

/// How a child ended. Both empty when someone else reaped it (e.g. SIGCHLD ignored).
struct ExitStatus {
  std::optional<int> exit_code;
  std::optional<int> signal;
};

/// A spawned child: its pid and the parent's ends of its stdout and stderr pipes.
struct Spawned {
  int pid = -1;
  int out_fd = -1;
  int err_fd = -1;
};

/// Starts argv (argv[0] searched in PATH when it has no '/') with stdin from /dev/null,
/// stdout/stderr to new pipes, in a new process group, default signal dispositions and an
/// empty signal mask. `env` entries are set on top of this process's environment. The child
/// inherits no other descriptor of this process, CLOEXEC or not (see SpawnMethod).
boost::system::error_code spawn(const std::vector<std::string>& argv,
                                const std::map<std::string, std::string>& env, Spawned& out);

/// How spawn() keeps this process's descriptors (a server's sockets, a library's files opened
/// without O_CLOEXEC) out of the child.
enum class SpawnMethod {
  /// posix_spawn with posix_spawn_file_actions_addclosefrom_np(3) (glibc >= 2.34; found by the
  /// build's configure check, GPUSTREAM_HAVE_SPAWN_CLOSEFROM).
  spawn_closefrom,
  /// posix_spawn with POSIX_SPAWN_CLOEXEC_DEFAULT (macOS): only 0, 1 and 2 are inherited.
  spawn_cloexec_default,
  /// Everywhere else: fork, then in the child (async-signal-safe calls only) set up 0/1/2,
  /// close every other descriptor (close_range, else a close loop) and execve.
  fork_close,
};

/// The method this build uses; GPUSTREAM_SUBPROCESS_SPAWN=fork in the environment forces
/// fork_close (so that the fallback is tested on systems that have the others).
SpawnMethod spawn_method();

/// What spawn() runs for SpawnMethod::fork_close. `out_w` and `err_w` are >= 3. On success
/// the child has exec'd (or failed to, which is reported here and the child reaped).
boost::system::error_code fork_and_exec(const std::vector<std::string>& argv, char* const* c_argv,
                                        char* const* c_env, int out_w, int err_w, int& pid);

/// One child process: waits for it to exit on an executor, signals its process group, reaps it.
///
/// Exiting and reaping are separate steps: after the child exited it stays a zombie until
/// reap(), which keeps its pid — and so its process group id — from being reused. Until then
/// signal_group() may still kill what the child left behind in its group (a grandchild holding
/// the pipes) without any risk of hitting an unrelated process.
///
/// The destructor kills (SIGKILL) the group and reaps a child that was not reaped yet
/// (blocking, which after SIGKILL is short). Not thread-safe; use from one serial executor.
class ChildProcess {
 public:
  ChildProcess(const boost::asio::any_io_executor& ex, int pid);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  int pid() const noexcept { return pid_; }
  /// The child has exited (status() is known); it may not be reaped yet.
  bool exited() const noexcept { return exited_; }
  bool reaped() const noexcept { return reaped_; }
  const ExitStatus& status() const noexcept { return status_; }

  /// Sends `sig` to the child's process group (to the child, if the group is gone). No effect
  /// once the child was reaped.
  void signal_group(int sig) noexcept;

  /// Reaps the child once it exited (no zombie left). No effect before exited().
  void reap() noexcept;

  /// Calls `handler` on the executor once the child has exited (not reaped yet: call reap()).
  /// One wait at a time. If the executor shuts down first, the handler is destroyed without
  /// being called; the handler must keep the ChildProcess's owner alive.
  using WaitHandler = std::function<void(const ExitStatus&)>;
  void async_wait(WaitHandler handler);

 private:
  bool check_exited() noexcept;
  void wait_pidfd(WaitHandler handler);
  void poll_later(WaitHandler handler);

  int pid_;
  bool exited_ = false;
  bool reaped_ = false;
  ExitStatus status_;
  boost::asio::posix::stream_descriptor pidfd_;  // open when the kernel offers pidfd_open
  boost::asio::steady_timer poll_timer_;         // fallback: poll waitid(WNOHANG | WNOWAIT)
  std::chrono::milliseconds poll_interval_{2};
};

/// Appends `data` to `tail`, keeping at most the last `cap` bytes.
void append_tail(std::string& tail, std::string_view data, std::size_t cap);

/// "exited with code 2", "killed by signal 9 (SIGKILL)", "ended (status unknown)", plus
/// ": <last non-empty stderr line>" when there is one.
std::string describe_exit(const ExitStatus& status, std::string_view stderr_tail);

/// The last path component of argv[0], for messages.
std::string program_name(const std::vector<std::string>& argv);

}  // namespace gpustream::detail
