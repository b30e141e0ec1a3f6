// Snapshot encodings for the wire.
#include "wire/encoder.hpp"

#include <algorithm>
#include <functional>

#include "gpustream/detail/json_text.hpp"

namespace gpustream::transport {

namespace {

constexpr std::string_view kType = "snapshot";
// What the SDK's writer puts before the snapshot's own keys when it writes a snapshot message.
constexpr std::string_view kMessageHead = "{\"type\":\"snapshot\",";

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
  for (const auto& d : devices) n += sizeof(std::string) + d.capacity();
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
    filtered.node = s.node;
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
  // The codec itself, the message's "type" first; a projection's metrics only.
  std::string out;
  detail::append_snapshot_json(out, *src, {kType, sel.fields.empty() ? nullptr : &sel.fields});
  out.push_back('\n');
  return out;
}

std::string snapshot_json_of_message(std::string_view message) {
  if (!message.empty() && message.back() == '\n') message.remove_suffix(1);
  if (message.substr(0, kMessageHead.size()) != kMessageHead) return std::string(message);
  std::string out = "{";
  out += message.substr(kMessageHead.size());
  return out;
}

}  // namespace gpustream::transport
