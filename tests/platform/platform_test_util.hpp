// Helpers for the platform tests: run an io_context until a condition holds, and check that a
// child process is gone (reaped, not a zombie).
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gpustream_fake_paths.hpp"

namespace gpustream::test {

/// Runs `io` until `done()` is true. The deadline only matters when a test fails.
inline bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
                      std::chrono::seconds deadline = std::chrono::seconds{10}) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    if (io.stopped()) io.restart();
    io.run_one_for(std::chrono::milliseconds{50});
  }
  return true;
}

/// True when `pid` is neither running nor a zombie of ours.
inline bool is_gone(int pid) {
  if (pid <= 0) return false;
  const bool not_our_child = ::waitpid(pid, nullptr, WNOHANG) == -1 && errno == ECHILD;
  const bool no_process = ::kill(pid, 0) == -1 && errno == ESRCH;
  return not_our_child && no_process;
}

/// A temporary directory, removed with its contents at the end of the scope.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "gpustream-platform-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// The pid the fake tool wrote with `pid-file PATH`, once the file exists.
inline std::optional<int> read_pid_file(const std::string& path) {
  std::ifstream in(path);
  int pid = -1;
  if (in >> pid && pid > 0) return pid;
  return std::nullopt;
}

/// Sets (or, with nullptr, unsets) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// argv for the fake tool: {fake_tool, args...}.
inline std::vector<std::string> fake_tool(std::vector<std::string> args) {
  args.insert(args.begin(), gpustream::fakes::kFakeTool);
  return args;
}

}  // namespace gpustream::test
