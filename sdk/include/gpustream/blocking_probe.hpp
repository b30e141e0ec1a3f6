// gpustream/blocking_probe.hpp — turns a plain, blocking detect()/sample() into the async Probe
// interface by running them on the work executor and posting the result to the io executor.
//
// Derived classes implement detect() and sample(); both run on a work-pool thread, never on the
// io thread. sample() reports failure by throwing (the message becomes the snapshot's error and
// the error code is errc::sample_failed) or by returning a snapshot whose `errors` are filled
// (a partial sample is still a sample).
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

  /// detect() / sample() on the calling thread, as they are (no time stamps filled in): for
  /// benchmarks and tools that want one blocking call. Not while an async operation runs.
  Detection detect_now() { return detect(); }
  GpuSnapshot sample_now() { return sample(); }

 protected:
  /// Runs on the work executor.
  virtual Detection detect() = 0;
  /// Runs on the work executor. `probe`, `time_unix_ns`, `monotonic_ns` and
  /// `sample_duration_ns` are filled in by BlockingProbe when left 0/empty.
  virtual GpuSnapshot sample() = 0;

  const ProbeExecutors& executors() const noexcept { return executors_; }

 private:
  ProbeExecutors executors_;
};

}  // namespace gpustream
