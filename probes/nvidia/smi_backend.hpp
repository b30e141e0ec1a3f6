// smi_backend.hpp — the nvidia-smi fallback of the NVIDIA probe.
//
// One sample runs nvidia-smi twice, one after the other: `--query-gpu=<fields>
// --format=csv,noheader,nounits` for every GPU, then `--query-compute-apps=gpu_uuid,pid,
// used_gpu_memory,process_name` (process name last: it may contain commas). Each run has a
// timeout after which the child's process group is killed. Parsing and the /proc reads for
// process names and RSS run on the work executor; completions are posted to the io executor.
// An old driver that rejects a field ("is not a valid field to query") is asked again with a
// smaller field list, which is then kept: without `power.draw.instant`/`.average` (before R535)
// `power.draw` labelled by `compute_cap`, then without `compute_cap`, then (any other field
// rejected) a basic list; see smi_next_field_list. Every sample runs the tool: how often samples
// come is the Scheduler's business (NvidiaProbe::min_interval() says 1 s once this backend is in
// use).
//
// Thread safety: async operations are serialized on a private strand; one sample or detection
// in flight at a time (the Scheduler's guarantee). cancel() may be called from any thread.
// Cancellation: cancel() kills the running child; the operation completes with
// operation_aborted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/strand.hpp>

#include "gpustream/probe.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/probes/process_table.hpp"
#include "gpustream/subprocess.hpp"

namespace gpustream::nvidia_detail {

/// What the fallback asks for, in this order: power as the driver means it
/// (`power.draw.instant`, `power.draw.average`: drivers since R535).
inline constexpr std::string_view kSmiGpuFields[] = {"index",
                                                     "uuid",
                                                     "name",
                                                     "pci.bus_id",
                                                     "memory.total",
                                                     "memory.used",
                                                     "utilization.gpu",
                                                     "utilization.memory",
                                                     "temperature.gpu",
                                                     "power.draw.instant",
                                                     "power.draw.average",
                                                     "power.limit",
                                                     "clocks.gr",
                                                     "clocks.sm",
                                                     "clocks.mem",
                                                     "fan.speed",
                                                     "clocks_throttle_reasons.active"};
/// For drivers before R535, which reject `power.draw.instant`: `power.draw` (a 1 s average on
/// Ampere and newer except GA100, instantaneous before) labelled by `compute_cap`.
inline constexpr std::string_view kSmiPowerDrawGpuFields[] = {"index",
                                                              "uuid",
                                                              "name",
                                                              "pci.bus_id",
                                                              "memory.total",
                                                              "memory.used",
                                                              "utilization.gpu",
                                                              "utilization.memory",
                                                              "temperature.gpu",
                                                              "power.draw",
                                                              "compute_cap",
                                                              "power.limit",
                                                              "clocks.gr",
                                                              "clocks.sm",
                                                              "clocks.mem",
                                                              "fan.speed",
                                                              "clocks_throttle_reasons.active"};
/// For drivers that reject `compute_cap` too: `power.draw` with power_kind unset.
inline constexpr std::string_view kSmiPowerDrawNoCapGpuFields[] = {
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "memory.total",
    "memory.used",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.gr",
    "clocks.sm",
    "clocks.mem",
    "fan.speed",
    "clocks_throttle_reasons.active"};
/// For drivers that reject any other field of the above.
inline constexpr std::string_view kSmiBasicGpuFields[] = {"index",
                                                          "uuid",
                                                          "name",
                                                          "pci.bus_id",
                                                          "memory.total",
                                                          "memory.used",
                                                          "utilization.gpu",
                                                          "temperature.gpu",
                                                          "power.draw"};
/// The field lists in the order the fallback tries them (SmiBackend::fields()).
enum class SmiFieldList : int { power_fields, power_draw, power_draw_no_cap, basic };
std::span<const std::string_view> smi_field_list(SmiFieldList list) noexcept;
/// The list to ask next when the tool rejected `rejected` (the name between the quotes of
/// 'Field "x" is not a valid field to query.'; empty when none was named) while asking `from`;
/// nothing when there is no smaller list left.
std::optional<SmiFieldList> smi_next_field_list(SmiFieldList from,
                                                std::string_view rejected) noexcept;
inline constexpr std::string_view kSmiAppFields[] = {"gpu_uuid", "pid", "used_gpu_memory",
                                                     "process_name"};

std::vector<std::string> smi_gpu_argv(const std::string& tool,
                                      std::span<const std::string_view> fields);
std::vector<std::string> smi_apps_argv(const std::string& tool);

/// A snapshot from the two outputs. `apps` is null when the compute-apps run failed
/// (`apps_error` says why; the devices are still reported). Process names and RSS come from
/// `processes`.
GpuSnapshot smi_snapshot(std::string_view gpu_csv, std::span<const std::string_view> fields,
                         const std::string* apps, const std::string& apps_error,
                         proc::ProcessTable& processes);

struct SmiOptions {
  std::string tool = "nvidia-smi";
  std::chrono::milliseconds timeout{4000};
  SystemPaths paths;
  /// For the snapshots' monotonic_ns and the process table's name refresh. Default:
  /// steady_clock.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

class SmiBackend : public std::enable_shared_from_this<SmiBackend> {
 public:
  SmiBackend(ProbeExecutors executors, SmiOptions options);

  void async_detect(std::function<void(Detection)> handler);
  void async_sample(std::function<void(boost::system::error_code, GpuSnapshot)> handler);
  void cancel();

  /// Blocking form for process_usage(): runs both queries with run(). Nothing when the device
  /// query did not answer (the tool is missing, failed or timed out; the reason is in `errors`).
  std::optional<std::vector<ProcessDeviceUsage>> process_usage(std::int64_t pid,
                                                               std::vector<SampleError>& errors);

 private:
  using SampleHandler = std::function<void(boost::system::error_code, GpuSnapshot)>;
  struct Run;

  std::span<const std::string_view> fields() const noexcept;
  RunOptions run_options(std::vector<std::string> argv) const;
  /// Runs the gpu query (retrying with a smaller field list when a field is rejected).
  void run_gpu_query(std::function<void(boost::system::error_code, std::string, std::string)> done);
  void finish(SampleHandler handler, boost::system::error_code ec, GpuSnapshot snap);
  /// Whether the tool rejected a field; `name` gets the field it named (empty when none).
  static bool rejected_field(const RunResult& r, std::string* name);

  ProbeExecutors executors_;
  SmiOptions options_;
  boost::asio::strand<boost::asio::any_io_executor> strand_;
  boost::asio::cancellation_signal cancel_;                           // used on strand_ only
  std::atomic<SmiFieldList> field_list_{SmiFieldList::power_fields};  // only shrinks, on strand_
  proc::ProcessTable processes_;  // names and RSS, kept between samples
};

}  // namespace gpustream::nvidia_detail
