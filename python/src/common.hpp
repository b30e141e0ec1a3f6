// Shared pieces of the Python module: conversions, and the machinery that delivers snapshots to
// Python (a Hub of subscriptions and streams over one SnapshotChannel).
//
// GIL rules (docs/python.md, "Threads and the GIL"): every call that can block releases the GIL;
// Python objects (callbacks) are only touched with the GIL held; C++ state shared with the
// module's own threads never holds a Python object.
#pragma once

#include <pybind11/pybind11.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <boost/json/value.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/model.hpp"

namespace gpustream::python {

namespace py = pybind11;

/// A name (an enum's to_string, a key) as a Python str.
inline py::str name_of(std::string_view s) { return py::str(s.data(), s.size()); }

/// An optional enum as its name, or None.
template <typename E>
py::object opt_name(const std::optional<E>& e) {
  if (!e) return py::none();
  return name_of(to_string(*e));
}

/// A boost::json::value (the SDK's encoder output) as plain Python objects (dict keeps the
/// encoder's key order).
py::object json_to_python(const boost::json::value& v);

/// A snapshot as Python sees it: the shared immutable object, never copied.
struct PySnapshot {
  SnapshotPtr s;
};
/// One device of a snapshot (keeps the snapshot alive).
struct PyDevice {
  SnapshotPtr s;
  const DeviceSample* d = nullptr;
};

/// Runs f() without the GIL, for waits that a Python daemon thread may be in when the interpreter
/// exits. Unlike py::gil_scoped_release, the GIL is taken back outside any destructor: at
/// interpreter exit CPython ends a daemon thread that asks for the GIL (pthread_exit, a forced
/// unwind), which must not pass through a noexcept destructor (std::terminate).
template <typename F>
auto without_gil(F&& f) -> decltype(f()) {
  using R = decltype(f());
  PyThreadState* state = PyEval_SaveThread();
  std::exception_ptr error;
  std::optional<std::conditional_t<std::is_void_v<R>, int, R>> result;
  try {
    if constexpr (std::is_void_v<R>)
      f();
    else
      result.emplace(f());
  } catch (...) {
    error = std::current_exception();
  }
  PyEval_RestoreThread(state);  // outside any handler and destructor (see above)
  if (error) std::rethrow_exception(error);
  if constexpr (!std::is_void_v<R>) return std::move(*result);
}

/// A stream's __next__: waits on `queue` (a SnapshotQueue or an EventQueue) without the GIL, in
/// slices of 100 ms so that Ctrl-C reaches the waiting thread, until `take` turns a popped item
/// into a result (it returns an empty optional to skip one). StopIteration when the queue is
/// closed or `timeout` seconds (none: no limit) have passed.
template <typename Queue, typename Take>
auto next_from_queue(Queue& queue, std::optional<double> timeout, Take take) ->
    typename decltype(take(queue.pop_for({})))::value_type {
  using clock = std::chrono::steady_clock;
  constexpr auto kWaitSlice = std::chrono::milliseconds{100};
  const bool bounded = timeout.has_value();
  const auto deadline = clock::now() + (bounded ? std::chrono::duration_cast<clock::duration>(
                                                      std::chrono::duration<double>(*timeout))
                                                : clock::duration::zero());
  for (;;) {
    auto item = without_gil([&] {
      auto slice = clock::duration(kWaitSlice);
      if (bounded)
        slice = std::min(slice, std::max(clock::duration::zero(), deadline - clock::now()));
      return queue.pop_for(slice);
    });
    if (item) {
      if (auto result = take(std::move(item))) return std::move(*result);
      continue;
    }
    if (queue.closed()) throw py::stop_iteration();
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C while waiting
    if (bounded && clock::now() >= deadline) throw py::stop_iteration();
  }
}

/// Arguments checked by hand, so that a wrong type is a TypeError naming the argument and what it
/// takes ("interval must be a number of seconds, not str 'fast'"), never pybind11's
/// "Unable to cast Python instance" RuntimeError. A bool is not taken for a number.
/// A float or an int (not a bool).
double number_arg(const py::object& o, const char* what, const char* expected);
/// An int (not a bool, not a float).
long long int_arg(const py::object& o, const char* what, const char* expected);
/// A str.
std::string str_arg(const py::object& o, const char* what);
/// timeout=: None (no limit) or a number of seconds >= 0 (ValueError below 0).
std::optional<double> timeout_arg(const py::object& o, const char* what = "timeout");
/// "str 'fast'": the type and repr of a refused argument, for the messages above.
std::string describe_arg(const py::object& o);

/// probes/devices arguments: None, "a,b" or a list of strings.
std::vector<std::string> string_list(const py::object& o, const char* what);
/// A SubscriptionFilter from the probes/devices arguments.
SubscriptionFilter make_filter(const py::object& probes, const py::object& devices);
/// SubscribeOptions from policy/capacity/filter; ValueError naming the allowed values.
SubscribeOptions make_options(const py::object& policy, const py::object& capacity,
                              SubscriptionFilter filter);

/// Something a Hub closes when it stops: a subscription or a stream. close_nogil() is called
/// without the GIL (it may join a thread that waits for the GIL) and never touches Python
/// objects.
class Closable {
 public:
  virtual ~Closable() = default;
  virtual void close_nogil() = 0;
};

/// The channel side of a Telemetry or a remote connection: where subscriptions and streams come
/// from, and what closes them all at stop(). Thread-safe.
class Hub {
 public:
  virtual ~Hub() = default;
  virtual SnapshotChannel& channel() = 0;
  /// Stops the hub (sampling or the connection) and closes what it tracks. GIL held.
  virtual void shutdown() = 0;
  /// Raises RuntimeError when the hub is stopped (nothing will be published any more).
  void ensure_open(const char* what) const;
  void track(const std::shared_ptr<Closable>& c);
  /// Closes every live subscription and stream. Call with the GIL held; it releases the GIL
  /// while closing (joining delivery threads).
  void close_all();
  bool closed() const;

 protected:
  void mark_closed();

 private:
  mutable std::mutex mu_;
  bool closed_ = false;
  std::vector<std::weak_ptr<Closable>> items_;
};

/// The hubs alive in this process: the atexit hook stops them all before the interpreter
/// finalizes (so no module thread waits for a GIL that will never come back).
void register_live(const std::shared_ptr<Hub>& hub);
void stop_all_live();

void bind_snapshot(py::module_& m);
void bind_delivery(py::module_& m);
void bind_events(py::module_& m);
void bind_telemetry(py::module_& m);
void bind_remote(py::module_& m);
void bind_bench(py::module_& m);
void bind_summary(py::module_& m);
void bind_logging(py::module_& m);
/// Stops the log handler's thread (lines go to stderr again); the atexit hook. GIL held.
void stop_log_handler();

}  // namespace gpustream::python
