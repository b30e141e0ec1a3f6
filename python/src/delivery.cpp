// Subscription (callbacks on a thread the module owns) and Stream (the iterator form).
//
// Both pop from a SnapshotQueue of the hub's channel: the SDK's bounded queue with the
// subscriber's policy (latest, drop_oldest, lossless), so a slow Python consumer never blocks
// the SDK's io thread nor another subscriber. A Subscription's thread waits without the GIL and
// takes it only to run the callback.
#include "delivery.hpp"

#include <pybind11/stl.h>  // Stream.gaps: a list of Gap

#include <chrono>

namespace gpustream::python {

namespace {
constexpr int kMaxBatch = 64;  // callbacks run under one take of the GIL at most
}  // namespace

struct PySubscription::Shared {
  std::shared_ptr<SnapshotQueue> queue;
  std::atomic<std::uint64_t> delivered{0};
  std::atomic<std::uint64_t> gaps{0};
  std::atomic<std::uint64_t> errors{0};
  // Read and cleared only with the GIL held: the owner, whose callbacks the thread calls.
  PySubscription* owner = nullptr;
};

PySubscription::PySubscription(std::shared_ptr<SnapshotQueue> queue, py::function callback,
                               py::object on_gap)
    : shared_(std::make_shared<Shared>()),
      callback_(std::move(callback)),
      on_gap_(std::move(on_gap)) {
  shared_->queue = std::move(queue);
  shared_->owner = this;
  thread_ = std::thread([shared = shared_] { run(shared); });
}

PySubscription::~PySubscription() {
  // Called with the GIL held (the Python object's deallocation).
  shared_->owner = nullptr;
  if (thread_.joinable() && thread_.get_id() == std::this_thread::get_id()) {
    shared_->queue->close();
    thread_.detach();  // the thread is returning from this very callback; it ends by itself
    return;
  }
  py::gil_scoped_release release;
  close_nogil();
}

void PySubscription::run(const std::shared_ptr<Shared>& shared) {
  // One Python thread state for the thread's life: taking the GIL is then only a switch, not a
  // thread-state creation per callback. The GIL is taken back by plain calls, never in a
  // destructor: should the interpreter be finalizing (a subscription dropped inside its own
  // callback just before exit, whose thread nobody joins), CPython ends the thread with a forced
  // unwind, which may pass through these frames but not through a noexcept destructor.
  const PyGILState_STATE gil_state = PyGILState_Ensure();
  PyThreadState* const state = PyEval_SaveThread();
  for (;;) {
    auto item = shared->queue->pop_for(std::chrono::hours{1});
    if (!item) {
      if (shared->queue->closed()) break;
      continue;
    }
    PyEval_RestoreThread(state);
    // Deliver what is queued now under one take of the GIL (bounded, so a flood cannot keep it).
    bool end = false;
    for (int batch = 1;; ++batch) {
      if (shared->owner == nullptr || shared->queue->closed()) {
        end = true;
        break;
      }
      deliver(*shared, *item);
      if (batch == kMaxBatch || !(item = shared->queue->try_pop())) break;
    }
    PyEval_SaveThread();
    if (end) break;
  }
  PyEval_RestoreThread(state);
  PyGILState_Release(gil_state);  // deletes the thread state and releases the GIL
}

void PySubscription::deliver(Shared& shared, QueueItem& item) {
  // Local references: the callback stays alive even if the subscription is dropped in it.
  if (auto* snap = std::get_if<SnapshotPtr>(&item)) {
    py::object cb = shared.owner->callback_;
    try {
      cb(PySnapshot{*snap});
      shared.delivered.fetch_add(1, std::memory_order_relaxed);
    } catch (py::error_already_set& e) {
      shared.errors.fetch_add(1, std::memory_order_relaxed);
      e.discard_as_unraisable("gpustream subscription callback");
    } catch (const std::exception& e) {
      shared.errors.fetch_add(1, std::memory_order_relaxed);
      PyErr_WarnEx(PyExc_RuntimeWarning, e.what(), 1);
    }
    return;
  }
  shared.gaps.fetch_add(1, std::memory_order_relaxed);
  py::object cb = shared.owner->on_gap_;
  if (cb.is_none()) return;
  try {
    cb(std::get<Gap>(item));
  } catch (py::error_already_set& e) {
    shared.errors.fetch_add(1, std::memory_order_relaxed);
    e.discard_as_unraisable("gpustream subscription on_gap callback");
  }
}

void PySubscription::close_nogil() {
  shared_->queue->close();
  std::lock_guard lock(join_mu_);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void PySubscription::close() {
  if (thread_.joinable() && thread_.get_id() == std::this_thread::get_id()) {
    shared_->queue->close();  // from its own callback: the thread ends when the callback returns
    return;
  }
  py::gil_scoped_release release;
  close_nogil();
}

bool PySubscription::active() const { return !shared_->queue->closed(); }
std::uint64_t PySubscription::dropped() const { return shared_->queue->dropped(); }
std::uint64_t PySubscription::lost() const { return shared_->queue->lost(); }
std::uint64_t PySubscription::delivered() const { return shared_->delivered.load(); }
std::uint64_t PySubscription::gaps() const { return shared_->gaps.load(); }
std::uint64_t PySubscription::errors() const { return shared_->errors.load(); }

PyStream::PyStream(std::shared_ptr<SnapshotQueue> queue, std::optional<double> timeout)
    : queue_(std::move(queue)), timeout_(timeout) {}

PyStream::~PyStream() { queue_->close(); }

void PyStream::close_nogil() { queue_->close(); }

PySnapshot PyStream::next() {
  return next_from_queue(*queue_, timeout_, [&](std::optional<QueueItem> item) {
    if (auto* snap = std::get_if<SnapshotPtr>(&*item)) return std::optional(PySnapshot{*snap});
    gaps_.push_back(std::get<Gap>(*item));
    return std::optional<PySnapshot>();
  });
}

void bind_delivery(py::module_& m) {
  py::class_<PySubscription, std::shared_ptr<PySubscription>>(
      m, "Subscription",
      "A live callback subscription. close() (or leaving its `with` block) unsubscribes; once "
      "it returns no callback runs any more (unless called from inside the callback itself).")
      .def("close", &PySubscription::close,
           "close(self)\n--\n\nUnsubscribes: once it returns no callback runs any more (from "
           "inside the callback: after that callback). Idempotent.")
      .def_property_readonly("active", &PySubscription::active,
                             "True until close() or until the source stops.")
      .def_property_readonly("dropped", &PySubscription::dropped,
                             "latest/drop_oldest: snapshots replaced or dropped while behind.")
      .def_property_readonly("lost", &PySubscription::lost,
                             "lossless: snapshots lost beyond the capacity.")
      .def_property_readonly("delivered", &PySubscription::delivered,
                             "Snapshots passed to the callback.")
      .def_property_readonly("gaps", &PySubscription::gaps, "Gaps received.")
      .def_property_readonly("errors", &PySubscription::errors,
                             "Calls of a callback that raised (each is reported as unraisable).")
      .def(
          "__enter__", [](const std::shared_ptr<PySubscription>& s) { return s; },
          "__enter__(self)\n--\n\nReturns the subscription itself.")
      .def(
          "__exit__",
          [](PySubscription& s, const py::args&) {
            s.close();
            return false;
          },
          "__exit__(self, *args)\n--\n\nclose().");

  py::class_<PyStream, std::shared_ptr<PyStream>>(
      m, "Stream",
      "Iterator over snapshots. Ends when the source stops, on close(), or after `timeout` "
      "seconds without a snapshot.")
      .def(
          "__iter__", [](const std::shared_ptr<PyStream>& s) { return s; },
          "__iter__(self)\n--\n\nReturns the stream itself.")
      .def("__next__", &PyStream::next,
           "__next__(self)\n--\n\nThe next snapshot; StopIteration when the stream ends.")
      .def(
          "close", [](PyStream& s) { s.close_nogil(); },
          "close(self)\n--\n\nEnds the stream (iteration stops). Idempotent.")
      .def_property_readonly(
          "gaps", [](const PyStream& s) { return s.gaps(); },
          "Gaps met so far (snapshots the policy dropped).")
      .def_property_readonly(
          "dropped", [](const PyStream& s) { return s.queue().dropped(); },
          "latest/drop_oldest: snapshots replaced or dropped while the consumer was behind.")
      .def_property_readonly(
          "lost", [](const PyStream& s) { return s.queue().lost(); },
          "lossless: snapshots lost beyond the capacity.")
      .def(
          "__enter__", [](const std::shared_ptr<PyStream>& s) { return s; },
          "__enter__(self)\n--\n\nReturns the stream itself.")
      .def(
          "__exit__",
          [](PyStream& s, const py::args&) {
            s.close_nogil();
            return false;
          },
          "__exit__(self, *args)\n--\n\nclose().");
}

}  // namespace gpustream::python

namespace gpustream::python {

std::shared_ptr<PySubscription> subscribe_on(Hub& hub, const py::object& callback,
                                             const py::object& policy, const py::object& probes,
                                             const py::object& devices, const py::object& capacity,
                                             const py::object& on_gap) {
  if (!PyCallable_Check(callback.ptr())) throw py::type_error("callback must be callable");
  if (!on_gap.is_none() && !PyCallable_Check(on_gap.ptr()))
    throw py::type_error("on_gap must be None or callable");
  auto options = make_options(policy, capacity, make_filter(probes, devices));
  hub.ensure_open("subscribe");
  auto sub =
      std::make_shared<PySubscription>(hub.channel().subscribe_queue(options),
                                       py::reinterpret_borrow<py::function>(callback), on_gap);
  hub.track(sub);
  return sub;
}

std::shared_ptr<PyStream> stream_on(Hub& hub, const py::object& probes, const py::object& devices,
                                    const py::object& timeout, const py::object& policy,
                                    const py::object& capacity) {
  const auto t = timeout_arg(timeout);
  auto options = make_options(policy, capacity, make_filter(probes, devices));
  hub.ensure_open("stream");
  auto stream = std::make_shared<PyStream>(hub.channel().subscribe_queue(options), t);
  hub.track(stream);
  return stream;
}

}  // namespace gpustream::python
