// A real nats-server for the NATS tests of the fleet view and the agent's bridge (Debian
// `nats-server`, a child process on 127.0.0.1 and a free port, killed by its destructor), with
// a JetStream store of the test's own, and what those tests share: waiting for a condition,
// capturing the log.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>

#include "gpustream/log.hpp"

extern char** environ;

namespace gpustream::transport::test::nats {

inline constexpr std::chrono::milliseconds kWait{10000};  // only matters when a test fails

inline unsigned short free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  unsigned short port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

inline bool accepts(unsigned short port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

/// Polls `pred` until it holds or `timeout` passes (the pause only paces the polling).
inline bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout = kWait) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

/// `nats-server -a 127.0.0.1 -p PORT [-js -sd STORE] [-c CONFIG]` (no JetStream when `store` is
/// empty; a config's own `listen` must name PORT); start() again after stop() is the same server
/// restarted on the same port with the same store (a memory stream is lost, a file one kept).
class Server {
 public:
  explicit Server(unsigned short port, std::string store = {}, std::string config = {})
      : port_(port), store_(std::move(store)), config_(std::move(config)) {}
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server() { stop(); }

  bool start() {
    std::string path;
    for (const char* p : {"/usr/sbin/nats-server", "/usr/bin/nats-server"})
      if (std::filesystem::exists(p)) path = p;
    if (path.empty()) {
      ADD_FAILURE() << "nats-server not found in /usr/sbin or /usr/bin: this build has NATS "
                       "support, so its tests need it (scripts/deps.sh test)";
      return false;
    }
    const std::string port = std::to_string(port_);
    std::vector<const char*> argv = {path.c_str(), "-a", "127.0.0.1", "-p", port.c_str()};
    if (!store_.empty()) {
      argv.push_back("-js");
      argv.push_back("-sd");
      argv.push_back(store_.c_str());
    }
    if (!config_.empty()) {
      argv.push_back("-c");
      argv.push_back(config_.c_str());
    }
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    const int rc = ::posix_spawn(&pid_, path.c_str(), &fa, nullptr,
                                 const_cast<char* const*>(argv.data()), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      pid_ = -1;
      ADD_FAILURE() << "cannot start " << path;
      return false;
    }
    if (!wait_for([&] { return accepts(port_); })) {
      ADD_FAILURE() << "nats-server does not accept connections on port " << port_;
      return false;
    }
    return true;
  }
  /// kill -9: no goodbye to the clients.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }

 private:
  unsigned short port_;
  std::string store_;
  std::string config_;
  pid_t pid_ = -1;
};

/// A sink that keeps what it is given, readable from any thread while others log.
class CaptureSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string text() {
    std::lock_guard lock(mutex_);
    return buf_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    buf_.append(formatted.data(), formatted.size());
  }
  void flush_() override {}

 private:
  std::string buf_;
};

/// The library's log, captured while it lives. count() and text() may be called while the
/// library's threads log (a refusal is counted before its line is written: wait for the line).
/// `at_least`: capture from that level on (e.g. info, where "back" lines are), lowering the
/// logger's level while the capture lives; by default, the logger's own level.
struct LogCapture {
  explicit LogCapture(std::optional<spdlog::level::level_enum> at_least = std::nullopt)
      : sink(std::make_shared<CaptureSink>()), level(logger()->level()) {
    logger()->sinks().push_back(sink);
    if (at_least) logger()->set_level(std::min(level, *at_least));
  }
  ~LogCapture() {
    logger()->set_level(level);
    auto& sinks = logger()->sinks();
    std::erase(sinks, std::static_pointer_cast<spdlog::sinks::sink>(sink));
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::size_t count(const std::string& needle) const {
    const std::string all = sink->text();
    std::size_t n = 0;
    for (auto pos = all.find(needle); pos != std::string::npos; pos = all.find(needle, pos + 1))
      ++n;
    return n;
  }
  std::string text() const { return sink->text(); }
  std::shared_ptr<CaptureSink> sink;
  spdlog::level::level_enum level;
};

}  // namespace gpustream::transport::test::nats
