// Helpers for the CLI suite: run the real gpustream binary (to completion, or as a child whose
// stdout is a pipe the test reads and closes), temporary directories, JSON lines.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <boost/json.hpp>

extern "C" char** environ;

namespace gpustream::cli::test {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs `gpustream ARGS` through the shell (stdin /dev/null) and waits for it.
inline Result run(const std::string& args) {
  static int n = 0;
  const fs::path dir = fs::temp_directory_path() / ("gpustream-cli-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto out_file = dir / ("out" + std::to_string(n));
  const auto err_file = dir / ("err" + std::to_string(n++));
  const std::string cmd = std::string(GPUSTREAM_CLI_PATH) + " " + args + " >" + out_file.string() +
                          " 2>" + err_file.string() + " </dev/null";
  const int status = std::system(cmd.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out_file);
  r.err = slurp(err_file);
  return r;
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("gpustream-cli-tree-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  TempDir(TempDir&& o) noexcept : path_(std::exchange(o.path_, {})) {}
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string file(const std::string& rel) const { return (path_ / rel).string(); }
  void write(const std::string& rel, const std::string& content) const {
    fs::create_directories((path_ / rel).parent_path());
    std::ofstream(path_ / rel, std::ios::binary) << content;
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

inline std::vector<boost::json::value> json_lines(const std::string& text) {
  std::vector<boost::json::value> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line))
    if (!line.empty()) out.push_back(boost::json::parse(line));
  return out;
}

/// `gpustream ARGS...` running as a child: its stdout is a pipe this test reads (and may close),
/// its stderr goes to a file. The destructor kills and reaps a child still running.
class CliChild {
 public:
  explicit CliChild(const std::vector<std::string>& args, const std::string& stderr_file) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    out_ = fds[0];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    std::vector<std::string> argv{GPUSTREAM_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> c_argv;
    for (auto& a : argv) c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    if (::posix_spawn(&pid_, c_argv[0], &fa, nullptr, c_argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
  }
  ~CliChild() {
    close_stdout();
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  CliChild(const CliChild&) = delete;
  CliChild& operator=(const CliChild&) = delete;

  bool started() const { return pid_ > 0; }
  int pid() const { return pid_; }

  /// The next line of its stdout (without '\n'); nullopt at EOF or after `deadline`.
  std::optional<std::string> read_line(std::chrono::seconds deadline = std::chrono::seconds{60}) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    for (;;) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      buffer_.append(buf, static_cast<std::size_t>(n));
    }
  }

  /// Closes the read end of its stdout, as `head` does when it has what it wanted.
  void close_stdout() {
    if (out_ >= 0) ::close(out_);
    out_ = -1;
  }

  void signal(int sig) const { ::kill(pid_, sig); }

  /// Its exit code (128 + signal when a signal ended it), once it exited; nullopt if it is
  /// still running after `deadline` (which only matters when a test fails).
  std::optional<int> wait(std::chrono::seconds deadline = std::chrono::seconds{60}) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (!status_) {
      int st = 0;
      const int r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (r < 0 || std::chrono::steady_clock::now() > end) return std::nullopt;
      ::poll(nullptr, 0, 20);
    }
    return status_;
  }

 private:
  int pid_ = -1;
  int out_ = -1;
  std::string buffer_;
  std::optional<int> status_;
};

}  // namespace gpustream::cli::test
