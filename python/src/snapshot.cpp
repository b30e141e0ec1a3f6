// Snapshot, Device, Reading, Process... as Python objects with attribute access. to_dict() is
// the SDK's own JSON encoder (gpustream/json.hpp) turned into Python objects: exactly the
// gpustream/1 document, never a second encoder.
#include <pybind11/stl.h>

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

Metric metric_arg(const std::string& name) {
  if (auto m = metric_from_string(name)) return *m;
  std::string known;
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    if (!known.empty()) known += ", ";
    known += to_string(static_cast<Metric>(i));
  }
  throw py::value_error("unknown metric '" + name + "' (known: " + known + ")");
}

py::dict present_metrics(const DeviceSample& d) {
  py::dict out;
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto m = static_cast<Metric>(i);
    const auto& r = d.metrics[m];
    if (!r.has_value()) continue;
    // Whole byte counts as int, as the gpustream/1 document writes them.
    const auto name = to_string(m);
    const double v = r.value();
    if (name.ends_with("_bytes") && v >= 0 && v < 9.007199254740992e15 && v == std::floor(v))
      out[name_of(name)] = py::int_(static_cast<std::uint64_t>(v));
    else
      out[name_of(name)] = v;
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
  py::class_<Reading>(m, "Reading",
                      "One metric: a value with its source, or an absence with its reason.")
      .def_property_readonly("present", &Reading::has_value)
      .def_property_readonly("value", &Reading::get, "The value, or None when absent.")
      .def_property_readonly("source",
                             [](const Reading& r) { return name_of(to_string(r.source())); })
      .def_property_readonly("reason",
                             [](const Reading& r) -> py::object {
                               if (r.has_value()) return py::none();
                               return name_of(to_string(r.reason()));
                             })
      .def("value_or", &Reading::value_or, py::arg("default"))
      .def("__bool__", &Reading::has_value)
      .def("__repr__", [](const Reading& r) {
        if (r.has_value())
          return "<gpustream.Reading " + py::repr(py::float_(r.value())).cast<std::string>() +
                 " (" + std::string(to_string(r.source())) + ")>";
        return "<gpustream.Reading absent: " + std::string(to_string(r.reason())) + ">";
      });

  // The model's fields come from the schema description (schema_fields.hpp); what is written
  // here is what Python adds: other names, docstrings, reprs, and fields shaped for Python.
  py::class_<EngineSample> engine(m, "Engine");
  def_fields<EngineSample>(engine);  // name; utilization_percent: the value or None
  engine.def_readonly("utilization", &EngineSample::utilization_percent);

  py::class_<ProcessContainer> container(m, "Container", "The container a process runs in.");
  def_fields<ProcessContainer>(container);
  container.def("__repr__", [](const ProcessContainer& c) {
    return "<gpustream.Container " + c.runtime + " " + c.id.substr(0, 12) + ">";
  });

  py::class_<SlurmJob> slurm(m, "SlurmJob", "The Slurm job a process runs in.");
  def_fields<SlurmJob>(slurm, {.docs = {{"step",
                                         "\"0\", \"batch\", \"extern\", \"interactive\"; "
                                         "\"\" when the cgroup names the job only"},
                                        {"uid", "The job's user id; None when unknown."}}});
  slurm.def("__repr__", [](const SlurmJob& j) {
    return "<gpustream.SlurmJob " + j.job_id + (j.step.empty() ? "" : "." + j.step) + ">";
  });

  py::class_<KubernetesPod> pod(m, "Pod",
                                "The Kubernetes pod and container holding a GPU (the kubelet's "
                                "PodResources API).");
  def_fields<KubernetesPod>(pod);
  pod.def("__repr__", [](const KubernetesPod& k) {
    return "<gpustream.Pod " + k.namespace_name + "/" + k.name + " " + k.container + ">";
  });

  py::class_<ProcessSample> process(m, "Process", "A process using a device.");
  def_fields<ProcessSample>(
      process,
      {.docs = {{"gtt_memory_bytes",
                 "AMD GTT bytes the process holds (system memory the GPU maps); None when the "
                 "source does not say."},
                {"container_absent",
                 "Why `container` is None: host, unrecognized, malformed, no_permission; None "
                 "when there is a container or the probe did not look."},
                {"slurm", "The Slurm job (SlurmJob) the process runs in; None outside Slurm."},
                {"slurm_absent",
                 "\"unrecognized\" when the cgroup has Slurm's mark in a shape not known; else "
                 "None."},
                {"pod",
                 "The Kubernetes pod and container (Pod: name, namespace, container) the process "
                 "runs in, from the kubelet; None outside a pod or when unknown."},
                {"pod_absent",
                 "Why `pod` is None for a process in a pod: kubelet_unavailable, not_assigned, "
                 "ambiguous; None otherwise."}}});
  process.def("__repr__", [](const ProcessSample& p) {
    return "<gpustream.Process " + std::to_string(p.pid) + " '" + p.name + "'>";
  });

  py::class_<HostProcess> host_process(m, "HostProcess");
  def_fields<HostProcess>(host_process);

  py::class_<HostSample> host(m, "Host", "Host memory, swap and watched processes.");
  def_fields<HostSample>(host);

  py::class_<SampleError> sample_error(m, "SampleError");
  def_fields<SampleError>(sample_error);
  sample_error.def("__repr__", [](const SampleError& e) {
    return "<gpustream.SampleError " + e.code + ": " + e.message + ">";
  });

  py::class_<MigIdentity> mig(m, "MigInstance", "The identity of a MIG instance (Device.mig).");
  def_fields<MigIdentity>(mig, {.docs = {{"profile", "e.g. \"1g.5gb\""}}});
  mig.def("__repr__", [](const MigIdentity& g) {
    return "<gpustream.MigInstance " + g.profile + " gi " + std::to_string(g.gpu_instance_id) +
           " ci " + std::to_string(g.compute_instance_id) + ">";
  });

  py::class_<PyDevice> device(m, "Device", "What one probe saw of one device.");
  // parent: None for a physical device; throttle_reasons_absent is not in the Python API.
  def_fields_of<DeviceSample>(
      device, [](const PyDevice& d) -> const DeviceSample& { return *d.d; },
      {.skip = {"parent", "throttle_reasons_absent", "power_samples"},
       .docs = {{"mig",
                 "A MigInstance (gpu_instance_id, compute_instance_id, profile) for a MIG "
                 "instance; None when the device is not one."},
                {"pods",
                 "The Kubernetes pods and containers (Pod) the kubelet says hold the device; "
                 "empty when none does or the kubelet is not read."},
                {"partitioned",
                 "True for a physical device in MIG mode: work goes to its instances (the "
                 "devices whose parent it is); its own metrics stay device-wide."}}});
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
          "{metric: value} of the metrics that have a value (an absent one is not there: "
          "see absent and reading()).")
      .def_property_readonly(
          "absent", [](const PyDevice& d) { return absent_metrics(*d.d); },
          "{metric: reason} of the metrics without a value.")
      .def(
          "reading",
          [](const PyDevice& d, const std::string& metric) {
            return d.d->metrics[metric_arg(metric)];
          },
          py::arg("metric"), "The Reading of one metric (value and source, or the reason).")
      .def(
          "__getitem__",
          [](const PyDevice& d, const std::string& metric) -> double {
            const auto& r = d.d->metrics[metric_arg(metric)];
            if (!r.has_value())
              throw py::key_error("metric '" + metric + "' is absent (" +
                                  std::string(to_string(r.reason())) + ")");
            return r.value();
          },
          py::arg("metric"))
      .def("to_dict", [](const PyDevice& d) { return json_to_python(to_json(*d.d)); })
      .def("__repr__", [](const PyDevice& d) { return device_repr(*d.d); });

  py::class_<PySnapshot> snapshot(m, "Snapshot", "What one probe saw at one moment (immutable).");
  // devices: Device objects that keep the snapshot alive; node is not in the Python API.
  def_fields_of<GpuSnapshot>(snapshot,
                             [](const PySnapshot& s) -> const GpuSnapshot& { return *s.s; },
                             {.skip = {"node", "devices"}});
  snapshot
      .def_property_readonly(
          "time", [](const PySnapshot& s) { return static_cast<double>(s.s->time_unix_ns) / 1e9; },
          "Wall-clock time in seconds since the Unix epoch (as time.time()).")
      .def_property_readonly("devices",
                             [](const PySnapshot& s) {
                               py::list out;
                               for (const auto& d : s.s->devices) out.append(PyDevice{s.s, &d});
                               return out;
                             })
      .def(
          "device",
          [](const PySnapshot& s, const std::string& id) -> py::object {
            if (const auto* d = s.s->find_device(id)) return py::cast(PyDevice{s.s, d});
            return py::none();
          },
          py::arg("id"), "The device with this id, or None.")
      .def(
          "to_dict", [](const PySnapshot& s) { return json_to_python(to_json(*s.s)); },
          "The gpustream/1 document (docs/protocol.md) as Python dicts and lists, from the "
          "SDK's JSON encoder.")
      .def(
          "to_json", [](const PySnapshot& s) { return to_json_string(*s.s); },
          "The gpustream/1 document as JSON text, exactly as the servers send it.")
      .def("__repr__", [](const PySnapshot& s) {
        return "<gpustream.Snapshot " + s.s->probe + " #" + std::to_string(s.s->sequence) + ", " +
               std::to_string(s.s->devices.size()) + " device(s)>";
      });

  py::class_<Gap>(m, "Gap",
                  "A hole in a subscriber's stream: `missed` snapshots were not delivered.")
      .def_readonly("after_sequence", &Gap::after_sequence)
      .def_readonly("missed", &Gap::missed)
      .def_readonly("reason", &Gap::reason)
      .def("__repr__", [](const Gap& g) {
        return "<gpustream.Gap after #" + std::to_string(g.after_sequence) + ": " +
               std::to_string(g.missed) + " missed (" + g.reason + ")>";
      });

  m.def(
      "snapshot_from_json",
      [](const std::string& text) {
        return PySnapshot{std::make_shared<const GpuSnapshot>(snapshot_from_json_string(text))};
      },
      py::arg("text"), "Decodes a gpustream/1 document (raises gpustream.JsonError).");
}

}  // namespace gpustream::python
