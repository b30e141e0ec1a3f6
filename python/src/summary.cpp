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
      .def_readonly("min", &MetricSummary::min, "The smallest reading.")
      .def_readonly("max", &MetricSummary::max, "The largest reading.")
      .def_readonly("mean", &MetricSummary::mean, "The mean of the readings.")
      .def_readonly("last", &MetricSummary::last, "The last reading.")
      .def_readonly("count", &MetricSummary::count, "How many readings there were.")
      .def_property_readonly(
          "source", [](const MetricSummary& s) { return name_of(to_string(s.source)); },
          "Where the readings came from (nvml, sysfs, ...).")
      .def("__repr__", [](const MetricSummary& s) {
        return "<gpustream.MetricSummary min " + std::to_string(s.min) + " mean " +
               std::to_string(s.mean) + " max " + std::to_string(s.max) + " (" +
               std::to_string(s.count) + " readings)>";
      });

  py::class_<DeviceWindowSummary>(m, "DeviceWindow", "One device over a window.")
      .def_readonly("device_id", &DeviceWindowSummary::device_id, "The device's id.")
      .def_readonly("probe", &DeviceWindowSummary::probe, "The probe that saw it.")
      .def_readonly("samples", &DeviceWindowSummary::samples,
                    "Samples of the device inside the window (the edges included).")
      .def_property_readonly("metrics", &metric_summaries, "{metric: MetricSummary}")
      .def_readonly("energy_joules", &DeviceWindowSummary::energy_joules,
                    "Energy used over the window, joules; None when it cannot be known.")
      .def_property_readonly(
          "energy_kind", [](const DeviceWindowSummary& d) { return opt_name(d.energy_kind); },
          "counter (the hardware counter read at both edges) or integrated (power integrated "
          "over the window); None without energy.")
      .def_readonly("energy_counter_resets", &DeviceWindowSummary::energy_counter_resets,
                    "Times the energy counter went back (a reset) inside the window.")
      .def_property_readonly(
          "begin_edge",
          [](const DeviceWindowSummary& d) { return std::string(to_string(d.begin_edge)); },
          "How the begin edge was obtained: sampled, interpolated, held, unknown (none: "
          "channel-only)")
      .def_property_readonly(
          "end_edge",
          [](const DeviceWindowSummary& d) { return std::string(to_string(d.end_edge)); },
          "How the end edge was obtained (as begin_edge).")
      .def_readonly("begin_edge_ns", &DeviceWindowSummary::begin_edge_ns,
                    "When the begin edge was sampled (steady clock, ns).")
      .def_readonly("end_edge_ns", &DeviceWindowSummary::end_edge_ns,
                    "When the end edge was sampled (steady clock, ns).")
      .def_readonly("estimated_joules", &DeviceWindowSummary::estimated_joules,
                    "The part of energy_joules that is estimated (an edge that was not sampled).")
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
      .def_readonly("counter_changes", &DeviceWindowSummary::counter_changes,
                    "Times the energy counter changed value inside the window.")
      .def_readonly("ignored_power_samples", &DeviceWindowSummary::ignored_power_samples,
                    "Driver power samples not integrated because they were bad")
      .def_readonly("ignored_power_samples_reason",
                    &DeviceWindowSummary::ignored_power_samples_reason,
                    "Why they were bad (empty when none was)")
      .def("__repr__", [](const DeviceWindowSummary& d) {
        std::string out = "<gpustream.DeviceWindow " + d.device_id + " (" + d.probe + ")";
        if (d.energy_joules) out += " " + std::to_string(*d.energy_joules) + " J";
        if (d.energy_method) out += " by " + std::string(to_string(*d.energy_method));
        if (d.fresh_coverage)
          out += ", " + std::to_string(std::lround(*d.fresh_coverage * 100)) + " % fresh";
        return out + ">";
      });

  py::class_<WindowSummary::Overhead>(m, "WindowOverhead", "What the window itself cost.")
      .def_readonly("edge_samples", &WindowSummary::Overhead::edge_samples,
                    "Edge samples taken (one per probe and edge; unavailable probes are none).")
      .def_readonly("failed_edge_samples", &WindowSummary::Overhead::failed_edge_samples,
                    "Of edge_samples, those that failed (named in edge_errors).")
      .def_readonly("begin_latency_ns", &WindowSummary::Overhead::begin_latency_ns,
                    "How long the begin edge took the caller, ns.")
      .def_readonly("end_latency_ns", &WindowSummary::Overhead::end_latency_ns,
                    "How long the end edge took the caller, ns.")
      .def_readonly("max_sample_latency_ns", &WindowSummary::Overhead::max_sample_latency_ns,
                    "The slowest edge sample, ns.")
      .def_readonly("caller_cpu_ns", &WindowSummary::Overhead::caller_cpu_ns,
                    "CPU time the window cost the calling thread, ns.");

  py::class_<WindowSummary>(m, "WindowSummary",
                            "What a window measured: per device the energy and min/max/mean/last "
                            "of each metric, and how exact its edges were.")
      .def_readonly("begin_ns", &WindowSummary::begin_ns, "When it began (steady clock, ns).")
      .def_readonly("end_ns", &WindowSummary::end_ns, "When it ended (steady clock, ns).")
      .def_property_readonly(
          "duration",
          [](const WindowSummary& s) { return static_cast<double>(s.end_ns - s.begin_ns) / 1e9; },
          "Seconds between begin and end.")
      .def_readonly("snapshots", &WindowSummary::snapshots,
                    "Snapshots taken into the window (the edges included).")
      .def_readonly("missed_snapshots", &WindowSummary::missed_snapshots,
                    "Snapshots the window did not get (it fell behind).")
      .def_readonly("devices", &WindowSummary::devices, "Per device (DeviceWindow).")
      .def_readonly("name", &WindowSummary::name, "The window's name.")
      .def_readonly("exact_edges", &WindowSummary::exact_edges,
                    "True when every device's both edges are fresh samples")
      .def_readonly("edge_errors", &WindowSummary::edge_errors,
                    "Edge samples that failed, one line each (\"nvidia: end: timeout: ...\"); "
                    "a probe that is not available is no edge and not listed.")
      .def_readonly("overhead", &WindowSummary::overhead,
                    "What the window itself cost (WindowOverhead).")
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
          [](const WindowSummary& s, const py::object& id) -> py::object {
            if (const auto* d = s.find(str_arg(id, "id"))) return py::cast(*d);
            return py::none();
          },
          py::arg("id"), "device(self, id)\n--\n\nThe DeviceWindow of this device, or None.");

  py::class_<DeviceFit>(m, "DeviceFit", "A device where the requested bytes fit.")
      .def_readonly("device_id", &DeviceFit::device_id, "The device's id.")
      .def_readonly("name", &DeviceFit::name, "The product name.")
      .def_readonly("probe", &DeviceFit::probe, "The probe that saw it.")
      .def_property_readonly(
          "vendor", [](const DeviceFit& f) { return name_of(to_string(f.vendor)); },
          "nvidia, amd, intel, apple, simulated or unknown.")
      .def_readonly("free_bytes", &DeviceFit::free_bytes, "Free device memory, bytes.")
      .def_property_readonly(
          "source", [](const DeviceFit& f) { return name_of(to_string(f.source)); },
          "Where free_bytes came from (nvml, amd_smi, derived, ...).")
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
      .def("best", &FitPlan::best, "best(self)\n--\n\nThe first of fits, or None.");

  py::class_<MyDeviceUsage>(m, "MyDeviceUsage", "This process on one device.")
      .def_readonly("probe", &MyDeviceUsage::probe, "The probe that saw the device.")
      .def_readonly("device_id", &MyDeviceUsage::device_id, "The device's id.")
      .def_property_readonly(
          "vendor", [](const MyDeviceUsage& u) { return name_of(to_string(u.vendor)); },
          "nvidia, amd, intel, apple, simulated or unknown.")
      .def_readonly("index", &MyDeviceUsage::index, "The device's index in its probe.")
      .def_readonly("name", &MyDeviceUsage::name, "The product name.")
      .def_readonly("gpu_memory_bytes", &MyDeviceUsage::gpu_memory_bytes,
                    "Device memory this process holds there; None when unknown (see absent).")
      .def_readonly("exact", &MyDeviceUsage::exact,
                    "True when the figure is this process's own, not shared.")
      .def_readonly("gpu_utilization_percent", &MyDeviceUsage::gpu_utilization_percent,
                    "This process's share of the device's time, percent; None when unknown.")
      .def_property_readonly(
          "absent", [](const MyDeviceUsage& u) { return opt_name(u.absent); },
          "Why gpu_memory_bytes is None (unsupported, no_permission, ...); else None.")
      .def_readonly("reason", &MyDeviceUsage::reason, "The absence in words; \"\" when known.")
      .def_readonly("device_memory_used_bytes", &MyDeviceUsage::device_memory_used_bytes,
                    "The device's used memory, bytes; None when unknown.")
      .def_readonly("device_memory_total_bytes", &MyDeviceUsage::device_memory_total_bytes,
                    "The device's total memory, bytes; None when unknown.")
      .def_readonly("device_memory_free_bytes", &MyDeviceUsage::device_memory_free_bytes,
                    "The device's free memory, bytes; None when unknown.")
      .def_readonly("sampled_monotonic_ns", &MyDeviceUsage::sampled_monotonic_ns,
                    "When the snapshot these come from was taken (steady clock, ns).");

  py::class_<MyProcessUsage>(m, "MyProcess", "This process's RSS and GPU memory per device.")
      .def_readonly("pid", &MyProcessUsage::pid, "This process's id (as the drivers see it).")
      .def_readonly("host_rss_bytes", &MyProcessUsage::host_rss_bytes,
                    "This process's resident host memory now; None when unreadable.")
      .def_readonly("devices", &MyProcessUsage::devices,
                    "Every device of every snapshot (MyDeviceUsage), in order.")
      .def_readonly("errors", &MyProcessUsage::errors, "What could not be read, and why.");
}

}  // namespace gpustream::python
