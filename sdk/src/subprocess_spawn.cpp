// Spawning and reaping children (see subprocess_posix.hpp).
#include "subprocess_posix.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include <boost/asio/error.hpp>

#include "gpustream/subprocess.hpp"
#include "gpustream_spawn_config.hpp"  // GPUSTREAM_HAVE_SPAWN_CLOSEFROM (sdk/CMakeLists.txt)

// The C library's environment, as POSIX declares it.
extern "C" char** environ;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

namespace gpustream::detail {
namespace {

using boost::system::error_code;

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

error_code errno_code(int err) { return {err, boost::system::system_category()}; }

error_code make_pipe(Fd& read_end, Fd& write_end) {
  int fds[2];
#if defined(__linux__)
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno_code(errno);
#else
  if (::pipe(fds) != 0) return errno_code(errno);
  ::fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  ::fcntl(fds[1], F_SETFD, FD_CLOEXEC);
#endif
  read_end = Fd(fds[0]);
  write_end = Fd(fds[1]);
  return {};
}

// The child's environment: ours, with `overrides` set on top.
std::vector<std::string> build_environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> result;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const auto eq = entry.find('=');
    const std::string key(entry.substr(0, eq));
    if (overrides.count(key) == 0) result.emplace_back(entry);
  }
  for (const auto& [key, value] : overrides) {
    std::string entry;
    entry.reserve(key.size() + 1 + value.size());
    entry.append(key).append("=").append(value);
    result.push_back(std::move(entry));
  }
  return result;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> result;
  result.reserve(strings.size() + 1);
  for (auto& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

// RAII for the posix_spawn attribute objects.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  bool actions_ok = false;
  bool attr_ok = false;
  SpawnSetup() {
    actions_ok = ::posix_spawn_file_actions_init(&actions) == 0;
    attr_ok = ::posix_spawnattr_init(&attr) == 0;
  }
  ~SpawnSetup() {
    if (actions_ok) ::posix_spawn_file_actions_destroy(&actions);
    if (attr_ok) ::posix_spawnattr_destroy(&attr);
  }
};

bool pidfd_disabled() {
  const char* v = std::getenv("GPUSTREAM_SUBPROCESS_WAIT");
  return v != nullptr && std::string_view(v) == "poll";
}

int open_pidfd(int pid) {
#if defined(__linux__) && defined(SYS_pidfd_open)
  if (pidfd_disabled()) return -1;
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  return static_cast<int>(fd);
#else
  (void)pid;
  return -1;
#endif
}

// A pipe end numbered >= 3 (when this process runs with 0, 1 or 2 closed, a new pipe can take
// those numbers, and the child's dup2 onto 0/1/2 would then overwrite one of them).
error_code above_stdio(Fd& fd) {
  if (fd.get() >= 3) return {};
  const int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) return errno_code(errno);
  fd = Fd(moved);
  return {};
}

}  // namespace

SpawnMethod spawn_method() {
  if (const char* v = std::getenv("GPUSTREAM_SUBPROCESS_SPAWN");
      v != nullptr && std::string_view(v) == "fork")
    return SpawnMethod::fork_close;
#if defined(GPUSTREAM_HAVE_SPAWN_CLOSEFROM)
  return SpawnMethod::spawn_closefrom;
#elif defined(POSIX_SPAWN_CLOEXEC_DEFAULT)
  return SpawnMethod::spawn_cloexec_default;
#else
  return SpawnMethod::fork_close;
#endif
}

error_code spawn(const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& env, Spawned& out) {
  if (argv.empty() || argv.front().empty()) {
    return make_error_code(boost::system::errc::invalid_argument);
  }
  Fd out_r, out_w, err_r, err_w;
  if (auto ec = make_pipe(out_r, out_w)) return ec;
  if (auto ec = make_pipe(err_r, err_w)) return ec;
  if (auto ec = above_stdio(out_w)) return ec;
  if (auto ec = above_stdio(err_w)) return ec;

  std::vector<std::string> args = argv;
  std::vector<std::string> environment = build_environment(env);
  auto c_args = c_strings(args);
  auto c_env = c_strings(environment);
  const SpawnMethod method = spawn_method();
  if (method == SpawnMethod::fork_close) {
    int pid = -1;
    if (auto ec = fork_and_exec(argv, c_args.data(), c_env.data(), out_w.get(), err_w.get(), pid))
      return ec;
    out.pid = pid;
    out.out_fd = out_r.release();
    out.err_fd = err_r.release();
    return {};  // the write ends close here
  }

  SpawnSetup setup;
  if (!setup.actions_ok || !setup.attr_ok) return errno_code(ENOMEM);
  int rc = ::posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  if (rc == 0) rc = ::posix_spawn_file_actions_adddup2(&setup.actions, out_w.get(), 1);
  if (rc == 0) rc = ::posix_spawn_file_actions_adddup2(&setup.actions, err_w.get(), 2);
  short extra_flags = 0;
#if defined(GPUSTREAM_HAVE_SPAWN_CLOSEFROM)
  // Do not leak this process's descriptors that lack FD_CLOEXEC into the tool.
  if (rc == 0 && method == SpawnMethod::spawn_closefrom)
    rc = ::posix_spawn_file_actions_addclosefrom_np(&setup.actions, 3);
#endif
#if defined(POSIX_SPAWN_CLOEXEC_DEFAULT)
  // Every descriptor not named by a file action is closed in the child.
  if (method == SpawnMethod::spawn_cloexec_default) extra_flags |= POSIX_SPAWN_CLOEXEC_DEFAULT;
#endif
  sigset_t empty_mask;
  sigset_t defaults;
  sigemptyset(&empty_mask);
  sigfillset(&defaults);
  sigdelset(&defaults, SIGKILL);
  sigdelset(&defaults, SIGSTOP);
  if (rc == 0) rc = ::posix_spawnattr_setsigmask(&setup.attr, &empty_mask);
  if (rc == 0) rc = ::posix_spawnattr_setsigdefault(&setup.attr, &defaults);
  if (rc == 0) rc = ::posix_spawnattr_setpgroup(&setup.attr, 0);
  if (rc == 0) {
    rc = ::posix_spawnattr_setflags(
        &setup.attr, static_cast<short>(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF | extra_flags));
  }
  if (rc != 0) return errno_code(rc);

  pid_t pid = -1;
  rc = ::posix_spawnp(&pid, c_args[0], &setup.actions, &setup.attr, c_args.data(), c_env.data());
  if (rc != 0) return errno_code(rc);

  out.pid = pid;
  out.out_fd = out_r.release();
  out.err_fd = err_r.release();
  return {};  // the write ends close here, so EOF arrives when the child (group) closes them
}

ChildProcess::ChildProcess(const boost::asio::any_io_executor& ex, int pid)
    : pid_(pid), pidfd_(ex), poll_timer_(ex) {
  const int fd = open_pidfd(pid);
  if (fd >= 0) {
    error_code ec;
    pidfd_.assign(fd, ec);
    if (ec) ::close(fd);
  }
}

ChildProcess::~ChildProcess() {
  error_code ignored;
  pidfd_.close(ignored);
  if (reaped_ || pid_ <= 0) return;
  signal_group(SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
}

void ChildProcess::signal_group(int sig) noexcept {
  if (reaped_ || pid_ <= 0) return;
  if (::kill(-pid_, sig) != 0 && !exited_) ::kill(pid_, sig);
}

// Looks at the child's state without reaping it (WNOWAIT), so that it stays a zombie.
bool ChildProcess::check_exited() noexcept {
  if (exited_) return true;
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  int r;
  do {
    r = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (r < 0 && errno == EINTR);
  if (r == 0 && info.si_pid == 0) return false;  // still running
  exited_ = true;
  if (r < 0) {
    reaped_ = true;  // not our child any more: someone else reaped it (SIGCHLD ignored?)
  } else if (info.si_code == CLD_EXITED) {
    status_.exit_code = info.si_status;
  } else if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
    status_.signal = info.si_status;
  }
  error_code ignored;
  pidfd_.close(ignored);
  return true;
}

void ChildProcess::reap() noexcept {
  if (reaped_ || !exited_) return;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
  reaped_ = true;
}

void ChildProcess::async_wait(WaitHandler handler) {
  if (pidfd_.is_open()) {
    wait_pidfd(std::move(handler));
  } else {
    poll_interval_ = std::chrono::milliseconds{2};
    poll_later(std::move(handler));
  }
}

// The handler travels inside the pending operation (not in a member), so whatever it keeps
// alive is released if the executor is destroyed with the wait still pending.
void ChildProcess::wait_pidfd(WaitHandler handler) {
  // The pidfd turns readable when the child exits; then waitpid() reaps it without blocking.
  pidfd_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                    [this, h = std::move(handler)](error_code ec) mutable {
                      if (ec == boost::asio::error::operation_aborted) return;
                      if (check_exited()) {
                        h(status_);
                      } else if (ec) {
                        poll_later(std::move(h));  // the descriptor failed: poll instead
                      } else {
                        wait_pidfd(std::move(h));
                      }
                    });
}

void ChildProcess::poll_later(WaitHandler handler) {
  if (check_exited()) {
    handler(status_);
    return;
  }
  poll_timer_.expires_after(poll_interval_);
  poll_interval_ = std::min(poll_interval_ * 2, std::chrono::milliseconds{100});
  poll_timer_.async_wait([this, h = std::move(handler)](error_code ec) mutable {
    if (ec == boost::asio::error::operation_aborted) return;
    poll_later(std::move(h));
  });
}

void append_tail(std::string& tail, std::string_view data, std::size_t cap) {
  if (cap == 0) return;
  if (data.size() >= cap) {
    tail.assign(data.substr(data.size() - cap));
    return;
  }
  tail.append(data);
  if (tail.size() > cap) tail.erase(0, tail.size() - cap);
}

std::string describe_exit(const ExitStatus& status, std::string_view stderr_tail) {
  std::string text;
  if (status.exit_code) {
    text = "exited with code " + std::to_string(*status.exit_code);
  } else if (status.signal) {
    text = "killed by signal " + std::to_string(*status.signal) + " (" +
           signal_name(*status.signal) + ")";
  } else {
    text = "ended (exit status unknown)";
  }
  // The last non-empty line of stderr usually says what went wrong.
  std::string_view s = stderr_tail;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) {
    s.remove_suffix(1);
  }
  if (const auto nl = s.rfind('\n'); nl != std::string_view::npos) s.remove_prefix(nl + 1);
  if (s.size() > 300) s = s.substr(0, 300);
  if (!s.empty()) {
    text += ": ";
    text += s;
  }
  return text;
}

std::string program_name(const std::vector<std::string>& argv) {
  if (argv.empty()) return "(no program)";
  const auto& p = argv.front();
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace gpustream::detail

namespace gpustream {

std::string signal_name(int signal) {
  switch (signal) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal " + std::to_string(signal);
  }
}

std::string RunResult::describe() const {
  if (timed_out) return "timed out and was killed";
  std::string text = detail::describe_exit({exit_code, signal}, stderr_tail);
  if (truncated) text += " (output truncated)";
  return text;
}

}  // namespace gpustream
