// The state of an AppleSiliconProbe: its macmon child, the latest line, and the samples waiting
// for a first line. Private to probes/apple.
//
// Thread safety: sample(), cancel_waiting(), stop_child() and shutdown() run on strand(), as do
// the LineChild's callbacks. status(), soc() and set_soc() may be called from any thread (they
// take mu_). Handlers of samples are posted to the io executor, never run on the strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "gpustream/log.hpp"
#include "gpustream/probes/apple_probe.hpp"
#include "gpustream/subprocess.hpp"

namespace gpustream {

namespace apple_detail {
/// `text` for a message: control bytes as '?', valid UTF-8.
std::string printable(std::string_view text);
}  // namespace apple_detail

class AppleSiliconProbe::Core : public std::enable_shared_from_this<AppleSiliconProbe::Core> {
 public:
  using Strand = boost::asio::strand<boost::asio::any_io_executor>;

  Core(ProbeExecutors executors, AppleProbeOptions options);

  Strand& strand() noexcept { return strand_; }
  const AppleProbeOptions& options() const noexcept { return options_; }

  // On the strand.
  void sample(SampleHandler handler);
  void cancel_waiting();
  void stop_child();
  void shutdown();

  // Any thread.
  AppleProbeStatus status() const;
  std::optional<MacmonSocInfo> soc() const;
  void set_soc(std::optional<MacmonSocInfo> soc);

 private:
  struct Waiting {
    SampleHandler handler;
    std::int64_t started_ns;
  };

  void ensure_started();
  void on_line(std::string_view line, bool partial);
  void on_event(const LineChildEvent& event);
  std::pair<boost::system::error_code, GpuSnapshot> build(std::int64_t started_ns);
  void maybe_restart_silent(std::int64_t now_ns);
  void finish_waiting(boost::system::error_code forced = {});
  void complete(SampleHandler handler, boost::system::error_code ec, GpuSnapshot snap);
  void note_problem(const char* code, std::string message, const char* log_key);
  void set_status(const std::function<void(AppleProbeStatus&)>& change);
  std::string child_state() const;

  std::int64_t mono() const { return options_.monotonic_clock(); }
  std::int64_t wall() const { return options_.wall_clock(); }

  const ProbeExecutors executors_;
  Strand strand_;
  const AppleProbeOptions options_;
  const std::int64_t interval_ns_;
  const std::int64_t silence_ns_;

  // Strand-only state.
  std::optional<MacmonSample> latest_;
  std::int64_t latest_mono_ = 0;  // when the latest line arrived (monotonic_clock)
  std::int64_t latest_wall_ = 0;
  std::int64_t run_started_mono_ = 0;
  bool child_alive_ = false;
  bool restarting_for_silence_ = false;
  bool shut_down_ = false;
  bool logged_since_good_line_ = false;
  std::string last_child_problem_;
  std::vector<SampleError> problems_;  // since the last snapshot
  std::size_t dropped_problems_ = 0;
  std::vector<Waiting> waiting_;
  std::optional<std::chrono::steady_clock::time_point> first_line_deadline_;
  boost::asio::steady_timer first_line_timer_;
  LogOnce log_once_;

  mutable std::mutex mu_;
  AppleProbeStatus status_;           // guarded by mu_
  std::optional<MacmonSocInfo> soc_;  // guarded by mu_

  std::unique_ptr<LineChild> child_;  // last: destroyed first, so no callback outlives the rest
};

}  // namespace gpustream
