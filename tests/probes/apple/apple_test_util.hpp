// apple_test_util.hpp — helpers for the AppleSiliconProbe tests: the fake macmon's recordings,
// and a rig that runs the probe against the fake with a monotonic clock the test moves.
#pragma once

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "gpustream/probes/apple_probe.hpp"
#include "gpustream_fake_macmon_paths.hpp"

namespace gpustream::test {

/// The lines of one of the fake's recordings, e.g. recorded_lines("v0.8.1").
inline std::vector<std::string> recorded_lines(const std::string& schema) {
  std::ifstream in(std::string(fakes::kFakeMacmonLines) + "/" + schema + ".jsonl");
  if (!in) throw std::runtime_error("cannot read the recording " + schema);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// True when `pid` is neither running nor a zombie, i.e. it has been reaped (by the probe: this
/// never calls waitpid, which would steal the child from its owner).
inline bool process_gone(int pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

struct AppleSample {
  boost::system::error_code ec;
  GpuSnapshot snapshot;
};

/// An AppleSiliconProbe on a test-driven io_context, against the fake macmon.
class AppleRig {
 public:
  static constexpr std::chrono::seconds kDeadline{10};  // only matters when a test fails

  ~AppleRig() { destroy_probe(); }

  /// Options for the fake with `fake_args` (its --fake-* flags), a short interval, fast
  /// restarts, and the rig's clock.
  AppleProbeOptions options(const std::string& fake_args = {},
                            std::chrono::milliseconds interval = std::chrono::milliseconds{20}) {
    AppleProbeOptions o;
    o.macmon = fakes::kFakeMacmon;
    o.interval = interval;
    o.env["GPUSTREAM_FAKE_MACMON"] = fake_args;
    o.restart_initial = std::chrono::milliseconds{10};
    o.restart_max = std::chrono::milliseconds{40};
    o.first_line_wait = std::chrono::milliseconds{0};
    o.monotonic_clock = [this] { return clock_ns_.load(); };
    return o;
  }

  AppleSiliconProbe& make(AppleProbeOptions o) {
    probe_ = make_apple_probe({io_.get_executor(), pool_.get_executor()}, std::move(o));
    return *probe_;
  }
  AppleSiliconProbe& probe() { return *probe_; }

  /// Moves the probe's monotonic clock.
  void advance(std::chrono::nanoseconds d) { clock_ns_ += d.count(); }

  AppleSample sample() {
    std::optional<AppleSample> out;
    probe_->async_sample([&](boost::system::error_code ec, GpuSnapshot s) {
      out = AppleSample{ec, std::move(s)};
    });
    if (!run_until([&] { return out.has_value(); })) throw std::runtime_error("no sample");
    return std::move(*out);
  }

  Detection detect() {
    std::optional<Detection> out;
    probe_->async_detect([&](Detection d) { out = std::move(d); });
    if (!run_until([&] { return out.has_value(); })) throw std::runtime_error("no detection");
    return std::move(*out);
  }

  /// Runs the io_context until `done()`; false after kDeadline.
  bool run_until(const std::function<bool()>& done) {
    const auto end = std::chrono::steady_clock::now() + kDeadline;
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      if (io_.stopped()) io_.restart();
      io_.run_one_for(std::chrono::milliseconds{20});
    }
    return true;
  }

  /// Samples (which starts the child) until `n` lines were accepted.
  bool wait_lines(std::uint64_t n) {
    sample();
    return run_until([&] { return probe_->status().lines_accepted >= n; });
  }

  /// Destroys the probe and waits until its child is gone. Returns false if it lingers.
  bool destroy_probe() {
    if (!probe_) return true;
    const auto pid = probe_->status().pid;
    probe_.reset();
    return !pid || run_until([&] { return process_gone(*pid); });
  }

  boost::asio::io_context& io() { return io_; }

 private:
  boost::asio::io_context io_;
  boost::asio::thread_pool pool_{1};
  std::atomic<std::int64_t> clock_ns_{1'000'000'000'000};
  std::shared_ptr<AppleSiliconProbe> probe_;
};

}  // namespace gpustream::test
