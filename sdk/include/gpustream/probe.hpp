// gpustream/probe.hpp — the interface every telemetry source implements.
//
// A probe knows one source (NVML, a sysfs tree, a CLI, ...). It can say whether the source is
// there and which devices it sees (detect), and produce one GpuSnapshot on request
// (async_sample). Both operations complete by calling their handler exactly once, on the
// probe's io executor. A probe never blocks the io thread: blocking work goes to the work pool
// (see BlockingProbe).
//
// Thread safety: a probe is driven by one Scheduler; it never has two samples in flight.
// cancel() may be called from the io thread at any time and must make an in-flight operation
// complete soon (with boost::asio::error::operation_aborted or its own error).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include "gpustream/events.hpp"
#include "gpustream/model.hpp"

namespace gpustream {

/// Where probes find the files of the machine. Containers mount the host's /proc elsewhere;
/// the tests point these at generated trees.
struct SystemPaths {
  std::string sysfs_root = "/sys";
  std::string procfs_root = "/proc";
  std::string devfs_root = "/dev";
};

/// A device as seen at detection time.
struct DeviceInfo {
  std::string id;
  Vendor vendor = Vendor::unknown;
  int index = 0;
  std::string name;
  std::string pci_bus_id;
  friend bool operator==(const DeviceInfo&, const DeviceInfo&) = default;
};

/// The result of detect(): is the source usable, and if not, why not (one line).
struct Detection {
  bool available = false;
  std::string reason;  // empty when available; otherwise what a user can act on
  std::vector<DeviceInfo> devices;
};

/// Executors a probe runs on.
struct ProbeExecutors {
  boost::asio::any_io_executor io;    // timers, pipes, sockets, completion handlers
  boost::asio::any_io_executor work;  // blocking calls (vendor libraries, file walks)
};

/// What a probe reports, which is all the SDK needs to know about it (it knows no probe names):
/// Telemetry waits for the `gpu` probes' first detections before deciding that a machine has no
/// GPU (Config::simulate_when_no_gpu), and never counts `host` or `simulated` devices as GPUs.
enum class ProbeKind {
  gpu,        // real GPUs of some vendor (the default for a probe of the host program's own)
  host,       // the machine itself (RAM, process RSS), no devices
  simulated,  // made-up GPUs (Config::simulate)
};

class Probe {
 public:
  using DetectHandler = std::function<void(Detection)>;
  using SampleHandler = std::function<void(boost::system::error_code, GpuSnapshot)>;

  virtual ~Probe() = default;

  /// Registry name: "nvidia", "amd", "intel", "apple", "host", "simulated", ...
  virtual std::string_view name() const noexcept = 0;

  /// What this probe reports; see ProbeKind.
  virtual ProbeKind kind() const noexcept { return ProbeKind::gpu; }

  /// The smallest interval at which the source really changes. The scheduler clamps faster
  /// requests to this and says so once.
  virtual std::chrono::milliseconds min_interval() const noexcept {
    return std::chrono::milliseconds{0};
  }

  /// Is the source there? Calls `handler` once, on the io executor.
  virtual void async_detect(DetectHandler handler) = 0;

  /// Produce one snapshot. Calls `handler` once, on the io executor. On failure the error code
  /// is set and the snapshot's `errors` say what happened in words. `sequence` is left 0: the
  /// channel numbers snapshots.
  virtual void async_sample(SampleHandler handler) = 0;

  /// True when one sample is a short computation that never blocks (no file, no system call
  /// that may wait, no vendor library, no child process: the simulated probe), so that
  /// sample_inline() may take it on whatever thread needs it now. The Scheduler then takes an
  /// on-demand sample (a measurement window's edge) on the requesting thread, with no thread
  /// hop. Constant for the probe's lifetime. Default: false.
  virtual bool samples_inline() const noexcept { return false; }

  /// One sample on the calling thread, any thread: what async_sample would hand its handler
  /// (`ec` set on failure, the snapshot's `errors` saying what happened). Called only when
  /// samples_inline(), by the Scheduler, never while another sample of this probe is in flight
  /// (its claim on the probe orders them: the probe needs no lock of its own for that). The
  /// default answers errc::sample_failed.
  virtual GpuSnapshot sample_inline(boost::system::error_code& ec);

  /// Abort whatever is in flight (kill a child process, stop waiting). Idempotent.
  virtual void cancel() noexcept {}

  /// Where the probe reports events (gpustream/events.hpp), for sources that have them (NVML:
  /// Xid, ECC, clock-event and power-source events). Telemetry calls it once, before the probe
  /// is scheduled; the probe calls `sink` from a thread of its own (never the io thread), with
  /// sequence left 0. The default drops it: the probe has no events.
  using EventSink = std::function<void(GpuEvent)>;
  virtual void start_events(EventSink sink) { sink = nullptr; }
  /// Stops reporting events and joins whatever thread start_events started, in bounded time
  /// (about the probe's event wait timeout). Idempotent; also done by the probe's destructor.
  virtual void stop_events() noexcept {}
};

using ProbePtr = std::shared_ptr<Probe>;

}  // namespace gpustream
