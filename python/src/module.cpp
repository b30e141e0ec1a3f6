// PYBIND11_MODULE(_gpustream): the compiled half of the gpustream Python package.
#include "common.hpp"
#include "gpustream/config.hpp"
#include "gpustream/json.hpp"
#include "gpustream/model.hpp"

PYBIND11_MODULE(_gpustream, m) {
  namespace gp = gpustream::python;
  m.doc() = "gpustream's compiled core; import gpustream instead.";
  pybind11::register_exception<gpustream::ConfigError>(m, "ConfigError", PyExc_ValueError);
  pybind11::register_exception<gpustream::JsonError>(m, "JsonError", PyExc_ValueError);
  pybind11::register_exception<gpustream::BadReadingAccess>(m, "AbsentMetricError",
                                                            PyExc_LookupError);
  gp::bind_snapshot(m);
  gp::bind_delivery(m);
  gp::bind_events(m);
  gp::bind_summary(m);
  gp::bind_telemetry(m);
  gp::bind_remote(m);
  gp::bind_bench(m);
  m.def("_stop_all", &gp::stop_all_live,
        "Stops every live Telemetry and connection (the atexit hook).");
}
