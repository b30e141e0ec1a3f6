// amd_smi_backend.hpp — everything the AMD library backend does through libamd_smi.so, as plain
// blocking calls.
//
// AmdSmiLibrary is the process-wide owner of one loaded libamd_smi.so (one per path, shared by
// every backend of the process) and of its one LibrarySession: amdsmi_init(AMDSMI_INIT_AMD_GPUS)
// on 0→1, amdsmi_shut_down on 1→0 (lazy mode) or at the end (persistent mode). The library's own
// init is not reference-counted (a second amdsmi_init answers SUCCESS and one amdsmi_shut_down
// ends it for everybody), so:
//
//   THE HOST GUARD. When the host program uses the AMD SMI library itself, gpustream never shuts
//   it down. "Uses it" is detected two ways: (1) the library was already loaded in the process
//   before gpustream opened it (dlopen RTLD_NOLOAD finds it); (2) at one of gpustream's inits the
//   library was already initialized by someone else (amdsmi_get_socket_handles answers SUCCESS
//   instead of AMDSMI_STATUS_NOT_INIT). Then gpustream calls amdsmi_init only when the library is
//   not initialized, never calls amdsmi_shut_down, and lazy mode behaves as persistent (logged
//   once). A host that starts using amdsmi only after gpustream did must use the persistent mode
//   (the default), or load the library before creating gpustream's probes.
//
// After the first init, amdsmi_get_lib_version picks the struct layouts (amd_smi_api.hpp); an
// unknown version fails the init with a clear reason, and no struct is ever read.
//
// AmdSmiBackend enumerates the GPUs (UUID, BDF, market name, VRAM total) once, and in every later
// session (lazy mode: every sample) re-resolves each device's handle by UUID, else by BDF: handles
// do not survive a re-init and the library may list the devices in another order. A device no
// longer found is reported lost (metrics absent `lost`, an error "gpu_lost") while the others keep
// reporting.
//
// Thread safety: AmdSmiLibrary is thread-safe (LibrarySession). Every public member of
// AmdSmiBackend locks one mutex. Everything blocks (vendor calls): run it on the work pool.
// Cancellation: none; a hung vendor call is abandoned by the caller (see BlockingProbe).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "amd/amd_smi_api.hpp"
#include "gpustream/dynamic_library.hpp"
#include "gpustream/library_session.hpp"
#include "gpustream/log_once.hpp"
#include "gpustream/probe.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/process_table.hpp"

namespace gpustream::amd_lib_detail {

/// Why the last init of an AmdSmiLibrary failed, for whoever must say more than the message
/// (`gpustream doctor` picks its fix from it).
struct InitFailure {
  enum class Step : std::uint8_t { init, version_call, unknown_version };
  Step step = Step::init;
  amdsmi::Status rc = amdsmi::kSuccess;  // the failing call's status (unknown_version: success)
  std::string message;                   // as acquire() reports it
};

class AmdSmiLibrary {
 public:
  /// The process-wide library for `path`: loads it (and its functions) on first use; a later
  /// call for the same path returns the same object while any holder lives (its session mode is
  /// the first caller's; a different request is logged once). Throws DynamicLibraryError
  /// (library_missing / symbol_missing).
  static std::shared_ptr<AmdSmiLibrary> get(const std::string& path, LibrarySessionMode mode);

  AmdSmiLibrary(const std::string& path, LibrarySessionMode mode, bool loaded_before);
  ~AmdSmiLibrary();
  AmdSmiLibrary(const AmdSmiLibrary&) = delete;
  AmdSmiLibrary& operator=(const AmdSmiLibrary&) = delete;

  /// A guard keeping the library initialized; throws std::runtime_error with the init failure.
  LibrarySession::Guard acquire();

  const amdsmi::Api& api() const noexcept { return api_; }
  const std::string& path() const noexcept { return library_.path(); }
  /// The session mode in effect (persistent when the host guard applies).
  LibrarySessionMode mode() const noexcept;
  /// True when the host program uses the library (see the host guard above).
  bool host_owned() const noexcept { return host_owned_.load(); }
  /// Successful inits gpustream made (or adopted) so far: handles of an older one are stale.
  std::uint64_t generation() const noexcept { return generation_.load(); }
  /// Set after the first successful init.
  std::optional<amdsmi::LibVersion> version() const;
  LibrarySession::Stats session_stats() const;
  /// Why the latest init failed; std::nullopt once an init succeeded after it (or none failed).
  std::optional<InitFailure> last_init_failure() const;

 private:
  std::optional<std::string> init();
  void shut_down();

  DynamicLibrary library_;
  amdsmi::Api api_;
  const LibrarySessionMode requested_;
  std::atomic<bool> host_owned_;
  std::atomic<bool> we_initialized_{false};
  std::atomic<std::uint64_t> generation_{0};
  mutable std::mutex mu_;
  std::optional<amdsmi::LibVersion> version_;  // guarded by mu_
  std::optional<InitFailure> last_failure_;    // guarded by mu_
  std::unique_ptr<LibrarySession> session_;
};

/// One GPU as the library showed it at enumeration, plus what the backend carries.
struct AmdSmiDevice {
  std::string uuid;
  std::string bdf;  // "0000:03:00.0"
  std::string name;
  int index = 0;
  std::optional<double> vram_total_bytes;
  amdsmi::ProcessorHandle handle = nullptr;
  std::uint64_t handle_generation = 0;
  bool lost = false;
  std::string lost_message;
};

struct AmdSmiOptions {
  std::string library = "libamd_smi.so";
  LibrarySessionMode mode = LibrarySessionMode::persistent;
  std::string procfs_root = "/proc";
  bool processes = true;
  /// Sample time (steady ns) for per-process engine percentages; empty: steady_now_ns.
  std::function<std::int64_t()> clock;
};

class AmdSmiBackend {
 public:
  /// Loads the library (AmdSmiLibrary::get). Throws DynamicLibraryError.
  explicit AmdSmiBackend(AmdSmiOptions options);

  /// Enumerates the GPUs in a session. Never throws.
  Detection detect();
  /// One snapshot of every GPU. Throws std::runtime_error when the library cannot be
  /// initialized (or its version is unknown); per-device problems go to the snapshot's errors.
  GpuSnapshot sample();

  const AmdSmiLibrary& library() const noexcept { return *lib_; }
  /// "libamd_smi.so 26.1.0 (layout v26, lazy session)": for logs and `gpustream list`.
  std::string describe() const;

 private:
  void enumerate();
  void resolve_handles();
  /// All devices the library lists now: (handle, uuid, bdf).
  struct Listed {
    amdsmi::ProcessorHandle handle;
    std::string uuid, bdf;
  };
  std::vector<Listed> list_devices();
  void sample_device(AmdSmiDevice& dev, DeviceSample& out, std::vector<SampleError>& errors);
  void read_processes(AmdSmiDevice& dev, DeviceSample& out, std::vector<SampleError>& errors);
  /// throttle_reasons, graphics_activity_percent and dram_activity_percent from
  /// amdsmi_get_gpu_metrics_info (only the layout-stable head is read).
  void read_gpu_metrics(const AmdSmiDevice& dev, DeviceSample& out,
                        std::vector<SampleError>& errors);
  void read_activity(const AmdSmiDevice& dev, const amdsmi::GpuMetricsHead& head, DeviceSample& out,
                     std::vector<SampleError>& errors);
  /// Maps a failed status to an absence; logs each new failure once; records an error for
  /// unexpected ones.
  Absence failed(const AmdSmiDevice& dev, const char* function, amdsmi::Status rc,
                 std::vector<SampleError>& errors);

  AmdSmiOptions options_;
  std::shared_ptr<AmdSmiLibrary> lib_;
  std::mutex mu_;
  std::vector<AmdSmiDevice> devices_;  // guarded by mu_
  bool enumerated_ = false;
  std::vector<std::byte> process_buffer_;
  std::vector<std::byte> metrics_buffer_;  // amdsmi::kGpuMetricsBuffer bytes
  EngineBusyTracker engines_;
  proc::ProcessTable process_table_;
  LogOnce log_once_;
};

}  // namespace gpustream::amd_lib_detail
