// gpustream.Telemetry: the SDK's Telemetry built from the probe registry, with Python's idiom
// (keyword arguments, a context manager, iterators, exceptions).
#include <pybind11/stl.h>

#include <cmath>

#include "delivery.hpp"
#include "event_stream.hpp"
#include "gpustream/config.hpp"
#include "gpustream/config_json.hpp"
#include "gpustream/json.hpp"
#include "gpustream/probe_stats.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/telemetry.hpp"
#include "planner_args.hpp"
#include "window_adapter.hpp"

namespace gpustream::python {

namespace {

std::chrono::milliseconds seconds_arg(double s, const char* what) {
  if (!std::isfinite(s) || s <= 0)
    throw ConfigError(std::string(what) + " must be a positive number of seconds (got " +
                      py::repr(py::float_(s)).cast<std::string>() + ")");
  const auto ms = std::llround(s * 1000.0);
  if (ms < 1)
    throw ConfigError(std::string(what) + " must be at least 0.001 seconds (got " +
                      py::repr(py::float_(s)).cast<std::string>() + ")");
  return std::chrono::milliseconds{ms};
}

/// config=: None, a dict (a config document, docs/configuration.md) or a path to a JSON file.
Config base_config(const py::object& config) {
  if (config.is_none()) return {};
  if (py::isinstance<py::dict>(config)) {
    const auto text = py::module_::import("json").attr("dumps")(config).cast<std::string>();
    boost::json::value v;
    try {
      v = parse_json(text);
    } catch (const JsonError& e) {
      throw ConfigError(std::string("config: ") + e.what());
    }
    return config_from_json(v, {}, config_sections());
  }
  const auto os = py::module_::import("os");
  if (py::isinstance<py::str>(config) || py::isinstance(config, os.attr("PathLike")))
    return load_config(os.attr("fspath")(config).cast<std::string>(), {}, config_sections());
  throw py::type_error("config must be None, a dict or a path to a JSON file");
}

Config make_config(const py::object& probes, const py::object& interval, const py::object& simulate,
                   const py::object& config) {
  Config c = base_config(config);
  if (!probes.is_none()) {
    c.probes = string_list(probes, "probes");
    for (const auto& name : c.probes)
      if (!is_known_probe(name))
        throw ConfigError("probes: unknown probe '" + name + "' (known: " + known_probe_list() +
                          ")");
  }
  if (!interval.is_none()) c.interval = seconds_arg(interval.cast<double>(), "interval");
  if (py::isinstance<py::bool_>(simulate)) {
    c.simulate = simulate.cast<bool>() ? 2 : 0;
  } else if (!simulate.is_none()) {
    const auto n = simulate.cast<long long>();
    if (n < 0 || n > kMaxSimulatedGpus)
      throw ConfigError("simulate must be True, False or 0.." + std::to_string(kMaxSimulatedGpus) +
                        " (got " + std::to_string(n) + ")");
    c.simulate = static_cast<int>(n);
  }
  return c;
}

}  // namespace

class PyTelemetry : public Hub, public std::enable_shared_from_this<PyTelemetry> {
 public:
  explicit PyTelemetry(Config config)
      : telemetry_(std::make_unique<Telemetry>(std::move(config), probe_factory())) {}

  ~PyTelemetry() override {
    // GIL held (deallocation); after the atexit hook everything is already stopped.
    stop();
  }

  SnapshotChannel& channel() override { return telemetry_->channel(); }
  void shutdown() override { stop(); }

  void start() {
    ensure_open("start");
    py::gil_scoped_release release;
    telemetry_->start();
  }

  void stop() {
    if (!closed()) {
      mark_closed();
      {
        py::gil_scoped_release release;
        telemetry_->stop();
      }
    }
    close_all();
  }

  std::vector<PySnapshot> latest(const py::object& probe) {
    std::vector<PySnapshot> out;
    if (!probe.is_none()) {
      if (auto s = channel().latest(probe.cast<std::string>())) out.push_back({std::move(s)});
      return out;
    }
    for (auto& s : channel().latest()) out.push_back({std::move(s)});
    return out;
  }

  std::vector<PySnapshot> wait_for_first_samples(double timeout) {
    if (!(timeout >= 0)) throw py::value_error("timeout must be a number of seconds >= 0");
    auto got = without_gil([&] {
      return telemetry_->wait_for_first_samples(
          std::chrono::milliseconds{std::llround(timeout * 1000.0)});
    });
    std::vector<PySnapshot> out;
    for (auto& s : got) out.push_back({std::move(s)});
    return out;
  }

  void begin_window(const std::string& name, const py::object& probes, const py::object& devices) {
    auto filter = make_filter(probes, devices);
    ensure_open("window");
    py::gil_scoped_release release;
    windows_.begin_window(*telemetry_, name, std::move(filter));
  }

  WindowSummary end_window(const std::string& name) {
    py::gil_scoped_release release;
    return windows_.end_window(*telemetry_, name);
  }

  MyProcessUsage my_process() {
    py::gil_scoped_release release;
    return telemetry_->my_process();
  }
  FitPlan fit_plan(long long bytes, const py::object& exclude, const py::object& window) {
    if (bytes < 0) throw py::value_error("bytes must be >= 0");
    return telemetry_->fits(static_cast<std::uint64_t>(bytes), fit_options_of(exclude, window));
  }
  std::vector<DeviceFit> fits(long long bytes, const py::object& exclude,
                              const py::object& window) {
    return fit_plan(bytes, exclude, window).fits;
  }
  std::optional<DeviceFit> best_device(long long bytes, const py::object& exclude,
                                       const py::object& window) {
    return fit_plan(bytes, exclude, window).best();
  }
  /// bench/python_bench.py's baseline: n windows opened and closed from C++ (no Python in
  /// between), seconds in all.
  double bench_windows(std::size_t n) {
    py::gil_scoped_release release;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      windows_.begin_window(*telemetry_, "bench", {});
      windows_.end_window(*telemetry_, "bench");
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  Telemetry& sdk() { return *telemetry_; }

 private:
  std::unique_ptr<Telemetry> telemetry_;
  WindowAdapter windows_;  // after telemetry_: destroyed first (its windows use the channel)
};

void bind_telemetry(py::module_& m) {
  py::class_<PyTelemetry, std::shared_ptr<PyTelemetry>>(
      m, "Telemetry",
      "GPU telemetry of this machine (the SDK's Telemetry with the probe registry). A context "
      "manager: `with gpustream.Telemetry(simulate=2) as t:` starts it and stops it.")
      .def(py::init([](const py::object& probes, const py::object& interval,
                       const py::object& simulate, const py::object& config) {
             auto t =
                 std::make_shared<PyTelemetry>(make_config(probes, interval, simulate, config));
             register_live(t);
             return t;
           }),
           py::arg("probes") = py::none(), py::arg("interval") = py::none(),
           py::arg("simulate") = py::none(), py::arg("config") = py::none())
      .def("start", &PyTelemetry::start, "Builds the probes and starts sampling (idempotent).")
      .def("stop", &PyTelemetry::stop,
           "Stops sampling and closes every subscription and stream (idempotent).")
      .def("__enter__",
           [](const std::shared_ptr<PyTelemetry>& t) {
             t->start();
             return t;
           })
      .def("__exit__",
           [](PyTelemetry& t, const py::args&) {
             t.stop();
             return false;
           })
      .def_property_readonly("stopped", &PyTelemetry::closed)
      .def("latest", &PyTelemetry::latest, py::arg("probe") = py::none(),
           "The newest snapshot of each probe (or of `probe`).")
      .def("wait_for_first_samples", &PyTelemetry::wait_for_first_samples, py::arg("timeout") = 5.0,
           "Waits until every probe has published once or is unavailable; returns latest().")
      .def(
          "subscribe",
          [](PyTelemetry& t, const py::object& callback, const std::string& policy,
             const py::object& probes, const py::object& devices, long long capacity,
             const py::object& on_gap) {
            return subscribe_on(t, callback, policy, probes, devices, capacity, on_gap);
          },
          GPUSTREAM_PY_SUBSCRIBE_ARGS)
      .def(
          "stream",
          [](PyTelemetry& t, const py::object& probes, const py::object& devices,
             const py::object& timeout, const std::string& policy, long long capacity) {
            return stream_on(t, probes, devices, timeout, policy, capacity);
          },
          GPUSTREAM_PY_STREAM_ARGS)
      .def(
          "events",
          [](PyTelemetry& t, const py::object& probes, const py::object& devices,
             const py::object& timeout) { return events_on(t, probes, devices, timeout); },
          GPUSTREAM_PY_EVENTS_ARGS, kEventsDoc)
      .def(
          "recent_events", [](PyTelemetry& t) { return recent_events_on(t); }, kRecentEventsDoc)
      .def("_begin_window", &PyTelemetry::begin_window, py::arg("name"),
           py::arg("probes") = py::none(), py::arg("devices") = py::none())
      .def("_end_window", &PyTelemetry::end_window, py::arg("name"))
      .def("_bench_windows", &PyTelemetry::bench_windows, py::arg("n"))
      .def("my_process", &PyTelemetry::my_process,
           "This process's host RSS and its GPU memory on every device.")
      .def("fits", &PyTelemetry::fits, py::arg("bytes"), py::kw_only(),
           py::arg("exclude") = py::none(), py::arg("fatal_event_window") = py::none(),
           "Every device with at least `bytes` free, most free first (DeviceFit list). "
           "exclude: device ids to leave out; fatal_event_window: seconds (None: 3600; 0: no "
           "health rule) — a device with a fatal event (Xid 79, 48, 94, 95, ..., an uncorrected "
           "ECC error) that recently is left out.")
      .def("best_device", &PyTelemetry::best_device, py::arg("bytes"), py::kw_only(),
           py::arg("exclude") = py::none(), py::arg("fatal_event_window") = py::none(),
           "The device with the most free memory if `bytes` fit there, else None (as fits()).")
      .def("fit_plan", &PyTelemetry::fit_plan, py::arg("bytes"), py::kw_only(),
           py::arg("exclude") = py::none(), py::arg("fatal_event_window") = py::none(),
           "fits() with what was left out and why: a FitPlan (.fits, .excluded).")
      .def(
          "stats",
          [](PyTelemetry& t) {
            py::list out;
            for (const auto& st : t.sdk().stats()) out.append(json_to_python(to_json(st)));
            return out;
          },
          "Per-probe statistics (samples, failures, latency percentiles...) as dicts, in the "
          "SDK's JSON form.")
      .def_property_readonly("probe_names", [](PyTelemetry& t) { return t.sdk().probe_names(); })
      .def_property_readonly("setup_errors", [](PyTelemetry& t) { return t.sdk().setup_errors(); })
      .def_property_readonly("interval", [](PyTelemetry& t) {
        return static_cast<double>(t.sdk().config().interval.count()) / 1000.0;
      });

  m.def("known_probes", [] {
    std::vector<std::string> out;
    for (auto n : known_probe_names()) out.emplace_back(n);
    return out;
  });
}

}  // namespace gpustream::python
