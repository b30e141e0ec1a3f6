// Snapshot encodings for the wire.
#include "encoder.hpp"

#include <algorithm>

#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"

namespace gpustream::transport {
namespace json = boost::json;

namespace {

constexpr std::string_view kMessageHead = "{\"type\":\"snapshot\",";

void keep_fields(json::object& device, const std::vector<Metric>& fields) {
  for (const std::string_view part : {"metrics", "sources", "absent", "absent_sources"}) {
    auto* obj = device.if_contains(part);
    if (!obj || !obj->is_object()) continue;
    auto& o = obj->get_object();
    for (auto it = o.begin(); it != o.end();) {
      const auto m = metric_from_string(std::string_view(it->key().data(), it->key().size()));
      if (m && std::binary_search(fields.begin(), fields.end(), *m))
        ++it;
      else
        it = o.erase(it);
    }
  }
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
  if (!p.devices.empty() || !p.fields.empty()) {
    // Device ids may contain any character: length-prefix them so keys cannot collide.
    p.key.push_back('d');
    for (const auto& d : p.devices) p.key += std::to_string(d.size()) + ":" + d;
    p.key += "f";
    for (const auto m : p.fields) p.key += std::to_string(static_cast<int>(m)) + ",";
  }
  return p;
}

std::string encode_snapshot_message(const GpuSnapshot& s, const Projection& p) {
  if (p.identity()) {
    std::string body;
    append_json(body, s);
    return snapshot_message(body);
  }
  const GpuSnapshot* src = &s;
  GpuSnapshot filtered;
  if (!p.devices.empty()) {
    filtered.probe = s.probe;
    filtered.sequence = s.sequence;
    filtered.time_unix_ns = s.time_unix_ns;
    filtered.monotonic_ns = s.monotonic_ns;
    filtered.sample_duration_ns = s.sample_duration_ns;
    filtered.host = s.host;
    filtered.errors = s.errors;
    for (const auto& d : s.devices)
      if (std::binary_search(p.devices.begin(), p.devices.end(), d.id))
        filtered.devices.push_back(d);
    src = &filtered;
  }
  if (p.fields.empty()) {
    std::string body;
    append_json(body, *src);
    return snapshot_message(body);
  }
  json::value v = to_json(*src);
  if (auto* devs = v.as_object().if_contains("devices"); devs && devs->is_array())
    for (auto& d : devs->get_array())
      if (d.is_object()) keep_fields(d.get_object(), p.fields);
  std::string body;
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
