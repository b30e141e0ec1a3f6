// Marketing names of AMD GPUs from libdrm's amdgpu.ids (Debian libdrm-common).
#include <algorithm>
#include <cctype>

#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/readers.hpp"

namespace gpustream {
namespace {

// A hex field of one line ("744C", "C8"); nullopt for anything else.
std::optional<std::uint32_t> hex_field(std::string_view s) {
  s = readers::trim(s);
  if (s.empty() || s.size() > 8) return std::nullopt;
  auto v = readers::parse_uint(s, 16);
  if (!v) return std::nullopt;
  return static_cast<std::uint32_t>(*v);
}

}  // namespace

AmdgpuIds parse_amdgpu_ids(std::string_view text) {
  AmdgpuIds out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const auto line = readers::trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') continue;
    // "device_id,\trevision_id,\tproduct_name"; the version line ("1.0.0") has no comma.
    const auto c1 = line.find(',');
    if (c1 == std::string_view::npos) continue;
    const auto c2 = line.find(',', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const auto device = hex_field(line.substr(0, c1));
    const auto revision = hex_field(line.substr(c1 + 1, c2 - c1 - 1));
    const auto name = readers::trim(line.substr(c2 + 1));
    if (!device || !revision || name.empty()) continue;
    out.names.try_emplace({*device, *revision}, name);  // the first line of a pair wins
  }
  return out;
}

std::optional<std::string> AmdgpuIds::find(std::uint32_t device, std::uint32_t revision) const {
  const auto it = names.find({device, revision});
  if (it == names.end()) return std::nullopt;
  return it->second;
}

readers::Result<AmdgpuIds> load_amdgpu_ids(const std::string& path) {
  auto text = readers::read_file(path, kMaxAmdgpuIdsBytes);
  if (!text) return text.error();
  return parse_amdgpu_ids(*text);
}

}  // namespace gpustream
