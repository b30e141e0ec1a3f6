// What the probes read, gathered from the registry rows for `gpustream capture`
// (gpustream/probes/capture.hpp). Each row's `capture` column follows the code that reads it:
// keep them together when a probe starts reading something new (the capture round-trip test,
// tests/cli/capture_test.cpp, fails otherwise).
#include "gpustream/probes/capture.hpp"

#include <algorithm>
#include <map>
#include <string_view>

#include "gpustream/probes/readers.hpp"
#include "gpustream/probes/registry.hpp"

namespace gpustream::capture {
namespace {

/// Most DRM nodes (card*, renderD*) examined.
constexpr std::size_t kMaxNodes = 64;

}  // namespace

Sources sources(const Config& config) {
  Sources out;
  for (const auto& row : probe_rows())
    if (row.capture) row.capture(out, config);
  return out;
}

std::vector<SysfsInput> sysfs_inputs(const std::string& sysfs_root) {
  const auto node_inputs = sources(Config{}).node_inputs;
  std::vector<SysfsInput> out;
  const std::string drm = "class/drm";
  auto nodes = numbered(sysfs_root, drm, "card");
  for (auto& r : numbered(sysfs_root, drm, "renderD")) nodes.push_back(std::move(r));
  if (nodes.size() > kMaxNodes) nodes.resize(kMaxNodes);
  for (const auto& [number, name] : nodes) {
    const auto node = concat(drm, "/", name);
    const auto device = concat(node, "/device");
    add_node_identity(out, sysfs_root, node, device);
    for (const auto& inputs : node_inputs) inputs(out, sysfs_root, node, device);
  }
  return out;
}

std::vector<ToolCommand> tool_commands(const Config& config) {
  // Grouped by tool, the tools in the order the rows name them first.
  std::vector<ToolCommand> out;
  for (auto& c : sources(config).tools) {
    auto last = std::find_if(out.rbegin(), out.rend(),
                             [&](const ToolCommand& t) { return t.tool == c.tool; });
    if (last == out.rend())
      out.push_back(std::move(c));
    else
      out.insert(last.base(), std::move(c));
  }
  return out;
}

std::string pci_vendor_name(std::uint32_t id) {
  for (const auto& [vendor, name] : sources(Config{}).pci_vendors)
    if (vendor == id) return name;
  return "other";
}

}  // namespace gpustream::capture
