// Golden-output comparison for the golden suite (tests/golden, docs/testing.md "Golden outputs").
//
//   expect_golden("wire/snapshot_message.txt", encode_snapshot_message(s, sel));
//
// compares `actual` byte for byte with tests/golden/data/<name>. On a mismatch the test fails
// with the file's path, the first differing line (expected and actual, with a few lines of
// context) and how to regenerate. With GPUSTREAM_UPDATE_GOLDEN=1 in the environment the file is
// (re)written from `actual` instead and the check passes: review the diff with git before
// committing it. A missing file is a failure (never silently created).
//
// Binary bytes (the fleet bus) are stored as hex text (to_hex / from_hex).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace gpustream::golden {

namespace fs = std::filesystem;

inline fs::path data_dir() { return fs::path(GPUSTREAM_SOURCE_DIR) / "tests" / "golden" / "data"; }

inline bool updating() {
  const char* v = std::getenv("GPUSTREAM_UPDATE_GOLDEN");
  return v != nullptr && std::string_view(v) == "1";
}

inline bool read_file(const fs::path& p, std::string& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

/// The lines of `s` without their '\n' (copies: `s` may be a temporary).
inline std::vector<std::string> split_lines(std::string_view s) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < s.size()) {
    const auto nl = s.find('\n', start);
    if (nl == std::string_view::npos) {
      lines.emplace_back(s.substr(start));
      break;
    }
    lines.emplace_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

/// A short, unified-diff-like hint: the first differing line with up to 2 lines of context, the
/// column where they differ, and the sizes. Long lines are cut around the difference.
inline std::string diff_hint(std::string_view expected, std::string_view actual) {
  const auto e = split_lines(expected);
  const auto a = split_lines(actual);
  std::size_t line = 0;
  while (line < e.size() && line < a.size() && e[line] == a[line]) ++line;
  auto cut = [](const std::string& l, std::size_t col) {
    constexpr std::size_t kSpan = 100;
    const std::size_t from = col > kSpan / 2 ? col - kSpan / 2 : 0;
    std::string out = from > 0 ? "..." : "";
    out += l.substr(from, kSpan);
    if (from + kSpan < l.size()) out += "...";
    return out;
  };
  std::size_t col = 0;
  if (line < e.size() && line < a.size()) {
    const auto& x = e[line];
    const auto& y = a[line];
    while (col < x.size() && col < y.size() && x[col] == y[col]) ++col;
  }
  std::ostringstream os;
  os << "sizes: expected " << expected.size() << " bytes, actual " << actual.size() << " bytes\n";
  os << "@@ first difference at line " << line + 1 << ", column " << col + 1 << " @@\n";
  const std::size_t ctx = line >= 2 ? line - 2 : 0;
  for (std::size_t i = ctx; i < line; ++i) os << "  " << cut(e[i], col) << "\n";
  for (std::size_t i = line; i < std::min(e.size(), line + 3); ++i)
    os << "- " << cut(e[i], col) << "\n";
  for (std::size_t i = line; i < std::min(a.size(), line + 3); ++i)
    os << "+ " << cut(a[i], col) << "\n";
  if (line >= e.size() && line >= a.size())
    os << "(the lines agree; the difference is a final '\\n')\n";
  return os.str();
}

/// Compares `actual` with the golden file `name` (relative to tests/golden/data); see the file
/// comment. Returns true when they are equal (or the file was just rewritten).
inline bool expect_golden(const std::string& name, std::string_view actual) {
  const fs::path path = data_dir() / name;
  if (updating()) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(actual.data(), static_cast<std::streamsize>(actual.size()));
    std::cout << "[ GOLDEN   ] wrote " << path.string() << "\n";
    return true;
  }
  std::string expected;
  if (!read_file(path, expected)) {
    ADD_FAILURE() << "golden file missing: " << path.string()
                  << "\n(record it with GPUSTREAM_UPDATE_GOLDEN=1, see docs/testing.md)";
    return false;
  }
  if (expected == actual) return true;
  ADD_FAILURE() << "output differs from the golden file " << path.string() << "\n"
                << diff_hint(expected, actual)
                << "If the change is intended, rerun with GPUSTREAM_UPDATE_GOLDEN=1 and review "
                   "`git diff tests/golden/data` (docs/testing.md).";
  return false;
}

/// The golden file's content (for decoding it back); fails the test when it is missing.
inline std::string golden_text(const std::string& name) {
  std::string out;
  if (!read_file(data_dir() / name, out))
    ADD_FAILURE() << "golden file missing: " << (data_dir() / name).string();
  return out;
}

/// Lower-case hex, 32 bytes (64 digits) per line, each line ending in '\n'.
inline std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
    if (i % 32 == 31 || i + 1 == bytes.size()) out += '\n';
  }
  return out;
}

/// The bytes of to_hex's text (whitespace ignored). Fails the test on a bad digit.
inline std::string from_hex(std::string_view hex) {
  std::string out;
  int hi = -1;
  for (const char c : hex) {
    if (c == '\n' || c == ' ' || c == '\r') continue;
    int v = -1;
    if (c >= '0' && c <= '9') v = c - '0';
    if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    if (v < 0) {
      ADD_FAILURE() << "bad hex digit '" << c << "'";
      return out;
    }
    if (hi < 0) {
      hi = v;
    } else {
      out += static_cast<char>((hi << 4) | v);
      hi = -1;
    }
  }
  return out;
}

}  // namespace gpustream::golden
