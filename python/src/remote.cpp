// gpustream.connect(url): snapshots of a remote `gpustream serve` (RemoteSubscriber, with
// reconnect and resume) behind the same latest()/subscribe()/stream() surface as a Telemetry.
//
// The connection runs on an io_context and a thread of its own. Each snapshot received is
// published into a local SnapshotChannel (so subscriptions and streams get the same policies as
// local ones); that channel numbers them again, so `sequence` is the client's own gap-free count,
// not the server's (see docs/python.md). GPU events likewise go into the channel's events().
#include <pybind11/stl.h>

#include <condition_variable>
#include <future>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "delivery.hpp"
#include "event_stream.hpp"
#include "gpustream/transport/remote_subscriber.hpp"

namespace gpustream::python {

namespace {
constexpr auto kCloseDeadline = std::chrono::seconds{2};
}  // namespace

class PyRemote : public Hub, public std::enable_shared_from_this<PyRemote> {
 public:
  explicit PyRemote(RemoteSubscriberOptions options)
      : work_(boost::asio::make_work_guard(io_)),
        channel_(io_.get_executor()),
        subscriber_(std::make_unique<RemoteSubscriber>(io_.get_executor(), std::move(options))) {
    subscriber_->on_snapshot([this](const SnapshotPtr& s) { channel_.publish(*s); });
    subscriber_->on_gap([this](const Gap&) { server_gaps_.fetch_add(1); });
    subscriber_->on_event([this](const EventPtr& e) { channel_.events().publish(*e); });
    subscriber_->on_status([this](const RemoteStatus& st) {
      {
        std::lock_guard lock(mu_);
        status_ = st;
      }
      cv_.notify_all();
    });
    subscriber_->start();
    io_done_ = io_finished_.get_future();
    thread_ = std::thread([this] {
      io_.run();
      io_finished_.set_value();
    });
  }

  ~PyRemote() override { close(); }

  SnapshotChannel& channel() override { return channel_; }
  void shutdown() override { close(); }

  void close() {
    if (!closed()) {
      mark_closed();
      py::gil_scoped_release release;
      // stop() starts the close handshake; the io thread runs it to its end (the server sees a
      // clean close), bounded by kCloseDeadline for a server that does not answer.
      subscriber_->stop();
      work_.reset();
      if (io_done_.wait_for(kCloseDeadline) == std::future_status::timeout) io_.stop();
      if (thread_.joinable()) thread_.join();
      {
        std::lock_guard lock(mu_);
        status_.state = RemoteStatus::State::stopped;
      }
      cv_.notify_all();
    }
    close_all();
  }

  /// Waits until connected (true) or `timeout` seconds pass / the client is closed (false).
  bool wait_connected(double timeout) {
    return without_gil([&] {
      std::unique_lock lock(mu_);
      return cv_.wait_for(lock, std::chrono::duration<double>(timeout), [&] {
        return status_.state == RemoteStatus::State::connected ||
               status_.state == RemoteStatus::State::stopped;
      }) && status_.state == RemoteStatus::State::connected;
    });
  }

  /// The server's answer to `fit` (RemoteSubscriber::fit), as a dict; RuntimeError with the
  /// reason when there is none, TimeoutError after `timeout` seconds.
  py::dict fit(const py::int_& bytes_arg, long long limit, double timeout) {
    if (closed()) throw std::runtime_error("fit: not connected (the client is closed)");
    const unsigned long long bytes = PyLong_AsUnsignedLongLong(bytes_arg.ptr());
    if (PyErr_Occurred()) {  // negative, or past 2**64 - 1
      PyErr_Clear();
      throw py::value_error("bytes must be a whole number from 0 to 2**64 - 1");
    }
    if (limit < 1 || limit > static_cast<long long>(transport::kFitMaxLimit))
      throw py::value_error("limit must be from 1 to " + std::to_string(transport::kFitMaxLimit));
    auto done = std::make_shared<std::promise<RemoteFitAnswer>>();
    auto answer = done->get_future();
    subscriber_->fit(
        static_cast<std::uint64_t>(bytes),
        [done](RemoteFitAnswer a) { done->set_value(std::move(a)); },
        static_cast<std::size_t>(limit));
    const bool ready = without_gil([&] {
      return answer.wait_for(std::chrono::duration<double>(timeout)) == std::future_status::ready;
    });
    if (!ready) {
      PyErr_SetString(PyExc_TimeoutError, "fit: no answer within the timeout");
      throw py::error_already_set();
    }
    auto a = answer.get();
    if (!a.result) throw std::runtime_error("fit: " + a.error);
    py::list fits;
    for (const auto& e : a.result->fits) {
      py::dict d;
      d["node"] = e.node;
      d["device"] = e.device;
      d["name"] = e.name;
      d["probe"] = e.probe;
      d["vendor"] = e.vendor;
      d["free_bytes"] = e.free_bytes;
      d["source"] = e.source;
      d["state"] = e.state;
      d["age_seconds"] = e.age_seconds;
      fits.append(d);
    }
    py::dict out;
    out["bytes"] = a.result->bytes;
    out["total"] = a.result->total;
    out["truncated"] = a.result->truncated;
    out["fits"] = fits;
    return out;
  }

  py::dict status() {
    RemoteStatus st;
    {
      std::lock_guard lock(mu_);
      st = status_;
    }
    py::dict d;
    d["state"] = std::string(to_string(st.state));
    d["reason"] = st.reason;
    d["attempts"] = st.attempts;
    const auto c = subscriber_->counters();
    d["connections"] = c.connections;
    d["snapshots"] = c.snapshots;
    d["server_gaps"] = server_gaps_.load();
    return d;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  SnapshotChannel channel_;
  std::unique_ptr<RemoteSubscriber> subscriber_;  // after channel_: destroyed first
  std::atomic<std::uint64_t> server_gaps_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  RemoteStatus status_;
  std::promise<void> io_finished_;
  std::future<void> io_done_;
  std::thread thread_;
};

void bind_remote(py::module_& m) {
  py::class_<PyRemote, std::shared_ptr<PyRemote>>(
      m, "RemoteClient",
      "Snapshots from a running `gpustream serve` (see gpustream.connect). A context manager; "
      "close() ends the connection and every subscription and stream.")
      .def("close", &PyRemote::close,
           "close(self)\n--\n\nEnds the connection (the WebSocket close handshake, at most "
           "2 s) and every subscription and stream. Idempotent.")
      .def(
          "__enter__", [](const std::shared_ptr<PyRemote>& r) { return r; },
          "__enter__(self)\n--\n\nReturns the client itself.")
      .def(
          "__exit__",
          [](PyRemote& r, const py::args&) {
            r.close();
            return false;
          },
          "__exit__(self, *args)\n--\n\nclose().")
      .def_property_readonly("closed", &PyRemote::closed, "True once close() was called.")
      .def(
          "wait_connected",
          [](PyRemote& r, const py::object& timeout) {
            return r.wait_connected(number_arg(timeout, "timeout", "a number of seconds"));
          },
          py::arg("timeout") = 5.0,
          "wait_connected(self, timeout=5.0)\n--\n\nTrue once connected; False after "
          "`timeout` seconds or when closed.")
      .def_property_readonly("status", &PyRemote::status,
                             "{'state', 'reason', 'attempts', 'connections', 'snapshots', "
                             "'server_gaps'}: the connection now.")
      .def("fit", &PyRemote::fit, py::arg("bytes"), py::arg("limit") = 16, py::arg("timeout") = 5.0,
           "fit(self, bytes, limit=16, timeout=5.0)\n--\n\n"
           "Where `bytes` of device memory fit now, asked of the server (the protocol's `fit`): "
           "{'bytes','total','truncated','fits':[{'node','device','name','probe','vendor',"
           "'free_bytes','source','state','age_seconds'}]}, most free first. `gpustream fleet` "
           "answers for every node. RuntimeError when not connected or refused; TimeoutError "
           "after `timeout` seconds.")
      .def(
          "latest",
          [](PyRemote& r) {
            std::vector<PySnapshot> out;
            for (auto& s : r.channel().latest()) out.push_back({std::move(s)});
            return out;
          },
          "latest(self)\n--\n\nThe newest snapshot received of each probe.")
      .def(
          "subscribe",
          [](PyRemote& r, const py::object& callback, const py::object& policy,
             const py::object& probes, const py::object& devices, const py::object& capacity,
             const py::object& on_gap) {
            return subscribe_on(r, callback, policy, probes, devices, capacity, on_gap);
          },
          GPUSTREAM_PY_SUBSCRIBE_ARGS, kSubscribeDoc)
      .def(
          "stream",
          [](PyRemote& r, const py::object& probes, const py::object& devices,
             const py::object& timeout, const py::object& policy, const py::object& capacity) {
            return stream_on(r, probes, devices, timeout, policy, capacity);
          },
          GPUSTREAM_PY_STREAM_ARGS, kStreamDoc)
      .def(
          "events",
          [](PyRemote& r, const py::object& probes, const py::object& devices,
             const py::object& timeout) { return events_on(r, probes, devices, timeout); },
          GPUSTREAM_PY_EVENTS_ARGS, kEventsDoc)
      .def(
          "recent_events", [](PyRemote& r) { return recent_events_on(r); },
          "recent_events(self)\n--\n\nThe newest events received (at most 256, 256 KiB), "
          "oldest first.");

  m.def(
      "connect",
      [](const py::object& url_arg, const py::object& token, const py::object& probes,
         const py::object& devices, const py::object& ca, const py::object& cert,
         const py::object& key) {
        RemoteSubscriberOptions o;
        o.url = str_arg(url_arg, "url");
        if (!token.is_none()) o.token = str_arg(token, "token");
        if (!ca.is_none()) o.tls_ca_file = py::str(ca).cast<std::string>();
        if (!cert.is_none()) o.tls_cert_file = py::str(cert).cast<std::string>();
        if (!key.is_none()) o.tls_key_file = py::str(key).cast<std::string>();
        o.probes = string_list(probes, "probes");
        o.devices = string_list(devices, "devices");
        validate_remote_url(o.url);  // std::invalid_argument -> ValueError
        auto r = std::make_shared<PyRemote>(std::move(o));
        register_live(r);
        return r;
      },
      py::arg("url"), py::arg("token") = py::none(), py::arg("probes") = py::none(),
      py::arg("devices") = py::none(), py::kw_only(), py::arg("ca") = py::none(),
      py::arg("cert") = py::none(), py::arg("key") = py::none(),
      "connect(url, token=None, probes=None, devices=None, *, ca=None, cert=None, key=None)\n"
      "--\n\nConnects to `gpustream serve` at ws://HOST:PORT[/PATH] or tcp://HOST:PORT (over TLS: "
      "wss://HOST[:PORT][/PATH] or tls://HOST:PORT, the server's certificate verified against "
      "`ca`, a PEM file, else the system's CAs, and its host name; `cert` and `key`: a client "
      "certificate for mutual TLS); reconnects and resumes by itself until close().");
}

}  // namespace gpustream::python
