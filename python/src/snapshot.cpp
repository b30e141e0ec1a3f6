// Snapshot, Device, Reading, Process... as Python objects with attribute access. to_dict() is
// the SDK's own JSON encoder (gpustream/json.hpp) turned into Python objects: exactly the
// gpustream/1 document, never a second encoder.
#include <pybind11/stl.h>

#include <cmath>

#include <boost/json.hpp>

#include "common.hpp"
#include "gpustream/json.hpp"

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

  py::class_<EngineSample>(m, "Engine")
      .def_readonly("name", &EngineSample::name)
      .def_readonly("utilization", &EngineSample::utilization_percent)
      .def_property_readonly("utilization_percent",
                             [](const EngineSample& e) { return e.utilization_percent.get(); });

  py::class_<ProcessContainer>(m, "Container", "The container a process runs in.")
      .def_readonly("runtime", &ProcessContainer::runtime)
      .def_readonly("id", &ProcessContainer::id)
      .def_readonly("pod_uid", &ProcessContainer::pod_uid)
      .def_readonly("qos", &ProcessContainer::qos)
      .def("__repr__", [](const ProcessContainer& c) {
        return "<gpustream.Container " + c.runtime + " " + c.id.substr(0, 12) + ">";
      });

  py::class_<ProcessSample>(m, "Process", "A process using a device.")
      .def_readonly("pid", &ProcessSample::pid)
      .def_readonly("name", &ProcessSample::name)
      .def_readonly("gpu_memory_bytes", &ProcessSample::gpu_memory_bytes)
      .def_readonly("gtt_memory_bytes", &ProcessSample::gtt_memory_bytes,
                    "AMD GTT bytes the process holds (system memory the GPU maps); None when the "
                    "source does not say.")
      .def_readonly("gpu_utilization_percent", &ProcessSample::gpu_utilization_percent)
      .def_readonly("host_rss_bytes", &ProcessSample::host_rss_bytes)
      .def_readonly("per_process_exact", &ProcessSample::per_process_exact)
      .def_readonly("container", &ProcessSample::container)
      .def_property_readonly(
          "container_absent",
          [](const ProcessSample& p) -> py::object {
            if (p.container || p.container_absent == ContainerAbsent::not_collected)
              return py::none();
            return py::str(std::string(to_string(p.container_absent)));
          },
          "Why `container` is None: host, unrecognized, malformed, no_permission; None when "
          "there is a container or the probe did not look.")
      .def_readonly("engines", &ProcessSample::engines)
      .def("__repr__", [](const ProcessSample& p) {
        return "<gpustream.Process " + std::to_string(p.pid) + " '" + p.name + "'>";
      });

  py::class_<HostProcess>(m, "HostProcess")
      .def_readonly("pid", &HostProcess::pid)
      .def_readonly("name", &HostProcess::name)
      .def_readonly("rss_bytes", &HostProcess::rss_bytes);

  py::class_<HostSample>(m, "Host", "Host memory, swap and watched processes.")
      .def_readonly("memory_total_bytes", &HostSample::memory_total_bytes)
      .def_readonly("memory_available_bytes", &HostSample::memory_available_bytes)
      .def_readonly("memory_used_bytes", &HostSample::memory_used_bytes)
      .def_readonly("swap_total_bytes", &HostSample::swap_total_bytes)
      .def_readonly("swap_used_bytes", &HostSample::swap_used_bytes)
      .def_readonly("processes", &HostSample::processes)
      .def_readonly("metrics", &HostSample::metrics);

  py::class_<SampleError>(m, "SampleError")
      .def_readonly("code", &SampleError::code)
      .def_readonly("message", &SampleError::message)
      .def_readonly("device", &SampleError::device)
      .def("__repr__", [](const SampleError& e) {
        return "<gpustream.SampleError " + e.code + ": " + e.message + ">";
      });

  py::class_<MigIdentity>(m, "MigInstance", "The identity of a MIG instance (Device.mig).")
      .def_readonly("gpu_instance_id", &MigIdentity::gpu_instance_id)
      .def_readonly("compute_instance_id", &MigIdentity::compute_instance_id)
      .def_readonly("profile", &MigIdentity::profile, "e.g. \"1g.5gb\"")
      .def("__repr__", [](const MigIdentity& g) {
        return "<gpustream.MigInstance " + g.profile + " gi " + std::to_string(g.gpu_instance_id) +
               " ci " + std::to_string(g.compute_instance_id) + ">";
      });

  py::class_<PyDevice>(m, "Device", "What one probe saw of one device.")
      .def_property_readonly("id", [](const PyDevice& d) { return d.d->id; })
      .def_property_readonly("vendor",
                             [](const PyDevice& d) { return name_of(to_string(d.d->vendor)); })
      .def_property_readonly("index", [](const PyDevice& d) { return d.d->index; })
      .def_property_readonly("name", [](const PyDevice& d) { return d.d->name; })
      .def_property_readonly("pci_bus_id", [](const PyDevice& d) { return d.d->pci_bus_id; })
      .def_property_readonly(
          "parent",
          [](const PyDevice& d) -> py::object {
            if (d.d->parent.empty()) return py::none();
            return py::str(d.d->parent);
          },
          "For a partition (a MIG instance): the id of its physical device, in the same "
          "snapshot. None for a physical device.")
      .def_property_readonly(
          "mig",
          [](const PyDevice& d) -> py::object {
            if (!d.d->mig) return py::none();
            return py::cast(*d.d->mig);
          },
          "A MigInstance (gpu_instance_id, compute_instance_id, profile) for a MIG instance; "
          "None when the device is not one.")
      .def_property_readonly(
          "partitioned", [](const PyDevice& d) { return d.d->partitioned; },
          "True for a physical device in MIG mode: work goes to its instances (the devices "
          "whose parent it is); its own metrics stay device-wide.")
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
      .def_property_readonly("energy_kind",
                             [](const PyDevice& d) { return opt_name(d.d->energy_kind); })
      .def_property_readonly("power_kind",
                             [](const PyDevice& d) { return opt_name(d.d->power_kind); })
      .def_property_readonly("power_state",
                             [](const PyDevice& d) { return name_of(to_string(d.d->power_state)); })
      .def_property_readonly("throttle_reasons",
                             [](const PyDevice& d) { return d.d->throttle_reasons; })
      .def_property_readonly("engines", [](const PyDevice& d) { return d.d->engines; })
      .def_property_readonly("processes", [](const PyDevice& d) { return d.d->processes; })
      .def_property_readonly("processes_absent",
                             [](const PyDevice& d) { return opt_name(d.d->processes_absent); })
      .def_property_readonly("attributes", [](const PyDevice& d) { return d.d->attributes; })
      .def("to_dict", [](const PyDevice& d) { return json_to_python(to_json(*d.d)); })
      .def("__repr__", [](const PyDevice& d) { return device_repr(*d.d); });

  py::class_<PySnapshot>(m, "Snapshot", "What one probe saw at one moment (immutable).")
      .def_property_readonly("probe", [](const PySnapshot& s) { return s.s->probe; })
      .def_property_readonly("sequence", [](const PySnapshot& s) { return s.s->sequence; })
      .def_property_readonly("time_unix_ns", [](const PySnapshot& s) { return s.s->time_unix_ns; })
      .def_property_readonly(
          "time", [](const PySnapshot& s) { return static_cast<double>(s.s->time_unix_ns) / 1e9; },
          "Wall-clock time in seconds since the Unix epoch (as time.time()).")
      .def_property_readonly("monotonic_ns", [](const PySnapshot& s) { return s.s->monotonic_ns; })
      .def_property_readonly("sample_duration_ns",
                             [](const PySnapshot& s) { return s.s->sample_duration_ns; })
      .def_property_readonly("devices",
                             [](const PySnapshot& s) {
                               py::list out;
                               for (const auto& d : s.s->devices) out.append(PyDevice{s.s, &d});
                               return out;
                             })
      .def_property_readonly("host", [](const PySnapshot& s) { return s.s->host; })
      .def_property_readonly("errors", [](const PySnapshot& s) { return s.s->errors; })
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
