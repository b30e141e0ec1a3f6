// The wire protocol, server → client: the decoders of hello, snapshot, gap, subscribed,
// fit_result and error (the encoders are in protocol.cpp). RemoteSubscriber and the tests use
// these.
#include <cstdint>

#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"
#include "wire/protocol_fields.hpp"

namespace gpustream::transport {
namespace json = boost::json;

namespace {

using fields::bad;
using fields::find;
using fields::text;
using fields::u64;

std::vector<std::string> texts(const json::object& o, std::string_view key) {
  std::vector<std::string> out;
  const auto* v = find(o, key);
  if (!v) return out;
  if (!v->is_array()) bad(key, "expected an array of strings");
  for (const auto& e : v->get_array()) {
    if (!e.is_string()) bad(key, "expected an array of strings");
    out.emplace_back(e.get_string());
  }
  return out;
}

const json::object& object_at(const json::value& v, std::string_view where) {
  if (!v.is_object()) bad(where, "expected an object");
  return v.get_object();
}

Hello decode_hello(const json::object& o) {
  Hello h;
  h.schema = text(o, "schema", true);
  h.server = text(o, "server");
  h.instance = text(o, "instance");
  h.last_sequence = u64(o, "last_sequence", true);
  h.history_capacity = static_cast<std::size_t>(u64(o, "history_capacity"));
  if (const auto* a = find(o, "probes")) {
    if (!a->is_array()) bad("probes", "expected an array");
    for (const auto& e : a->get_array()) {
      const auto& p = object_at(e, "probes[]");
      h.probes.push_back({text(p, "name", true), text(p, "state"), text(p, "reason")});
    }
  }
  if (const auto* a = find(o, "devices")) {
    if (!a->is_array()) bad("devices", "expected an array");
    for (const auto& e : a->get_array()) h.devices.push_back(device_info_from_json(e));
  }
  // Absent (a server older than the list): nullopt, not an empty list (which says "none").
  if (find(o, "requests")) h.requests = texts(o, "requests");
  if (find(o, "devices_pending")) h.devices_pending = texts(o, "devices_pending");
  return h;
}

Subscribed decode_subscribed(const json::object& o) {
  Subscribed s;
  if (find(o, "since")) s.request.since = u64(o, "since");
  s.request.probes = texts(o, "probes");
  s.request.devices = texts(o, "devices");
  for (const auto& name : texts(o, "fields"))
    if (const auto m = metric_from_string(name)) s.request.fields.push_back(*m);
  if (const auto* v = find(o, "max_rate_hz")) {
    if (!v->is_number()) bad("max_rate_hz", "expected a number");
    s.request.max_rate_hz = v->to_number<double>();
  }
  if (const auto* u = find(o, "unknown")) {
    const auto& uo = object_at(*u, "unknown");
    s.unknown_probes = texts(uo, "probes");
    s.unknown_devices = texts(uo, "devices");
  }
  return s;
}

std::vector<FitEntry> fit_entries(const json::value& a, const std::string& key) {
  if (!a.is_array()) bad(key, "expected an array");
  std::vector<FitEntry> out;
  for (const auto& e : a.get_array()) {
    const auto& f = object_at(e, key + "[]");
    FitEntry x;
    x.node = text(f, "node");
    x.device = text(f, "device", true);
    x.name = text(f, "name");
    x.probe = text(f, "probe");
    x.vendor = text(f, "vendor");
    x.free_bytes = u64(f, "free_bytes", true);
    x.source = text(f, "source");
    x.state = text(f, "state");
    if (const auto* age = find(f, "age_seconds")) {
      if (!age->is_number()) bad(key + "[].age_seconds", "expected a number");
      x.age_seconds = age->to_number<double>();
    }
    x.reason = text(f, "reason");
    x.detail = text(f, "detail");
    out.push_back(std::move(x));
  }
  return out;
}

FitResult decode_fit_result(const json::object& o) {
  FitResult r;
  r.id = text(o, "id");
  r.bytes = u64(o, "bytes", true);
  r.total = u64(o, "total");
  if (const auto* t = find(o, "truncated")) {
    if (!t->is_bool()) bad("truncated", "expected true or false");
    r.truncated = t->get_bool();
  }
  const auto* a = find(o, "fits");
  if (!a) bad("fits", "required key is missing");
  r.fits = fit_entries(*a, "fits");
  // Absent from a server older than exclusions: none.
  if (const auto* x = find(o, "excluded")) r.excluded = fit_entries(*x, "excluded");
  return r;
}

}  // namespace

DeviceInfo device_info_from_json(const json::value& v) {
  const auto& d = object_at(v, "devices[]");
  DeviceInfo info{text(d, "id", true),  text(d, "vendor"), text(d, "name"), text(d, "probe"), 0,
                  text(d, "pci_bus_id")};
  if (const auto* i = find(d, "index")) {
    if (!i->is_int64() || i->get_int64() < INT32_MIN || i->get_int64() > INT32_MAX)
      bad("devices[].index", "expected an int");
    info.index = static_cast<int>(i->get_int64());
  }
  info.node = text(d, "node");
  return info;
}

ServerMessage parse_server_message(std::string_view message) {
  const json::value v = parse_json(message);
  const auto& o = object_at(v, "");
  const auto type = text(o, "type", true);
  ServerMessage m;
  if (type == "snapshot") {
    m.kind = ServerMessage::Kind::snapshot;
    m.snapshot = snapshot_from_json(v);  // "type" is a key the codec does not know: ignored
  } else if (type == "hello") {
    m.kind = ServerMessage::Kind::hello;
    m.hello = decode_hello(o);
  } else if (type == "gap") {
    m.kind = ServerMessage::Kind::gap;
    m.gap = Gap{u64(o, "after_sequence", true), u64(o, "missed", true), text(o, "reason")};
  } else if (type == "subscribed") {
    m.kind = ServerMessage::Kind::subscribed;
    m.subscribed = decode_subscribed(o);
  } else if (type == "error") {
    m.kind = ServerMessage::Kind::error;
    m.error = ServerError{text(o, "code"), text(o, "message"), text(o, "id")};
  } else if (type == "fit_result") {
    m.kind = ServerMessage::Kind::fit_result;
    m.fit = decode_fit_result(o);
  }
  return m;
}

}  // namespace gpustream::transport
