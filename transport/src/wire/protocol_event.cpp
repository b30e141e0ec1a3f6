// The `event` wire message: encoder and decoder (see protocol_event.hpp).
#include "gpustream/transport/protocol_event.hpp"

#include <cstdint>

#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"
#include "wire/protocol_fields.hpp"

namespace gpustream::transport {
namespace json = boost::json;

json::object event_to_json(const GpuEvent& e) {
  json::object o;
  o["sequence"] = e.sequence;
  o["time_unix_ns"] = e.time_unix_ns;
  o["probe"] = e.probe;
  o["device"] = e.device_id;
  o["kind"] = to_string(e.kind);
  if (e.data) o["data"] = *e.data;
  return o;
}

std::string event_message(const GpuEvent& e) {
  json::object o;
  o["type"] = "event";
  for (auto& kv : event_to_json(e)) o[kv.key()] = kv.value();
  auto s = to_compact_json(o);
  s += '\n';
  return s;
}

namespace {

GpuEvent event_from_object(const json::object& o) {
  GpuEvent e;
  e.sequence = fields::u64(o, "sequence", true);
  const auto* t = fields::find(o, "time_unix_ns");
  if (!t || !t->is_int64()) fields::bad("time_unix_ns", "expected an integer");
  e.time_unix_ns = t->get_int64();
  e.probe = fields::text(o, "probe", true);
  e.device_id = fields::text(o, "device", true);
  e.kind = event_kind_from_string(fields::text(o, "kind", true)).value_or(EventKind::other);
  if (fields::find(o, "data")) e.data = fields::u64(o, "data", true);
  return e;
}

}  // namespace

GpuEvent parse_event_message(std::string_view text_in) {
  const json::value v = parse_json(text_in);
  if (!v.is_object()) throw JsonError("$: expected an object");
  const auto& o = v.get_object();
  if (const auto* t = fields::find(o, "type"); t && (!t->is_string() || t->get_string() != "event"))
    fields::bad("type", "expected \"event\"");
  return event_from_object(o);
}

std::optional<GpuEvent> parse_if_event_message(std::string_view text_in) {
  const json::value v = parse_json(text_in);
  if (!v.is_object()) throw JsonError("$: expected an object");
  const auto& o = v.get_object();
  const auto* t = fields::find(o, "type");
  if (!t || !t->is_string() || t->get_string() != "event") return std::nullopt;
  return event_from_object(o);
}

}  // namespace gpustream::transport
