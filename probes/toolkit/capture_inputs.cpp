// The toolkit's part of `gpustream capture` (gpustream/probes/capture.hpp): the identity, power
// and hwmon files every DRM probe reads for a node.
#include <string_view>

#include "gpustream/probes/capture.hpp"
#include "gpustream/probes/readers.hpp"
#include "gpustream/probes/sysfs.hpp"

namespace gpustream::capture {
namespace {

/// hwmon files: sysfs::read_temperatures and each DRM probe's power, energy, fan and clock
/// reads.
void add_hwmon(std::vector<SysfsInput>& out, const std::string& hw) {
  out.push_back({concat(hw, "/name")});
  for (int i = 1; i <= sysfs::kMaxTemperatureSensors; ++i) {
    out.push_back({concat(hw, "/temp", std::to_string(i), "_input")});
    out.push_back({concat(hw, "/temp", std::to_string(i), "_label")});
  }
  for (const char* f : {"power1_average", "power1_input", "power1_cap", "power1_max",
                        "power1_rated_max", "power2_max", "power2_rated_max", "energy1_input",
                        "energy2_input", "fan1_input", "fan2_input", "fan3_input"})
    out.push_back({concat(hw, "/", f)});
  for (int i = 1; i <= 4; ++i) {
    out.push_back({concat(hw, "/freq", std::to_string(i), "_input")});
    out.push_back({concat(hw, "/freq", std::to_string(i), "_label")});
  }
}

}  // namespace

std::vector<sysfs::Numbered> numbered(const std::string& root, const std::string& rel,
                                      std::string_view prefix) {
  auto out = sysfs::numbered_entries(readers::join_path(root, rel), prefix);
  if (out.size() > kMaxNumberedEntries) out.resize(kMaxNumberedEntries);
  return out;
}

void add_node_identity(std::vector<SysfsInput>& out, const std::string& sysfs_root,
                       const std::string& node, const std::string& device) {
  out.push_back({node});
  out.push_back({device});
  // Identity: the probes' card scans, sysfs::pci_bus_id_of (uevent, else the device link's
  // name) and driver_of (uevent, else the driver link's name).
  for (const char* f : {"vendor", "device", "revision", "uevent", "product_name"})
    out.push_back({concat(device, "/", f)});
  out.push_back({concat(device, "/driver"), /*follow=*/false});
  out.push_back({concat(device, "/power/runtime_status")});
  for (const auto& hw : numbered(sysfs_root, concat(device, "/hwmon"), "hwmon"))
    add_hwmon(out, concat(device, "/hwmon/", hw.name));
}

}  // namespace gpustream::capture
