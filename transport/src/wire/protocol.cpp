// The wire protocol: parsing client messages, building server messages.
#include "gpustream/transport/protocol.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include <boost/json.hpp>

#include "gpustream/detail/json_parse.hpp"
#include "gpustream/detail/json_text.hpp"
#include "gpustream/json.hpp"
#include "wire/request_target.hpp"

namespace gpustream::transport {
namespace json = boost::json;

namespace {

[[noreturn]] void bad(const std::string& what) { throw ProtocolError(kErrBadRequest, what); }

std::vector<std::string> string_list(const json::value& v, std::string_view key) {
  const auto* arr = v.if_array();
  if (!arr) bad("subscribe." + std::string(key) + ": expected an array of strings");
  if (arr->size() > kMaxSubscribeListSize)
    bad("subscribe." + std::string(key) + ": more than " + std::to_string(kMaxSubscribeListSize) +
        " entries");
  std::vector<std::string> out;
  out.reserve(arr->size());
  for (const auto& e : *arr) {
    const auto* s = e.if_string();
    if (!s) bad("subscribe." + std::string(key) + ": expected an array of strings");
    if (s->size() > kMaxNameLength)
      bad("subscribe." + std::string(key) + ": a name is longer than " +
          std::to_string(kMaxNameLength) + " bytes");
    out.emplace_back(s->data(), s->size());
  }
  return out;
}

SubscribeRequest parse_subscribe(const json::object& o) {
  SubscribeRequest r;
  if (const auto* v = o.if_contains("probes"); v && !v->is_null())
    r.probes = string_list(*v, "probes");
  if (const auto* v = o.if_contains("devices"); v && !v->is_null())
    r.devices = string_list(*v, "devices");
  if (const auto* v = o.if_contains("fields"); v && !v->is_null()) {
    for (const auto& name : string_list(*v, "fields")) {
      const auto m = metric_from_string(name);
      if (!m) bad("subscribe.fields: unknown metric '" + to_valid_utf8(name) + "'");
      r.fields.push_back(*m);
    }
  }
  if (const auto* v = o.if_contains("max_rate_hz"); v && !v->is_null()) {
    if (!v->is_number()) bad("subscribe.max_rate_hz: expected a number");
    const double hz = v->to_number<double>();
    if (!(hz > 0) || hz > kMaxRateHz || !std::isfinite(hz))
      bad("subscribe.max_rate_hz: must be > 0 and <= 1000");
    r.max_rate_hz = hz;
  }
  if (const auto* v = o.if_contains("since"); v && !v->is_null()) {
    if (v->is_uint64()) {
      r.since = v->get_uint64();
    } else if (v->is_int64() && v->get_int64() >= 0) {
      r.since = static_cast<std::uint64_t>(v->get_int64());
    } else {
      bad("subscribe.since: expected a non-negative integer");
    }
  }
  return r;
}

std::uint64_t whole_number(const json::value& v, const std::string& where) {
  if (v.is_uint64()) return v.get_uint64();
  if (v.is_int64() && v.get_int64() >= 0) return static_cast<std::uint64_t>(v.get_int64());
  // A double here is a fraction, an exponent form or a number past 2^64 - 1 (the parser makes
  // those doubles): none is a whole number of bytes we can hold.
  bad(where + ": expected a whole number from 0 to 18446744073709551615");
}

/// The fit's `id` first, so that every later refusal can name it.
std::string fit_id(const json::object& o) {
  const auto* v = o.if_contains("id");
  if (!v || v->is_null()) return {};
  const auto* s = v->if_string();
  if (!s) bad("fit.id: expected a string");
  if (s->size() > kFitMaxIdBytes)
    bad("fit.id: longer than " + std::to_string(kFitMaxIdBytes) + " bytes");
  return {s->data(), s->size()};
}

/// The exclusions of a fit, bounded in count, in bytes per id and in bytes together.
void check_exclude(const std::vector<std::string>& ids, std::string_view where) {
  if (ids.size() > kFitMaxExclude)
    bad(std::string(where) + ": more than " + std::to_string(kFitMaxExclude) + " device ids");
  std::size_t total = 0;
  for (const auto& id : ids) {
    if (id.empty()) bad(std::string(where) + ": an empty device id");
    if (id.size() > kMaxNameLength)
      bad(std::string(where) + ": a device id is longer than " + std::to_string(kMaxNameLength) +
          " bytes");
    total += id.size();
  }
  if (total > kFitMaxExcludeBytes)
    bad(std::string(where) + ": the device ids are longer than " +
        std::to_string(kFitMaxExcludeBytes) + " bytes together");
}

std::uint64_t fatal_window(std::uint64_t s, std::string_view where) {
  if (s > static_cast<std::uint64_t>(kMaxFatalEventWindow.count()))
    bad(std::string(where) + ": must be from 0 to " + std::to_string(kMaxFatalEventWindow.count()) +
        " seconds");
  return s;
}

FitRequest parse_fit(const json::object& o) {
  FitRequest r;
  r.id = fit_id(o);
  try {
    const auto* b = o.if_contains("bytes");
    if (!b || b->is_null()) bad("fit.bytes: required (the device memory to place, in bytes)");
    r.bytes = whole_number(*b, "fit.bytes");
    if (const auto* l = o.if_contains("limit"); l && !l->is_null()) {
      const auto n = whole_number(*l, "fit.limit");
      if (n < 1 || n > kFitMaxLimit)
        bad("fit.limit: must be from 1 to " + std::to_string(kFitMaxLimit));
      r.limit = static_cast<std::size_t>(n);
    }
    if (const auto* x = o.if_contains("exclude"); x && !x->is_null()) {
      // Counted before anything is copied: a list past the bound is refused, not read.
      if (const auto* a = x->if_array(); a && a->size() > kFitMaxExclude)
        bad("fit.exclude: more than " + std::to_string(kFitMaxExclude) + " device ids");
      if (!x->is_array()) bad("fit.exclude: expected an array of device ids");
      for (const auto& e : x->get_array())
        if (!e.is_string()) bad("fit.exclude: expected an array of device ids");
      std::size_t total = 0;
      for (const auto& e : x->get_array()) total += e.get_string().size();
      if (total > kFitMaxExcludeBytes)
        bad("fit.exclude: the device ids are longer than " + std::to_string(kFitMaxExcludeBytes) +
            " bytes together");
      for (const auto& e : x->get_array()) r.exclude.emplace_back(e.get_string());
      check_exclude(r.exclude, "fit.exclude");
    }
    if (const auto* w = o.if_contains("fatal_event_window_s"); w && !w->is_null())
      r.fatal_event_window_s =
          fatal_window(whole_number(*w, "fit.fatal_event_window_s"), "fit.fatal_event_window_s");
  } catch (const ProtocolError& e) {
    throw ProtocolError(e.code(), e.what(), r.id);
  }
  return r;
}

json::array metric_names(const std::vector<Metric>& ms) {
  json::array a;
  for (const auto m : ms) a.emplace_back(to_string(m));
  return a;
}

json::array strings(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

std::string with_newline(std::string s) {
  s.push_back('\n');
  return s;
}

}  // namespace

ClientMessage parse_client_message(std::string_view text) {
  if (!is_valid_utf8(text)) bad("not valid UTF-8 (messages are UTF-8 JSON text)");
  // Exact doubles (Boost 1.81's own parse can be an ulp off), so that what a client sent is
  // what `subscribed` echoes and encode_subscribe gives back (fuzz/targets/client_message.cpp).
  json::monotonic_resource mr;
  json::error_code ec;
  std::size_t consumed = 0;
  const json::value v = detail::parse_json_bounded(text, &mr, 16, ec, consumed);
  if (ec) bad("not valid JSON: " + ec.message());
  const auto* o = v.if_object();
  if (!o) bad("expected a JSON object");
  const auto* type = o->if_contains("type");
  if (!type || !type->is_string()) bad("missing \"type\"");
  const auto t = type->get_string();
  ClientMessage m;
  if (t == "subscribe") {
    m.kind = ClientMessage::Kind::subscribe;
    m.subscribe = parse_subscribe(*o);
  } else if (t == "fit") {
    m.kind = ClientMessage::Kind::fit;
    m.fit = parse_fit(*o);
  } else if (t == "auth") {
    m.kind = ClientMessage::Kind::auth;
    const auto* tok = o->if_contains("token");
    if (!tok || !tok->is_string()) bad("auth.token: expected a string");
    m.token.assign(tok->get_string().data(), tok->get_string().size());
  } else {
    bad("unknown message type '" + to_valid_utf8(std::string_view(t.data(), t.size())) + "'");
  }
  return m;
}

std::string encode_subscribe(const SubscribeRequest& r) {
  json::object o;
  o["type"] = "subscribe";
  if (!r.probes.empty()) o["probes"] = strings(r.probes);
  if (!r.devices.empty()) o["devices"] = strings(r.devices);
  if (!r.fields.empty()) o["fields"] = metric_names(r.fields);
  if (r.max_rate_hz) o["max_rate_hz"] = *r.max_rate_hz;
  if (r.since) o["since"] = *r.since;
  return to_compact_json(o);
}

std::string encode_fit(const FitRequest& r) {
  json::object o;
  o["type"] = "fit";
  if (!r.id.empty()) o["id"] = r.id;
  o["bytes"] = r.bytes;
  o["limit"] = r.limit;
  if (!r.exclude.empty()) o["exclude"] = strings(r.exclude);
  if (r.fatal_event_window_s) o["fatal_event_window_s"] = *r.fatal_event_window_s;
  return to_compact_json(o);
}

FitOptions fit_options(const FitRequest& r) {
  FitOptions o;
  o.exclude = r.exclude;
  if (r.fatal_event_window_s)
    o.fatal_event_window = std::chrono::seconds{static_cast<std::int64_t>(
        std::min<std::uint64_t>(*r.fatal_event_window_s, kMaxFatalEventWindow.count()))};
  return o;
}

json::object to_json(const FitEntry& e) {
  json::object o{{"node", e.node},     {"device", e.device}, {"name", e.name},
                 {"probe", e.probe},   {"vendor", e.vendor}, {"free_bytes", e.free_bytes},
                 {"source", e.source}, {"state", e.state},   {"age_seconds", e.age_seconds}};
  if (!e.reason.empty()) {
    o["reason"] = e.reason;
    o["detail"] = e.detail;
  }
  return o;
}

FitEntry fit_entry(const DeviceFit& f, std::string_view state, std::int64_t age_ns) {
  FitEntry e;
  e.node = f.node;
  e.device = f.device_id;
  e.name = f.name;
  e.probe = f.probe;
  e.vendor = std::string(to_string(f.vendor));
  e.free_bytes = f.free_bytes;
  e.source = std::string(to_string(f.source));
  e.state = std::string(state);
  e.age_seconds = static_cast<double>(std::max<std::int64_t>(0, age_ns)) / 1e9;
  return e;
}

std::vector<FitEntry> local_fits(const std::vector<SnapshotPtr>& latest, std::uint64_t bytes,
                                 std::int64_t now_unix_ns) {
  std::vector<FitEntry> out;
  for (const auto& f : fits(latest, bytes))
    out.push_back(fit_entry(f, "up", now_unix_ns - f.time_unix_ns));
  return out;
}

FitAnswer local_fits(const std::vector<SnapshotPtr>& latest,
                     const std::vector<EventPtr>& fatal_events, const FitRequest& r,
                     std::int64_t now_unix_ns) {
  const auto plan = fits(latest, r.bytes, fit_options(r), fatal_events, now_unix_ns);
  FitAnswer a;
  for (const auto& f : plan.fits)
    a.fits.push_back(fit_entry(f, "up", now_unix_ns - f.time_unix_ns));
  for (const auto& x : plan.excluded) {
    auto e = fit_entry(x.device, "up", now_unix_ns - x.device.time_unix_ns);
    e.reason = std::string(to_string(x.reason));
    e.detail = x.detail;
    a.excluded.push_back(std::move(e));
  }
  return a;
}

void exclude_requested(FitAnswer& a, const FitRequest& r) {
  if (r.exclude.empty()) return;
  std::vector<FitEntry> kept;
  for (auto& e : a.fits) {
    if (std::ranges::find(r.exclude, e.device) == r.exclude.end()) {
      kept.push_back(std::move(e));
      continue;
    }
    e.reason = std::string(to_string(ExclusionReason::excluded));
    e.detail = "in the request's exclusions";
    a.excluded.push_back(std::move(e));
  }
  a.fits = std::move(kept);
  std::ranges::stable_sort(a.excluded, std::greater<>{}, &FitEntry::free_bytes);
}

std::string fit_result_message(std::string_view id, std::uint64_t bytes,
                               const std::vector<FitEntry>& fits, std::size_t limit) {
  return fit_result_message(id, bytes, FitAnswer{fits, {}}, limit);
}

std::string fit_result_message(std::string_view id, std::uint64_t bytes, const FitAnswer& a,
                               std::size_t limit) {
  const auto& fits = a.fits;
  limit = std::clamp<std::size_t>(limit, 1, kFitMaxLimit);
  // Head and tail around the entries; the tail (truncated, and "]}\n") is written last, so
  // the bound counts it before an entry is let in.
  json::object head{{"type", "fit_result"}};
  if (!id.empty()) head["id"] = id;
  head["schema"] = kSchema;
  head["bytes"] = bytes;
  head["total"] = static_cast<std::uint64_t>(fits.size());
  std::string out = to_compact_json(head);
  out.pop_back();  // '}'
  out += ",\"fits\":[";
  static constexpr std::string_view kMiddle = "],\"excluded\":[";
  static constexpr std::string_view kTailMax = "],\"truncated\":false}\n";
  // Appends the entries of `list` while they fit (count and bytes); returns how many.
  std::string entry;
  const auto append = [&](const std::vector<FitEntry>& list, std::size_t max, std::size_t reserve) {
    std::size_t written = 0;
    for (const auto& f : list) {
      if (written == max) break;
      entry.clear();
      if (written > 0) entry.push_back(',');
      append_compact_json(entry, to_json(f));
      if (out.size() + entry.size() + reserve > kFitMaxReplyBytes) break;
      out += entry;
      ++written;
    }
    return written;
  };
  const auto fits_written = append(fits, limit, kMiddle.size() + kTailMax.size());
  out += kMiddle;
  const auto excluded_written = append(a.excluded, kFitMaxLimit, kTailMax.size());
  const bool cut = fits_written < fits.size() || excluded_written < a.excluded.size();
  out += cut ? "],\"truncated\":true}\n" : "],\"truncated\":false}\n";
  return out;
}

std::string fit_json(const std::vector<FitEntry>& fits, std::uint64_t bytes) {
  return fit_json(FitAnswer{fits, {}}, bytes);
}

std::string fit_json(const FitAnswer& a, std::uint64_t bytes) {
  const auto array = [](const std::vector<FitEntry>& list) {
    json::array out;
    out.reserve(list.size());
    for (const auto& e : list) out.push_back(to_json(e));
    return out;
  };
  json::object doc{{"schema", kSchema},
                   {"bytes", bytes},
                   {"fits", array(a.fits)},
                   {"excluded", array(a.excluded)}};
  return to_compact_json(doc) + "\n";
}

FitRequest fit_request_of_target(std::string_view target) {
  FitRequest r;
  const auto bytes = fit_bytes_parameter(target);
  if (!bytes)
    bad("bytes: expected ?bytes=N (a whole number of bytes from 0 to 18446744073709551615)");
  r.bytes = *bytes;
  if (const auto x = query_parameter(target, "exclude"); x && !x->empty()) {
    // The target is bounded by the server's request limit; the list is bounded again here.
    std::string_view rest = *x;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const auto id = rest.substr(0, comma);
      if (!id.empty()) r.exclude.emplace_back(id);
      if (r.exclude.size() > kFitMaxExclude) break;  // check_exclude names it
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    check_exclude(r.exclude, "exclude");
  }
  if (const auto w = query_parameter(target, "fatal_event_window_s")) {
    std::uint64_t s = 0;
    const auto res = std::from_chars(w->data(), w->data() + w->size(), s);
    if (w->empty() || res.ec != std::errc() || res.ptr != w->data() + w->size())
      bad("fatal_event_window_s: expected a whole number of seconds from 0 to " +
          std::to_string(kMaxFatalEventWindow.count()));
    r.fatal_event_window_s = fatal_window(s, "fatal_event_window_s");
  }
  return r;
}

std::optional<std::uint64_t> fit_bytes_parameter(std::string_view target) {
  const auto q = query_parameter(target, "bytes");
  if (!q || q->empty()) return std::nullopt;
  std::uint64_t bytes = 0;
  // Digits only: from_chars refuses a sign, a fraction, spaces and anything past 2^64 - 1.
  const auto r = std::from_chars(q->data(), q->data() + q->size(), bytes);
  if (r.ec != std::errc() || r.ptr != q->data() + q->size()) return std::nullopt;
  return bytes;
}

std::vector<DeviceInfo> devices_of(const std::vector<SnapshotPtr>& latest) {
  std::vector<DeviceInfo> out;
  for (const auto& s : latest) {
    if (!s) continue;
    for (const auto& d : s->devices)
      out.push_back({d.id, std::string(to_string(d.vendor)), d.name, s->probe, d.index,
                     d.pci_bus_id, s->node});
  }
  return out;
}

json::value to_json(const DeviceInfo& d) {
  json::object o{{"id", d.id},       {"vendor", d.vendor}, {"name", d.name},
                 {"probe", d.probe}, {"index", d.index},   {"pci_bus_id", d.pci_bus_id}};
  if (!d.node.empty()) o["node"] = d.node;
  return o;
}

std::string hello_message(const Hello& h) {
  json::object o;
  o["type"] = "hello";
  o["schema"] = h.schema;
  o["server"] = h.server;
  o["instance"] = h.instance;
  o["last_sequence"] = h.last_sequence;
  o["history_capacity"] = h.history_capacity;
  json::array probes;
  for (const auto& p : h.probes) {
    json::object po{{"name", p.name}, {"state", p.state}};
    if (!p.reason.empty()) po["reason"] = p.reason;
    probes.push_back(std::move(po));
  }
  o["probes"] = std::move(probes);
  json::array devices;
  for (const auto& d : h.devices) devices.push_back(to_json(d));
  o["devices"] = std::move(devices);
  if (h.devices_pending) o["devices_pending"] = strings(*h.devices_pending);
  if (h.requests) o["requests"] = strings(*h.requests);
  return with_newline(to_compact_json(o));
}

std::string snapshot_message(std::string_view snapshot_json) {
  static constexpr std::string_view kHead = "{\"type\":\"snapshot\",";
  std::string out;
  out.reserve(snapshot_json.size() + kHead.size() + 1);
  out += kHead;
  // The codec always writes an object with at least "schema", so there is a key after '{'.
  if (!snapshot_json.empty() && snapshot_json.front() == '{') snapshot_json.remove_prefix(1);
  out += snapshot_json;
  out.push_back('\n');
  return out;
}

std::string gap_message(const Gap& g) {
  json::object o{{"type", "gap"},
                 {"after_sequence", g.after_sequence},
                 {"missed", g.missed},
                 {"reason", g.reason}};
  return with_newline(to_compact_json(o));
}

std::string subscribed_message(const Subscribed& s) {
  const auto& r = s.request;
  json::object o;
  o["type"] = "subscribed";
  o["since"] = r.since ? json::value(*r.since) : json::value(nullptr);
  o["probes"] = strings(r.probes);
  o["devices"] = strings(r.devices);
  o["fields"] = metric_names(r.fields);
  o["max_rate_hz"] = r.max_rate_hz ? json::value(*r.max_rate_hz) : json::value(nullptr);
  o["unknown"] =
      json::object{{"probes", strings(s.unknown_probes)}, {"devices", strings(s.unknown_devices)}};
  return with_newline(to_compact_json(o));
}

std::string error_message(std::string_view code, std::string_view message, std::string_view id) {
  json::object o{{"type", "error"}, {"code", code}, {"message", to_valid_utf8(message)}};
  if (!id.empty()) o["id"] = to_valid_utf8(id);
  return with_newline(to_compact_json(o));
}

void append_compact_json(std::string& out, const json::value& v) {
  detail::append_json_value(out, v);
}

std::string to_compact_json(const json::value& v) {
  std::string out;
  append_compact_json(out, v);
  return out;
}

}  // namespace gpustream::transport
