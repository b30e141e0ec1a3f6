// nvml_gpm.hpp — what the NVIDIA probe keeps per GPU for NVML's GPM (GPU performance monitoring,
// Hopper and newer): whether the GPU supports it, and the previous nvmlGpmSample_t, since every
// GPM figure is computed from two samples (nvml_gpm.cpp).
//
// Thread safety: none; owned by an NvmlDevice, used under the backend's lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "nvidia/nvml_api.hpp"

namespace gpustream::nvidia_detail {

/// One nvmlGpmSample_t, released with nvmlGpmSampleFree when reset or destroyed (move-only).
/// The free function must stay loaded as long as the owner lives (the backend's library does).
class GpmSampleOwner {
 public:
  GpmSampleOwner() noexcept = default;
  GpmSampleOwner(nvml::GpmSample sample, nvml::GpmSampleFreeFn* free) noexcept
      : sample_(sample), free_(free) {}
  GpmSampleOwner(GpmSampleOwner&& o) noexcept
      : sample_(std::exchange(o.sample_, nullptr)), free_(o.free_) {}
  GpmSampleOwner& operator=(GpmSampleOwner&& o) noexcept {
    if (this != &o) {
      reset();
      sample_ = std::exchange(o.sample_, nullptr);
      free_ = o.free_;
    }
    return *this;
  }
  GpmSampleOwner(const GpmSampleOwner&) = delete;
  GpmSampleOwner& operator=(const GpmSampleOwner&) = delete;
  ~GpmSampleOwner() { reset(); }

  void reset() noexcept {
    if (sample_ && free_) free_(sample_);
    sample_ = nullptr;
  }
  nvml::GpmSample get() const noexcept { return sample_; }
  explicit operator bool() const noexcept { return sample_ != nullptr; }
  friend void swap(GpmSampleOwner& a, GpmSampleOwner& b) noexcept {
    std::swap(a.sample_, b.sample_);
    std::swap(a.free_, b.free_);
  }

 private:
  nvml::GpmSample sample_ = nullptr;
  nvml::GpmSampleFreeFn* free_ = nullptr;
};

/// GPM state of one GPU. At most two samples are held (the previous one and the buffer the next
/// one is read into): 2 allocations of the driver's sample size per GPU.
struct GpmState {
  enum class Support : std::uint8_t { unknown, supported, unsupported };
  Support support = Support::unknown;  // asked once per GPU (a failed query is asked again)
  std::string reason;                  // why unsupported, for the `gpm` attribute and the log
  GpmSampleOwner previous;             // the newer sample of the last pair (null: not seeded)
  GpmSampleOwner spare;                // the buffer the next sample is read into
  std::uint64_t generation = 0;        // the NVML session `previous` was read in
  std::chrono::steady_clock::time_point previous_at{};
  std::uint16_t failing_metrics = 0;  // bit i: kGpmFeeds[i] failed or was out of range last time
  std::optional<unsigned> gpu_instance_id;  // a MIG instance: the GPU instance sampled

  /// Frees both samples (a lost GPU, a new NVML session, shutdown).
  void release() noexcept {
    previous.reset();
    spare.reset();
  }
};

}  // namespace gpustream::nvidia_detail
