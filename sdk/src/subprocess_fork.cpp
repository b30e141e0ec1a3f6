// spawn()'s fallback where posix_spawn cannot close the descriptors a child would inherit
// (glibc < 2.34 without posix_spawn_file_actions_addclosefrom_np, other libcs): fork, then in
// the child set up 0/1/2, close every other descriptor and execve. See subprocess_posix.hpp.
//
// Between fork() and execve() the child of a multi-threaded process may only make
// async-signal-safe calls: everything it needs (the candidate paths, argv, envp, the highest
// descriptor number to close) is prepared here, in the parent, before fork().
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include "subprocess_posix.hpp"

namespace gpustream::detail {
namespace {

using boost::system::error_code;

error_code errno_code(int err) { return {err, boost::system::system_category()}; }

// Where execve is tried, in order: argv[0] itself when it has a '/', else each PATH entry
// (the search posix_spawnp and execvp do; an empty entry is the current directory).
std::vector<std::string> exec_candidates(const std::string& program) {
  if (program.find('/') != std::string::npos) return {program};
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/bin:/usr/bin";
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto colon = dirs.find(':', start);
    std::string dir =
        dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    out.push_back((dir.empty() ? std::string(".") : dir) + "/" + program);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

#if defined(__linux__) && defined(SYS_close_range)
// close_range (Linux >= 5.9) answers EINVAL to an empty range, ENOSYS on older kernels.
bool have_close_range() {
  static const bool have = ::syscall(SYS_close_range, ~0u, 0u, 0u) != 0 && errno == EINVAL;
  return have;
}
#else
bool have_close_range() { return false; }
#endif

// The highest descriptor open now (-1 if unknown), from /proc/self/fd or /dev/fd.
int highest_open_fd() {
  for (const char* dir : {"/proc/self/fd", "/dev/fd"}) {
    DIR* d = ::opendir(dir);
    if (d == nullptr) continue;
    int high = -1;
    while (const dirent* e = ::readdir(d)) {
      char* end = nullptr;
      const long fd = std::strtol(e->d_name, &end, 10);
      if (end != e->d_name && *end == '\0' && fd <= INT_MAX)
        high = std::max(high, static_cast<int>(fd));
    }
    ::closedir(d);
    return high;
  }
  return -1;
}

// Where the child's close loop stops when it has no close_range: the soft limit (no descriptor
// can be opened at or above it), at most 1 << 16 iterations, but always past the highest
// descriptor open now (one opened while the limit was higher). 0: close_range will do.
int close_loop_end() {
  if (have_close_range()) return 0;
  long end = 1L << 16;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    end = std::min<long>(end, static_cast<long>(rl.rlim_cur));
  return static_cast<int>(std::max<long>(end, highest_open_fd() + 1L));
}

// Child side: closes every descriptor >= 3 except `keep`. Async-signal-safe.
void close_inherited(int keep, int loop_end) {
#if defined(__linux__) && defined(SYS_close_range)
  if (loop_end == 0) {  // two ranges around `keep` (which is >= 3)
    if (keep > 3) ::syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u);
    ::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u);
    return;
  }
#endif
  for (int fd = 3; fd < loop_end; ++fd)
    if (fd != keep) ::close(fd);
}

[[noreturn]] void child_fail(int report_fd, int err) {
  while (::write(report_fd, &err, sizeof err) < 0 && errno == EINTR) {}
  ::_exit(127);
}

// Child side, after fork(): only async-signal-safe calls from here to execve.
[[noreturn]] void run_child(const std::vector<std::string>& candidates, char* const* argv,
                            char* const* envp, int out_w, int err_w, int report_fd, int loop_end) {
  // Default dispositions first, then unblock: no handler of the parent runs in the child.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    ::sigaction(sig, &dfl, nullptr);  // EINVAL for the numbers libc reserves: ignored
  }
  sigset_t none;
  sigemptyset(&none);
  // The child of fork() has one thread: sigprocmask is what it needs.
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // NOLINT(concurrency-mt-unsafe)
  if (::setpgid(0, 0) != 0) child_fail(report_fd, errno);

  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd < 0) child_fail(report_fd, errno);
  if (null_fd != 0) {
    if (::dup2(null_fd, 0) < 0) child_fail(report_fd, errno);
    ::close(null_fd);
  }
  // out_w and err_w are >= 3 (spawn() made sure), so these do not overwrite each other.
  if (::dup2(out_w, 1) < 0 || ::dup2(err_w, 2) < 0) child_fail(report_fd, errno);
  close_inherited(report_fd, loop_end);  // the pipe ends too: 1 and 2 are their copies

  int err = ENOENT;
  for (const auto& path : candidates) {
    ::execve(path.c_str(), argv, envp);
    // As execvp: try the next directory when this one has no such program (or refuses it).
    if (errno != ENOENT && errno != ENOTDIR && errno != EACCES) {
      err = errno;
      break;
    }
    if (errno == EACCES) err = EACCES;
  }
  child_fail(report_fd, err);
}

}  // namespace

error_code fork_and_exec(const std::vector<std::string>& argv, char* const* c_argv,
                         char* const* c_env, int out_w, int err_w, int& pid) {
  const auto candidates = exec_candidates(argv.front());
  const int loop_end = close_loop_end();
  // The child reports an exec failure (its errno) through this pipe; a successful exec closes
  // it (CLOEXEC), and the parent reads EOF.
  int report[2];
#if defined(__linux__)
  if (::pipe2(report, O_CLOEXEC) != 0) return errno_code(errno);
#else
  if (::pipe(report) != 0) return errno_code(errno);
  ::fcntl(report[0], F_SETFD, FD_CLOEXEC);
  ::fcntl(report[1], F_SETFD, FD_CLOEXEC);
#endif
  if (report[1] < 3) {  // this process runs with 0, 1 or 2 closed: keep it clear of dup2
    const int moved = ::fcntl(report[1], F_DUPFD_CLOEXEC, 3);
    const int err = errno;
    ::close(report[1]);
    if (moved < 0) {
      ::close(report[0]);
      return errno_code(err);
    }
    report[1] = moved;
  }
  // No signal handler may run in the child before its dispositions are reset.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t child = ::fork();
  if (child == 0) run_child(candidates, c_argv, c_env, out_w, err_w, report[1], loop_end);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(report[1]);
  if (child < 0) {
    ::close(report[0]);
    return errno_code(fork_errno);
  }
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    return errno_code(child_errno);
  }
  pid = child;
  return {};
}

}  // namespace gpustream::detail
