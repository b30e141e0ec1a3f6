// Private to the SDK: the one JSON text writer. Every JSON text gpustream writes goes through it:
// the snapshot codec (json_write.cpp, driven by gpustream/detail/schema.hpp) and any
// boost::json::value (append_json_value, which the transport's messages use). It owns the rules
// the documents share: escaping (and UTF-8 repair), "a double always reads back as a double"
// ("1.0", not "1"), integers to their extremes, whole byte counts as integers.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "gpustream/json.hpp"
#include "json_lossy.hpp"

namespace gpustream::detail {

/// Appends to a std::string through a raw cursor: the string is grown ahead and trimmed by
/// finish() (or the destructor), so each piece is a bounds check and a memcpy.
class JsonWriter {
 public:
  JsonWriter(std::string& out, std::size_t hint) : out_(out) {
    const std::size_t used = out_.size();
    out_.resize(used + hint);
    p_ = out_.data() + used;
    end_ = out_.data() + out_.size();
  }
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;
  ~JsonWriter() { finish(); }

  /// Trims the string to what was written.
  void finish() { out_.resize(static_cast<std::size_t>(p_ - out_.data())); }

  void raw(std::string_view s) {
    reserve(s.size());
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void raw(char c) {
    reserve(1);
    *p_++ = c;
  }

  /// `"name":` for names that need no escaping (our keys and enum names).
  void key(std::string_view name) {
    reserve(name.size() + 3);
    *p_++ = '"';
    std::memcpy(p_, name.data(), name.size());
    p_ += name.size();
    *p_++ = '"';
    *p_++ = ':';
  }
  /// A string that needs no escaping (an enum's name).
  void plain_string(std::string_view s) {
    reserve(s.size() + 2);
    *p_++ = '"';
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
    *p_++ = '"';
  }

  /// Any string, escaped; a byte that is not UTF-8 is written as U+FFFD (and logged once, unless
  /// `log_lossy` is false).
  void string(std::string_view s, bool log_lossy = true) {
    std::size_t i = 0;
    while (i < s.size() && kPlain[static_cast<unsigned char>(s[i])]) ++i;
    if (i == s.size()) return plain_string(s);  // printable ASCII, the usual case
    if (!is_valid_utf8(s)) {
      const std::string valid = to_valid_utf8(s);
      if (log_lossy) note_lossy("string that is not UTF-8", valid);
      escaped(valid);
    } else {
      escaped(s);
    }
  }

  template <typename Int>
  void integer(Int v) {
    reserve(24);
    p_ = std::to_chars(p_, p_ + 24, v).ptr;
  }

  void boolean(bool b) { raw(b ? std::string_view("true") : std::string_view("false")); }

  /// Precondition: std::isfinite(v). Always reads back as a double ("1.0", not "1").
  void number(double v) {
    reserve(40);
    char* const start = p_;
    p_ = std::to_chars(p_, p_ + 38, v).ptr;
    for (const char* c = start; c != p_; ++c)
      if (*c == '.' || *c == 'e') return;
    *p_++ = '.';
    *p_++ = '0';
  }

  /// A metric value: a whole, non-negative byte count as an integer, anything else as a double.
  void metric_value(Metric m, double v) {
    if (is_bytes_metric(m) && v >= 0 && v < 18446744073709551616.0 && v == std::floor(v))
      integer(static_cast<std::uint64_t>(v));
    else
      number(v);
  }

  /// True for the metrics counted in bytes (their name ends in "_bytes").
  static bool is_bytes_metric(Metric m) noexcept {
    static const auto kTable = [] {
      std::array<bool, kMetricCount> t{};
      for (std::size_t i = 0; i < kMetricCount; ++i)
        t[i] = to_string(static_cast<Metric>(i)).ends_with("_bytes");
      return t;
    }();
    return kTable[static_cast<std::size_t>(m)];
  }

 private:
  /// Bytes that go into a JSON string as they are: printable ASCII but '"' and '\\'.
  static constexpr std::array<bool, 256> kPlain = [] {
    std::array<bool, 256> t{};
    for (int c = 0x20; c < 0x80; ++c) t[static_cast<std::size_t>(c)] = c != '"' && c != '\\';
    return t;
  }();

  void reserve(std::size_t n) {
    if (static_cast<std::size_t>(end_ - p_) < n) grow(n);
  }

  [[gnu::noinline]] void grow(std::size_t n) {
    const auto used = static_cast<std::size_t>(p_ - out_.data());
    out_.resize(std::max(out_.size() * 2, used + n));
    p_ = out_.data() + used;
    end_ = out_.data() + out_.size();
  }

  /// Precondition: `s` is valid UTF-8. Beyond what JSON requires (control characters, '"',
  /// '\\'), DEL (U+007F) and the C1 controls (U+0080..U+009F, e.g. U+009B, a terminal's CSI)
  /// are written as \u00XX too: a JSON line printed to a terminal cannot drive it.
  void escaped(std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    reserve(s.size() * 6 + 2);  // worst case: every byte as \u00XX
    *p_++ = '"';
    for (std::size_t i = 0; i < s.size(); ++i) {
      const char ch = s[i];
      auto c = static_cast<unsigned char>(ch);
      if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f && c != 0xc2) {
        *p_++ = ch;
        continue;
      }
      if (c == 0xc2) {  // U+0080..U+00FF: C1 controls escaped, the rest kept
        const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
        if (next < 0x80 || next > 0x9f) {
          *p_++ = ch;
          continue;
        }
        c = next;
        ++i;
      }
      *p_++ = '\\';
      switch (c) {
        case '"':
          *p_++ = '"';
          break;
        case '\\':
          *p_++ = '\\';
          break;
        case '\n':
          *p_++ = 'n';
          break;
        case '\r':
          *p_++ = 'r';
          break;
        case '\t':
          *p_++ = 't';
          break;
        case '\b':
          *p_++ = 'b';
          break;
        case '\f':
          *p_++ = 'f';
          break;
        default:
          *p_++ = 'u';
          *p_++ = '0';
          *p_++ = '0';
          *p_++ = kHex[c >> 4];
          *p_++ = kHex[c & 0xF];
      }
    }
    *p_++ = '"';
  }

  std::string& out_;
  char* p_ = nullptr;
  char* end_ = nullptr;
};

}  // namespace gpustream::detail
