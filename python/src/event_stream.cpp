// Event (one GPU event: an Xid, an ECC error, ...) and EventStream (the iterator over the events
// of a Telemetry or a connection).
//
// A stream pops from an EventQueue of the hub's channel (SnapshotChannel::events()): the SDK's
// queue, bounded in count and bytes, with the oldest dropped when the consumer falls behind, so
// a slow Python consumer never blocks the SDK's io thread nor the other subscribers.
#include "event_stream.hpp"

#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>

#include "gpustream/transport/protocol_event.hpp"

namespace gpustream::python {

namespace {

std::string event_repr(const GpuEvent& e) {
  std::string out =
      "<gpustream.Event #" + std::to_string(e.sequence) + " " + std::string(to_string(e.kind));
  if (e.data) out += " " + std::to_string(*e.data);
  return out + " on " + e.device_id + ">";
}
}  // namespace

PyEventStream::PyEventStream(std::shared_ptr<EventQueue> queue, std::optional<double> timeout)
    : queue_(std::move(queue)), timeout_(timeout) {}

PyEventStream::~PyEventStream() { queue_->close(); }

void PyEventStream::close_nogil() { queue_->close(); }

PyEvent PyEventStream::next() {
  return next_from_queue(*queue_, timeout_,
                         [](EventPtr e) { return std::optional<PyEvent>(PyEvent{std::move(e)}); });
}

std::shared_ptr<PyEventStream> events_on(Hub& hub, const py::object& probes,
                                         const py::object& devices, const py::object& timeout) {
  const auto t = timeout_arg(timeout);
  EventSubscribeOptions o;
  o.probes = string_list(probes, "probes");
  o.devices = string_list(devices, "devices");
  hub.ensure_open("events");
  auto stream =
      std::make_shared<PyEventStream>(hub.channel().events().subscribe_queue(std::move(o)), t);
  hub.track(stream);
  return stream;
}

std::vector<PyEvent> recent_events_on(Hub& hub) {
  std::vector<PyEvent> out;
  for (auto& e : hub.channel().events().recent()) out.push_back({std::move(e)});
  return out;
}

void bind_events(py::module_& m) {
  py::class_<PyEvent>(m, "Event",
                      "A GPU event (immutable): an Xid error, an ECC error, a clock-event or "
                      "power-source change (docs/probes.md, NVIDIA events).")
      .def_property_readonly(
          "sequence", [](const PyEvent& e) { return e.e->sequence; },
          "1, 2, 3, ... in the events' own sequence space (not the "
          "snapshots'); a hole: events dropped for this consumer.")
      .def_property_readonly(
          "time_unix_ns", [](const PyEvent& e) { return e.e->time_unix_ns; },
          "When the probe received it: nanoseconds since the Unix epoch.")
      .def_property_readonly(
          "time", [](const PyEvent& e) { return static_cast<double>(e.e->time_unix_ns) / 1e9; },
          "When the probe received it: seconds since the Unix epoch (as time.time()).")
      .def_property_readonly(
          "probe", [](const PyEvent& e) { return e.e->probe; },
          "The probe that reported it (\"nvidia\", ...).")
      .def_property_readonly(
          "device", [](const PyEvent& e) { return e.e->device_id; },
          "The device's id, as in snapshots (NVIDIA: the UUID).")
      .def_property_readonly(
          "kind", [](const PyEvent& e) { return std::string(to_string(e.e->kind)); },
          "xid, ecc_single_bit, ecc_double_bit, clock_event, power_source, pstate or other.")
      .def_property_readonly(
          "data", [](const PyEvent& e) { return e.e->data; },
          "The Xid number (xid), the clocks-event reasons mask (clock_event), "
          "the vendor's event type bits (other); None when there is none.")
      .def_property_readonly(
          "xid",
          [](const PyEvent& e) -> std::optional<std::uint64_t> {
            if (e.e->kind != EventKind::xid) return std::nullopt;
            return e.e->data;
          },
          "The Xid number of an xid event; None for other kinds.")
      .def(
          "to_dict",
          [](const PyEvent& e) { return json_to_python(transport::event_to_json(*e.e)); },
          "to_dict(self)\n--\n\nThe event as the wire's `event` message has it (without "
          "\"type\"): sequence, time_unix_ns, probe, device, kind and data (left out when there is "
          "none).")
      .def("__repr__", [](const PyEvent& e) { return event_repr(*e.e); });

  py::class_<PyEventStream, std::shared_ptr<PyEventStream>>(
      m, "EventStream",
      "Iterator over GPU events. Ends when the source stops, on close(), or after `timeout` "
      "seconds without an event.")
      .def(
          "__iter__", [](const std::shared_ptr<PyEventStream>& s) { return s; },
          "__iter__(self)\n--\n\nReturns the stream itself.")
      .def("__next__", &PyEventStream::next,
           "__next__(self)\n--\n\nThe next event; StopIteration when the stream ends.")
      .def(
          "close", [](PyEventStream& s) { s.close_nogil(); },
          "close(self)\n--\n\nEnds the stream (iteration stops). Idempotent.")
      .def_property_readonly(
          "dropped", [](const PyEventStream& s) { return s.queue().dropped(); },
          "Events dropped because this stream fell behind (the oldest go first).")
      .def(
          "__enter__", [](const std::shared_ptr<PyEventStream>& s) { return s; },
          "__enter__(self)\n--\n\nReturns the stream itself.")
      .def(
          "__exit__",
          [](PyEventStream& s, const py::args&) {
            s.close_nogil();
            return false;
          },
          "__exit__(self, *args)\n--\n\nclose().");
}

}  // namespace gpustream::python
