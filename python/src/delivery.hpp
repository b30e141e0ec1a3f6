// Subscription and Stream: how snapshots reach Python (see delivery.cpp).
#pragma once

#include <atomic>
#include <thread>

#include "common.hpp"

namespace gpustream::python {

/// A callback subscription with its own delivery thread. Thread-safe; the Python callbacks are
/// touched with the GIL held only.
class PySubscription : public Closable {
 public:
  PySubscription(std::shared_ptr<SnapshotQueue> queue, py::function callback, py::object on_gap);
  ~PySubscription() override;
  PySubscription(const PySubscription&) = delete;
  PySubscription& operator=(const PySubscription&) = delete;

  /// GIL held. From inside its own callback it only closes (the thread ends after it).
  void close();
  void close_nogil() override;
  bool active() const;
  std::uint64_t dropped() const;
  std::uint64_t lost() const;
  std::uint64_t delivered() const;
  std::uint64_t gaps() const;
  std::uint64_t errors() const;

 private:
  struct Shared;
  static void run(const std::shared_ptr<Shared>& shared);
  static void deliver(Shared& shared, QueueItem& item);

  std::shared_ptr<Shared> shared_;
  py::object callback_;
  py::object on_gap_;
  std::mutex join_mu_;
  std::thread thread_;
};

/// The iterator form: next() waits without the GIL, checking for signals every 100 ms.
class PyStream : public Closable {
 public:
  PyStream(std::shared_ptr<SnapshotQueue> queue, std::optional<double> timeout);
  ~PyStream() override;
  void close_nogil() override;
  PySnapshot next();
  const std::vector<Gap>& gaps() const { return gaps_; }
  const SnapshotQueue& queue() const { return *queue_; }

 private:
  std::shared_ptr<SnapshotQueue> queue_;
  std::optional<double> timeout_;
  std::vector<Gap> gaps_;
};

}  // namespace gpustream::python

namespace gpustream::python {

/// hub.subscribe(...) and hub.stream(...) as the bindings expose them (GIL held).
std::shared_ptr<PySubscription> subscribe_on(Hub& hub, const py::object& callback,
                                             const py::object& policy, const py::object& probes,
                                             const py::object& devices, const py::object& capacity,
                                             const py::object& on_gap);
std::shared_ptr<PyStream> stream_on(Hub& hub, const py::object& probes, const py::object& devices,
                                    const py::object& timeout, const py::object& policy,
                                    const py::object& capacity);
/// The keyword arguments both take, for the bindings, and their text signatures (the first line
/// of a docstring, which inspect.signature() reads; python/gpustream/_gpustream.pyi has the
/// types).
#define GPUSTREAM_PY_SUBSCRIBE_ARGS                                                       \
  py::arg("callback"), py::arg("policy") = "drop_oldest", py::arg("probes") = py::none(), \
                       py::arg("devices") = py::none(), py::arg("capacity") = 64,         \
                       py::arg("on_gap") = py::none()
#define GPUSTREAM_PY_STREAM_ARGS                                   \
  py::arg("probes") = py::none(), py::arg("devices") = py::none(), \
  py::arg("timeout") = py::none(), py::arg("policy") = "drop_oldest", py::arg("capacity") = 64
inline constexpr const char* kSubscribeDoc =
    "subscribe(self, callback, policy='drop_oldest', probes=None, devices=None, capacity=64, "
    "on_gap=None)\n--\n\n"
    "Calls callback(snapshot) on a thread of the module for every snapshot published from now "
    "on that matches `probes` and `devices`, through a queue of `capacity` snapshots with "
    "`policy` ('latest', 'drop_oldest' or 'lossless'; docs/python.md, \"Subscriptions\"). "
    "on_gap(Gap) is called where snapshots were dropped or lost. Returns a Subscription (a "
    "context manager).";
inline constexpr const char* kStreamDoc =
    "stream(self, probes=None, devices=None, timeout=None, policy='drop_oldest', capacity=64)"
    "\n--\n\n"
    "An iterator (Stream) over the snapshots published from now on that match `probes` and "
    "`devices`. It ends when the source stops, on close(), or after `timeout` seconds without "
    "a snapshot (None: no limit). The wait releases the GIL; Ctrl-C interrupts it.";

}  // namespace gpustream::python
