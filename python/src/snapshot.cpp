// Snapshot, Device, Reading, Process... as Python objects with attribute access. to_dict() is
// the SDK's own JSON encoder (gpustream/json.hpp) turned into Python objects: exactly the
// gpustream/1 document, never a second encoder.
#include <pybind11/stl.h>

#include <array>
#include <cmath>

#include <boost/json.hpp>

#include "common.hpp"
#include "gpustream/json.hpp"
#include "schema_fields.hpp"

namespace gpustream::python {

py::object json_to_python(const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::null:
      return py::none();
    case boost::json::kind::bool_:
      return py::bool_(v.get_bool());
    case boost::json::kind::int64:
      return py::int_(v.get_int64());
    case boost::json::kind::uint64:
      return py::int_(v.get_uint64());
    case boost::json::kind::double_:
      return py::float_(v.get_double());
    case boost::json::kind::string: {
      const auto& s = v.get_string();
      return py::str(s.data(), s.size());
    }
    case boost::json::kind::array: {
      const auto& a = v.get_array();
      py::list out(a.size());
      for (std::size_t i = 0; i < a.size(); ++i) out[i] = json_to_python(a[i]);
      return out;
    }
    case boost::json::kind::object: {
      py::dict out;
      for (const auto& kv : v.get_object())
        out[py::str(kv.key().data(), kv.key().size())] = json_to_python(kv.value());
      return out;
    }
  }
  return py::none();
}

namespace {

/// gpustream.UnknownMetricError (a KeyError and a ValueError) and gpustream.AbsentMetricError
/// (a KeyError), made in bind_snapshot; held for the module's life.
py::handle g_unknown_metric;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
py::handle g_absent_metric;   // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

/// Raises `type(message)` with attributes (metric, reason) set on the exception object.
[[noreturn]] void raise_metric_error(py::handle type, const std::string& message,
                                     const std::string& metric, py::object reason) {
  py::object error = py::reinterpret_borrow<py::object>(type)(message);
  error.attr("metric") = metric;
  error.attr("reason") = std::move(reason);
  PyErr_SetObject(type.ptr(), error.ptr());
  throw py::error_already_set();
}

Metric metric_arg(const py::object& name_arg) {
  const auto name = str_arg(name_arg, "metric");
  if (auto m = metric_from_string(name)) return *m;
  std::string known;
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    if (!known.empty()) known += ", ";
    known += to_string(static_cast<Metric>(i));
  }
  raise_metric_error(g_unknown_metric, "unknown metric '" + name + "' (known: " + known + ")", name,
                     py::none());
}

/// Metrics whose values are whole numbers: byte counts and counts (errors, pages, rows, the
/// PCIe link's generation and width, the 0/1 flags). Python gives them as int.
bool integral_metric(Metric m) {
  static const auto kTable = [] {
    std::array<bool, kMetricCount> t{};
    for (std::size_t i = 0; i < kMetricCount; ++i) {
      const auto name = to_string(static_cast<Metric>(i));
      t[i] = name.ends_with("_bytes") || name.starts_with("ecc_") ||
             name.starts_with("retired_pages_") || name.starts_with("remapped_rows_") ||
             name.starts_with("pcie_link_");
    }
    return t;
  }();
  return kTable[static_cast<std::size_t>(m)];
}

/// A value as Python sees it: an int for a whole value of an integral metric (as the
/// gpustream/1 document writes byte counts), else a float.
py::object metric_value(double v, bool integral) {
  constexpr double kExactInt = 9.007199254740992e15;  // 2**53: every integer below is exact
  if (integral && v > -kExactInt && v < kExactInt && v == std::floor(v))
    return py::int_(static_cast<long long>(v));
  return py::float_(v);
}

/// A Reading and whether its metric is integral (Reading.value is then an int).
struct PyReading {
  Reading r;
  bool integral = false;
};

py::dict present_metrics(const DeviceSample& d) {
  py::dict out;
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto m = static_cast<Metric>(i);
    const auto& r = d.metrics[m];
    if (!r.has_value()) continue;
    out[name_of(to_string(m))] = metric_value(r.value(), integral_metric(m));
  }
  return out;
}

py::dict absent_metrics(const DeviceSample& d) {
  py::dict out;
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto m = static_cast<Metric>(i);
    if (const auto& r = d.metrics[m]; !r.has_value())
      out[name_of(to_string(m))] = name_of(to_string(r.reason()));
  }
  return out;
}

std::string device_repr(const DeviceSample& d) {
  return "<gpustream.Device " + d.id + " '" + d.name + "' (" + std::string(to_string(d.vendor)) +
         ")>";
}

}  // namespace

void bind_snapshot(py::module_& m) {
  // The metric errors: KeyError subclasses, so `except KeyError` around dev[name] keeps working;
  // an unknown name is also a ValueError (what it was before). Both carry .metric and .reason.
  g_absent_metric = PyErr_NewExceptionWithDoc(
      "gpustream.AbsentMetricError",
      "dev[name] for a metric without a value (a KeyError): .metric is its name, .reason why it "
      "is absent (unsupported, no_permission, not_yet_seeded, ...).",
      PyExc_KeyError, nullptr);
  if (g_absent_metric.ptr() == nullptr) throw py::error_already_set();
  m.attr("AbsentMetricError") = g_absent_metric;
  const py::tuple unknown_bases =
      py::make_tuple(py::handle(PyExc_KeyError), py::handle(PyExc_ValueError));
  g_unknown_metric = PyErr_NewExceptionWithDoc(
      "gpustream.UnknownMetricError",
      "A metric name that is not one of gpustream.known_metrics() (a KeyError and a "
      "ValueError): .metric is the name given, .reason is None.",
      unknown_bases.ptr(), nullptr);
  if (g_unknown_metric.ptr() == nullptr) throw py::error_already_set();
  m.attr("UnknownMetricError") = g_unknown_metric;
  // Reading::value() on an absent reading (C++ code called from the module). pybind11's
  // translator type takes the exception_ptr by value.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const BadReadingAccess& e) {
      PyErr_SetString(g_absent_metric.ptr(), e.what());
    }
  });

  m.def(
      "known_metrics",
      [] {
        std::vector<std::string> out;
        for (std::size_t i = 0; i < kMetricCount; ++i)
          out.emplace_back(to_string(static_cast<Metric>(i)));
        return out;
      },
      "known_metrics()\n--\n\nEvery metric name a Device can have, in the gpustream/1 "
      "document's order (docs/python.md, \"Metrics\").");

  py::class_<PyReading>(m, "Reading",
                        "One metric: a value with its source, or an absence with its reason.")
      .def_property_readonly(
          "present", [](const PyReading& r) { return r.r.has_value(); },
          "True when there is a value.")
      .def_property_readonly(
          "value",
          [](const PyReading& r) -> py::object {
            if (!r.r.has_value()) return py::none();
            return metric_value(r.r.value(), r.integral);
          },
          "The value (an int for byte counts and counts, else a float), or None when absent.")
      .def_property_readonly(
          "source", [](const PyReading& r) { return name_of(to_string(r.r.source())); },
          "Where the value came from (nvml, sysfs, ...); for an absent one, where it was "
          "looked for (\"none\" when nowhere).")
      .def_property_readonly(
          "reason",
          [](const PyReading& r) -> py::object {
            if (r.r.has_value()) return py::none();
            return name_of(to_string(r.r.reason()));
          },
          "Why it is absent (unsupported, no_permission, ...); None when there is a value.")
      .def(
          "value_or",
          [](const PyReading& r, const py::object& fallback) -> py::object {
            if (!r.r.has_value()) return fallback;
            return metric_value(r.r.value(), r.integral);
          },
          py::arg("default"), "value_or(self, default)\n--\n\nThe value, or `default` when absent.")
      .def(
          "__bool__", [](const PyReading& r) { return r.r.has_value(); },
          "__bool__(self)\n--\n\nTrue when there is a value.")
      .def("__repr__", [](const PyReading& r) {
        if (r.r.has_value())
          return "<gpustream.Reading " +
                 py::repr(metric_value(r.r.value(), r.integral)).cast<std::string>() + " (" +
                 std::string(to_string(r.r.source())) + ")>";
        return "<gpustream.Reading absent: " + std::string(to_string(r.r.reason())) + ">";
      });

  // The model's fields come from the schema description (schema_fields.hpp); what is written
  // here is what Python adds: other names, docstrings, reprs, and fields shaped for Python.
  py::class_<EngineSample> engine(m, "Engine",
                                  "One engine of a device or a process (graphics, compute, "
                                  "copy, video ...) and how busy it was.");
  def_fields<EngineSample>(
      engine, {.docs = {{"name", "The engine's name as the source gives it."},
                        {"utilization_percent", "Percent of time busy, or None when unknown."}}});
  engine.def_property_readonly(
      "utilization",
      [](const EngineSample& e) {
        return PyReading{e.utilization_percent, false};
      },
      "utilization_percent as a Reading (with its source, or the reason it is absent).");

  py::class_<ProcessContainer> container(m, "Container", "The container a process runs in.");
  def_fields<ProcessContainer>(
      container,
      {.docs = {{"runtime",
                 "\"docker\", \"containerd\", \"cri-o\", \"podman\"; \"kubernetes\" when only "
                 "the pod is known."},
                {"id", "The container id (64 hex digits); \"\" when only the pod is known."},
                {"pod_uid", "The Kubernetes pod UID; \"\" outside Kubernetes."},
                {"qos", "The Kubernetes QoS class (guaranteed, burstable, besteffort) or \"\"."}}});
  container.def("__repr__", [](const ProcessContainer& c) {
    return "<gpustream.Container " + c.runtime + " " + c.id.substr(0, 12) + ">";
  });

  py::class_<SlurmJob> slurm(m, "SlurmJob", "The Slurm job a process runs in.");
  def_fields<SlurmJob>(
      slurm, {.docs = {{"job_id", "The job's id (decimal), as the cgroup names it."},
                       {"step",
                        "\"0\", \"batch\", \"extern\", \"interactive\"; "
                        "\"\" when the cgroup names the job only"},
                       {"uid", "The job's user id; None when unknown."},
                       {"user", "The job's user name; \"\" when unknown."},
                       {"array_job_id", "The array job's id for an array task; else \"\"."},
                       {"array_task_id", "The array task's id; else \"\"."}}});
  slurm.def("__repr__", [](const SlurmJob& j) {
    return "<gpustream.SlurmJob " + j.job_id + (j.step.empty() ? "" : "." + j.step) + ">";
  });

  py::class_<KubernetesPod> pod(m, "Pod",
                                "The Kubernetes pod and container holding a GPU (the kubelet's "
                                "PodResources API).");
  def_fields<KubernetesPod>(
      pod, {.docs = {{"name", "The pod's name."},
                     {"namespace", "The pod's namespace."},
                     {"container", "The name of the pod's container that holds the GPU."}}});
  pod.def("__repr__", [](const KubernetesPod& k) {
    return "<gpustream.Pod " + k.namespace_name + "/" + k.name + " " + k.container + ">";
  });

  py::class_<ProcessSample> process(m, "Process", "A process using a device.");
  def_fields<ProcessSample>(
      process,
      {.docs = {{"pid", "The process id (as this machine's /proc sees it)."},
                {"name", "The process name (comm)."},
                {"gpu_memory_bytes", "Device memory the process holds; None when unknown."},
                {"gtt_memory_bytes",
                 "AMD GTT bytes the process holds (system memory the GPU maps); None when the "
                 "source does not say."},
                {"gpu_utilization_percent",
                 "The process's share of the device's time, percent; None when unknown."},
                {"host_rss_bytes", "The process's resident host memory; None when unknown."},
                {"per_process_exact",
                 "False when the figures are the device's shared among its processes."},
                {"container", "The Container the process runs in; None when none is known."},
                {"container_absent",
                 "Why `container` is None: host, unrecognized, malformed, no_permission; None "
                 "when there is a container or the probe did not look."},
                {"slurm", "The Slurm job (SlurmJob) the process runs in; None outside Slurm."},
                {"slurm_absent",
                 "\"unrecognized\" when the cgroup has Slurm's mark in a shape not known; else "
                 "None."},
                {"engines", "Per engine (Engine) use by this process; [] when unknown."},
                {"pod",
                 "The Kubernetes pod and container (Pod: name, namespace, container) the process "
                 "runs in, from the kubelet; None outside a pod or when unknown."},
                {"pod_absent",
                 "Why `pod` is None for a process in a pod: kubelet_unavailable, not_assigned, "
                 "ambiguous; None otherwise."}}});
  process.def("__repr__", [](const ProcessSample& p) {
    return "<gpustream.Process " + std::to_string(p.pid) + " '" + p.name + "'>";
  });

  py::class_<HostProcess> host_process(m, "HostProcess", "A watched process on the host.");
  def_fields<HostProcess>(host_process,
                          {.docs = {{"pid", "The process id."},
                                    {"name", "The process name (comm)."},
                                    {"rss_bytes", "Resident memory; None when unknown."}}});

  py::class_<HostSample> host(m, "Host", "Host memory, swap and watched processes.");
  def_fields<HostSample>(
      host, {.docs = {{"memory_total_bytes", "Host memory in all; None when unknown."},
                      {"memory_available_bytes", "Memory available for new work (MemAvailable)."},
                      {"memory_used_bytes", "Memory in use (total - available)."},
                      {"swap_total_bytes", "Swap in all; None when unknown."},
                      {"swap_used_bytes", "Swap in use; None when unknown."},
                      {"processes", "The watched processes (HostProcess)."},
                      {"metrics", "Other host figures by name ({name: value})."}}});

  py::class_<SampleError> sample_error(m, "SampleError",
                                       "What went wrong in a sample (the snapshot still counts).");
  def_fields<SampleError>(
      sample_error,
      {.docs = {{"code", "A short machine-readable code, e.g. \"gpu_lost\", \"tool_failed\"."},
                {"message", "One line for humans."},
                {"device", "The device id when the error concerns one device, else \"\"."}}});
  sample_error.def("__repr__", [](const SampleError& e) {
    return "<gpustream.SampleError " + e.code + ": " + e.message + ">";
  });

  py::class_<MigIdentity> mig(m, "MigInstance", "The identity of a MIG instance (Device.mig).");
  def_fields<MigIdentity>(mig, {.docs = {{"gpu_instance_id", "The GPU instance id."},
                                         {"compute_instance_id", "The compute instance id."},
                                         {"profile", "e.g. \"1g.5gb\""}}});
  mig.def("__repr__", [](const MigIdentity& g) {
    return "<gpustream.MigInstance " + g.profile + " gi " + std::to_string(g.gpu_instance_id) +
           " ci " + std::to_string(g.compute_instance_id) + ">";
  });

  py::class_<PyDevice> device(m, "Device", "What one probe saw of one device.");
  // parent: None for a physical device; throttle_reasons_absent is not in the Python API.
  def_fields_of<DeviceSample>(
      device, [](const PyDevice& d) -> const DeviceSample& { return *d.d; },
      {.skip = {"parent", "throttle_reasons_absent", "power_samples"},
       .docs = {{"id", "The device's id, stable across samples (NVIDIA: the UUID)."},
                {"vendor", "nvidia, amd, intel, apple, simulated or unknown."},
                {"index", "The device's index in its probe."},
                {"name", "The product name."},
                {"pci_bus_id", "\"0000:01:00.0\"; \"\" when unknown."},
                {"power_state", "active, suspended or unknown."},
                {"energy_kind",
                 "How metrics['energy_joules'] was obtained: counter or integrated; None "
                 "without it."},
                {"power_kind",
                 "What metrics['power_watts'] is: instant, or average (the driver's own "
                 "average); None without it."},
                {"mig",
                 "A MigInstance (gpu_instance_id, compute_instance_id, profile) for a MIG "
                 "instance; None when the device is not one."},
                {"pods",
                 "The Kubernetes pods and containers (Pod) the kubelet says hold the device; "
                 "empty when none does or the kubelet is not read."},
                {"partitioned",
                 "True for a physical device in MIG mode: work goes to its instances (the "
                 "devices whose parent it is); its own metrics stay device-wide."},
                {"throttle_reasons", "Why the clocks are held down now (names); [] for none."},
                {"engines", "Per engine (Engine) utilization."},
                {"processes", "The processes (Process) using the device."},
                {"processes_absent", "Why `processes` is empty by lack of data; else None."},
                {"attributes", "Other facts about the device ({name: text})."}}});
  device
      .def_property_readonly(
          "parent",
          [](const PyDevice& d) -> py::object {
            if (d.d->parent.empty()) return py::none();
            return py::str(d.d->parent);
          },
          "For a partition (a MIG instance): the id of its physical device, in the same "
          "snapshot. None for a physical device.")
      .def_property_readonly(
          "power_samples",
          [](const PyDevice& d) {
            py::list out;
            for (const auto& p : d.d->power_samples)
              out.append(py::make_tuple(p.monotonic_ns, p.watts));
            return out;
          },
          "The driver's own power readings since the probe's previous snapshot of the device, "
          "as (monotonic_ns, watts) tuples, oldest first, on the clock of Snapshot.monotonic_ns "
          "(NVML's power sample ring); [] when the source keeps no such record.")
      .def_property_readonly(
          "metrics", [](const PyDevice& d) { return present_metrics(*d.d); },
          "{metric: value} of the metrics that have a value (ints for byte counts and counts; "
          "an absent one is not there: see absent and reading()).")
      .def_property_readonly(
          "absent", [](const PyDevice& d) { return absent_metrics(*d.d); },
          "{metric: reason} of the metrics without a value.")
      .def(
          "reading",
          [](const PyDevice& d, const py::object& metric) {
            const auto m = metric_arg(metric);
            return PyReading{d.d->metrics[m], integral_metric(m)};
          },
          py::arg("metric"),
          "reading(self, metric)\n--\n\nThe Reading of one metric (value and source, or the "
          "reason). UnknownMetricError for a name that is not a metric.")
      .def(
          "__getitem__",
          [](const PyDevice& d, const py::object& metric_name) {
            const auto m = metric_arg(metric_name);
            const auto& r = d.d->metrics[m];
            if (!r.has_value()) {
              const auto name = std::string(to_string(m));
              const auto reason = std::string(to_string(r.reason()));
              raise_metric_error(g_absent_metric,
                                 "metric '" + name + "' is absent (" + reason + ")", name,
                                 py::str(reason));
            }
            return metric_value(r.value(), integral_metric(m));
          },
          py::arg("metric"),
          "__getitem__(self, metric)\n--\n\nThe value of a metric. AbsentMetricError (a "
          "KeyError) saying the reason when it has none; UnknownMetricError for a name that is "
          "not a metric.")
      .def(
          "to_dict", [](const PyDevice& d) { return json_to_python(to_json(*d.d)); },
          "to_dict(self)\n--\n\nThe device as in the gpustream/1 document (dicts and lists).")
      .def("__repr__", [](const PyDevice& d) { return device_repr(*d.d); });

  py::class_<PySnapshot> snapshot(m, "Snapshot", "What one probe saw at one moment (immutable).");
  // devices: Device objects that keep the snapshot alive; node is not in the Python API.
  def_fields_of<GpuSnapshot>(
      snapshot, [](const PySnapshot& s) -> const GpuSnapshot& { return *s.s; },
      {.skip = {"node", "devices"},
       .docs = {{"probe", "The probe that took it (\"nvidia\", \"simulated\", ...)."},
                {"sequence", "1, 2, 3, ... per channel, gap-free."},
                {"time_unix_ns", "Wall-clock time, nanoseconds since the Unix epoch."},
                {"monotonic_ns", "Steady clock, nanoseconds (time.monotonic_ns() on Linux)."},
                {"sample_duration_ns", "How long the sample took, nanoseconds."},
                {"host",
                 "Host memory and watched processes (Host) for the host probe; else "
                 "None."},
                {"errors", "What went wrong in this sample (SampleError); [] when nothing."}}});
  snapshot
      .def_property_readonly(
          "time", [](const PySnapshot& s) { return static_cast<double>(s.s->time_unix_ns) / 1e9; },
          "Wall-clock time in seconds since the Unix epoch (as time.time()).")
      .def_property_readonly(
          "devices",
          [](const PySnapshot& s) {
            py::list out;
            for (const auto& d : s.s->devices) out.append(PyDevice{s.s, &d});
            return out;
          },
          "The devices (Device) the probe saw.")
      .def(
          "device",
          [](const PySnapshot& s, const py::object& id) -> py::object {
            if (const auto* d = s.s->find_device(str_arg(id, "id")))
              return py::cast(PyDevice{s.s, d});
            return py::none();
          },
          py::arg("id"), "device(self, id)\n--\n\nThe device with this id, or None.")
      .def(
          "to_dict", [](const PySnapshot& s) { return json_to_python(to_json(*s.s)); },
          "to_dict(self)\n--\n\nThe gpustream/1 document (docs/protocol.md) as Python dicts "
          "and lists, from the SDK's JSON encoder.")
      .def(
          "to_json", [](const PySnapshot& s) { return to_json_string(*s.s); },
          "to_json(self)\n--\n\nThe gpustream/1 document as JSON text, exactly as the servers "
          "send it.")
      .def("__repr__", [](const PySnapshot& s) {
        return "<gpustream.Snapshot " + s.s->probe + " #" + std::to_string(s.s->sequence) + ", " +
               std::to_string(s.s->devices.size()) + " device(s)>";
      });

  py::class_<Gap>(m, "Gap",
                  "A hole in a subscriber's stream: `missed` snapshots were not delivered.")
      .def_readonly("after_sequence", &Gap::after_sequence,
                    "The sequence of the last snapshot delivered before the hole.")
      .def_readonly("missed", &Gap::missed, "How many snapshots were not delivered.")
      .def_readonly("reason", &Gap::reason, "dropped_slow_subscriber, lossless_bound_exceeded, ...")
      .def("__repr__", [](const Gap& g) {
        return "<gpustream.Gap after #" + std::to_string(g.after_sequence) + ": " +
               std::to_string(g.missed) + " missed (" + g.reason + ")>";
      });

  m.def(
      "snapshot_from_json",
      [](const py::object& text) {
        return PySnapshot{
            std::make_shared<const GpuSnapshot>(snapshot_from_json_string(str_arg(text, "text")))};
      },
      py::arg("text"),
      "snapshot_from_json(text)\n--\n\nDecodes a gpustream/1 document (raises "
      "gpustream.JsonError).");
}

}  // namespace gpustream::python
