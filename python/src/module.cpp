// PYBIND11_MODULE(_gpustream): the compiled half of the gpustream Python package.
//
// Signatures: pybind11's own ("name(self: T, ...) -> R", the first lines of every docstring) are
// turned off; each docstring starts with its text signature instead ("name(self, a=None)", a line
// "--" and a blank line), the form CPython reads into __text_signature__, so that
// inspect.signature() works on every function and method. The types are in the stubs
// (python/gpustream/_gpustream.pyi); tests/python/test_typing.py checks that both agree.
#include "common.hpp"
#include "gpustream/config.hpp"
#include "gpustream/json.hpp"
#include "gpustream/model.hpp"

PYBIND11_MODULE(_gpustream, m) {
  namespace gp = gpustream::python;
  pybind11::options options;
  options.disable_function_signatures();
  m.doc() = "gpustream's compiled core; import gpustream instead.";
  pybind11::register_exception<gpustream::ConfigError>(m, "ConfigError", PyExc_ValueError).doc() =
      "A bad configuration (a ValueError): unknown probe, interval <= 0, simulate out of "
      "range, unknown config key, a bad probe section, a missing config file.";
  pybind11::register_exception<gpustream::JsonError>(m, "JsonError", PyExc_ValueError).doc() =
      "A malformed gpustream/1 document (a ValueError); the message says where.";
  gp::bind_snapshot(m);
  gp::bind_delivery(m);
  gp::bind_events(m);
  gp::bind_summary(m);
  gp::bind_telemetry(m);
  gp::bind_remote(m);
  gp::bind_bench(m);
  gp::bind_logging(m);
  m.def(
      "_stop_all",
      [] {
        gp::stop_all_live();
        gp::stop_log_handler();
      },
      "_stop_all()\n--\n\nStops every live Telemetry and connection and the log handler's "
      "thread (the atexit hook).");
}
