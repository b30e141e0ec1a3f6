// Window summaries, my_process() and the planner's answers as Python objects.
#include <algorithm>
#include <cmath>

#include <pybind11/stl.h>

#include "common.hpp"
#include "gpustream/measurement.hpp"
#include "gpustream/planner.hpp"

namespace gpustream::python {

namespace {

py::dict metric_summaries(const DeviceWindowSummary& d) {
  py::dict out;
  for (const auto& [metric, s] : d.metrics) out[name_of(to_string(metric))] = s;
  return out;
}

}  // namespace

void bind_summary(py::module_& m) {
  py::class_<MetricSummary>(m, "MetricSummary", "min/max/mean/last of one metric over a window.")
      .def_readonly("min", &MetricSummary::min)
      .def_readonly("max", &MetricSummary::max)
      .def_readonly("mean", &MetricSummary::mean)
      .def_readonly("last", &MetricSummary::last)
      .def_readonly("count", &MetricSummary::count)
      .def_property_readonly("source",
                             [](const MetricSummary& s) { return name_of(to_string(s.source)); })
      .def("__repr__", [](const MetricSummary& s) {
        return "<gpustream.MetricSummary min " + std::to_string(s.min) + " mean " +
               std::to_string(s.mean) + " max " + std::to_string(s.max) + " (" +
               std::to_string(s.count) + " readings)>";
      });

  py::class_<DeviceWindowSummary>(m, "DeviceWindow", "One device over a window.")
      .def_readonly("device_id", &DeviceWindowSummary::device_id)
      .def_readonly("probe", &DeviceWindowSummary::probe)
      .def_readonly("samples", &DeviceWindowSummary::samples)
      .def_property_readonly("metrics", &metric_summaries, "{metric: MetricSummary}")
      .def_readonly("energy_joules", &DeviceWindowSummary::energy_joules)
      .def_property_readonly("energy_kind",
                             [](const DeviceWindowSummary& d) { return opt_name(d.energy_kind); })
      .def_readonly("energy_counter_resets", &DeviceWindowSummary::energy_counter_resets)
      .def_property_readonly(
          "begin_edge",
          [](const DeviceWindowSummary& d) { return std::string(to_string(d.begin_edge)); },
          "How the begin edge was obtained: sampled, interpolated, held, unknown (none: "
          "channel-only)")
      .def_property_readonly(
          "end_edge",
          [](const DeviceWindowSummary& d) { return std::string(to_string(d.end_edge)); })
      .def_readonly("begin_edge_ns", &DeviceWindowSummary::begin_edge_ns)
      .def_readonly("end_edge_ns", &DeviceWindowSummary::end_edge_ns)
      .def_readonly("estimated_joules", &DeviceWindowSummary::estimated_joules)
      // Coverage (docs/python.md, "Coverage"): None where it cannot be known, never 0.
      .def_property_readonly(
          "energy_method", [](const DeviceWindowSummary& d) { return opt_name(d.energy_method); },
          "How energy_joules was obtained: counter, integrated (from power_readings readings), "
          "edges (the two edges only); None without energy")
      .def_readonly("power_readings", &DeviceWindowSummary::power_readings,
                    "Power readings integrated inside the window (0 for the counter)")
      .def_readonly("driver_power_samples", &DeviceWindowSummary::driver_power_samples,
                    "Of power_readings, the driver's own power samples")
      .def_readonly("largest_gap_ns", &DeviceWindowSummary::largest_gap_ns,
                    "Largest interval between consecutive readings integrated, ns, or None")
      .def_readonly("update_period_ns", &DeviceWindowSummary::update_period_ns,
                    "The source's update period measured from the stream, ns, or None")
      .def_readonly("fresh_coverage", &DeviceWindowSummary::fresh_coverage,
                    "Share (0..1) of the window covered by fresh readings, or None")
      .def_readonly("shorter_than_update_period", &DeviceWindowSummary::shorter_than_update_period,
                    "True when the window is shorter than the update period; None if unknown")
      .def_readonly("coverage_reason", &DeviceWindowSummary::coverage_reason,
                    "Why update_period_ns is None (empty when it is known)")
      .def_readonly("counter_changes", &DeviceWindowSummary::counter_changes)
      .def_readonly("ignored_power_samples", &DeviceWindowSummary::ignored_power_samples,
                    "Driver power samples not integrated because they were bad")
      .def_readonly("ignored_power_samples_reason",
                    &DeviceWindowSummary::ignored_power_samples_reason)
      .def("__repr__", [](const DeviceWindowSummary& d) {
        std::string out = "<gpustream.DeviceWindow " + d.device_id + " (" + d.probe + ")";
        if (d.energy_joules) out += " " + std::to_string(*d.energy_joules) + " J";
        if (d.energy_method) out += " by " + std::string(to_string(*d.energy_method));
        if (d.fresh_coverage)
          out += ", " + std::to_string(std::lround(*d.fresh_coverage * 100)) + " % fresh";
        return out + ">";
      });

  py::class_<WindowSummary::Overhead>(m, "WindowOverhead", "What the window itself cost.")
      .def_readonly("edge_samples", &WindowSummary::Overhead::edge_samples)
      .def_readonly("failed_edge_samples", &WindowSummary::Overhead::failed_edge_samples)
      .def_readonly("begin_latency_ns", &WindowSummary::Overhead::begin_latency_ns)
      .def_readonly("end_latency_ns", &WindowSummary::Overhead::end_latency_ns)
      .def_readonly("max_sample_latency_ns", &WindowSummary::Overhead::max_sample_latency_ns)
      .def_readonly("caller_cpu_ns", &WindowSummary::Overhead::caller_cpu_ns);

  py::class_<WindowSummary>(m, "WindowSummary")
      .def_readonly("begin_ns", &WindowSummary::begin_ns)
      .def_readonly("end_ns", &WindowSummary::end_ns)
      .def_property_readonly(
          "duration",
          [](const WindowSummary& s) { return static_cast<double>(s.end_ns - s.begin_ns) / 1e9; },
          "Seconds between begin and end.")
      .def_readonly("snapshots", &WindowSummary::snapshots)
      .def_readonly("missed_snapshots", &WindowSummary::missed_snapshots)
      .def_readonly("devices", &WindowSummary::devices)
      .def_readonly("name", &WindowSummary::name)
      .def_readonly("exact_edges", &WindowSummary::exact_edges,
                    "True when every device's both edges are fresh samples")
      .def_readonly("edge_errors", &WindowSummary::edge_errors)
      .def_readonly("overhead", &WindowSummary::overhead)
      .def_property_readonly(
          "energy",
          [](const WindowSummary& s) {
            py::dict out;
            for (const auto& d : s.devices)
              if (d.energy_joules) out[py::str(d.device_id)] = *d.energy_joules;
            return out;
          },
          "{device_id: joules} of the devices whose energy is known.")
      .def(
          "device",
          [](const WindowSummary& s, const std::string& id) -> py::object {
            if (const auto* d = s.find(id)) return py::cast(*d);
            return py::none();
          },
          py::arg("id"));

  py::class_<DeviceFit>(m, "DeviceFit", "A device where the requested bytes fit.")
      .def_readonly("device_id", &DeviceFit::device_id)
      .def_readonly("name", &DeviceFit::name)
      .def_readonly("probe", &DeviceFit::probe)
      .def_property_readonly("vendor",
                             [](const DeviceFit& f) { return name_of(to_string(f.vendor)); })
      .def_readonly("free_bytes", &DeviceFit::free_bytes)
      .def_property_readonly("source",
                             [](const DeviceFit& f) { return name_of(to_string(f.source)); })
      .def_readonly("node", &DeviceFit::node, "The fleet node; '' for this machine's devices.")
      .def_readonly("parent", &DeviceFit::parent,
                    "A MIG instance's physical GPU id (local only); else ''.")
      .def_readonly("time_unix_ns", &DeviceFit::time_unix_ns,
                    "When the free figure was sampled (wall clock, ns since the epoch).")
      .def_property_readonly(
          "age_seconds",
          [](const DeviceFit& f) {
            return static_cast<double>(std::max<std::int64_t>(0, wall_now_ns() - f.time_unix_ns)) /
                   1e9;
          },
          "Seconds since the free figure was sampled.")
      .def("__repr__", [](const DeviceFit& f) {
        return "<gpustream.DeviceFit " + f.device_id + " '" + f.name + "', " +
               std::to_string(f.free_bytes) + " bytes free>";
      });

  py::class_<FitExclusion>(m, "FitExclusion",
                           "A device with enough free memory that the planner left out, and why.")
      .def_readonly("device", &FitExclusion::device, "The DeviceFit it would have been.")
      .def_property_readonly(
          "reason", [](const FitExclusion& x) { return name_of(to_string(x.reason)); },
          "'excluded' (in exclude=) or 'fatal_event' (a fatal event within the window).")
      .def_readonly("detail", &FitExclusion::detail,
                    "In words: 'xid 79 42 s ago (event #7, nvidia)'.")
      .def("__repr__", [](const FitExclusion& x) {
        return "<gpustream.FitExclusion " + x.device.device_id + " " +
               std::string(to_string(x.reason)) + ": " + x.detail + ">";
      });

  py::class_<FitPlan>(m, "FitPlan", "The planner's answer: what fits, and what was left out.")
      .def_readonly("fits", &FitPlan::fits, "DeviceFit list, most free first.")
      .def_readonly("excluded", &FitPlan::excluded, "FitExclusion list, most free first.")
      .def("best", &FitPlan::best, "The first of fits, or None.");

  py::class_<MyDeviceUsage>(m, "MyDeviceUsage", "This process on one device.")
      .def_readonly("probe", &MyDeviceUsage::probe)
      .def_readonly("device_id", &MyDeviceUsage::device_id)
      .def_property_readonly("vendor",
                             [](const MyDeviceUsage& u) { return name_of(to_string(u.vendor)); })
      .def_readonly("index", &MyDeviceUsage::index)
      .def_readonly("name", &MyDeviceUsage::name)
      .def_readonly("gpu_memory_bytes", &MyDeviceUsage::gpu_memory_bytes)
      .def_readonly("exact", &MyDeviceUsage::exact)
      .def_readonly("gpu_utilization_percent", &MyDeviceUsage::gpu_utilization_percent)
      .def_property_readonly("absent", [](const MyDeviceUsage& u) { return opt_name(u.absent); })
      .def_readonly("reason", &MyDeviceUsage::reason)
      .def_readonly("device_memory_used_bytes", &MyDeviceUsage::device_memory_used_bytes)
      .def_readonly("device_memory_total_bytes", &MyDeviceUsage::device_memory_total_bytes)
      .def_readonly("device_memory_free_bytes", &MyDeviceUsage::device_memory_free_bytes)
      .def_readonly("sampled_monotonic_ns", &MyDeviceUsage::sampled_monotonic_ns);

  py::class_<MyProcessUsage>(m, "MyProcess", "This process's RSS and GPU memory per device.")
      .def_readonly("pid", &MyProcessUsage::pid)
      .def_readonly("host_rss_bytes", &MyProcessUsage::host_rss_bytes)
      .def_readonly("devices", &MyProcessUsage::devices)
      .def_readonly("errors", &MyProcessUsage::errors);
}

}  // namespace gpustream::python
