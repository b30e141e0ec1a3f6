// gpustream/blocking_probe.hpp — turns a plain, blocking detect()/sample() into the async Probe
// interface by running them on the work executor and posting the result to the io executor.
//
// Derived classes implement detect() and sample(); both run on a work-pool thread, never on the
// io thread — unless the probe says they never block (never_blocks(): a computation with no I/O
// and no vendor call, such as the simulated probe), in which case they run on the io executor,
// in a handler of their own: a sample then costs no thread hop. Such a probe also samples inline
// (Probe::samples_inline): the Scheduler takes an on-demand sample (a window's edge) by calling
// sample() on the requesting thread, with no hop to the io thread either. sample() reports failure
// by throwing (the message becomes the snapshot's error and the error code is errc::sample_failed)
// or by returning a snapshot whose `errors` are filled (a partial sample is still a sample).
//
// Lifetime: the object must be owned by a std::shared_ptr (make_shared); in-flight work keeps it
// alive, so a hung vendor call never leaves a dangling probe behind.
#pragma once

#include <memory>

#include "gpustream/probe.hpp"

namespace gpustream {

class BlockingProbe : public Probe, public std::enable_shared_from_this<BlockingProbe> {
 public:
  explicit BlockingProbe(ProbeExecutors executors) : executors_(std::move(executors)) {}

  void async_detect(DetectHandler handler) final;
  void async_sample(SampleHandler handler) final;
  /// never_blocks(): a sample is arithmetic, so it may be taken on any thread.
  bool samples_inline() const noexcept final { return never_blocks(); }
  /// sample() on the calling thread, with the failure handling and time stamps of
  /// async_sample. Only for a probe that never_blocks() (errc::sample_failed otherwise).
  GpuSnapshot sample_inline(boost::system::error_code& ec) final;

  /// detect() / sample() on the calling thread, as they are (no time stamps filled in): for
  /// benchmarks and tools that want one blocking call. Not while an async operation runs.
  Detection detect_now() { return detect(); }
  GpuSnapshot sample_now() { return sample(); }

 protected:
  /// Runs on the work executor.
  virtual Detection detect() = 0;
  /// Runs on the work executor (or, when never_blocks(), on the io executor or the thread of
  /// an on-demand sample: never two at once). `probe`, `time_unix_ns`, `monotonic_ns` and
  /// `sample_duration_ns` are filled in by BlockingProbe when left 0/empty.
  virtual GpuSnapshot sample() = 0;

  /// True when detect() and sample() are short computations that never block (no file, no
  /// system call that may wait, no vendor library, no child process): they then run on the io
  /// executor instead of the work pool, saving the two thread hops of each sample. Such a probe
  /// cannot hang, so nothing is lost by not running it where a hung call can be abandoned.
  /// Default: false.
  virtual bool never_blocks() const noexcept { return false; }

  const ProbeExecutors& executors() const noexcept { return executors_; }

 private:
  /// sample() with its exceptions turned into `ec` and an error, and the stamps filled in.
  GpuSnapshot run_sample(boost::system::error_code& ec);

  ProbeExecutors executors_;
};

}  // namespace gpustream
