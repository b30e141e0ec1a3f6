// pod_resources.hpp — which Kubernetes pod and container hold each GPU, from the kubelet's
// PodResources API (v1, List), and its join with the snapshot: DeviceSample::pods and, for a
// process in a pod's cgroup, ProcessSample::pod (docs/operations.md, "Kubernetes").
//
// The kubelet names a device as its device plugin does (ContainerDevices.device_ids):
//   nvidia.com/gpu, nvidia.com/mig-<profile>   the GPU's or MIG instance's UUID (GPU-..., MIG-...);
//                                              a time-sliced or MPS replica is "<uuid>::<n>"
//   amd.com/gpu (and amd.com/<partition>)      the PCI bus id ("0000:c1:00.0")
//   gpu.intel.com/i915, gpu.intel.com/xe       "card<N>-<n>" (the DRM card and a share index)
// Other resources (CPUs, NICs, hugepages ...) are not kept. A device matches by its id, its PCI
// bus id (domain widths and case compared loosely) or its DRM card (attributes["card"]).
//
// The gRPC side (the socket, the deadline, the bound on the answer's bytes) is
// gpustream/probes/kubelet_client.hpp; KubeletWatcher here refreshes through any KubeletLister.
//
// Thread safety: a PodResourceMap is immutable once built (shared as shared_ptr<const>); every
// KubeletWatcher member may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "gpustream/log_once.hpp"
#include "gpustream/model.hpp"

namespace gpustream::probes {

/// The kubelet's default socket of the PodResources API.
inline constexpr std::string_view kDefaultKubeletSocket =
    "/var/lib/kubelet/pod-resources/kubelet.sock";

/// True for the resource names of GPUs (nvidia.com/gpu, nvidia.com/mig-*, amd.com/*,
/// gpu.intel.com/i915, gpu.intel.com/xe).
bool is_gpu_resource(std::string_view resource_name) noexcept;

/// The key a device id of `resource_name` is kept under: a replica's "::<n>" cut, a PCI bus id
/// as "pci:<4-digit domain>:bb:dd.f" in lower case, an Intel "card<N>-<n>" as "card<N>".
std::string device_key(std::string_view resource_name, std::string_view device_id);

/// Device key → the containers holding the device, sorted and unique. Bounded: at most
/// `max_holds` (key, container) pairs; each string at most 253 bytes of printable ASCII (a name
/// that is not is refused, counted in `refused`). Worst case in bytes: max_holds × (256 + 3 ×
/// 253 + ~160 of node and string headers) ≈ 1.2 KiB × max_holds.
class PodResourceMap {
 public:
  explicit PodResourceMap(std::size_t max_holds = kDefaultMaxHolds) : max_holds_(max_holds) {}
  static constexpr std::size_t kDefaultMaxHolds = 4096;
  static constexpr std::size_t kMaxString = 253;

  /// One device id held by one container. False (and counted) when refused or bounded; a
  /// resource that is not a GPU is skipped (true, not counted).
  bool add(std::string_view resource_name, std::string_view device_id, const KubernetesPod& pod);
  /// Sorts each device's holders (call once, after the last add).
  void finish();

  /// The holders of a device (an empty span: none).
  std::span<const KubernetesPod> holders_of(const DeviceSample& d) const;
  std::span<const KubernetesPod> holders(const std::string& key) const;

  std::size_t holds() const noexcept { return holds_; }
  std::size_t devices() const noexcept { return by_key_.size(); }
  std::size_t refused() const noexcept { return refused_; }  // bad names or device ids
  std::size_t bounded() const noexcept { return bounded_; }  // past max_holds
  /// The PodResources entries (pods) the answer listed, GPUs or not.
  std::size_t pods() const noexcept { return pods_; }
  void set_pods(std::size_t n) noexcept { pods_ = n; }

 private:
  std::unordered_map<std::string, std::vector<KubernetesPod>> by_key_;
  std::size_t max_holds_;
  std::size_t holds_ = 0;
  std::size_t refused_ = 0;
  std::size_t bounded_ = 0;
  std::size_t pods_ = 0;
};

/// Fills DeviceSample::pods from `map` and, for each process whose cgroup is a pod's
/// (ProcessSample::container with a pod_uid), ProcessSample::pod: its device's one holder; else
/// pod_absent `not_assigned` (no holder) or `ambiguous` (several). `map` null: the kubelet could
/// not be asked — such processes are `kubelet_unavailable`, devices get no pods.
void apply_pods(const PodResourceMap* map, std::span<DeviceSample> devices);

/// What one List call gave: a map, or why not.
struct KubeletListResult {
  std::shared_ptr<PodResourceMap> map;  // null on failure
  /// On failure: socket_missing, unavailable, deadline, too_large, malformed, failed.
  std::string error;
  std::string message;  // one line for the log
};

/// One List call against the kubelet (gpustream/probes/kubelet_client.hpp makes the gRPC one).
/// list() blocks for at most the lister's own deadline.
class KubeletLister {
 public:
  virtual ~KubeletLister() = default;
  virtual KubeletListResult list() = 0;
};

/// The kubelet's PodResources, refreshed: every `refresh` after a good answer, after `backoff_min`
/// doubling to `backoff_max` after failures. A failure drops the map (the last answer may name
/// pods that are gone): processes read `kubelet_unavailable` until the next good one.
struct KubeletWatcherOptions {
  std::chrono::milliseconds refresh{10000};
  std::chrono::milliseconds backoff_min{1000};
  std::chrono::milliseconds backoff_max{60000};
};

struct KubeletStats {
  std::uint64_t refreshes = 0;  // good answers
  std::uint64_t errors = 0;     // failed List calls, all reasons
  std::unordered_map<std::string, std::uint64_t> errors_by_reason;
  std::uint64_t refused = 0;  // device holds refused (bad names/ids), summed over answers
  std::uint64_t bounded = 0;  // device holds past the bound, summed over answers
  bool available = false;     // the last List answered
  std::size_t pods = 0;       // pods in the last answer
  std::size_t devices = 0;    // GPU devices held in the last answer
  std::string last_error;     // the reason of the last failure ("" after a good answer)
};

/// Runs a KubeletLister on its own thread (never on the io thread or the work pool: a slow
/// kubelet delays nothing but its own refresh) and annotates snapshots with the latest answer.
/// stop() (or the destructor) returns within the lister's deadline.
class KubeletWatcher {
 public:
  KubeletWatcher(std::unique_ptr<KubeletLister> lister, KubeletWatcherOptions options = {});
  ~KubeletWatcher();
  KubeletWatcher(const KubeletWatcher&) = delete;
  KubeletWatcher& operator=(const KubeletWatcher&) = delete;

  /// Starts the refresh thread (the first List at once).
  void start();
  void stop();

  /// One List now, on the caller's thread; returns the delay before the next (the thread's
  /// loop, and the tests' driven time).
  std::chrono::milliseconds refresh_once();

  /// The latest good answer; null while the kubelet is unavailable.
  std::shared_ptr<const PodResourceMap> current() const;
  /// apply_pods with current(): cheap, never blocks on the kubelet.
  void annotate(GpuSnapshot& snapshot) const;
  KubeletStats stats() const;

 private:
  void run();
  std::unique_ptr<KubeletLister> lister_;
  KubeletWatcherOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::shared_ptr<const PodResourceMap> current_;
  KubeletStats stats_;
  std::chrono::milliseconds backoff_{0};
  LogOnce log_once_;
  std::thread thread_;
};

}  // namespace gpustream::probes
