// Hub: what closes a Telemetry's or a connection's subscriptions and streams; the process-wide
// list of live hubs the atexit hook stops; argument conversions shared by the bindings.
#include "common.hpp"
#include "gpustream/split_list.hpp"

namespace gpustream::python {

std::string describe_arg(const py::object& o) {
  auto text = py::repr(o).cast<std::string>();
  constexpr std::size_t kMaxRepr = 60;  // a message stays one line
  if (text.size() > kMaxRepr) text = text.substr(0, kMaxRepr) + "...";
  return py::type::handle_of(o).attr("__name__").cast<std::string>() + " " + text;
}

double number_arg(const py::object& o, const char* what, const char* expected) {
  if (PyBool_Check(o.ptr()) || !(PyFloat_Check(o.ptr()) || PyLong_Check(o.ptr())))
    throw py::type_error(std::string(what) + " must be " + expected + ", not " + describe_arg(o));
  return o.cast<double>();
}

long long int_arg(const py::object& o, const char* what, const char* expected) {
  if (PyBool_Check(o.ptr()) || !PyLong_Check(o.ptr()))
    throw py::type_error(std::string(what) + " must be " + expected + ", not " + describe_arg(o));
  const long long v = PyLong_AsLongLong(o.ptr());
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    throw py::value_error(std::string(what) + " is out of range (got " + describe_arg(o) + ")");
  }
  return v;
}

std::optional<double> timeout_arg(const py::object& o, const char* what) {
  if (o.is_none()) return std::nullopt;
  const double t = number_arg(o, what, "None or a number of seconds");
  if (!(t >= 0))
    throw py::value_error(std::string(what) + " must be None or a number of seconds >= 0 (got " +
                          describe_arg(o) + ")");
  return t;
}

std::string str_arg(const py::object& o, const char* what) {
  if (!py::isinstance<py::str>(o))
    throw py::type_error(std::string(what) + " must be a str, not " + describe_arg(o));
  return o.cast<std::string>();
}

std::vector<std::string> string_list(const py::object& o, const char* what) {
  std::vector<std::string> out;
  if (o.is_none()) return out;
  if (py::isinstance<py::str>(o)) {
    return split_list(o.cast<std::string>(), ListBlanks::keep);
  }
  try {
    for (const auto& item : o) out.push_back(item.cast<std::string>());
  } catch (const py::cast_error&) {
    throw py::type_error(std::string(what) + " must be None, a string or a list of strings");
  } catch (const py::error_already_set&) {
    throw py::type_error(std::string(what) + " must be None, a string or a list of strings");
  }
  return out;
}

SubscriptionFilter make_filter(const py::object& probes, const py::object& devices) {
  SubscriptionFilter f;
  f.probes = string_list(probes, "probes");
  f.devices = string_list(devices, "devices");
  return f;
}

SubscribeOptions make_options(const py::object& policy_arg, const py::object& capacity_arg,
                              SubscriptionFilter filter) {
  const auto policy = str_arg(policy_arg, "policy");
  const auto capacity = int_arg(capacity_arg, "capacity", "an int (snapshots)");
  SubscribeOptions o;
  const auto p = backpressure_from_string(policy);
  if (!p)
    throw py::value_error("policy must be 'latest', 'drop_oldest' or 'lossless' (got '" + policy +
                          "')");
  if (capacity < 1 || capacity > 1'000'000)
    throw py::value_error("capacity must be between 1 and 1000000 snapshots (got " +
                          std::to_string(capacity) + ")");
  o.policy = *p;
  o.capacity = static_cast<std::size_t>(capacity);
  o.filter = std::move(filter);
  return o;
}

void Hub::ensure_open(const char* what) const {
  if (closed()) throw std::runtime_error(std::string(what) + ": this source is stopped");
}

void Hub::track(const std::shared_ptr<Closable>& c) {
  std::lock_guard lock(mu_);
  std::erase_if(items_, [](const auto& w) { return w.expired(); });
  items_.push_back(c);
}

bool Hub::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

void Hub::mark_closed() {
  std::lock_guard lock(mu_);
  closed_ = true;
}

void Hub::close_all() {
  // Owners are taken with the GIL held and dropped with it held: the last reference to a
  // subscription may be this one, and it owns Python callbacks. The list is kept: a
  // subscription closed here from its own callback thread is joined by a later close_all (the
  // atexit hook's), before the interpreter finalizes.
  std::vector<std::shared_ptr<Closable>> live;
  {
    std::lock_guard lock(mu_);
    std::erase_if(items_, [](const auto& w) { return w.expired(); });
    for (auto& w : items_)
      if (auto c = w.lock()) live.push_back(std::move(c));
  }
  {
    py::gil_scoped_release release;
    for (auto& c : live) c->close_nogil();
  }
}

namespace {
struct LiveHubs {
  std::mutex mu;
  std::vector<std::weak_ptr<Hub>> hubs;
};
LiveHubs& live_hubs() {
  static LiveHubs live;  // never destroyed before the atexit hook runs (it is a static)
  return live;
}
}  // namespace

void register_live(const std::shared_ptr<Hub>& hub) {
  auto& live = live_hubs();
  std::lock_guard lock(live.mu);
  std::erase_if(live.hubs, [](const auto& w) { return w.expired(); });
  live.hubs.push_back(hub);
}

void stop_all_live() {
  std::vector<std::shared_ptr<Hub>> hubs;
  {
    auto& live = live_hubs();
    std::lock_guard lock(live.mu);
    for (auto& w : live.hubs)
      if (auto h = w.lock()) hubs.push_back(std::move(h));
    live.hubs.clear();
  }
  for (auto& h : hubs) h->shutdown();
}

}  // namespace gpustream::python
