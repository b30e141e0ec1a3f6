// Hidden helpers for bench/python_bench.py: a channel the benchmark publishes into itself, and
// the C++ subscriber baseline measured in the same process. Not part of the API.
#include <pybind11/stl.h>

#include <chrono>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "delivery.hpp"

namespace gpustream::python {

namespace {

class BenchChannel : public Hub {
 public:
  BenchChannel() : work_(boost::asio::make_work_guard(io_)), channel_(io_.get_executor()) {
    thread_ = std::thread([this] { io_.run(); });
  }
  ~BenchChannel() override {
    work_.reset();
    io_.stop();
    thread_.join();
  }
  SnapshotChannel& channel() override { return channel_; }
  void shutdown() override {
    mark_closed();
    close_all();
  }

  /// Publishes `n` copies of `proto` (GIL released).
  void publish(const PySnapshot& proto, std::size_t n) {
    py::gil_scoped_release release;
    for (std::size_t i = 0; i < n; ++i) channel_.publish(*proto.s);
  }

  /// The baseline: a C++ queue subscriber popping on a thread of its own, the same structure as
  /// a Python subscription without Python. Seconds from the first publish to the n-th pop.
  double cpp_subscriber(const PySnapshot& proto, std::size_t n) {
    py::gil_scoped_release release;
    SubscribeOptions o;
    o.policy = Backpressure::lossless;
    o.capacity = n;
    auto q = channel_.subscribe_queue(o);
    std::uint64_t sum = 0;
    const auto t0 = std::chrono::steady_clock::now();
    std::thread consumer([&] {
      for (std::size_t got = 0; got < n;) {
        auto item = q->pop_for(std::chrono::seconds{10});
        if (!item) break;
        if (auto* s = std::get_if<SnapshotPtr>(&*item)) {
          sum += (*s)->devices.size();  // touch the snapshot, as a callback would
          ++got;
        }
      }
    });
    for (std::size_t i = 0; i < n; ++i) channel_.publish(*proto.s);
    consumer.join();
    const auto t1 = std::chrono::steady_clock::now();
    q->close();
    if (sum == 0) throw std::runtime_error("baseline consumer received nothing");
    return std::chrono::duration<double>(t1 - t0).count();
  }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  SnapshotChannel channel_;
  std::thread thread_;
};

}  // namespace

void bind_bench(py::module_& m) {
  py::class_<BenchChannel, std::shared_ptr<BenchChannel>>(m, "_BenchChannel")
      .def(py::init<>())
      .def("publish", &BenchChannel::publish)
      .def("cpp_subscriber", &BenchChannel::cpp_subscriber)
      .def("close", &BenchChannel::shutdown)
      .def(
          "subscribe",
          [](BenchChannel& b, const py::object& callback, const py::object& policy,
             const py::object& probes, const py::object& devices, const py::object& capacity,
             const py::object& on_gap) {
            return subscribe_on(b, callback, policy, probes, devices, capacity, on_gap);
          },
          GPUSTREAM_PY_SUBSCRIBE_ARGS)
      .def(
          "stream",
          [](BenchChannel& b, const py::object& probes, const py::object& devices,
             const py::object& timeout, const py::object& policy, const py::object& capacity) {
            return stream_on(b, probes, devices, timeout, policy, capacity);
          },
          GPUSTREAM_PY_STREAM_ARGS);
}

}  // namespace gpustream::python
