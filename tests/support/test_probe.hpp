// tests/support/test_probe.hpp — a scriptable Probe for testing what drives probes (the
// Scheduler, the Telemetry facade). It is a real implementation of the Probe interface whose
// answers the test decides:
//
//   auto p = std::make_shared<TestProbe>("gpu", io.get_executor(), manual_now_ns);
//   p->script_detect([](std::uint64_t n) { return n < 3 ? unavailable("no driver")
//                                                       : available(2); });
//   p->script_sample([](std::uint64_t) { return TestProbe::ok(2); });  // answers at once
//   // or leave sampling unscripted and answer by hand:
//   p->complete_sample(TestProbe::ok(1));
//
// A script returning std::nullopt leaves the operation pending until complete_*() or cancel().
// A script may throw: async_detect()/async_sample() then throw (to test how callers cope).
// Handlers are always called through a post to the io executor, never inline.
// set_samples_inline(true) makes it a probe that samples inline (Probe::samples_inline):
// sample_inline() then runs the sample script on the calling thread.
//
// Thread safety: every member is thread-safe. Pending handlers keep their caller alive (a
// Scheduler's per-probe state); call drop_pending() at the end of a test that leaves one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include "gpustream/probe.hpp"

namespace gpustream::test {

class TestProbe : public Probe {
 public:
  struct SampleResult {
    boost::system::error_code ec;
    GpuSnapshot snapshot;
  };
  using Now = std::function<std::int64_t()>;  // ns; recorded at each async_sample call
  using DetectScript = std::function<std::optional<Detection>(std::uint64_t call)>;
  using SampleScript = std::function<std::optional<SampleResult>(std::uint64_t call)>;

  /// Detection answers "available, 1 device" at once; sampling stays pending until completed.
  TestProbe(std::string name, boost::asio::any_io_executor io, Now now = {});

  std::string_view name() const noexcept override { return name_; }
  std::chrono::milliseconds min_interval() const noexcept override;
  void async_detect(DetectHandler handler) override;
  void async_sample(SampleHandler handler) override;
  /// Counts the call; completes a pending operation with operation_aborted unless
  /// set_cancel_completes(false).
  void cancel() noexcept override;
  bool samples_inline() const noexcept override { return samples_inline_.load(); }
  /// The sample script's answer for this call, on the calling thread (a script answering
  /// std::nullopt fails the sample: an inline sample cannot stay pending). Counted as a
  /// sample call and in flight while the script runs.
  GpuSnapshot sample_inline(boost::system::error_code& ec) override;

  // -- scripting --
  void set_min_interval(std::chrono::milliseconds d);
  void script_detect(DetectScript s);
  void script_sample(SampleScript s);
  void set_cancel_completes(bool v);
  /// Makes samples_inline() true (false by default). Set before the probe is scheduled.
  void set_samples_inline(bool v) { samples_inline_.store(v); }

  /// Completes the pending operation (posted to io). False when none is pending.
  bool complete_detect(Detection d);
  bool complete_sample(SampleResult r);
  /// Forgets pending handlers without calling them.
  void drop_pending();

  // -- observations --
  bool detect_pending() const;
  bool sample_pending() const;
  std::uint64_t detect_calls() const;
  std::uint64_t sample_calls() const;
  std::uint64_t cancel_calls() const;
  /// Most samples ever in flight at once (from async_sample to the handler's call).
  std::uint64_t max_samples_in_flight() const;
  std::vector<std::int64_t> sample_times() const;
  /// Samples taken through sample_inline(), and the thread of the last one.
  std::uint64_t inline_calls() const;
  std::thread::id last_inline_thread() const;

  // -- canned answers --
  static Detection available(std::size_t devices = 1);
  static Detection unavailable(std::string reason);
  static SampleResult ok(std::size_t devices = 1);
  static SampleResult partial(std::size_t devices, std::string error_message);
  static SampleResult failed(std::string message);

 private:
  void post_detect(DetectHandler h, Detection d);
  void post_sample(SampleHandler h, SampleResult r);

  const std::string name_;
  const boost::asio::any_io_executor io_;
  const Now now_;
  std::atomic<bool> samples_inline_{false};

  mutable std::mutex mu_;
  std::chrono::milliseconds min_interval_{0};
  DetectScript detect_script_;
  SampleScript sample_script_;
  bool cancel_completes_ = true;
  DetectHandler pending_detect_;
  SampleHandler pending_sample_;
  std::uint64_t detect_calls_ = 0;
  std::uint64_t sample_calls_ = 0;
  std::uint64_t cancel_calls_ = 0;
  std::uint64_t in_flight_ = 0;
  std::uint64_t max_in_flight_ = 0;
  std::vector<std::int64_t> sample_times_;
  std::uint64_t inline_calls_ = 0;
  std::thread::id last_inline_thread_;
};

}  // namespace gpustream::test
