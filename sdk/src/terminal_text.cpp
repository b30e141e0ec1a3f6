#include "gpustream/terminal_text.hpp"

namespace gpustream {
namespace {

constexpr char kHex[] = "0123456789abcdef";

struct Decoded {
  char32_t cp = 0;
  std::size_t length = 0;  // 0: not well-formed UTF-8 at this byte
};

// The well-formed UTF-8 sequence that starts at s[i] (a byte >= 0x80), per Unicode's table 3-7:
// no overlong forms, no surrogates, nothing above U+10FFFF.
Decoded decode(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t k) -> unsigned {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u;
  };
  const auto cont = [&](std::size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return at(k) >= lo && at(k) <= hi;
  };
  const unsigned b0 = at(0);
  std::size_t n = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF)
    n = cont(1) ? 2 : 0;
  else if (b0 == 0xE0)
    n = cont(1, 0xA0) && cont(2) ? 3 : 0;
  else if (b0 == 0xED)
    n = cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  else if (b0 >= 0xE1 && b0 <= 0xEF)
    n = cont(1) && cont(2) ? 3 : 0;
  else if (b0 == 0xF0)
    n = cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  else if (b0 >= 0xF1 && b0 <= 0xF3)
    n = cont(1) && cont(2) && cont(3) ? 4 : 0;
  else if (b0 == 0xF4)
    n = cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  if (n == 0) return {};
  char32_t cp = b0 & (n == 2 ? 0x1Fu : n == 3 ? 0x0Fu : 0x07u);
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (at(k) & 0x3Fu);
  return {cp, n};
}

// C1 controls, and the invisible characters that break or reorder a line.
bool is_hidden(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
         cp == 0x2028 || cp == 0x2029 || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

bool is_wide(char32_t cp) {
  return (cp >= 0x1100 && cp <= 0x115F) || cp == 0x2329 || cp == 0x232A ||
         (cp >= 0x2E80 && cp <= 0xA4CF && cp != 0x303F) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFE10 && cp <= 0xFE19) ||
         (cp >= 0xFE30 && cp <= 0xFE6F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
         (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1F64F) ||
         (cp >= 0x1F900 && cp <= 0x1F9FF) || (cp >= 0x20000 && cp <= 0x2FFFD) ||
         (cp >= 0x30000 && cp <= 0x3FFFD);
}

void append_byte_escape(std::string& out, unsigned char c) {
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 0xF];
}

void append_code_point_escape(std::string& out, char32_t cp) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 0xF];
}

std::string sanitize(std::string_view s, bool keep_line_feed) {
  std::size_t i = 0;
  while (i < s.size() && s[i] >= 0x20 && s[i] < 0x7F) ++i;
  if (i == s.size()) return std::string(s);  // printable ASCII: the usual case
  std::string out(s.substr(0, i));
  out.reserve(s.size() + 16);
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c >= 0x20 && c < 0x7F) || (keep_line_feed && c == '\n'))
        out += static_cast<char>(c);
      else
        append_byte_escape(out, c);
      ++i;
      continue;
    }
    const Decoded d = decode(s, i);
    if (d.length == 0) {
      append_byte_escape(out, c);
      ++i;
    } else {
      if (is_hidden(d.cp))
        append_code_point_escape(out, d.cp);
      else
        out.append(s.substr(i, d.length));
      i += d.length;
    }
  }
  return out;
}

}  // namespace

std::string terminal_safe(std::string_view s) { return sanitize(s, false); }

bool is_terminal_safe(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) return false;
      ++i;
      continue;
    }
    const Decoded d = decode(s, i);
    if (d.length == 0 || is_hidden(d.cp)) return false;
    i += d.length;
  }
  return true;
}

std::string terminal_safe_text(std::string_view s) { return sanitize(s, true); }

std::size_t display_columns(std::string_view s) {
  std::size_t columns = 0;
  for (std::size_t i = 0; i < s.size();) {
    const Decoded d = static_cast<unsigned char>(s[i]) < 0x80
                          ? Decoded{static_cast<char32_t>(s[i]), 1}
                          : decode(s, i);
    columns += d.length != 0 && is_wide(d.cp) ? 2 : 1;
    i += d.length != 0 ? d.length : 1;
  }
  return columns;
}

std::string fit_columns(std::string_view s, std::size_t columns) {
  if (columns == 0) return {};
  if (display_columns(s) <= columns) return std::string(s);
  std::string out;
  std::size_t used = 0;
  for (std::size_t i = 0; i < s.size();) {
    const Decoded d = static_cast<unsigned char>(s[i]) < 0x80
                          ? Decoded{static_cast<char32_t>(s[i]), 1}
                          : decode(s, i);
    const std::size_t length = d.length != 0 ? d.length : 1;
    const std::size_t width = d.length != 0 && is_wide(d.cp) ? 2 : 1;
    if (used + width > columns - 1) break;
    out.append(s.substr(i, length));
    used += width;
    i += length;
  }
  return out + "~";
}

}  // namespace gpustream
