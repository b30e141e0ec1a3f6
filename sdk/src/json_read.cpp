// The decoder: boost::json::value -> model, validating every type and enumeration name, walking
// the schema description (gpustream/detail/schema.hpp).
// Rules (docs/protocol.md): keys of the contract are required, keys added later are optional,
// unknown keys are ignored, unknown enumeration values are rejected. Each error names its place
// as a path, e.g. "$.devices[0].metrics.power_watts: expected a number, got string".

#include "gpustream/json.hpp"

#include "json_read_rules.hpp"

namespace gpustream {

GpuSnapshot snapshot_from_json(const json::value& v) {
  const Path& at = kRoot;
  const auto& o = as_object(v, at);
  const std::string_view schema = as_view(need(o, "schema", at), at / "schema");
  if (schema != kSchema)
    fail(at / "schema", "unsupported schema \"" + std::string(schema) +
                            "\" (this decoder reads \"" + std::string(kSchema) + "\")");
  GpuSnapshot s;
  read_members(o, at, s);
  check_snapshot(s, at);
  return s;
}

DeviceSample device_from_json(const json::value& v) {
  DeviceSample d;
  read(v, kRoot, d);
  return d;
}

HostSample host_from_json(const json::value& v) {
  HostSample h;
  read(v, kRoot, h);
  return h;
}

}  // namespace gpustream
