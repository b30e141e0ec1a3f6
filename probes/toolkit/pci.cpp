#include "gpustream/probes/pci.hpp"

#include <algorithm>

#include "gpustream/probes/readers.hpp"

namespace gpustream::pci {
namespace {

bool is_hex(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

}  // namespace

std::string normalize_bus_id(std::string_view text) {
  const auto s = readers::trim(text);
  // [domain ':'] bus(2) ':' device(2) '.' function(1)
  if (s.size() < 7) return {};
  const auto rest = s.substr(s.size() - 7);
  if (rest[2] != ':' || rest[5] != '.' || rest[6] < '0' || rest[6] > '7') return {};
  for (std::size_t i : {0u, 1u, 3u, 4u})
    if (!is_hex(rest[i])) return {};
  std::string_view domain;
  if (s.size() > 7) {
    if (s[s.size() - 8] != ':') return {};
    domain = s.substr(0, s.size() - 8);
    if (domain.empty() || domain.size() > 8) return {};
    for (char c : domain)
      if (!is_hex(c)) return {};
  }
  while (domain.size() > 4 && domain.front() == '0') domain.remove_prefix(1);
  std::string out(4 - std::min<std::size_t>(4, domain.size()), '0');
  for (char c : domain) out += lower(c);
  out += ':';
  for (char c : rest) out += lower(c);
  return out;
}

}  // namespace gpustream::pci
