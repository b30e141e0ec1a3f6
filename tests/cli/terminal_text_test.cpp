// terminal_safe: what a tool, a recording or the bus may put in a string never reaches the
// terminal as a control; a normal name comes back byte for byte, and the table's columns line up.
#include "gpustream/terminal_text.hpp"

#include <string>

#include <gtest/gtest.h>

#include "format.hpp"

namespace gpustream::cli {
namespace {

// True when `s` holds no byte a terminal acts on: a C0 control but LF (when `lf_ok`), DEL, a
// C1 control as a raw byte or as UTF-8 (C2 80..9F), and no invalid UTF-8 lead that could be one.
bool inert(const std::string& s, bool lf_ok = false) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n' && lf_ok) continue;
    if (c < 0x20 || c == 0x7F) return false;
    if (c >= 0x80 && c <= 0x9F && (i == 0 || static_cast<unsigned char>(s[i - 1]) < 0xC0))
      return false;  // a raw C1 byte, not the continuation of a sequence
    if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(s[i + 1]) <= 0x9F)
      return false;  // U+0080..U+009F
  }
  return true;
}

TEST(TerminalSafe, NormalNamesComeBackByteForByte) {
  for (const std::string s :
       {"", "NVIDIA GeForce RTX 4090", "AMD Radeon\u2122 RX 7900 XTX", "\u663e\u5361 0",
        "Intel(R) Arc(TM) A770 Graphics", "a\\b", "\u2514 MIG 1g.10gb 1/0", "\U0001F600"}) {
    EXPECT_EQ(terminal_safe(s), s);
    EXPECT_EQ(terminal_safe_text(s), s);
  }
}

TEST(TerminalSafe, ControlsBecomeVisibleEscapes) {
  EXPECT_EQ(terminal_safe("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(terminal_safe("bell\x07"), "bell\\x07");
  EXPECT_EQ(terminal_safe("ok\rFAKE LINE"), "ok\\x0dFAKE LINE");
  EXPECT_EQ(terminal_safe("one\ntwo\tthree\bfour"), "one\\x0atwo\\x09three\\x08four");
  EXPECT_EQ(terminal_safe(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(terminal_safe("del\x7f"), "del\\x7f");
  EXPECT_EQ(terminal_safe("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
}

TEST(TerminalSafe, C1ControlsAndInvisibleReorderingAreEscaped) {
  EXPECT_EQ(terminal_safe("a\u009b2Jb"), "a\\u009b2Jb");  // CSI as UTF-8
  EXPECT_EQ(terminal_safe("\u0080\u009f"), "\\u0080\\u009f");
  EXPECT_EQ(terminal_safe("abc\u202Edcb"), "abc\\u202edcb");  // right-to-left override
  EXPECT_EQ(terminal_safe("x\u2028y\u2029z"), "x\\u2028y\\u2029z");
  EXPECT_EQ(terminal_safe("\u2066\u2069\u200e\u200f\u061c"), "\\u2066\\u2069\\u200e\\u200f\\u061c");
  EXPECT_EQ(terminal_safe("\u00a0\u00e9"), "\u00a0\u00e9");  // the first printable ones stay
}

TEST(TerminalSafe, InvalidUtf8BytesAreEscaped) {
  EXPECT_EQ(terminal_safe("a\x9b"
                          "2J"),
            "a\\x9b2J");                                        // a raw C1 byte
  EXPECT_EQ(terminal_safe("\xe2\x84"), "\\xe2\\x84");           // a cut sequence
  EXPECT_EQ(terminal_safe("\xc0\x9b"), "\\xc0\\x9b");           // an overlong ESC-like form
  EXPECT_EQ(terminal_safe("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(terminal_safe("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(terminal_safe("\xff"), "\\xff");
}

TEST(TerminalSafe, EveryByteAloneAndAfterEveryLeadIsInert) {
  for (int a = 0; a < 256; ++a) {
    const std::string one(1, static_cast<char>(a));
    EXPECT_TRUE(inert(terminal_safe(one))) << a;
    for (int b = 0; b < 256; ++b) {
      const std::string two{static_cast<char>(a), static_cast<char>(b)};
      ASSERT_TRUE(inert(terminal_safe(two))) << a << " " << b;
      ASSERT_EQ(is_terminal_safe(two), terminal_safe(two) == two) << a << " " << b;
    }
  }
}

TEST(TerminalSafe, TextKeepsLineFeedsOnly) {
  EXPECT_EQ(terminal_safe_text("one\ntwo\r\nthree\x1b[1m"), "one\ntwo\\x0d\nthree\\x1b[1m");
  EXPECT_TRUE(inert(terminal_safe_text("a\n\x1b\x07\u009b\x9b\n"), true));
}

TEST(TerminalSafe, ColumnsCountCharactersAndWideOnesTwice) {
  EXPECT_EQ(display_columns("RTX 4090"), 8u);
  EXPECT_EQ(display_columns("Radeon\u2122"), 7u);
  EXPECT_EQ(display_columns("\u663e\u5361"), 4u);
  EXPECT_EQ(fit_columns("abcdef", 6), "abcdef");
  EXPECT_EQ(fit_columns("abcdefg", 6), "abcde~");
  EXPECT_EQ(fit_columns("\u2122\u2122\u2122\u2122\u2122\u2122\u2122", 6),
            "\u2122\u2122\u2122\u2122\u2122~");  // whole characters, never a cut sequence
  EXPECT_EQ(fit_columns("\u663e\u5361\u663e\u5361", 6), "\u663e\u5361~");  // 4 + "~"
}

// A hostile name takes the same place in the table as its escapes: nothing moves the cursor,
// and a long UTF-8 name is cut between characters, so the columns after it still line up.
TEST(TerminalSafe, TheTableEscapesEveryStringAndKeepsItsColumns) {
  GpuSnapshot s;
  s.probe = "sim\x1b[31m";
  DeviceSample d;
  d.id = "GPU-1";
  d.name = "Evil\x1b[2J\x07\rFORGED\u009b";
  s.devices.push_back(d);
  d.name = "Radeon\u2122 Radeon\u2122 Radeon\u2122 Radeon\u2122";  // 31 columns, 40 bytes
  s.devices.push_back(d);
  d.name = "NVIDIA GeForce RTX 4090";
  s.devices.push_back(d);
  HostSample h;
  h.processes.push_back({1, "proc\x1b]0;title\x07", 1024});
  s.host = h;
  s.errors.push_back({"tool\x07", "failed\rFORGED\x1b[K", "GPU\x9b"});
  const auto text = format_table({&s});
  EXPECT_TRUE(inert(text, true)) << text;
  EXPECT_NE(text.find("Evil\\x1b[2J\\x07\\x0dFORG~"), std::string::npos) << text;
  EXPECT_NE(text.find("failed\\x0dFORGED\\x1b[K"), std::string::npos) << text;
  EXPECT_NE(text.find("proc\\x1b]0;title\\x07"), std::string::npos) << text;
  EXPECT_NE(text.find("(device GPU\\x9b)"), std::string::npos) << text;
  // The three device lines: the column after the name starts at the same column.
  std::vector<std::string> lines;
  for (std::size_t at = 0; lines.size() < 3;) {
    const auto nl = text.find('\n', at);
    lines.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  const auto util_column = [](const std::string& line) { return display_columns(line); };
  EXPECT_EQ(util_column(lines[0]), util_column(lines[2])) << text;
  EXPECT_EQ(util_column(lines[1]), util_column(lines[2])) << text;
  EXPECT_NE(lines[1].find("Radeon\u2122 Radeon\u2122 Radeon\u2122~"), std::string::npos)
      << lines[1];
  EXPECT_NE(lines[2].find("NVIDIA GeForce RTX 4090 "), std::string::npos) << lines[2];
}

TEST(TerminalSafe, AnEventLineEscapesItsStrings) {
  GpuEvent e;
  e.probe = "nv\x1b[2J";
  e.device_id = "GPU\rFORGED";
  e.kind = EventKind::xid;
  e.data = 79;
  const auto line = event_line(e);
  EXPECT_TRUE(inert(line)) << line;
  EXPECT_NE(line.find("GPU\\x0dFORGED xid 79"), std::string::npos) << line;
  EXPECT_NE(line.find("nv\\x1b[2J)"), std::string::npos) << line;
}

}  // namespace
}  // namespace gpustream::cli
