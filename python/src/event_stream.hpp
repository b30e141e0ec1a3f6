// GPU events (Xid, ECC, ...) in Python: Event, and EventStream, the iterator over an
// EventQueue of the hub's channel (see event_stream.cpp).
#pragma once

#include "common.hpp"
#include "gpustream/events.hpp"

namespace gpustream::python {

/// One event as Python sees it: the shared immutable object, never copied.
struct PyEvent {
  EventPtr e;
};

/// The iterator form: next() waits without the GIL, checking for signals every 100 ms.
class PyEventStream : public Closable {
 public:
  PyEventStream(std::shared_ptr<EventQueue> queue, std::optional<double> timeout);
  ~PyEventStream() override;
  void close_nogil() override;
  PyEvent next();
  const EventQueue& queue() const { return *queue_; }

 private:
  std::shared_ptr<EventQueue> queue_;
  std::optional<double> timeout_;
};

/// hub.events(...) and hub.recent_events() as the bindings expose them (GIL held).
std::shared_ptr<PyEventStream> events_on(Hub& hub, const py::object& probes,
                                         const py::object& devices, const py::object& timeout);
std::vector<PyEvent> recent_events_on(Hub& hub);
#define GPUSTREAM_PY_EVENTS_ARGS \
  py::arg("probes") = py::none(), py::arg("devices") = py::none(), py::arg("timeout") = py::none()
inline constexpr const char* kEventsDoc =
    "events(self, probes=None, devices=None, timeout=None)\n--\n\n"
    "Iterator over the GPU events (Xid errors, ECC errors, clock-event and power-source "
    "changes) published from now on, matching `probes` and `devices`. Ends when the source "
    "stops, on close(), or after `timeout` seconds without an event. Bounded like every event "
    "subscriber (1024 events, 1 MiB): when it falls behind, the oldest are dropped (counted "
    "in `dropped`; a hole in `sequence` shows where).";
inline constexpr const char* kRecentEventsDoc =
    "recent_events(self)\n--\n\n"
    "The newest events kept (at most 256, 256 KiB), oldest first.";

}  // namespace gpustream::python
