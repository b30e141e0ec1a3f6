// gpustream.connect(url): snapshots of a remote `gpustream serve` (RemoteSubscriber, with
// reconnect and resume) behind the same latest()/subscribe()/stream() surface as a Telemetry.
//
// The connection runs on an io_context and a thread of its own. Each snapshot received is
// published into a local SnapshotChannel (so subscriptions and streams get the same policies as
// local ones); that channel numbers them again, so `sequence` is the client's own gap-free count,
// not the server's (see docs/python.md). GPU events likewise go into the channel's events().
#include <pybind11/stl.h>

#include <cmath>
#include <condition_variable>
#include <future>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "delivery.hpp"
#include "event_stream.hpp"
#include "gpustream/transport/remote_subscriber.hpp"
#include "planner_args.hpp"

namespace gpustream::python {

namespace {
constexpr auto kCloseDeadline = std::chrono::seconds{2};

/// A fit_result entry as the local planner's DeviceFit (one shape for Telemetry and
/// RemoteClient): the figure's time from its age; `parent` is not on the wire (empty).
DeviceFit device_fit_of(const transport::FitEntry& e, std::int64_t now_unix_ns) {
  DeviceFit f;
  f.device_id = e.device;
  f.name = e.name;
  f.probe = e.probe;
  f.vendor = vendor_from_string(e.vendor).value_or(Vendor::unknown);
  f.free_bytes = e.free_bytes;
  f.source = source_from_string(e.source).value_or(Source::none);
  f.node = e.node;
  f.time_unix_ns = now_unix_ns - static_cast<std::int64_t>(std::llround(e.age_seconds * 1e9));
  return f;
}

FitPlan plan_of(const transport::FitResult& r) {
  const auto now = wall_now_ns();
  FitPlan plan;
  for (const auto& e : r.fits) plan.fits.push_back(device_fit_of(e, now));
  for (const auto& e : r.excluded) {
    FitExclusion x;
    x.device = device_fit_of(e, now);
    x.reason = e.reason == "fatal_event" ? ExclusionReason::fatal_event : ExclusionReason::excluded;
    x.detail = e.detail;
    plan.excluded.push_back(std::move(x));
  }
  return plan;
}
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

  /// The server's answer to a `fit` (RemoteSubscriber::fit); RuntimeError with the reason when
  /// there is none, TimeoutError after `timeout` seconds. `options` null: the server's defaults.
  transport::FitResult ask(const char* what, const py::int_& bytes_arg, long long limit,
                           const FitOptions* options, double timeout) {
    if (closed())
      throw std::runtime_error(std::string(what) + ": not connected (the client is closed)");
    const unsigned long long bytes = PyLong_AsUnsignedLongLong(bytes_arg.ptr());
    if (PyErr_Occurred()) {  // negative, or past 2**64 - 1
      PyErr_Clear();
      throw py::value_error("bytes must be a whole number from 0 to 2**64 - 1");
    }
    if (limit < 1 || limit > static_cast<long long>(transport::kFitMaxLimit))
      throw py::value_error("limit must be from 1 to " + std::to_string(transport::kFitMaxLimit));
    auto done = std::make_shared<std::promise<RemoteFitAnswer>>();
    auto answer = done->get_future();
    auto on_answer = [done](RemoteFitAnswer a) { done->set_value(std::move(a)); };
    if (options)
      subscriber_->fit(static_cast<std::uint64_t>(bytes), *options, std::move(on_answer),
                       static_cast<std::size_t>(limit));
    else
      subscriber_->fit(static_cast<std::uint64_t>(bytes), std::move(on_answer),
                       static_cast<std::size_t>(limit));
    const bool ready = without_gil([&] {
      return answer.wait_for(std::chrono::duration<double>(timeout)) == std::future_status::ready;
    });
    if (!ready) {
      PyErr_SetString(PyExc_TimeoutError,
                      (std::string(what) + ": no answer within the timeout").c_str());
      throw py::error_already_set();
    }
    auto a = answer.get();
    if (!a.result) throw std::runtime_error(std::string(what) + ": " + a.error);
    return std::move(*a.result);
  }

  /// fits(), best_device() and fit_plan(): the local planner's shapes (DeviceFit, FitPlan).
  FitPlan fit_plan(const py::int_& bytes, long long limit, const py::object& exclude,
                   const py::object& window, double timeout) {
    const auto o = fit_options_of(exclude, window);
    // Without exclude= or fatal_event_window=, the server applies its own defaults.
    const bool defaults = exclude.is_none() && window.is_none();
    return plan_of(ask("fit", bytes, limit, defaults ? nullptr : &o, timeout));
  }

  /// The deprecated dict of fit() (fits() returns DeviceFit objects, as Telemetry.fits does).
  py::dict fit(const py::int_& bytes_arg, long long limit, double timeout) {
    auto warnings = py::module_::import("warnings");
    warnings.attr("warn")(
        "RemoteClient.fit() is deprecated: use fits(), best_device() or fit_plan(), which "
        "return gpustream.DeviceFit objects (device_id, not 'device') as Telemetry's do",
        py::module_::import("builtins").attr("DeprecationWarning"), 2);
    const auto r = ask("fit", bytes_arg, limit, nullptr, timeout);
    const auto* a = &r;
    py::list fits;
    for (const auto& e : a->fits) {
      py::dict d;
      d["node"] = e.node;
      d["device"] = e.device;
      d["device_id"] = e.device;
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
    out["bytes"] = a->bytes;
    out["total"] = a->total;
    out["truncated"] = a->truncated;
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
           "Deprecated (DeprecationWarning): use fits() / best_device() / fit_plan(). Where "
           "`bytes` of device memory fit now, as a dict {'bytes','total','truncated','fits':"
           "[{'node','device','device_id','name','probe','vendor','free_bytes','source','state',"
           "'age_seconds'}]}, most free first.")
      .def(
          "fits",
          [](PyRemote& r, const py::int_& bytes, long long limit, const py::object& exclude,
             const py::object& window,
             double timeout) { return r.fit_plan(bytes, limit, exclude, window, timeout).fits; },
          py::arg("bytes"), py::arg("limit") = static_cast<long long>(transport::kFitMaxLimit),
          py::kw_only(), py::arg("exclude") = py::none(),
          py::arg("fatal_event_window") = py::none(), py::arg("timeout") = 5.0,
          "fits(self, bytes, limit=256, *, exclude=None, fatal_event_window=None, "
          "timeout=5.0)\n--\n\n"
          "Where `bytes` of device memory fit now, asked of the server (the protocol's `fit`): "
          "a list of gpustream.DeviceFit, most free first, at most `limit` (1..256) — the same "
          "objects as Telemetry.fits(). `gpustream fleet` answers for every node (DeviceFit.node). "
          "exclude: device ids to leave out; fatal_event_window: seconds (None: the server's "
          "default, 3600; 0: no health rule) — a device with a fatal event (Xid 79, ...) that "
          "recently is left out. RuntimeError when not connected or refused; TimeoutError after "
          "`timeout` seconds.")
      .def(
          "best_device",
          [](PyRemote& r, const py::int_& bytes, const py::object& exclude,
             const py::object& window,
             double timeout) { return r.fit_plan(bytes, 1, exclude, window, timeout).best(); },
          py::arg("bytes"), py::kw_only(), py::arg("exclude") = py::none(),
          py::arg("fatal_event_window") = py::none(), py::arg("timeout") = 5.0,
          "best_device(self, bytes, *, exclude=None, fatal_event_window=None, timeout=5.0)\n--\n\n"
          "The DeviceFit with the most free memory among fits(), or None when none has `bytes` "
          "free.")
      .def("fit_plan", &PyRemote::fit_plan, py::arg("bytes"),
           py::arg("limit") = static_cast<long long>(transport::kFitMaxLimit), py::kw_only(),
           py::arg("exclude") = py::none(), py::arg("fatal_event_window") = py::none(),
           py::arg("timeout") = 5.0,
           "fit_plan(self, bytes, limit=256, *, exclude=None, fatal_event_window=None, "
           "timeout=5.0)\n--\n\n"
           "fits() with what was left out and why: a gpustream.FitPlan (.fits, .excluded: "
           "FitExclusion with .device, .reason 'excluded' or 'fatal_event', .detail).")
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
