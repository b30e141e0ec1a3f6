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
  if (!interval.is_none())
    c.interval =
        seconds_arg(number_arg(interval, "interval", "None or a number of seconds"), "interval");
  if (py::isinstance<py::bool_>(simulate)) {
    c.simulate = simulate.cast<bool>() ? 2 : 0;
  } else if (!simulate.is_none()) {
    const auto n =
        int_arg(simulate, "simulate",
                ("True, False, None or an int 0.." + std::to_string(kMaxSimulatedGpus)).c_str());
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
    {
      py::gil_scoped_release release;
      telemetry_->start();
    }
    started_ = true;
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
      if (auto s = channel().latest(str_arg(probe, "probe"))) out.push_back({std::move(s)});
      return out;
    }
    for (auto& s : channel().latest()) out.push_back({std::move(s)});
    return out;
  }

  std::vector<PySnapshot> wait_for_first_samples(const py::object& timeout_arg) {
    const double timeout = number_arg(timeout_arg, "timeout", "a number of seconds");
    if (!(timeout >= 0)) throw py::value_error("timeout must be a number of seconds >= 0");
    auto got = without_gil([&] {
      return telemetry_->wait_for_first_samples(
          std::chrono::milliseconds{std::llround(timeout * 1000.0)});
    });
    std::vector<PySnapshot> out;
    for (auto& s : got) out.push_back({std::move(s)});
    return out;
  }

  void begin_window(const py::object& name_arg, const py::object& probes,
                    const py::object& devices) {
    const auto name = str_arg(name_arg, "name");
    auto filter = make_filter(probes, devices);
    ensure_open("window");
    // A Telemetry that never sampled has no edges to take: the window would be empty.
    if (!started_)
      throw std::runtime_error("window '" + name +
                               "': this Telemetry was never started (use `with "
                               "gpustream.Telemetry(...) as t:` or call t.start() first)");
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
  FitPlan fit_plan(const py::object& bytes, const py::object& exclude, const py::object& window) {
    return telemetry_->fits(bytes_arg(bytes), fit_options_of(exclude, window));
  }
  std::vector<DeviceFit> fits(const py::object& bytes, const py::object& exclude,
                              const py::object& window) {
    return fit_plan(bytes, exclude, window).fits;
  }
  std::optional<DeviceFit> best_device(const py::object& bytes, const py::object& exclude,
                                       const py::object& window) {
    return fit_plan(bytes, exclude, window).best();
  }
  /// {probe: seconds} each probe samples at: the requested interval (or the probe's own from
  /// probe_intervals_seconds) raised to the probe's minimum; {} before start().
  py::dict effective_intervals() const {
    py::dict out;
    for (const auto& st : telemetry_->stats())
      out[py::str(st.probe)] = static_cast<double>(st.interval.count()) / 1000.0;
    return out;
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
  static std::uint64_t bytes_arg(const py::object& bytes) {
    const auto n = int_arg(bytes, "bytes", "an int (bytes)");
    if (n < 0) throw py::value_error("bytes must be >= 0 (got " + std::to_string(n) + ")");
    return static_cast<std::uint64_t>(n);
  }

  std::unique_ptr<Telemetry> telemetry_;
  bool started_ = false;   // start() succeeded once (GIL held when read or written)
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
           py::arg("simulate") = py::none(), py::arg("config") = py::none(),
           "__init__(self, probes=None, interval=None, simulate=None, config=None)\n--\n\n"
           "Builds (does not start) a Telemetry: `probes` (None: the registry's default, a list "
           "or \"a,b\"), `interval` (seconds), `simulate` (True, False or 0..64 simulated GPUs), "
           "`config` (a dict in the form of a config file, or a path to one). ConfigError for a "
           "bad value, TypeError for a wrong type.")
      .def("start", &PyTelemetry::start,
           "start(self)\n--\n\nBuilds the probes and starts sampling (idempotent; a stopped "
           "Telemetry does not start again).")
      .def("stop", &PyTelemetry::stop,
           "stop(self)\n--\n\nStops sampling and closes every subscription and stream "
           "(idempotent). latest() keeps the last snapshots.")
      .def(
          "__enter__",
          [](const std::shared_ptr<PyTelemetry>& t) {
            t->start();
            return t;
          },
          "__enter__(self)\n--\n\nstart(), and returns the Telemetry.")
      .def(
          "__exit__",
          [](PyTelemetry& t, const py::args&) {
            t.stop();
            return false;
          },
          "__exit__(self, *args)\n--\n\nstop().")
      .def_property_readonly("stopped", &PyTelemetry::closed, "True once stop() was called.")
      .def("latest", &PyTelemetry::latest, py::arg("probe") = py::none(),
           "latest(self, probe=None)\n--\n\nThe newest snapshot of each probe (or a list with "
           "`probe`'s, or []). Kept after stop().")
      .def("wait_for_first_samples", &PyTelemetry::wait_for_first_samples, py::arg("timeout") = 5.0,
           "wait_for_first_samples(self, timeout=5.0)\n--\n\nWaits at most `timeout` seconds "
           "until every probe has published once or is unavailable; returns latest().")
      .def(
          "subscribe",
          [](PyTelemetry& t, const py::object& callback, const py::object& policy,
             const py::object& probes, const py::object& devices, const py::object& capacity,
             const py::object& on_gap) {
            return subscribe_on(t, callback, policy, probes, devices, capacity, on_gap);
          },
          GPUSTREAM_PY_SUBSCRIBE_ARGS, kSubscribeDoc)
      .def(
          "stream",
          [](PyTelemetry& t, const py::object& probes, const py::object& devices,
             const py::object& timeout, const py::object& policy, const py::object& capacity) {
            return stream_on(t, probes, devices, timeout, policy, capacity);
          },
          GPUSTREAM_PY_STREAM_ARGS, kStreamDoc)
      .def(
          "events",
          [](PyTelemetry& t, const py::object& probes, const py::object& devices,
             const py::object& timeout) { return events_on(t, probes, devices, timeout); },
          GPUSTREAM_PY_EVENTS_ARGS, kEventsDoc)
      .def(
          "recent_events", [](PyTelemetry& t) { return recent_events_on(t); }, kRecentEventsDoc)
      .def("_begin_window", &PyTelemetry::begin_window, py::arg("name"),
           py::arg("probes") = py::none(), py::arg("devices") = py::none(),
           "_begin_window(self, name, probes=None, devices=None)\n--\n\nOpens window `name` "
           "(gpustream.Window's __enter__).")
      .def("_end_window", &PyTelemetry::end_window, py::arg("name"),
           "_end_window(self, name)\n--\n\nCloses window `name` and returns its WindowSummary "
           "(gpustream.Window's __exit__).")
      .def("_bench_windows", &PyTelemetry::bench_windows, py::arg("n"),
           "_bench_windows(self, n)\n--\n\nbench/python_bench.py's baseline: `n` windows "
           "opened and closed from C++; seconds in all.")
      .def("my_process", &PyTelemetry::my_process,
           "my_process(self)\n--\n\nThis process's host RSS and its GPU memory on every "
           "device (MyProcess).")
      .def("fits", &PyTelemetry::fits, py::arg("bytes"), py::kw_only(),
           py::arg("exclude") = py::none(), py::arg("fatal_event_window") = py::none(),
           "fits(self, bytes, *, exclude=None, fatal_event_window=None)\n--\n\n"
           "Every device (DeviceFit) with at least `bytes` free, most free first. "
           "exclude: device ids to leave out; fatal_event_window: seconds (None: 3600; 0: no "
           "health rule) — a device with a fatal event (Xid 79, 48, 94, 95, ..., an uncorrected "
           "ECC error) that recently is left out.")
      .def("best_device", &PyTelemetry::best_device, py::arg("bytes"), py::kw_only(),
           py::arg("exclude") = py::none(), py::arg("fatal_event_window") = py::none(),
           "best_device(self, bytes, *, exclude=None, fatal_event_window=None)\n--\n\n"
           "The device (DeviceFit) with the most free memory if `bytes` fit there, else None "
           "(as fits()).")
      .def("fit_plan", &PyTelemetry::fit_plan, py::arg("bytes"), py::kw_only(),
           py::arg("exclude") = py::none(), py::arg("fatal_event_window") = py::none(),
           "fit_plan(self, bytes, *, exclude=None, fatal_event_window=None)\n--\n\n"
           "fits() with what was left out and why: a FitPlan (.fits, .excluded).")
      .def(
          "stats",
          [](PyTelemetry& t) {
            py::list out;
            for (const auto& st : t.sdk().stats()) out.append(json_to_python(to_json(st)));
            return out;
          },
          "stats(self)\n--\n\nPer-probe statistics (samples, failures, latency percentiles...) "
          "as dicts, in the SDK's JSON form.")
      .def_property_readonly(
          "probe_names", [](PyTelemetry& t) { return t.sdk().probe_names(); },
          "The probes built (after start()).")
      .def_property_readonly(
          "setup_errors", [](PyTelemetry& t) { return t.sdk().setup_errors(); },
          "What the no-GPU fallback could not build, one line each.")
      .def_property_readonly(
          "interval",
          [](PyTelemetry& t) {
            return static_cast<double>(t.sdk().config().interval.count()) / 1000.0;
          },
          "The requested interval in seconds (the interval argument or the config's "
          "interval_seconds). Each probe samples at least its own minimum apart: see "
          "effective_intervals.")
      .def_property_readonly(
          "effective_intervals", &PyTelemetry::effective_intervals,
          "{probe: seconds} each probe really samples at: the requested interval (or the "
          "probe's probe_intervals_seconds) raised to the probe's minimum interval; {} before "
          "start().");

  m.def(
      "known_probes",
      [] {
        std::vector<std::string> out;
        for (auto n : known_probe_names()) out.emplace_back(n);
        return out;
      },
      "known_probes()\n--\n\nThe names of the probes this build has, in the registry's order.");
}

}  // namespace gpustream::python
