// The planner's keyword arguments, shared by Telemetry and RemoteClient (fits, best_device,
// fit_plan): exclude= (device ids) and fatal_event_window= (seconds; None: the default).
#pragma once

#include <chrono>
#include <cmath>
#include <string>

#include "common.hpp"
#include "gpustream/planner.hpp"

namespace gpustream::python {

/// FitOptions from Python arguments; TypeError / ValueError naming the argument.
inline FitOptions fit_options_of(const py::object& exclude, const py::object& window) {
  FitOptions o;
  if (!exclude.is_none()) {
    if (py::isinstance<py::str>(exclude))
      throw py::type_error("exclude: expected a list of device ids, not one string");
    for (const auto& id : py::iter(exclude)) {
      if (!py::isinstance<py::str>(id)) throw py::type_error("exclude: device ids are strings");
      o.exclude.push_back(id.cast<std::string>());
    }
  }
  if (!window.is_none()) {
    if (py::isinstance<py::bool_>(window) ||
        !(py::isinstance<py::int_>(window) || py::isinstance<py::float_>(window)))
      throw py::type_error("fatal_event_window: expected seconds (a number) or None");
    const double s = window.cast<double>();
    if (!std::isfinite(s) || s < 0 || s > static_cast<double>(kMaxFatalEventWindow.count()))
      throw py::value_error("fatal_event_window: must be from 0 to " +
                            std::to_string(kMaxFatalEventWindow.count()) + " seconds");
    o.fatal_event_window = std::chrono::seconds{static_cast<std::int64_t>(s)};
  }
  return o;
}

}  // namespace gpustream::python
