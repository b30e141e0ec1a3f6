// Snapshot encodings for the wire.
#include "wire/encoder.hpp"

#include <algorithm>
#include <functional>

#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"

namespace gpustream::transport {
namespace json = boost::json;

namespace {

constexpr std::string_view kMessageHead = "{\"type\":\"snapshot\",";

// Boost 1.81's json::object::erase moves the last element into the hole, which would change
// the key order of a projected message: kept keys are copied, in order, into a new object.
json::object without(const json::object& o, const std::function<bool(std::string_view)>& drop) {
  json::object out(o.storage());
  out.reserve(o.size());
  for (const auto& kv : o) {
    const std::string_view key(kv.key().data(), kv.key().size());
    if (!drop(key)) out.emplace(key, kv.value());
  }
  return out;
}

void keep_fields(json::object& device, const std::vector<Metric>& fields) {
  for (const std::string_view part : {"metrics", "sources", "absent", "absent_sources"}) {
    auto* obj = device.if_contains(part);
    if (!obj || !obj->is_object()) continue;
    *obj = without(obj->get_object(), [&](std::string_view key) {
      const auto m = metric_from_string(key);
      return !(m && std::binary_search(fields.begin(), fields.end(), *m));
    });
  }
  // The codec leaves "absent_sources" out when no absent metric names a source.
  if (const auto* as = device.if_contains("absent_sources");
      as && as->is_object() && as->get_object().empty())
    device = without(device, [](std::string_view key) { return key == "absent_sources"; });
}

}  // namespace

Projection Projection::make(std::vector<std::string> devices, std::vector<Metric> fields) {
  Projection p;
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  std::sort(fields.begin(), fields.end());
  fields.erase(std::unique(fields.begin(), fields.end()), fields.end());
  p.devices = std::move(devices);
  p.fields = std::move(fields);
  return p;
}

std::size_t Projection::bytes() const noexcept {
  std::size_t n = sizeof(*this) + fields.capacity() * sizeof(Metric);
  for (const auto& d : devices) n += sizeof(d) + d.capacity();
  return n;
}

Selection Projection::of(const GpuSnapshot& s) const {
  Selection sel;
  sel.fields = fields;
  if (!devices.empty()) {
    sel.keep.resize(s.devices.size());
    std::size_t kept = 0;
    for (std::size_t i = 0; i < s.devices.size(); ++i) {
      sel.keep[i] = std::binary_search(devices.begin(), devices.end(), s.devices[i].id);
      kept += sel.keep[i] ? 1 : 0;
    }
    sel.any = kept > 0;
    sel.all_devices = kept == s.devices.size();
    if (sel.all_devices) sel.keep.clear();
  }
  // The key names the bytes: kept device positions within this snapshot (the cache keys by
  // sequence too), then the metrics. Unknown ids never reach it.
  if (!sel.all_devices) {
    sel.key.push_back('d');
    for (std::size_t i = 0; i < sel.keep.size(); ++i)
      if (sel.keep[i]) sel.key += std::to_string(i) + ",";
  }
  if (!sel.fields.empty()) {
    sel.key.push_back('f');
    for (const auto m : sel.fields) sel.key += std::to_string(static_cast<int>(m)) + ",";
  }
  sel.hash = std::hash<std::string>{}(sel.key);
  return sel;
}

std::string encode_snapshot_message(const GpuSnapshot& s, const Selection& sel) {
  const GpuSnapshot* src = &s;
  GpuSnapshot filtered;
  if (!sel.all_devices) {
    filtered.probe = s.probe;
    filtered.sequence = s.sequence;
    filtered.time_unix_ns = s.time_unix_ns;
    filtered.monotonic_ns = s.monotonic_ns;
    filtered.sample_duration_ns = s.sample_duration_ns;
    filtered.host = s.host;
    filtered.errors = s.errors;
    for (std::size_t i = 0; i < s.devices.size(); ++i)
      if (sel.keep[i]) filtered.devices.push_back(s.devices[i]);
    src = &filtered;
  }
  std::string body;
  if (sel.fields.empty()) {
    append_json(body, *src);  // the codec itself
    return snapshot_message(body);
  }
  // The codec's document, edited; written back with the codec's number rules.
  json::value v = to_json(*src);
  if (auto* devs = v.as_object().if_contains("devices"); devs && devs->is_array())
    for (auto& d : devs->get_array())
      if (d.is_object()) keep_fields(d.get_object(), sel.fields);
  append_compact_json(body, v);
  return snapshot_message(body);
}

std::string snapshot_json_of_message(std::string_view message) {
  if (!message.empty() && message.back() == '\n') message.remove_suffix(1);
  if (message.substr(0, kMessageHead.size()) != kMessageHead) return std::string(message);
  std::string out = "{";
  out += message.substr(kMessageHead.size());
  return out;
}

}  // namespace gpustream::transport
