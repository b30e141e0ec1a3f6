// gpustream/split_list.hpp — a comma-separated list ("a,b, c") as its items: the one splitter of
// the CLI's flags (--probes, --nats) and the Python module's probes=/devices= strings.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace gpustream {

/// What split_list does with the blanks around an item.
enum class ListBlanks {
  keep,  // " a" stays " a" (the Python module's probes=/devices=)
  trim,  // spaces and tabs around an item are dropped (the CLI's flags)
};

/// The items between the commas of `s`, in order. Empty items (",,", a trailing ',', and with
/// ListBlanks::trim an item of blanks only) are left out.
inline std::vector<std::string> split_list(std::string_view s, ListBlanks blanks) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const auto comma = std::min(s.find(',', start), s.size());
    std::string_view item = s.substr(start, comma - start);
    if (blanks == ListBlanks::trim) {
      const auto b = item.find_first_not_of(" \t");
      item = b == std::string_view::npos ? std::string_view()
                                         : item.substr(b, item.find_last_not_of(" \t") - b + 1);
    }
    if (!item.empty()) out.emplace_back(item);
    start = comma + 1;
  }
  return out;
}

}  // namespace gpustream
